"""Fast encoding path: precision, tokenizer workers, several devices, stats, the cache.

All on CPU with the embedded MiniLM: bf16 runs there too (slowly on CPUs without bf16
instructions, so the fixtures stay small), and two ``"cpu"`` devices stand for two GPUs.
"""

from __future__ import annotations

import copy
import itertools
import json

import numpy as np
import pytest

from dualview.data.formats.beir import load_corpus
from dualview.errors import DualviewError
from dualview.retrieval.devices import balanced_shares
from dualview.retrieval.encode import Encoder, load_sentence_transformer, model_fingerprint
from dualview.retrieval.inference import batch_spans, resolve_precision
from dualview.retrieval.text import doc_text

LONG = " ".join(["retrieval with instructions needs long passages to test truncation"] * 40)
TEXTS = [
    "the cat sat on the mat",
    LONG,  # longer than the model's 256 tokens: truncated exactly as sentence-transformers does
    "short",
    "instruction following retrieval evaluation with p-MRR",
    "the cat sat on the mat",  # duplicate
    *[f"passage number {i} about topic {i % 7} " * (1 + i % 5) for i in range(35)],
]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def model():
    return load_sentence_transformer("embedded:minilm", device="cpu")


def _reference(model, texts, prompt=None) -> np.ndarray:
    return model.encode(texts, prompt=prompt, normalize_embeddings=True, convert_to_numpy=True)


def _ranks(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(x, axis=1), axis=1).astype(np.float64)


