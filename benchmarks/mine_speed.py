"""Mining speed: corpus encoding (documents/s) and search (queries/s), exact torch vs FAISS.

On the shared MS MARCO slice (``../shared/data/msmarco-1743``) with the embedded MiniLM, via
the same code mining uses (:class:`dualview.retrieval.encode.Encoder`,
:func:`dualview.retrieval.search.topk`):

- encoding: documents/s with the cache off (the model's own speed), then documents/s when
  every vector comes from the on-disk cache (a re-run or resumed mining);
- search: queries/s for top-``k`` of all 1,743 queries against the real corpus, and against
  the corpus embeddings tiled with small noise up to ``--scale`` rows (a synthetic stand-in
  for a paper-scale corpus), for ``torch`` (exact, chunked) and ``faiss`` (IndexFlatIP, exact).

    .venv/bin/python benchmarks/mine_speed.py [--docs 1743] [--scale 200000] [--k 100]

Writes ``benchmarks/results/mine_speed.json`` and prints a table. Other jobs on a shared
machine slow every number down: the load average before and after is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from _machine import machine_end, machine_line, machine_start

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "mine_speed.json"
DATA = ROOT.parent / "shared" / "data" / "msmarco-1743"


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - start, out


def bench_encoding(texts: list[str], batch_size: int) -> tuple[dict, np.ndarray]:
    from dualview.retrieval.encode import Encoder

    enc = Encoder("embedded:minilm", batch_size=batch_size, show_progress=False)
    cold, emb = timed(enc.encode, texts)
    warm, _ = timed(enc.encode, texts)
    return {
        "documents": len(texts),
        "batch_size": batch_size,
        "encode_seconds": round(cold, 2),
        "documents_per_s": round(len(texts) / cold, 1),
        "cached_seconds": round(warm, 3),
        "cached_documents_per_s": round(len(texts) / warm, 1),
    }, emb


def tile(emb: np.ndarray, rows: int, seed: int = 0) -> np.ndarray:
    """``emb`` repeated with small noise up to ``rows`` rows, re-normalized."""
    rng = np.random.default_rng(seed)
    reps = -(-rows // len(emb))
    big = np.tile(emb, (reps, 1))[:rows]
    big = big + rng.normal(scale=0.02, size=big.shape).astype(np.float32)
    return big / np.linalg.norm(big, axis=1, keepdims=True)


def bench_search(queries: np.ndarray, docs: np.ndarray, k: int) -> dict:
    from dualview.retrieval.search import faiss_available, topk

    row = {"corpus_rows": len(docs), "queries": len(queries), "k": k}
    seconds, (_, exact_idx) = timed(topk, queries, docs, k, backend="torch")
    row["torch_queries_per_s"] = round(len(queries) / seconds, 1)
    if faiss_available():
        seconds, (_, faiss_idx) = timed(topk, queries, docs, k, backend="faiss")
        row["faiss_queries_per_s"] = round(len(queries) / seconds, 1)
        row["top1_agreement"] = float(np.mean(exact_idx[:, 0] == faiss_idx[:, 0]))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=None, help="corpus documents (default all)")
    parser.add_argument("--scale", type=int, default=200_000, help="synthetic corpus rows")
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DUALVIEW_NO_PROGRESS", "1")
    os.environ["DUALVIEW_CACHE"] = tempfile.mkdtemp(prefix="mine-speed-")  # cold cache

    from dualview.data.formats.beir import load_beir
    from dualview.retrieval.encode import Encoder
    from dualview.retrieval.text import doc_text

    info = machine_start()
    data = load_beir(DATA)
    docs = list(data.corpus.values())[: args.docs]
    encoding, doc_emb = bench_encoding([doc_text(d) for d in docs], args.batch_size)
    query_emb = Encoder("embedded:minilm", show_progress=False).encode(list(data.queries.values()))
    search = [bench_search(query_emb, doc_emb, args.k)]
    search.append(bench_search(query_emb, tile(doc_emb, args.scale), args.k))
    info = machine_end(info)
    result = {"machine": info, "encoding": encoding, "search": search}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(machine_line(info))
    print(
        f"encoding {encoding['documents']} docs (MiniLM, batch {encoding['batch_size']}): "
        f"{encoding['documents_per_s']} docs/s cold, "
        f"{encoding['cached_documents_per_s']} docs/s from cache"
    )
    print(f"{'corpus rows':>12} {'queries':>8} {'k':>4} {'torch q/s':>10} {'faiss q/s':>10}")
    for row in search:
        print(
            f"{row['corpus_rows']:>12} {row['queries']:>8} {row['k']:>4} "
            f"{row['torch_queries_per_s']:>10} {row.get('faiss_queries_per_s', '-'):>10}"
        )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
