"""BM25 first stages side by side: ``bm25`` (the `bm25s` library, stemmed, English stop
words) and ``bm25-builtin`` (hand-written, no stemming), on the shared MS MARCO slice
(``../shared/data/msmarco-1743``: 1,743 queries, one relevant passage each, 1,743 passages).

Through the code evaluation runs (`dualview.data.bm25.bm25_index`, ``top_k`` per query):

- indexing: seconds to index the corpus (tokenizing included), best of ``--repeat``;
- retrieval: queries/s for the top-``k`` of every query, best of ``--repeat``;
- quality: nDCG@10 and MRR@10 of each run (`dualview.eval.metrics.ir_metrics`, trec_eval).

    .venv/bin/python benchmarks/bm25_speed.py [--k 100] [--repeat 3]

Writes ``benchmarks/results/bm25_speed.json`` and prints a table with the ratio builtin /
bm25s (above 1: the builtin takes longer). Other jobs on a shared machine slow every number
down: the load average before and after is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from _machine import machine_end, machine_line, machine_start

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "bm25_speed.json"
DATA = ROOT.parent / "shared" / "data" / "msmarco-1743"
KINDS = ("bm25", "bm25-builtin")


def best_of(repeat: int, fn, *args) -> tuple[float, object]:
    """The fastest of ``repeat`` calls (seconds) and the last call's result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn(*args)
        best = min(best, time.perf_counter() - start)
    return best, out


def run_queries(index, queries: dict[str, str], doc_ids: list[str], k: int) -> dict:
    run = {}
    for qid, text in queries.items():
        scores, rows = index.top_k(text, k)
        run[qid] = {doc_ids[r]: float(s) for s, r in zip(scores, rows, strict=True)}
    return run


def bench_kind(kind: str, data, k: int, repeat: int) -> dict:
    from dualview.data.bm25 import bm25_fingerprint, bm25_index
    from dualview.eval.metrics import ir_metrics

    doc_ids = list(data.corpus)
    docs = [data.corpus[d] for d in doc_ids]
    index_s, index = best_of(repeat, bm25_index, kind, docs)
    search_s, run = best_of(repeat, run_queries, index, data.queries, doc_ids, k)
    metrics = ir_metrics(data.qrels, run, ["nDCG@10", "MRR@10"])
    return {
        "kind": kind,
        "fingerprint": bm25_fingerprint(kind),
        "documents": len(docs),
        "queries": len(data.queries),
        "k": k,
        "index_seconds": round(index_s, 3),
        "search_seconds": round(search_s, 3),
        "queries_per_s": round(len(data.queries) / search_s, 1),
        "nDCG@10": round(metrics["nDCG@10"].mean, 4),
        "MRR@10": round(metrics["MRR@10"].mean, 4),
    }


def print_table(rows: dict[str, dict]) -> None:
    new, old = rows["bm25"], rows["bm25-builtin"]
    print(f"{'':>16} {'bm25 (bm25s)':>14} {'bm25-builtin':>14} {'builtin/bm25s':>14}")
    for key in ("index_seconds", "search_seconds", "queries_per_s", "nDCG@10", "MRR@10"):
        ratio = old[key] / new[key] if new[key] else float("nan")
        print(f"{key:>16} {new[key]:>14} {old[key]:>14} {ratio:>14.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=100, help="documents retrieved per query")
    parser.add_argument("--repeat", type=int, default=3, help="timings: best of this many")
    args = parser.parse_args()
    os.environ.setdefault("DUALVIEW_NO_PROGRESS", "1")

    from dualview.data.formats.beir import load_beir

    info = machine_start()
    data = load_beir(DATA)
    rows = {kind: bench_kind(kind, data, args.k, args.repeat) for kind in KINDS}
    info = machine_end(info)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"machine": info, "results": rows}, indent=2) + "\n")
    print(machine_line(info))
    print_table(rows)
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
