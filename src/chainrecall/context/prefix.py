"""Prefix stability: how much of a new prompt a provider's prefix cache could reuse.

Providers cache prompt prefixes and reuse a cached prefix only when the new
request starts with it whole (DeepSeek's context cache works this way). The
share of a context that repeats the previous context byte for byte, from the
start, is what such a cache can serve; the rest is paid in full.
"""

from __future__ import annotations

from collections.abc import Sequence


def shared_prefix_bytes(previous: str, current: str) -> int:
    """Length in UTF-8 bytes of the longest common prefix of two texts."""
    a, b = previous.encode("utf-8"), current.encode("utf-8")
    limit = min(len(a), len(b))
    # Compare in blocks first: contexts are kilobytes and usually share most of them.
    start, block = 0, 256
    while start + block <= limit and a[start : start + block] == b[start : start + block]:
        start += block
    while start < limit and a[start] == b[start]:
        start += 1
    return start


def shared_prefix_ratio(previous: str, current: str) -> float:
    """Share of `current` (in bytes) that begins with the same bytes as `previous`."""
    size = len(current.encode("utf-8"))
    return shared_prefix_bytes(previous, current) / size if size else 1.0


def prefix_ratios(texts: Sequence[str]) -> list[float]:
    """The shared-prefix ratio of each context with the one before it (len(texts) - 1 values)."""
    return [shared_prefix_ratio(texts[i - 1], texts[i]) for i in range(1, len(texts))]
