"""Identifiers: the stable names of Triggers, Threads and Workers.

An ID is a kind prefix (`trg_`, `thr_`, `wkr_`) and a short random tail of
lowercase base-36 characters. It is never derived from a row position, so a
migration, an export or a backend change cannot renumber it; the stores keep a
row for every ID ever issued (deleted objects keep a tombstone), and a primary
key refuses a repeat, so an ID is never given to anything else. Eight
characters (about 41 bits) keep an ID at a few tokens in a prompt; a collision
is caught by the store's primary key and the store draws again.
"""

from __future__ import annotations

import re
import secrets
from typing import Literal

Kind = Literal["trigger", "thread", "worker"]

PREFIXES: dict[Kind, str] = {"trigger": "trg", "thread": "thr", "worker": "wkr"}
KIND_BY_PREFIX: dict[str, Kind] = {v: k for k, v in PREFIXES.items()}

ID_PATTERN = re.compile(r"^(trg|thr|wkr)_[0-9a-z_]{1,40}$")
MAX_ID_LENGTH = 44
_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"
TAIL_LENGTH = 8


def new_id(kind: Kind) -> str:
    """A fresh random ID of `kind`; uniqueness is enforced by the store."""
    # One draw from the OS random source, not one per character (ingest makes many IDs).
    number = secrets.randbelow(36**TAIL_LENGTH)
    tail = []
    for _ in range(TAIL_LENGTH):
        number, digit = divmod(number, 36)
        tail.append(_ALPHABET[digit])
    return f"{PREFIXES[kind]}_{''.join(tail)}"


def is_valid(value: str, kind: Kind | None = None) -> bool:
    """True when `value` is a well-formed ID (of `kind`, when given)."""
    if len(value) > MAX_ID_LENGTH or not ID_PATTERN.match(value):
        return False
    return kind is None or value.startswith(PREFIXES[kind] + "_")


def kind_of(value: str) -> Kind | None:
    """The kind a well-formed ID names, or None for anything else."""
    if not is_valid(value):
        return None
    return KIND_BY_PREFIX[value.split("_", 1)[0]]
