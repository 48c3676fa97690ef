"""One exception tree for everything a caller of chainrecall can meet.

    ChainRecallError              base; carries an HTTP status and a problem type
    ├── NotFound                  404: no such ID here (unknown, malformed, wrong kind,
    │                             or in another namespace: the caller cannot tell)
    ├── Gone                      410: the object was deleted; its ID stays retired
    ├── InvalidInput              400: a bad parameter or body
    │   ├── InvalidCursor         400: a cursor not issued by us, altered, or foreign
    │   └── UnknownReference      422: a body names an ID that does not resolve
    ├── PayloadTooLarge           413: a body over the configured limit
    ├── Unauthorized              401: missing or invalid token or signature
    ├── Forbidden                 403: a valid token without the needed scope
    ├── RateLimited               429: too many requests for one token
    ├── NotConfigured             503: a feature that needs set-up (e.g. a webhook secret)
    └── StoreUnavailable          503: the database could not be reached

Storage drivers translate their own errors into this tree in exactly one place
per backend; the HTTP layer maps the tree onto problem+json in exactly one place.
Every message says what was wrong and, where it helps, what to do instead.
"""

from __future__ import annotations

from typing import Any


class ChainRecallError(Exception):
    status: int = 500
    type_slug: str = "internal"
    title: str = "Internal error"

    def __init__(self, detail: str, **extensions: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extensions = extensions


class NotFound(ChainRecallError):
    status = 404
    type_slug = "not-found"
    title = "Not Found"

    def __init__(self, object_id: str, what: str = "object") -> None:
        super().__init__(f"no {what} with id {object_id!r} exists", id=object_id)
        self.object_id = object_id


class Gone(ChainRecallError):
    status = 410
    type_slug = "gone"
    title = "Gone"

    def __init__(self, object_id: str, deleted_at: str | None = None) -> None:
        detail = f"{object_id!r} was deleted"
        if deleted_at:
            detail += f" at {deleted_at}"
        super().__init__(detail + "; its id is retired and never reused", id=object_id)
        self.object_id = object_id


class InvalidInput(ChainRecallError):
    status = 400
    type_slug = "invalid-input"
    title = "Bad Request"


class InvalidCursor(InvalidInput):
    type_slug = "invalid-cursor"
    title = "Invalid cursor"


class UnknownReference(InvalidInput):
    status = 422
    type_slug = "unknown-reference"
    title = "Unknown reference"

    def __init__(self, object_id: str, field: str) -> None:
        super().__init__(
            f"{field} names {object_id!r}, which does not exist; send an id this service returned",
            id=object_id,
            field=field,
        )
        self.object_id = object_id


class PayloadTooLarge(ChainRecallError):
    status = 413
    type_slug = "too-large"
    title = "Content Too Large"


class Unauthorized(ChainRecallError):
    status = 401
    type_slug = "unauthorized"
    title = "Unauthorized"


class Forbidden(ChainRecallError):
    status = 403
    type_slug = "forbidden"
    title = "Forbidden"


class RateLimited(ChainRecallError):
    status = 429
    type_slug = "rate-limited"
    title = "Too Many Requests"


class NotConfigured(ChainRecallError):
    status = 503
    type_slug = "not-configured"
    title = "Not configured"


class StoreUnavailable(ChainRecallError):
    status = 503
    type_slug = "store-unavailable"
    title = "Store unavailable"
