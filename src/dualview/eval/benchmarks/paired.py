"""Paired instruction sets: two instructions that differ in one constraint, same documents.

A generic format of our own (the bundled demo evaluation set uses it). Layout::

    <dir>/corpus.jsonl   {"_id", "title", "text"}           (BEIR corpus)
    <dir>/pairs.jsonl    one pair per line:
      {"pair_id": "p1",
       "query": "effects of caffeine",                      shared query
       "constraint": "length",                              optional: what differs (a label)
       "a": {"instruction": "...", "satisfying": ["d1"], "violating": ["d2"]},
       "b": {"instruction": "...", "satisfying": ["d2"], "violating": ["d1"]},
       "candidates": ["d1", "d2", "d9"]}                    optional

- ``a`` and ``b`` are the two sides; a side may carry its own ``"query"`` (pairs that differ
  in the query rather than the instruction). ``satisfying``: documents relevant under this
  side (they meet its constraint); ``violating``: on topic but breaking it. Every id must be
  in ``corpus.jsonl``; each side needs at least one satisfying document.
- ``candidates``: the documents to rank for both sides (reranking mode); without it each side
  is searched over the whole corpus (top 1000).

Reported (query ids ``<pair_id>/a`` and ``<pair_id>/b``; ``constraint`` groups them):

- ``pairwise accuracy`` (×100): share of (satisfying, violating) pairs ranked in order;
- ``p-MRR`` (×100), both directions: from side a's run to side b's run over the documents
  satisfying a and not b (ids ``<pair_id>/a>b``), and the reverse;
- ``nDCG@10`` with the satisfying documents as relevant;
- per constraint label: ``<constraint>/p-MRR``, ``<constraint>/pairwise accuracy`` and
  ``<constraint>/nDCG@10``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dualview.data.formats.beir import load_corpus
from dualview.errors import DataError
from dualview.eval.benchmarks.base import (
    Benchmark,
    BenchmarkMeta,
    BenchmarkResult,
    EvalContext,
    encode_corpus,
    require_file,
    rerank,
    retrieve,
)
from dualview.eval.benchmarks.meta import MtebTasks, ReportColumn
from dualview.eval.metrics import MetricResult, ir_metrics, p_mrr, pairwise_accuracy
from dualview.io.files import iter_json_lines

TOP_K = 1000
SIDES = ("a", "b")
OWN_BENCHMARK = "dualview's own benchmark: mteb has no task for it"


@dataclass
class Side:
    query: str
    instruction: str
    satisfying: list[str]
    violating: list[str]


@dataclass
class Pair:
    pair_id: str
    constraint: str
    sides: dict[str, Side]
    candidates: list[str] | None


def _id_list(value: Any, path: Path, line: int, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise DataError(path, line, field, "expected a list of document ids")
    return [str(v) for v in value]


def _side(row: dict, key: str, path: Path, line: int, corpus: dict) -> Side:
    raw = row.get(key)
    if not isinstance(raw, dict):
        raise DataError(path, line, key, "missing side object {instruction, satisfying, ...}")
    query = raw.get("query", row.get("query"))
    if not isinstance(query, str) or not query.strip():
        raise DataError(path, line, f"{key}.query", "missing query (on the pair or the side)")
    instruction = raw.get("instruction", "")
    if not isinstance(instruction, str):
        raise DataError(path, line, f"{key}.instruction", "expected a string")
    side = Side(
        query=query,
        instruction=instruction,
        satisfying=_id_list(raw.get("satisfying"), path, line, f"{key}.satisfying"),
        violating=_id_list(raw.get("violating"), path, line, f"{key}.violating"),
    )
    if not side.satisfying:
        raise DataError(path, line, f"{key}.satisfying", "needs at least one document id")
    for field, ids in (("satisfying", side.satisfying), ("violating", side.violating)):
        for doc_id in ids:
            if doc_id not in corpus:
                raise DataError(path, line, f"{key}.{field}", f"{doc_id!r} is not in corpus.jsonl")
    return side


def read_pairs(path: Path, corpus: dict) -> list[Pair]:
    pairs: list[Pair] = []
    seen: set[str] = set()
    for line, row in iter_json_lines(require_file(path)):
        pair_id = row.get("pair_id")
        if not isinstance(pair_id, str) or not pair_id:
            raise DataError(path, line, "pair_id", "missing")
        if pair_id in seen:
            raise DataError(path, line, "pair_id", f"duplicate {pair_id!r}")
        seen.add(pair_id)
        candidates = row.get("candidates")
        cands = None if candidates is None else _id_list(candidates, path, line, "candidates")
        for doc_id in cands or ():
            if doc_id not in corpus:
                raise DataError(path, line, "candidates", f"{doc_id!r} is not in corpus.jsonl")
        sides = {k: _side(row, k, path, line, corpus) for k in SIDES}
        pairs.append(Pair(pair_id, str(row.get("constraint") or ""), sides, cands))
    if not pairs:
        raise DataError(path, None, "pairs", "no pairs")
    return pairs


def _subset(result: MetricResult, keys: set[str]) -> MetricResult:
    values = {k: v for k, v in result.per_query.items() if k in keys}
    mean = sum(values.values()) / len(values) if values else float("nan")
    return MetricResult(mean=mean, per_query=values)


class PairedInstructions(Benchmark):
    """Pairwise accuracy, p-MRR and nDCG@10 on paired instructions (module docstring)."""

    meta = BenchmarkMeta(
        name="paired",
        description="Instruction pairs differing in one constraint, with satisfying and "
        "violating documents",
        reference="docs/architecture/eval.md",
        main_score="p-MRR",
        columns=(
            ReportColumn(metric="pairwise accuracy", scale="percent"),
            ReportColumn(metric="p-MRR", scale="percent"),
            ReportColumn(metric="nDCG@10"),
        ),
        pairing="instruction_pairs",
        mteb=MtebTasks(skip=OWN_BENCHMARK),
    )

    def __init__(self, path: Path | None, subsets: list[str] | None = None) -> None:
        if path is None:
            raise DataError("paired", None, "path", "the paired format is local only: paired=PATH")
        folder = Path(path)
        self.corpus = load_corpus(require_file(folder / "corpus.jsonl"))
        self.pairs = read_pairs(folder / "pairs.jsonl", self.corpus)
        if subsets:
            self.pairs = [p for p in self.pairs if p.constraint in subsets]
            if not self.pairs:
                raise DataError(
                    folder / "pairs.jsonl", None, "constraint", f"no pair has {subsets}"
                )
        self.files = [folder / "corpus.jsonl", folder / "pairs.jsonl"]

    def _runs(self, ctx: EvalContext, pairs: list[Pair]) -> dict[str, dict[str, float]]:
        texts = {
            f"{p.pair_id}/{k}": ctx.query_text(s.query, s.instruction)
            for p in pairs
            for k, s in p.sides.items()
        }
        reranked = {
            q
            for p in pairs
            if p.candidates is not None
            for q in (f"{p.pair_id}/a", f"{p.pair_id}/b")
        }
        run: dict[str, dict[str, float]] = {}
        if reranked:
            cands = {f"{p.pair_id}/{k}": p.candidates or [] for p in pairs for k in SIDES}
            run.update(rerank(ctx, {q: texts[q] for q in reranked}, self.corpus, cands))
        rest = {q: t for q, t in texts.items() if q not in reranked}
        if rest:
            corpus_emb = encode_corpus(ctx, self.corpus)
            run.update(retrieve(ctx, rest, self.corpus, min(TOP_K, len(self.corpus)), corpus_emb))
        return run

    def evaluate(self, ctx: EvalContext) -> BenchmarkResult:
        pairs = ctx.first(self.pairs)
        run = self._runs(ctx, pairs)
        satisfying, violating, qrels, changed = {}, {}, {}, {}
        og_run, new_run = {}, {}
        for p in pairs:
            for k, other in (("a", "b"), ("b", "a")):
                qid, side, opp = f"{p.pair_id}/{k}", p.sides[k], p.sides[other]
                satisfying[qid], violating[qid] = side.satisfying, side.violating
                qrels[qid] = {d: 1 for d in side.satisfying} | {d: 0 for d in side.violating}
                key = f"{p.pair_id}/{k}>{other}"
                changed[key] = [d for d in side.satisfying if d not in set(opp.satisfying)]
                og_run[key], new_run[key] = run[qid], run[f"{p.pair_id}/{other}"]
        result = BenchmarkResult()
        accuracy = pairwise_accuracy(run, satisfying, violating)
        pmrr = p_mrr(og_run, new_run, changed)
        result.add("p-MRR", pmrr)
        result.add("pairwise accuracy", accuracy)
        ndcg = ir_metrics(qrels, run, ["nDCG@10"])["nDCG@10"]
        result.add("nDCG@10", ndcg)
        for label in sorted({p.constraint for p in pairs if p.constraint}):
            ids = {p.pair_id for p in pairs if p.constraint == label}
            result.add(
                f"{label}/nDCG@10",
                _subset(ndcg, {k for k in ndcg.per_query if k.rsplit("/", 1)[0] in ids}),
            )
            result.add(
                f"{label}/p-MRR",
                _subset(pmrr, {k for k in pmrr.per_query if k.rsplit("/", 1)[0] in ids}),
            )
            result.add(
                f"{label}/pairwise accuracy",
                _subset(accuracy, {k for k in accuracy.per_query if k.rsplit("/", 1)[0] in ids}),
            )
        result.counts["pairs"] = len(pairs)
        return result
