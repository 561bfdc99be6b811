"""Unpadded token ids padded per chunk, and length-sorted chunk plans under a token budget."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoTokenizer

from dualview.models.tokens import (
    PAD_MULTIPLE,
    TokenizedTexts,
    padded_width,
    plan_chunks,
    tokenize_texts,
)
from dualview.resources import embedded_encoder_path

TEXTS = ["a short one", "a much longer text about retrieval and instructions " * 3, "", "x y"]


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(str(embedded_encoder_path()))


@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_equals_the_tokenizers_own_padding(tokenizer, side: str) -> None:
    tokenizer.padding_side = side
    texts = [t or "empty" for t in TEXTS]
    tokens = tokenize_texts(tokenizer, texts, max_length=24)
    chosen = [3, 1, 0]
    ours = tokens.pad(chosen, tokenizer.pad_token_id, left=side == "left", max_length=24)
    ref = tokenizer([texts[i] for i in chosen], padding=True, truncation=True, max_length=24)
    width = len(ref["input_ids"][0])
    assert ours["input_ids"].shape[1] == padded_width(width, 24)
    extra = ours["input_ids"].shape[1] - width  # rounding to PAD_MULTIPLE adds pad columns
    keep = slice(extra, None) if side == "left" else slice(0, width)
    assert ours["input_ids"][:, keep].tolist() == ref["input_ids"]
    assert ours["attention_mask"][:, keep].tolist() == ref["attention_mask"]
    assert int(ours["attention_mask"].sum()) == sum(map(sum, ref["attention_mask"]))
    tokenizer.padding_side = "right"


def test_padded_width_rounds_up_but_never_past_max_length() -> None:
    assert padded_width(1) == PAD_MULTIPLE
    assert padded_width(17) == 24
    assert padded_width(500, max_length=510) == 504
    assert padded_width(507, max_length=510) == 510  # 512 would pass the limit
    assert padded_width(510, max_length=510) == 510


def test_from_lists_round_trip() -> None:
    seqs = [[5, 6, 7], [], [9]]
    tokens = TokenizedTexts.from_lists(seqs)
    assert len(tokens) == 3 and tokens.lengths.tolist() == [3, 0, 1]
    out = tokens.pad([0, 2], pad_id=0)
    assert out["input_ids"].tolist() == [[5, 6, 7, 0, 0, 0, 0, 0], [9, 0, 0, 0, 0, 0, 0, 0]]


@pytest.mark.parametrize("seed", range(5))
def test_plan_chunks_covers_all_sorted_and_within_budget(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [rng.randint(1, 512) for _ in range(rng.randint(1, 300))]
    budget = rng.choice([600, 4096, 20000])
    chunks = plan_chunks(torch.tensor(lengths), max_tokens=budget, max_items=50)
    flat = [i for c in chunks for i in c]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths, reverse=True)
    for chunk in chunks:
        assert len(chunk) <= 50
        cost = len(chunk) * padded_width(max(lengths[i] for i in chunk))
        assert len(chunk) == 1 or cost <= budget


def test_plan_chunks_by_count_only() -> None:
    assert [len(c) for c in plan_chunks([3, 1, 2, 5, 4], max_items=2)] == [2, 2, 1]
