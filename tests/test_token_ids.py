"""`dualview.models.token_ids` gives the ids the ordinary tokenizer call gives."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from dualview.models.token_ids import token_ids
from dualview.models.tokens import TokenizedTexts
from dualview.resources import resolve_model_path

TEXTS = [
    "Hello, World!  Ünïcode accents and CAPITALS",
    "",
    "word " * 700,  # truncated
    "中文 mixed with English, numbers 12345 and [brackets]",
]


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(resolve_model_path("embedded:minilm"))


@pytest.mark.parametrize("max_length", [8, 512])
@pytest.mark.parametrize("side", ["right", "left"])
def test_same_ids_as_the_tokenizer_call(tokenizer, max_length: int, side: str) -> None:
    tokenizer.truncation_side = side
    try:
        want = tokenizer(TEXTS, truncation=True, max_length=max_length)["input_ids"]
        got = token_ids(tokenizer, TEXTS, max_length)
    finally:
        tokenizer.truncation_side = "right"
    assert got == want
    assert max(len(ids) for ids in got) == max_length  # the long text was truncated


def test_the_ordinary_call_still_pads_afterwards(tokenizer) -> None:
    token_ids(tokenizer, TEXTS, 8)
    padded = tokenizer(TEXTS[:2], padding=True, truncation=True, max_length=64)
    assert len({len(ids) for ids in padded["input_ids"]}) == 1
    assert padded["input_ids"][0][-1] == tokenizer.sep_token_id  # not cut at 8


def test_tokenizer_without_backend_uses_the_call() -> None:
    calls = []

    def slow(texts, **kwargs):
        calls.append(kwargs["max_length"])
        return {"input_ids": [[1, len(t)] for t in texts]}

    assert token_ids(slow, ["ab", "c"], 7) == [[1, 2], [1, 1]] and calls == [7]


def test_flat_ids_round_trip() -> None:
    tokens = TokenizedTexts.from_lists([[5, 6, 7], [], [8]])
    assert tokens.ids.tolist() == [5, 6, 7, 8] and tokens.lengths.tolist() == [3, 0, 1]
    assert tokens.pad([0, 2], pad_id=0)["input_ids"].tolist() == [
        [5, 6, 7, 0, 0, 0, 0, 0],
        [8, 0, 0, 0, 0, 0, 0, 0],
    ]
