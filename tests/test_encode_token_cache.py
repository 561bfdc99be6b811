"""`Encoder(token_cache=...)`: vectors equal the ordinary path's; a second model with the same
tokenizer reads the ids back; a model whose own preprocessing differs is encoded as usual."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from dualview.models.token_cache import TokenIdCache
from dualview.retrieval import encode as encode_module
from dualview.retrieval.encode import Encoder, load_sentence_transformer

TEXTS = [f"passage {i} " + "about retrieval and instructions " * (i % 7) for i in range(40)]


@pytest.fixture(scope="module")
def model():
    return load_sentence_transformer("embedded:minilm", device="cpu")


def _encode(model, cache: TokenIdCache | None, prompt: str | None = None) -> np.ndarray:
    encoder = Encoder(
        model, batch_size=16, cache=False, show_progress=False, num_workers=0, token_cache=cache
    )
    return encoder.encode(TEXTS, prompt=prompt)


def _refuse(*args, **kwargs):
    raise AssertionError("this path must not run here")


@pytest.mark.parametrize("prompt", [None, "query: "])
def test_cached_ids_give_the_same_vectors(
    tmp_path: Path, model, prompt: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = TokenIdCache(tmp_path)
    plain = _encode(model, None, prompt)
    monkeypatch.setattr(encode_module, "encode_sorted", _refuse)  # no tokenizer in the loop
    first = _encode(model, cache, prompt)
    second = _encode(model, cache, prompt)  # another encoder of the same tokenizer
    assert (cache.misses, cache.hits) == (1, 1)
    np.testing.assert_allclose(first, plain, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(second, first)


def test_inputs_are_checked_against_preprocess(
    tmp_path: Path, model, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens = TokenIdCache(tmp_path).ids(model.tokenizer, TEXTS, model.max_seq_length)
    assert encode_module._same_inputs(model, tokens, TEXTS, "") is not None
    original = model.preprocess

    def with_prompt_length(texts, prompt=None):  # e.g. pooling that leaves the prompt out
        return {**original(texts, prompt=prompt), "prompt_length": torch.tensor([2])}

    monkeypatch.setattr(model, "preprocess", with_prompt_length)
    assert encode_module._same_inputs(model, tokens, TEXTS, "") is None

    def other_ids(texts, prompt=None):
        features = dict(original(texts, prompt=prompt))
        features["input_ids"] = features["input_ids"].flip(1)
        return features

    monkeypatch.setattr(model, "preprocess", other_ids)
    assert encode_module._same_inputs(model, tokens, TEXTS, "") is None


def test_a_model_that_fails_the_check_is_encoded_as_usual(
    tmp_path: Path, model, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = _encode(model, None)

    monkeypatch.setattr(encode_module, "_same_inputs", lambda *args: None)
    monkeypatch.setattr(encode_module, "encode_token_ids", _refuse)
    np.testing.assert_array_equal(_encode(model, TokenIdCache(tmp_path)), plain)
