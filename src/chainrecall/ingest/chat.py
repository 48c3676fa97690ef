"""Chat messages: a plain JSON shape for any chat, and Slack's Events API envelope.

Both follow Slack's model of threads: a message that starts a conversation
names the thread by its own id, and replies name that root. Thread keys:

- plain chat: `chat:{channel}/{thread}`, where `thread` is the root message id
  (the message's own `message_id` when it starts one); `chat:{channel}` for a
  message without ids;
- Slack: `slack:{team_id}/{channel}/{thread_ts or ts}`; events that are about no
  message (a user joined the team) go to `slack:{team_id}`.

Every message claims an alias for its id, so a reply cites the message it
answers (`in_reply_to`) and an edit or a reaction cites the message it changes.
Slack requests are checked against the signing secret: `v0=` HMAC-SHA256 of
`v0:{timestamp}:{body}`, and a timestamp older than five minutes is refused so
that a captured request cannot be replayed.
"""

from __future__ import annotations

import hmac
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from chainrecall.errors import InvalidInput, Unauthorized
from chainrecall.ingest.common import (
    Lookup,
    as_dict,
    clip,
    hmac_sha256_hex,
    parse_json_object,
)
from chainrecall.model import NewTrigger, format_timestamp
from chainrecall.service import Memory

CHAT_SOURCE = "chat"
SLACK_SOURCE = "slack"
JSON_TYPE = "application/json"
SLACK_TOLERANCE_SECONDS = 5 * 60
MAX_ID = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

CHAT_FIELDS = {
    "channel": "where the message was posted (required)",
    "text": "the message text (required)",
    "author": "who wrote it",
    "message_id": "the message's id in its chat: makes retries safe and lets replies cite it",
    "thread": "the id of the message that started the thread this one belongs to",
    "reply_to": "the id of the message this one answers",
    "occurred_at": "when it was posted, RFC 3339",
}


# -- plain chat --------------------------------------------------------------------------


def message_alias(scope: str, message_id: str) -> str:
    return f"{scope}:msg:{message_id}"


def _field(
    data: dict[str, Any], name: str, *, required: bool = False, limit: int = MAX_ID
) -> str | None:
    value = data.get(name)
    if value is None:
        if required:
            raise InvalidInput(f"`{name}` is required: {CHAT_FIELDS[name]}", field=name)
        return None
    if isinstance(value, int) and not isinstance(value, bool) and name != "text":
        value = str(value)  # numeric message ids are common; they name the same message
    if not isinstance(value, str):
        raise InvalidInput(f"`{name}` must be a string", field=name)
    if len(value) > limit:
        raise InvalidInput(f"`{name}` is longer than {limit} characters", field=name)
    if required and not value.strip():
        raise InvalidInput(f"`{name}` must not be empty: {CHAT_FIELDS[name]}", field=name)
    if name != "text" and _CONTROL.search(value):
        raise InvalidInput(f"`{name}` must not contain control characters", field=name)
    return value


def plan_chat(body: bytes, lookup: Lookup) -> NewTrigger:
    """The trigger for one plain chat message (see CHAT_FIELDS); InvalidInput if malformed."""
    data = parse_json_object(body, "chat message")
    unknown = sorted(set(data) - set(CHAT_FIELDS))
    if unknown:
        raise InvalidInput(
            f"unknown field(s) {', '.join(unknown)}; a chat message has: " + ", ".join(CHAT_FIELDS),
            field=unknown[0],
        )
    channel = _field(data, "channel", required=True)
    text = _field(data, "text", required=True, limit=100_000)
    assert channel is not None and text is not None
    author = _field(data, "author", limit=100)
    message_id = _field(data, "message_id")
    thread = _field(data, "thread")
    reply_to = _field(data, "reply_to")
    scope = f"chat:{channel}"
    in_reply_to = None
    thread_key: str | None = None
    thread_id: str | None = None
    if reply_to:
        in_reply_to = lookup.resolve(message_alias(scope, reply_to))
    if thread:
        thread_key = f"{scope}/{thread}"
        if in_reply_to is None and thread != message_id:
            in_reply_to = lookup.resolve(message_alias(scope, thread))
    elif reply_to:
        # the parent's thread, wherever it is; unknown parent: the thread it would root
        parent_thread = lookup.thread_of(in_reply_to) if in_reply_to else None
        if parent_thread:
            thread_id = parent_thread
        else:
            thread_key = f"{scope}/{reply_to}"
    elif message_id:
        thread_key = f"{scope}/{message_id}"
    else:
        thread_key = scope
    who = author or "someone"
    return Memory.new_trigger(
        source=CHAT_SOURCE,
        kind="message",
        raw=body,
        content_type=JSON_TYPE,
        search_text="\n".join(p for p in (author, channel, text) if p),
        thread_key=thread_key,
        thread_id=thread_id,
        thread_title=f"{channel}: {clip(text, 120)}",
        summary=f"{who} in {channel}: {clip(text, 150)}",
        author=author,
        occurred_at=_field(data, "occurred_at", limit=64),
        dedupe_key=f"{channel}:{message_id}" if message_id else None,
        in_reply_to=in_reply_to,
        aliases=[message_alias(scope, message_id)] if message_id else [],
    )


