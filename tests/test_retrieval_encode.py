"""Encoder: same vectors as sentence-transformers, on-disk cache, fingerprint, prompts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dualview.errors import DualviewError
from dualview.retrieval.encode import (
    Encoder,
    load_sentence_transformer,
    model_fingerprint,
    text_key,
)

TEXTS = [
    "the cat sat on the mat",
    "a considerably longer sentence about retrieval models that read instructions carefully",
    "short",
    "the cat sat on the mat",  # duplicate: must come back in place
    "instruction following retrieval evaluation with p-MRR",
]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def model():
    return load_sentence_transformer("embedded:minilm", device="cpu")


def _count_encode_calls(encoder: Encoder) -> list[int]:
    """Wrap the encoder's model runs to record how many texts each one received."""
    calls: list[int] = []
    original = encoder._run

    def counting(texts, *args, **kwargs):
        calls.append(len(texts))
        return original(texts, *args, **kwargs)

    encoder._run = counting
    return calls


def test_matches_sentence_transformers_in_input_order(model) -> None:
    enc = Encoder(model, batch_size=2, cache=False)
    ours = enc.encode(TEXTS)
    reference = model.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    assert ours.dtype == np.float32
    assert ours.shape == (len(TEXTS), enc.dim)
    np.testing.assert_allclose(ours, reference, atol=1e-5)
    np.testing.assert_array_equal(ours[0], ours[3])


def test_prompt_is_passed_to_the_model(model) -> None:
    enc = Encoder(model, cache=False)
    ours = enc.encode(TEXTS[:2], prompt="query: ")
    reference = model.encode(TEXTS[:2], prompt="query: ", normalize_embeddings=True)
    np.testing.assert_allclose(ours, reference, atol=1e-5)
    assert not np.allclose(ours, enc.encode(TEXTS[:2]), atol=1e-3)


def test_second_encoding_reads_the_cache(model) -> None:
    enc = Encoder(model)
    calls = _count_encode_calls(enc)
    first = enc.encode(TEXTS)
    assert calls == [4]  # 4 distinct texts, one chunk
    second = enc.encode(list(reversed(TEXTS)))
    assert calls == [4]  # nothing new to encode
    np.testing.assert_array_equal(second, first[::-1])
    assert enc.cache.path.is_file()
    assert len(enc.cache) == 4


def test_cache_is_keyed_by_prompt_and_resumes_partial_work(model) -> None:
    enc = Encoder(model)
    calls = _count_encode_calls(enc)
    enc.encode(TEXTS[:2], prompt="p1: ")
    enc.encode(TEXTS, prompt="p1: ")  # only the 2 unseen distinct texts
    enc.encode(TEXTS[:2], prompt="p2: ")  # another prompt is another key
    assert calls == [2, 2, 2]
    assert text_key("x", "a") != text_key("x", "b") != text_key("x", None)


def test_cache_is_shared_across_encoder_instances(model) -> None:
    Encoder(model).encode(TEXTS)
    other = Encoder(model)
    calls = _count_encode_calls(other)
    other.encode(TEXTS)
    assert calls == []


def test_fingerprint_follows_weights_not_path() -> None:
    a = load_sentence_transformer("embedded:minilm", device="cpu")
    b = load_sentence_transformer("embedded:minilm", device="cpu")
    assert model_fingerprint(a) == model_fingerprint(b)
    with torch.no_grad():
        next(iter(b.parameters())).view(-1)[0] += 1e-3
    assert model_fingerprint(a) != model_fingerprint(b)


def test_prompt_name_errors_and_resolution(model) -> None:
    enc = Encoder(model, cache=False)
    with pytest.raises(DualviewError, match="no prompt 'nope'"):
        enc.encode(["x"], prompt_name="nope")
    with pytest.raises(DualviewError, match="either prompt or prompt_name"):
        enc.resolve_prompt("a", "b")
    assert enc.encode([]).shape == (0, enc.dim)


def test_unknown_model_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(DualviewError, match="cannot load model"):
        Encoder(str(tmp_path / "missing-model"))
