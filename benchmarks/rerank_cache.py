"""Two-stage evaluation's reranker path against plain ``CrossEncoder.predict``, and its cache.

On the BM25 top ``--top-k`` of the first ``--queries`` queries of ``../shared/data/msmarco-1743``
(`dualview.data.bm25.BM25` over its 1,743 passages) and a cross-encoder (``--model minilm``:
initialised from the embedded all-MiniLM-L6-v2, its scoring head random, seed 0, the speed
of a trained one; ``--model tiny``: a 2-layer, 32-dim random BERT with MiniLM's tokenizer,
where our per-pair overhead weighs most), measures:

1. ``CrossEncoder.predict(pairs, batch_size)``: the baseline;
2. `dualview.retrieval.rerank.CachedReranker` without its cache, over an adapter that calls
   the same ``predict`` (the reranker contract's ``score``): our path's overhead (length
   sorting, chunking, keys; goal: throughput >= 0.95x of (1));
3. the same with an empty score cache (scores and writes), then a new `CachedReranker` on the
   same pairs (reads everything back; goal: at least 10x faster than the empty cache).

(1) and (2) alternate for ``--repeats`` rounds and the best round of each is kept. BM25's
ranking time over all the queries is reported beside them.

    .venv/bin/python benchmarks/rerank_cache.py [--model minilm|tiny] [--queries 100]
        [--top-k 20] [--repeats 3]

Writes ``benchmarks/results/rerank_cache_<model>.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _machine import machine_end, machine_line, machine_start

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "rerank_cache_{model}.json"
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "msmarco-1743"


class PredictReranker:
    """The `Reranker` contract over ``CrossEncoder.predict`` (query text ``query instruction``)."""

    fingerprint = "bench:minilm-cross-encoder-seed0"

    def __init__(self, model) -> None:
        self.model = model

    def score(self, queries, instructions, passages, batch_size=32) -> np.ndarray:
        pairs = [
            (f"{q} {i}".strip(), p) for q, i, p in zip(queries, instructions, passages, strict=True)
        ]
        return self.model.predict(pairs, batch_size=batch_size, show_progress_bar=False)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def first_stage(folder: Path, n_queries: int, k: int) -> tuple[list[tuple[str, str]], float]:
    """BM25's top ``k`` passages of the first ``n_queries`` queries as (query, passage) pairs,
    and the seconds BM25 took to rank them (index included)."""
    from dualview.data.bm25 import BM25
    from dualview.data.formats.beir import load_corpus
    from dualview.io.files import iter_json_lines
    from dualview.retrieval.text import doc_text

    corpus = list(load_corpus(folder / "corpus.jsonl").values())
    queries = [row["text"] for _, row in iter_json_lines(folder / "queries.jsonl")][:n_queries]
    start = time.perf_counter()
    bm25 = BM25(corpus)
    ranked = [bm25.top_k(q, k)[1] for q in queries]
    seconds = time.perf_counter() - start
    pairs = [
        (q, doc_text(corpus[row])) for q, rows in zip(queries, ranked, strict=True) for row in rows
    ]
    return pairs, seconds


def cross_encoder(kind: str, device: str):
    """The CrossEncoder of ``--model`` (module docstring), seed 0."""
    import torch
    from sentence_transformers import CrossEncoder
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from dualview.resources import embedded_encoder_path

    torch.manual_seed(0)
    if kind == "minilm":
        return CrossEncoder(str(embedded_encoder_path()), num_labels=1, device=device)
    folder = Path(tempfile.mkdtemp(prefix="tiny-ce-"))
    tokenizer = AutoTokenizer.from_pretrained(str(embedded_encoder_path()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return CrossEncoder(str(folder), device=device)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("minilm", "tiny"), default="minilm")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["DUALVIEW_CACHE"] = tempfile.mkdtemp(prefix="rerank-cache-")
    from dualview.retrieval.rerank import CachedReranker

    info = machine_start()
    pairs, bm25_s = first_stage(args.data, args.queries, args.top_k)
    model = cross_encoder(args.model, args.device)
    model.predict(pairs[:64], batch_size=args.batch_size, show_progress_bar=False)  # warm-up
    queries, passages = [q for q, _ in pairs], [p for _, p in pairs]
    blanks = [""] * len(pairs)
    plain = CachedReranker(
        PredictReranker(model), args.batch_size, cache=False, show_progress=False
    )

    st_times, ours_times = [], []
    for _ in range(args.repeats):
        st_times.append(
            timed(lambda: model.predict(pairs, batch_size=args.batch_size, show_progress_bar=False))
        )
        ours_times.append(timed(lambda: plain.score(queries, blanks, passages)))
    expected = model.predict(pairs, batch_size=args.batch_size, show_progress_bar=False)
    cold = CachedReranker(PredictReranker(model), args.batch_size, show_progress=False)
    cold_s = timed(lambda: cold.score(queries, blanks, passages))
    warm = CachedReranker(PredictReranker(model), args.batch_size, show_progress=False)
    scores = []
    warm_s = timed(lambda: scores.append(warm.score(queries, blanks, passages)))
    max_diff = float(np.abs(scores[0] - expected).max())

    n = len(pairs)
    st_best, ours_best = min(st_times), min(ours_times)
    result = {
        "model": args.model,
        "pairs": n,
        "queries": args.queries,
        "top_k": args.top_k,
        "batch_size": args.batch_size,
        "device": args.device,
        "bm25_rank_s": bm25_s,
        "cross_encoder_predict_s": st_times,
        "cached_reranker_no_cache_s": ours_times,
        "predict_pairs_per_s": n / st_best,
        "ours_pairs_per_s": n / ours_best,
        "ours_vs_predict_ratio": st_best / ours_best,
        "cache_cold_s": cold_s,
        "cache_warm_s": warm_s,
        "cache_speedup": cold_s / warm_s,
        "warm_scores_max_abs_diff_vs_predict": max_diff,
        "warm_model_calls": warm.stats.calls,
        "goals": {
            "within_5pct": st_best / ours_best >= 0.95,
            "cache_10x": cold_s / warm_s >= 10,
        },
        "machine": (info := machine_end(info)),
    }
    results = Path(str(RESULTS).format(model=args.model))
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    rows = [
        ("CrossEncoder.predict", st_best),
        ("CachedReranker (no cache)", ours_best),
        ("CachedReranker, empty cache", cold_s),
        ("CachedReranker, warm cache", warm_s),
    ]
    print(f"{args.model}: {n} pairs (BM25 top {args.top_k} of {args.queries} queries), ", end="")
    print(f"batch {args.batch_size}")
    print(f"{'run':<30} {'time':>10} {'pairs/s':>10}")
    for name, t in rows:
        print(f"{name:<30} {t:>9.3f}s {n / t:>10.1f}")
    print(f"ours / predict throughput: {st_best / ours_best:.3f} (goal >= 0.95)")
    print(f"cache speed-up (empty -> warm): {cold_s / warm_s:.1f}x (goal >= 10x); ", end="")
    print(f"warm model calls: {warm.stats.calls}; max |warm - predict|: {max_diff:.2e}")
    print(f"BM25 ranking of {args.queries} queries over the corpus: {bm25_s:.2f} s")
    print(machine_line(info))
    print(f"-> {results.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
