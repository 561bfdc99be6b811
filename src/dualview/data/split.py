"""Split a BEIR folder by query into two folders (e.g. queries for synthesis vs held out).

Both halves keep the whole corpus (copied), so held-out retrieval is over the same documents;
queries and qrels are divided. The split is deterministic: the first ``n_first`` judged
queries in qrels order, or a seeded shuffle when ``seed`` is given.
"""

from __future__ import annotations

import random
from pathlib import Path

from dualview.data.formats.beir import load_qrels, load_queries
from dualview.errors import DualviewError
from dualview.io.atomic import atomic_copy, atomic_write_text, write_jsonl


def _write_half(
    src: Path, out: Path, qids: list[str], queries: dict[str, str], qrels, split: str
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic_copy(src / "corpus.jsonl", out / "corpus.jsonl")
    write_jsonl(out / "queries.jsonl", ({"_id": q, "text": queries[q]} for q in qids))
    (out / "qrels").mkdir(exist_ok=True)
    lines = ["query-id\tcorpus-id\tscore"]
    lines += [f"{q}\t{d}\t{s}" for q in qids for d, s in qrels[q].items()]
    atomic_write_text(out / "qrels" / f"{split}.tsv", "\n".join(lines) + "\n")


def split_beir(
    src: str | Path, first: str | Path, rest: str | Path, n_first: int,
    seed: int | None = None, split: str = "test",
) -> tuple[int, int]:  # fmt: skip
    """Write the first ``n_first`` judged queries to ``first`` and the others to ``rest``."""
    src = Path(src)
    qrels = load_qrels(src / "qrels" / f"{split}.tsv")
    queries = load_queries(src / "queries.jsonl")
    qids = [q for q in qrels if q in queries]
    if not 0 < n_first < len(qids):
        raise DualviewError(f"{src}: n_first must be between 1 and {len(qids) - 1}")
    if seed is not None:
        random.Random(seed).shuffle(qids)
    _write_half(src, Path(first), qids[:n_first], queries, qrels, split)
    _write_half(src, Path(rest), qids[n_first:], queries, qrels, split)
    return n_first, len(qids) - n_first
