"""E-mail: raw RFC 5322 messages, threaded by References and In-Reply-To.

The message is stored byte for byte (`message/rfc822`), attachments and all;
the summary names the sender, the subject and how many attachments there are,
and only the text body is indexed for search. Thread key:
`email:{root Message-ID}`, where the root is the first id of `References`; a
reply without `References` joins the thread of the message it answers when
that message was seen, else the thread that message would root. Every message
claims its Message-ID as an alias, so a reply cites its parent as
`in_reply_to`. The Message-ID is also the dedupe key (a digest of the bytes
when a message has none).
"""

from __future__ import annotations

import re
from email import policy
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.utils import getaddresses, parsedate_to_datetime
from html.parser import HTMLParser
from typing import Any

from chainrecall.errors import InvalidInput
from chainrecall.ingest.common import Lookup, clip, content_digest
from chainrecall.model import NewTrigger, format_timestamp
from chainrecall.service import Memory

SOURCE = "email"
CONTENT_TYPE = "message/rfc822"
MAX_BODY_INDEX = 32 * 1024

_MSGID = re.compile(r"<([^<>\s]+)>")
_ADDRESS_HEADERS = ("From", "To", "Cc")


def message_alias(message_id: str) -> str:
    return f"email:{message_id}"


def thread_key(root_id: str) -> str:
    return f"email:{root_id}"


def message_ids(value: Any) -> list[str]:
    """The ids in a Message-ID / References / In-Reply-To value, without angle brackets."""
    if not value:
        return []
    text = str(value)
    found = _MSGID.findall(text)
    if not found and text.strip() and " " not in text.strip():
        found = [text.strip()]  # a bare id without brackets, as some senders write it
    return found


def parse_message(raw: bytes) -> EmailMessage:
    """The parsed message, or InvalidInput when the bytes are not an RFC 5322 message."""
    if not raw.strip():
        raise InvalidInput("the e-mail body is empty; send one raw RFC 5322 message", field="body")
    message = BytesParser(policy=policy.default).parsebytes(raw)
    assert isinstance(message, EmailMessage)
    has_header = any(message.get(name) for name in ("From", "Message-ID", "Subject", "To"))
    if not has_header or not message.get("From"):
        raise InvalidInput(
            "this is not an RFC 5322 message: it needs header lines (at least From:) "
            "followed by a blank line and the body; send the raw message as message/rfc822",
            field="body",
        )
    return message


def plan_email(raw: bytes, lookup: Lookup) -> NewTrigger:
    """The trigger for one raw e-mail (validated, not stored); InvalidInput if malformed."""
    message = parse_message(raw)
    try:
        return _plan(message, raw, lookup)
    except (ValueError, TypeError, IndexError, LookupError) as exc:
        # the stdlib parses headers lazily; a header it cannot parse surfaces here
        raise InvalidInput(f"the e-mail has a header that cannot be parsed: {exc}") from None


def _plan(message: EmailMessage, raw: bytes, lookup: Lookup) -> NewTrigger:
    own_ids = message_ids(message.get("Message-ID"))
    own_id = own_ids[0] if own_ids else None
    references = [i for i in message_ids(message.get("References")) if i != own_id]
    parents = [i for i in message_ids(message.get("In-Reply-To")) if i != own_id]
    parent_id = parents[0] if parents else (references[-1] if references else None)
    in_reply_to = lookup.resolve(message_alias(parent_id)) if parent_id else None
    key: str | None = None
    thread_id: str | None = None
    if references:
        key = thread_key(references[0])
    elif parent_id:
        # no References: the parent's thread when we saw it, else the thread it roots
        parent_thread = lookup.thread_of(in_reply_to) if in_reply_to else None
        if parent_thread:
            thread_id = parent_thread
        else:
            key = thread_key(parent_id)
    else:
        key = thread_key(own_id or f"sha256:{content_digest(raw)}")
    sender = _sender(message)
    subject = clip(message.get("Subject") or "(no subject)", 120)
    attachments = _attachment_names(message)
    text = _body_text(message)
    summary = f"E-mail from {sender}: {subject}"
    if attachments:
        count = len(attachments)
        summary += f" ({count} attachment{'s' if count != 1 else ''})"
    search_parts = [
        f"{name}: {message.get(name)}"
        for name in (*_ADDRESS_HEADERS, "Subject")
        if message.get(name)
    ]
    search_parts += [", ".join(attachments), text[:MAX_BODY_INDEX]]
    return Memory.new_trigger(
        source=SOURCE,
        kind="reply" if parent_id else "message",
        raw=raw,
        content_type=CONTENT_TYPE,
        search_text="\n".join(p for p in search_parts if p),
        thread_key=key,
        thread_id=thread_id,
        thread_title=_thread_subject(subject),
        summary=summary,
        author=clip(sender, 100),
        occurred_at=_date(message),
        dedupe_key=own_id[:500] if own_id else f"sha256:{content_digest(raw)}",
        in_reply_to=in_reply_to,
        aliases=[message_alias(own_id)] if own_id else [],
    )


def _sender(message: Message) -> str:
    pairs = getaddresses([str(message.get("From", ""))])
    if pairs:
        name, address = pairs[0]
        if name and address:
            return f"{name} <{address}>"
        if address or name:
            return address or name
    return "unknown sender"


def _thread_subject(subject: str) -> str:
    return re.sub(r"^(?:(?:re|fwd?|aw|sv)\s*:\s*)+", "", subject, flags=re.IGNORECASE) or subject


def _date(message: Message) -> str | None:
    value = message.get("Date")
    if not value:
        return None
    try:
        moment = parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None
    return format_timestamp(moment)


def _attachment_names(message: EmailMessage) -> list[str]:
    """Names of the parts that are files rather than the readable body."""
    names = []
    for part in message.walk():
        if part.is_multipart():
            continue
        filename = part.get_filename()
        if part.get_content_disposition() == "attachment" or filename:
            names.append(clip(filename or part.get_content_type(), 80))
    return names


def _body_text(message: EmailMessage) -> str:
    """The readable body: text/plain preferred, else text/html with the tags stripped."""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError):
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    if not isinstance(content, str):
        return ""
    if part.get_content_subtype() == "html":
        return _strip_html(content)
    return content


class _TextOnly(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def _strip_html(html: str) -> str:
    parser = _TextOnly()
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())
