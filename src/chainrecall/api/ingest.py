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

from fastapi import APIRouter, Depends, Request
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
from chainrecall.store import DEFAULT_NAMESPACE, Store

JSON = "application/json"
EMAIL_TYPES = frozenset({"message/rfc822", "text/plain", "application/octet-stream"})


async def _authorize(request: Request) -> None:
    """The bearer-token check of the recall routes, for the plain ingest posts.

    Imported when called: `api.app` includes this module's router, so importing it at
    module load would be circular. Webhooks do not use it: they prove who sent them by
    signature, and the secret that matched picks the namespace.
    """
    from chainrecall.api.app import authorize

    await authorize(request)


router = APIRouter(tags=["ingest"])
_posts = APIRouter(tags=["ingest"], dependencies=[Depends(_authorize)])


def _problems(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"content": {"application/problem+json": {}}} for code in codes}


def _memory(request: Request, namespace: str | None = None) -> Memory:
    if namespace is None:
        namespace = str(getattr(request.state, "namespace", DEFAULT_NAMESPACE))
    return Memory(request.app.state.store, namespace)


def _secrets(request: Request, source: str, configured: str | None) -> list[tuple[str, str]]:
    """(namespace, secret) pairs of a webhook source: the server's own, then the stored ones."""
    store: Store = request.app.state.store
    pairs = [(DEFAULT_NAMESPACE, configured)] if configured else []
    return pairs + store.webhook_secrets(source)


def _config(request: Request) -> ServerConfig:
    config: ServerConfig = request.app.state.config
    return config


def _store(memory: Memory, plan: Callable[[Lookup], NewTrigger]) -> tuple[Trigger, bool]:
    """Plan and store one trigger (run in the thread pool: lookups and a durable commit)."""
    item = plan(Lookup(memory))
    trigger, created = memory.record_triggers([item])[0]
    return trigger, created


async def _ingest(
    request: Request, plan: Callable[[Lookup], NewTrigger], namespace: str | None = None
) -> Response:
    trigger, created = await run_in_threadpool(_store, _memory(request, namespace), plan)
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
    secrets = _secrets(request, "github", _config(request).github_secret)
    if not secrets:
        raise NotConfigured(
            "GitHub deliveries are refused because no webhook secret is configured: start "
            "the server with --github-secret SECRET (or set CHAINRECALL_GITHUB_SECRET), or "
            "set one per namespace with `chainrecall webhook-secret --source github`, and "
            "enter the same secret in the webhook's settings on GitHub"
        )
    body = await request.body()
    namespace = github.match_signature(secrets, body, request.headers.get(github.SIGNATURE_HEADER))
    event = github.check_event_name(request.headers.get("X-GitHub-Event"))
    delivery = github.check_delivery_id(request.headers.get("X-GitHub-Delivery"))
    content_type = request.headers.get("content-type") or JSON
    payload = github.parse_body(body, content_type)

    def plan(lookup: Lookup) -> NewTrigger:
        return github.plan_delivery(
            event=event, delivery_id=delivery, body=body, content_type=content_type,
            lookup=lookup, payload=payload,
        )  # fmt: skip

    return await _ingest(request, plan, namespace)


@router.post(
    "/webhooks/slack", status_code=201, response_class=Response,
    responses={200: {"description": "the url_verification challenge, or a repeated event"},
               **_problems(400, 401, 413, 503)},
)  # fmt: skip
async def slack_webhook(request: Request) -> Response:
    """Slack's Events API: answers url_verification, stores event_callback messages."""
    secrets = _secrets(request, "slack", _config(request).slack_signing_secret)
    if not secrets:
        raise NotConfigured(
            "Slack events are refused because no signing secret is configured: start the "
            "server with --slack-signing-secret SECRET (or set CHAINRECALL_SLACK_SIGNING_SECRET), "
            "or set one per namespace with `chainrecall webhook-secret --source slack`, using "
            "the Signing Secret under the Slack app's Basic Information"
        )
    body = await request.body()
    namespace = chat.match_slack_signature(
        secrets,
        body,
        request.headers.get("X-Slack-Request-Timestamp"),
        request.headers.get("X-Slack-Signature"),
    )
    envelope = chat.parse_slack(body)
    if envelope.challenge is not None:
        return JSONResponse({"challenge": envelope.challenge})
    return await _ingest(request, lambda lookup: chat.plan_slack(envelope, body, lookup), namespace)


@_posts.post(
    "/ingest/chat", status_code=201, response_model=Trigger, response_class=Response,
    responses={200: {"model": Trigger}, **_problems(400, 413)},
)  # fmt: skip
async def chat_message(request: Request) -> Response:
    """One chat message: channel, text, author, message_id, thread, reply_to, occurred_at."""
    body = await request.body()
    return await _ingest(request, lambda lookup: chat.plan_chat(body, lookup))


@_posts.post(
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


@_posts.post(
    "/ingest/ci", status_code=201, response_model=Trigger, response_class=Response,
    responses={200: {"model": Trigger}, **_problems(400, 413)},
)  # fmt: skip
async def ci_callback(request: Request) -> Response:
    """A CI run's status: run_id, status, repository, pr or commit, log (see docs/ingest.md)."""
    body = await request.body()
    return await _ingest(request, lambda lookup: ci.plan_ci(body, lookup))


# the plain posts need a token (when the server has any); webhooks carry signatures instead
router.include_router(_posts)
