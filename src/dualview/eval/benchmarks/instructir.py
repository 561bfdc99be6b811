"""InstructIR (KAIST): per-query instructions over MS MARCO passages; nDCG@10 and robustness.

Layout (BEIR, as in the upstream repository ``kaistAI/InstructIR``, folder ``INSTRUCTIR/``)::

    <dir>/corpus.jsonl     {"_id", "title", "text"}
    <dir>/queries.jsonl    {"_id": "<query>_<n>", "text": "<instruction> [SEP] <query>"}
                           or {"_id", "text": "<query>", "instruction": "<instruction>"}
    <dir>/qrels/test.tsv   qid <TAB> pid <TAB> score   (header line)

Query ids ``<query>_<n>`` are the instruction variants ``n`` of one query. Every variant is
searched over the whole corpus (instruction first, as upstream). Reported:

- ``nDCG@10`` over all variants;
- ``Robustness@10``: for each query, the lowest nDCG@10 over its variants, averaged over
  queries (the paper's robustness score; mteb's ``robustness_at_10``).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from dualview.data.formats.beir import load_corpus, load_qrels
from dualview.errors import DataError
from dualview.eval.benchmarks.base import (
    Benchmark,
    BenchmarkMeta,
    BenchmarkResult,
    EvalContext,
    hub_snapshot,
    require_file,
    retrieve,
)
from dualview.eval.benchmarks.meta import MtebTasks, ReportColumn
from dualview.eval.metrics import MetricResult, ir_metrics
from dualview.io.files import iter_json_lines

UPSTREAM_TEMPLATE = "{instruction} {query}"
TOP_K = 100
SEP = "[SEP]"


def read_queries(path: Path) -> dict[str, tuple[str, str]]:
    """``_id -> (query, instruction)`` from either query layout (module docstring)."""
    out: dict[str, tuple[str, str]] = {}
    for line, row in iter_json_lines(require_file(path)):
        text = row.get("text")
        if "_id" not in row or not isinstance(text, str) or not text.strip():
            raise DataError(path, line, "_id/text", "missing id or empty text")
        if isinstance(row.get("instruction"), str):
            out[str(row["_id"])] = (text, row["instruction"])
        elif SEP in text:
            instruction, _, query = text.partition(SEP)
            out[str(row["_id"])] = (query.strip(), instruction.strip())
        else:
            out[str(row["_id"])] = (text, "")
    return out


def base_query_id(qid: str) -> str:
    """``"1078446_3"`` -> ``"1078446"`` (ids without a variant suffix stand alone)."""
    head, sep, tail = qid.rpartition("_")
    return head if sep and tail.isdigit() else qid


def robustness(per_query: dict[str, float]) -> MetricResult:
    """Lowest value over the variants of each query; mean over queries."""
    groups: dict[str, list[float]] = defaultdict(list)
    for qid, value in per_query.items():
        groups[base_query_id(qid)].append(value)
    worst = {g: min(v) for g, v in groups.items()}
    return MetricResult(
        mean=sum(worst.values()) / len(worst) if worst else float("nan"), per_query=worst
    )


class InstructIR(Benchmark):
    """InstructIR nDCG@10 and Robustness@10 (see module docstring)."""

    meta = BenchmarkMeta(
        name="instructir",
        description="User-aligned per-query instructions; robustness over instruction variants",
        reference="https://arxiv.org/abs/2402.14334",
        main_score="Robustness@10",
        hub_dataset="mteb/InstructIR-mteb",
        columns=(ReportColumn(metric="nDCG@10"), ReportColumn(metric="Robustness@10")),
        mteb=MtebTasks(
            tasks={"": "InstructIR"},
            main_score="Robustness@10",
            main_score_key="robustness_at_10",
        ),
    )

    def __init__(self, path: Path | None, subsets: list[str] | None = None) -> None:
        folder = Path(path) if path is not None else hub_snapshot("mteb/InstructIR-mteb")
        self.corpus = load_corpus(require_file(folder / "corpus.jsonl"))
        self.queries = read_queries(folder / "queries.jsonl")
        self.qrels = load_qrels(require_file(folder / "qrels" / "test.tsv"))
        self.files = [folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels/test.tsv"]

    def evaluate(self, ctx: EvalContext) -> BenchmarkResult:
        qids = ctx.first([q for q in self.queries if q in self.qrels])
        texts = {q: ctx.query_text(*self.queries[q], UPSTREAM_TEMPLATE) for q in qids}
        run = retrieve(ctx, texts, self.corpus, min(TOP_K, len(self.corpus)))
        result = BenchmarkResult()
        ndcg = ir_metrics({q: self.qrels[q] for q in qids}, run, ["nDCG@10"])["nDCG@10"]
        result.add("nDCG@10", ndcg)
        result.add("Robustness@10", robustness(ndcg.per_query))
        result.counts["queries"] = len(qids)
        return result
