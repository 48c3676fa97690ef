"""Wire schemas of the request bodies, and the problem shape, for validation and OpenAPI.

Responses are the records of `chainrecall.model`; these are only what clients
send. Fields are strict (a number is not a string) and unknown fields are
refused, so a typo is a clear 422 instead of data silently dropped.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TriggerIn(Strict):
    source: str = Field(min_length=1, max_length=100, examples=["github"])
    kind: str = Field(min_length=1, max_length=100, examples=["check_run.completed"])
    thread_key: str | None = Field(
        None, max_length=512, description="natural key; the thread is created on first use",
        examples=["github:acme/payments#412"],
    )  # fmt: skip
    thread_id: str | None = Field(None, max_length=44, description="an existing thr_ id")
    summary: str | None = Field(None, max_length=2000, description="one line; derived if absent")
    payload: Any = Field(..., description="any JSON value, or a string (stored as text/plain)")
    occurred_at: str | None = Field(None, description="RFC 3339 time; default: now")
    dedupe_key: str | None = Field(
        None, max_length=512, description="unique within source: a retry answers the first record"
    )
    author: str | None = Field(None, max_length=100)
    in_reply_to: str | None = Field(None, max_length=44, description="trg_ id this replies to")
    refs: list[str] = Field(default_factory=list, max_length=100, description="trg_ ids cited")
    thread_title: str | None = Field(None, max_length=2000)
    thread_status: str | None = Field(None, max_length=32)

    @model_validator(mode="after")
    def _one_thread(self) -> TriggerIn:
        if (self.thread_key is None) == (self.thread_id is None):
            raise ValueError(
                "give exactly one of thread_key (natural key; created on first use) or thread_id"
            )
        return self


class TriggerBatchIn(Strict):
    items: list[TriggerIn] = Field(min_length=1, max_length=1000)


class WorkerIn(Strict):
    thread_id: str | None = Field(None, max_length=44)
    thread_ids: list[str] | None = Field(None, min_length=1, max_length=50)
    task: str = Field(min_length=1, max_length=20_000)

    @model_validator(mode="after")
    def _one_thread(self) -> WorkerIn:
        if (self.thread_id is None) == (self.thread_ids is None):
            raise ValueError("give exactly one of thread_id or thread_ids")
        return self


class ReportIn(Strict):
    summary: str = Field(min_length=1, max_length=2000)
    body: str = ""
    refs: list[str] = Field(default_factory=list, max_length=1000)
    status: str = Field("ready", max_length=32, examples=["ready", "waiting", "blocked", "failed"])


class Problem(BaseModel):
    """An error, as RFC 9457 problem details."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    instance: str


class BatchItemOut(BaseModel):
    status: int = Field(description="201 when stored now, 200 when a dedupe key matched")
    trigger: Any


class BatchOut(BaseModel):
    items: list[BatchItemOut]