# -- Slack ---------------------------------------------------------------------------------


def slack_sign(secret: str, timestamp: str, body: bytes) -> str:
    """The X-Slack-Signature value for `body` sent at `timestamp` (for senders and tests)."""
    return "v0=" + hmac_sha256_hex(secret, b"v0:" + timestamp.encode("ascii") + b":" + body)


def verify_slack_signature(
    secret: str,
    body: bytes,
    timestamp: str | None,
    signature: str | None,
    now: float | None = None,
) -> None:
    """Raise Unauthorized unless Slack signed `body` with `secret` within the tolerance."""
    if not timestamp or not signature:
        raise Unauthorized(
            "X-Slack-Signature and X-Slack-Request-Timestamp are required; point the Slack "
            "app's Event Subscriptions here and give chainrecall its signing secret "
            "(--slack-signing-secret)"
        )
    try:
        sent = int(timestamp)
    except ValueError:
        raise Unauthorized("X-Slack-Request-Timestamp is not a Unix time") from None
    current = time.time() if now is None else now
    if abs(current - sent) > SLACK_TOLERANCE_SECONDS:
        raise Unauthorized(
            "X-Slack-Request-Timestamp is more than 5 minutes from this server's clock; a "
            "replayed request is refused (check the server's clock if Slack's are fresh)"
        )
    expected = slack_sign(secret, timestamp, body)
    if not hmac.compare_digest(expected.encode("ascii"), signature.strip().encode("utf-8")):
        raise Unauthorized(
            "X-Slack-Signature does not match the body; check that --slack-signing-secret "
            "is the Signing Secret under the Slack app's Basic Information"
        )


def match_slack_signature(
    candidates: list[tuple[str, str]],
    body: bytes,
    timestamp: str | None,
    signature: str | None,
    now: float | None = None,
) -> str:
    """The namespace whose signing secret signed `body`, among (namespace, secret) pairs."""
    last: Unauthorized | None = None
    matched = None
    for namespace, secret in candidates:
        try:
            verify_slack_signature(secret, body, timestamp, signature, now)
        except Unauthorized as exc:
            last = exc
            continue
        matched = matched or namespace
    if matched is None:
        raise last or Unauthorized("no Slack signing secret is configured")
    return matched


@dataclass(frozen=True)
class SlackEnvelope:
    """A parsed Events API request: a challenge to answer, or an event to store."""

    type: str
    data: dict[str, Any]

    @property
    def challenge(self) -> str | None:
        value = self.data.get("challenge")
        return value if self.type == "url_verification" and isinstance(value, str) else None


