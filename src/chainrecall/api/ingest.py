"""HTTP routes of ingest: GitHub and Slack webhooks, and plain chat, e-mail and CI posts.

Each route reads the raw body, checks the sender's signature where the source
signs (before parsing anything), hands the bytes to its adapter in
`chainrecall.ingest`, and stores the one trigger it answers. The answer is the
stored trigger record: `201` when stored now, `200` when a dedupe key (GitHub
delivery id, Slack event id, Message-ID, CI run and status) matched an earlier
delivery. Every refusal is problem+json and stores nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from chainrecall.api.problems import problem
from chainrecall.config import ServerConfig
from chainrecall.errors import NotConfigured
from chainrecall.ingest import chat, ci, github
from chainrecall.ingest import email as email_ingest
from chainrecall.ingest.common import Lookup
from chainrecall.model import NewTrigger, Trigger
from chainrecall.service import Memory
from chainrecall.store import DEFAULT_NAMESPACE

JSON = "application/json"
EMAIL_TYPES = frozenset({"message/rfc822", "text/plain", "application/octet-stream"})

router = APIRouter(tags=["ingest"])


def _problems(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"content": {"application/problem+json": {}}} for code in codes}


def _memory(request: Request) -> Memory:
    return Memory(request.app.state.store, getattr(request.state, "namespace", DEFAULT_NAMESPACE))


def _config(request: Request) -> ServerConfig:
    config: ServerConfig = request.app.state.config
    return config


def _store(memory: Memory, plan: Callable[[Lookup], NewTrigger]) -> tuple[Trigger, bool]:
    """Plan and store one trigger (run in the thread pool: lookups and a durable commit)."""
    item = plan(Lookup(memory))
    trigger, created = memory.record_triggers([item])[0]
    return trigger, created


async def _ingest(request: Request, plan: Callable[[Lookup], NewTrigger]) -> Response:
    trigger, created = await run_in_threadpool(_store, _memory(request), plan)
    return Response(
        trigger.model_dump_json(),
        status_code=201 if created else 200,
        media_type=JSON,
        headers={"Location": f"/triggers/{trigger.id}"},
    )


@router.post(
    "/webhooks/github", status_code=201, response_model=Trigger, response_class=Response,
    responses={200: {"model": Trigger}, **_problems(400, 401, 413, 503)},
)  # fmt: skip
async def github_webhook(request: Request) -> Response:
    """A GitHub delivery as GitHub sends it (X-GitHub-Event, -Delivery, -Hub-Signature-256)."""
    secret = _config(request).github_secret
    if not secret:
        raise NotConfigured(
            "GitHub deliveries are refused because no webhook secret is configured: start "
            "the server with --github-secret SECRET (or set CHAINRECALL_GITHUB_SECRET) and "
            "enter the same secret in the webhook's settings on GitHub"
        )
    body = await request.body()
    github.verify_signature(secret, body, request.headers.get(github.SIGNATURE_HEADER))
    event = github.check_event_name(request.headers.get("X-GitHub-Event"))
    delivery = github.check_delivery_id(request.headers.get("X-GitHub-Delivery"))
    content_type = request.headers.get("content-type") or JSON
    payload = github.parse_body(body, content_type)

    def plan(lookup: Lookup) -> NewTrigger:
        return github.plan_delivery(
            event=event, delivery_id=delivery, body=body, content_type=content_type,
            lookup=lookup, payload=payload,
        )  # fmt: skip

    return await _ingest(request, plan)


@router.post(
    "/webhooks/slack", status_code=201, response_class=Response,
    responses={200: {"description": "the url_verification challenge, or a repeated event"},
               **_problems(400, 401, 413, 503)},
)  # fmt: skip
async def slack_webhook(request: Request) -> Response:
    """Slack's Events API: answers url_verification, stores event_callback messages."""
    secret = _config(request).slack_signing_secret
    if not secret:
        raise NotConfigured(
            "Slack events are refused because no signing secret is configured: start the "
            "server with --slack-signing-secret SECRET (or set CHAINRECALL_SLACK_SIGNING_SECRET) "
            "using the Signing Secret under the Slack app's Basic Information"
        )
    body = await request.body()
    chat.verify_slack_signature(
        secret,
        body,
        request.headers.get("X-Slack-Request-Timestamp"),
        request.headers.get("X-Slack-Signature"),
    )
    envelope = chat.parse_slack(body)
    if envelope.challenge is not None:
        return JSONResponse({"challenge": envelope.challenge})
    return await _ingest(request, lambda lookup: chat.plan_slack(envelope, body, lookup))


@router.post(
    "/ingest/chat", status_code=201, response_model=Trigger, response_class=Response,
    responses={200: {"model": Trigger}, **_problems(400, 413)},
)  # fmt: skip
async def chat_message(request: Request) -> Response:
    """One chat message: channel, text, author, message_id, thread, reply_to, occurred_at."""
    body = await request.body()
    return await _ingest(request, lambda lookup: chat.plan_chat(body, lookup))


@router.post(
    "/ingest/email", status_code=201, response_model=Trigger, response_class=Response,
    responses={200: {"model": Trigger}, **_problems(400, 413, 415)},
)  # fmt: skip
async def email_message(request: Request) -> Response:
    """One raw RFC 5322 message (Content-Type: message/rfc822), stored byte for byte."""
    content_type = (request.headers.get("content-type") or "message/rfc822").split(";")[0]
    if content_type.strip().lower() not in EMAIL_TYPES:
        return problem(
            415,
            f"an e-mail is posted raw as message/rfc822, not {content_type}; send the "
            "message's bytes as they arrived (headers, blank line, body)",
            instance=request.url.path,
        )
    body = await request.body()
    return await _ingest(request, lambda lookup: email_ingest.plan_email(body, lookup))


@router.post(
    "/ingest/ci", status_code=201, response_model=Trigger, response_class=Response,
    responses={200: {"model": Trigger}, **_problems(400, 413)},
)  # fmt: skip
async def ci_callback(request: Request) -> Response:
    """A CI run's status: run_id, status, repository, pr or commit, log (see docs/ingest.md)."""
    body = await request.body()
    return await _ingest(request, lambda lookup: ci.plan_ci(body, lookup))
