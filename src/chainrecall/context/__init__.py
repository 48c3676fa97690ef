"""Inline and spill: the prompt context an agent receives, and what it costs.

`build_context` reads the records a context needs from a `Memory` and
`assemble` (pure) renders them within a byte/token budget: the thread index,
the thread at hand, the current trigger inline, pointers for what was spilled.
`tokens` counts bytes and, with a real tokenizer, tokens; `prefix` measures
how much of a context a provider's prefix cache could reuse; `strategies` is
the arithmetic of resending history, shared by `chainrecall cost` and the
benchmarks.
"""

from __future__ import annotations

from chainrecall.context.assemble import (
    FORMATS,
    Budget,
    Context,
    ContextSource,
    Format,
    PayloadView,
    Spill,
    assemble,
    human_size,
)
from chainrecall.context.builder import (
    DEFAULT_EVENTS_LIMIT,
    DEFAULT_INDEX_LIMIT,
    build_context,
)
from chainrecall.context.prefix import prefix_ratios, shared_prefix_bytes, shared_prefix_ratio
from chainrecall.context.tokens import (
    TOKENIZERS,
    TokenCounter,
    available_tokenizers,
    load_tokenizer,
    utf8_bytes,
)

__all__ = [
    "DEFAULT_EVENTS_LIMIT",
    "DEFAULT_INDEX_LIMIT",
    "FORMATS",
    "TOKENIZERS",
    "Budget",
    "Context",
    "ContextSource",
    "Format",
    "PayloadView",
    "Spill",
    "TokenCounter",
    "assemble",
    "available_tokenizers",
    "build_context",
    "human_size",
    "load_tokenizer",
    "prefix_ratios",
    "shared_prefix_bytes",
    "shared_prefix_ratio",
    "utf8_bytes",
]