def parse_slack(body: bytes) -> SlackEnvelope:
    data = parse_json_object(body, "Slack event")
    kind = data.get("type")
    if not isinstance(kind, str) or not kind:
        raise InvalidInput(
            "a Slack Events API body has a `type` (url_verification or event_callback)",
            field="type",
        )
    if kind == "url_verification" and not isinstance(data.get("challenge"), str):
        raise InvalidInput("url_verification must carry a `challenge` string", field="challenge")
    if kind == "event_callback":
        if not isinstance(data.get("event"), dict):
            raise InvalidInput("event_callback must carry an `event` object", field="event")
        if not isinstance(data.get("event_id"), str) or not data["event_id"]:
            raise InvalidInput(
                "event_callback must carry its `event_id` (it keeps Slack's retries from "
                "being stored twice)",
                field="event_id",
            )
    return SlackEnvelope(kind, data)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def plan_slack(envelope: SlackEnvelope, body: bytes, lookup: Lookup) -> NewTrigger:
    """The trigger for an Events API request other than url_verification."""
    data = envelope.data
    team = _text(data.get("team_id")) or _text(data.get("enterprise_id")) or "unknown-team"
    team_scope = f"slack:{team}"
    if envelope.type != "event_callback":
        # e.g. app_rate_limited: a notice about the subscription, kept on the team's thread
        return Memory.new_trigger(
            source=SLACK_SOURCE, kind=f"slack.{clip(envelope.type, 60)}", raw=body,
            content_type=JSON_TYPE, thread_key=team_scope, thread_title=f"Slack {team}",
            summary=f"Slack notice {envelope.type} for team {team}",
        )  # fmt: skip
    event = as_dict(data.get("event"))
    event_type = _text(event.get("type")) or "event"
    subtype = _text(event.get("subtype"))
    message = event
    if subtype == "message_changed":
        message = as_dict(event.get("message"))
    elif subtype == "message_deleted":
        message = as_dict(event.get("previous_message"))
    item = as_dict(event.get("item"))
    channel = _text(event.get("channel")) or _text(item.get("channel"))
    ts = _text(message.get("ts")) or _text(item.get("ts"))
    thread_ts = _text(message.get("thread_ts"))
    user = (
        _text(message.get("user"))
        or _text(event.get("user"))
        or _text(message.get("username"))
        or _text(message.get("bot_id"))
    )
    text = _text(message.get("text")) or ""
    thread_key: str | None = team_scope
    thread_id: str | None = None
    in_reply_to = None
    refs: list[str] = []
    aliases: list[str] = []
    where = team
    if channel:
        scope = f"slack:{team}/{channel}"
        where = channel
        own = lookup.resolve(message_alias(scope, ts)) if ts else None
        is_new_message = event_type in {"message", "app_mention"} and subtype is None
        if is_new_message and ts:
            aliases.append(message_alias(scope, ts))
        elif own:
            refs.append(own)  # an edit, deletion or reaction cites the message it is about
        root = thread_ts or ts
        if not is_new_message and own and not thread_ts:
            thread_id = lookup.thread_of(own)  # a reaction goes where its message went
        thread_key = None if thread_id else (f"{scope}/{root}" if root else scope)
        if thread_ts and thread_ts != ts:
            in_reply_to = lookup.resolve(message_alias(scope, thread_ts))
    who = user or "someone"
    kind = f"{event_type}.{subtype}" if subtype else event_type
    if event_type == "message" and subtype is None:
        summary = f"{who} in {where}: {clip(text, 150)}"
    elif subtype == "message_changed":
        summary = f"{who} edited a message in {where}: {clip(text, 140)}"
    elif subtype == "message_deleted":
        summary = f"{who}'s message in {where} was deleted"
    elif event_type == "app_mention":
        summary = f"{who} mentioned the app in {where}: {clip(text, 140)}"
    else:
        reaction = _text(event.get("reaction"))
        summary = f"Slack {kind.replace('_', ' ')} by {who} in {where}" + (
            f": :{reaction}:" if reaction else ""
        )
    return Memory.new_trigger(
        source=SLACK_SOURCE,
        kind=clip(kind, 100),
        raw=body,
        content_type=JSON_TYPE,
        search_text="\n".join(p for p in (user, channel, text) if p),
        thread_key=thread_key,
        thread_id=thread_id,
        thread_title=f"Slack {where}: {clip(text, 120)}" if text else f"Slack {where}",
        summary=summary,
        author=clip(user, 100) or None,
        occurred_at=_slack_time(data.get("event_time"), ts),
        dedupe_key=clip(data.get("event_id"), 200),
        in_reply_to=in_reply_to,
        refs=refs,
        aliases=aliases,
    )


def _slack_time(event_time: Any, ts: str | None) -> str | None:
    seconds: float | None = None
    if isinstance(event_time, int | float) and not isinstance(event_time, bool):
        seconds = float(event_time)
    elif ts:
        try:
            seconds = float(ts)
        except ValueError:
            seconds = None
    if seconds is None or not 0 < seconds < 32503680000:
        return None
    return format_timestamp(datetime.fromtimestamp(int(seconds), UTC))