def _spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman correlation of each row of ``a`` with the same row of ``b`` (no ties)."""
    ra, rb = _ranks(a), _ranks(b)
    ra -= ra.mean(axis=1, keepdims=True)
    rb -= rb.mean(axis=1, keepdims=True)
    return (ra * rb).sum(axis=1) / np.sqrt((ra**2).sum(axis=1) * (rb**2).sum(axis=1))


def _top10_overlap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    top_a, top_b = np.argsort(-a, axis=1)[:, :10], np.argsort(-b, axis=1)[:, :10]
    return np.array([len(set(x) & set(y)) / 10 for x, y in zip(top_a, top_b, strict=True)])


def test_bf16_ranks_like_fp32(model, msmarco_dir, capsys) -> None:
    docs = [doc_text(d) for d in list(load_corpus(msmarco_dir / "corpus.jsonl").values())[:120]]
    lines = (msmarco_dir / "queries.jsonl").read_text(encoding="utf-8").splitlines()[:20]
    queries = [json.loads(line)["text"] for line in lines]
    scores = {}
    for precision in ("fp32", "bf16"):
        enc = Encoder(model, batch_size=32, cache=False, precision=precision)
        assert enc.precision == precision
        scores[precision] = enc.encode(queries) @ enc.encode(docs).T
    fp32, bf16 = scores["fp32"], scores["bf16"]
    overlap, rho = _top10_overlap(fp32, bf16).mean(), _spearman(fp32, bf16).mean()
    diff = np.abs(fp32 - bf16).max()
    with capsys.disabled():
        print(f"\nbf16 vs fp32: top-10 overlap {overlap:.3f}, Spearman {rho:.4f}, ", end="")
        print(f"largest score difference {diff:.4f}")
    assert diff > 1e-4  # it did run in bf16
    assert diff < 0.03
    assert overlap >= 0.85
    assert rho >= 0.98


def test_fp32_matches_sentence_transformers_with_prompt_and_truncation(model) -> None:
    enc = Encoder(model, batch_size=4, cache=False)
    ours = enc.encode(TEXTS, prompt="query: ")
    np.testing.assert_allclose(ours, _reference(model, TEXTS, "query: "), atol=1e-5)


def test_workers_give_the_same_vectors_and_stats(model) -> None:
    inline = Encoder(model, batch_size=4, cache=False, num_workers=0)
    forked = Encoder(model, batch_size=4, cache=False, num_workers=2)
    np.testing.assert_array_equal(inline.encode(TEXTS), forked.encode(TEXTS))
    assert inline.stats.texts == forked.stats.texts == len(set(TEXTS))
    assert inline.stats.tokens == forked.stats.tokens
    assert inline.stats.padded_tokens == forked.stats.padded_tokens


def test_prompt_left_out_of_pooling_in_workers(model) -> None:
    """``include_prompt=False``: the prompt length reaches the pooling from the workers."""
    excluding = copy.deepcopy(model)
    excluding.set_pooling_include_prompt(False)
    ours = Encoder(excluding, batch_size=4, cache=False, num_workers=2).encode(TEXTS, "query: ")
    np.testing.assert_allclose(ours, _reference(excluding, TEXTS, "query: "), atol=1e-5)
    assert not np.allclose(ours, _reference(model, TEXTS, "query: "), atol=1e-3)


def test_stats_count_real_and_padded_tokens(model) -> None:
    enc = Encoder(model, batch_size=8, cache=False)
    unique = list(dict.fromkeys(TEXTS))
    enc.encode(unique)
    longest_first = sorted(unique, key=len, reverse=True)
    ids = model.tokenizer(longest_first, truncation=True, max_length=256)["input_ids"]
    lengths = [len(x) for x in ids]
    batches = [lengths[i : i + 8] for i in range(0, len(lengths), 8)]
    assert enc.stats.tokens == sum(lengths)
    assert enc.stats.padded_tokens == sum(max(b) * len(b) for b in batches)
    report = enc.stats.to_dict()
    assert report["texts"] == len(unique)
    assert report["padding"] == pytest.approx(1 - sum(lengths) / enc.stats.padded_tokens, abs=1e-4)
    assert report["texts_per_s"] > 0


def test_two_cpu_processes_match_one(model) -> None:
    single = Encoder(model, batch_size=4, cache=False).encode(TEXTS, prompt="q: ")
    pair = Encoder(model, batch_size=4, cache=False, devices=["cpu", "cpu"])
    both = pair.encode(TEXTS, prompt="q: ")
    np.testing.assert_allclose(both, single, atol=1e-5)
    np.testing.assert_array_equal(both[0], both[4])
    assert pair.stats.texts == len(set(TEXTS))


def test_a_failing_device_is_reported(model) -> None:
    enc = Encoder(model, batch_size=4, cache=False, devices=["cpu", "no-such-device"])
    with pytest.raises(DualviewError, match="encoding on no-such-device failed"):
        enc.encode(TEXTS)


def test_cache_does_not_mix_precisions(model) -> None:
    fp32 = Encoder(model, precision="fp32")
    assert fp32.fingerprint == model_fingerprint(model)  # caches from before precisions
    first = fp32.encode(TEXTS)
    bf16 = Encoder(model, precision="bf16")
    assert bf16.fingerprint != fp32.fingerprint
    assert bf16.cache.path != fp32.cache.path
    calls: list[int] = []
    run = bf16._run
    bf16._run = lambda texts, prompt: calls.append(len(texts)) or run(texts, prompt)
    half = bf16.encode(TEXTS)
    assert calls == [len(set(TEXTS))]  # nothing read from the fp32 cache
    assert not np.array_equal(half, first)
    assert next(model.parameters()).dtype.is_floating_point
    assert str(next(model.parameters()).dtype) == "torch.float32"  # the caller's model is kept


def test_loaded_and_given_models_share_a_fingerprint(model) -> None:
    """The weights are hashed as loaded, before the encoder casts the model it owns."""
    owned = Encoder("embedded:minilm", device="cpu", precision="bf16", cache=False)
    owned.encode(TEXTS[:3])
    assert str(next(owned.model.parameters()).dtype) == "torch.bfloat16"
    assert owned.fingerprint == Encoder(model, precision="bf16").fingerprint


def test_options_are_checked() -> None:
    assert resolve_precision("auto", "cpu") == "fp32"
    assert resolve_precision("fp16", "cpu") == "fp16"
    with pytest.raises(DualviewError, match="precision must be one of"):
        resolve_precision("fp8", "cpu")
    with pytest.raises(DualviewError, match="either device or devices"):
        Encoder("embedded:minilm", device="cpu", devices=["cpu", "cpu"])


def test_balanced_shares_are_contiguous_and_even() -> None:
    lengths = [100] * 10 + [10] * 100  # sorted, longest first
    shares = balanced_shares(lengths, 2)
    assert shares[0][0] == 0 and shares[-1][1] == len(lengths)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(shares))
    sums = [sum(lengths[a:b]) for a, b in shares]
    assert abs(sums[0] - sums[1]) <= 100
    assert balanced_shares([5, 4, 3], 4) == [(0, 1), (1, 2), (2, 3)]
    assert balanced_shares([3, 2, 1, 1], 2) == [(0, 1), (1, 4)]
    assert balanced_shares([], 2) == []


def test_batches_never_cross_a_chunk() -> None:
    chunks = batch_spans(10, batch_size=4, chunk_size=6)
    assert chunks == [[(0, 4), (4, 6)], [(6, 10)]]
