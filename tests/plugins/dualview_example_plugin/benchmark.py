"""``eval -b first_hit``: a benchmark shipped with its data (``first_hit/data.json``): does
each query's top document match its gold one (Hits@1)? Its metadata makes it a report column
and keeps it out of the mteb export."""

from __future__ import annotations

import json
from pathlib import Path

from dualview.data.schema import Document
from dualview.eval.benchmarks import Benchmark, BenchmarkMeta, BenchmarkResult, EvalContext
from dualview.eval.benchmarks.base import rerank
from dualview.eval.benchmarks.meta import ReportColumn
from dualview.eval.metrics import MetricResult

DATA = Path(__file__).parent / "first_hit"


class FirstHit(Benchmark):
    """Hits@1 over every document of the set."""

    meta = BenchmarkMeta(
        name="first_hit",
        description="three queries, three documents: is the gold document ranked first",
        reference="tests/plugins/dualview_example_plugin/benchmark.py",
        main_score="Hits@1",
        columns=(ReportColumn(metric="Hits@1"),),
    )
    bundled_path = DATA

    def __init__(self, path: Path | None, subsets: list[str] | None = None) -> None:
        self.files = [(path or DATA) / "data.json"]
        self.data = json.loads(self.files[0].read_text(encoding="utf-8"))

    def evaluate(self, ctx: EvalContext) -> BenchmarkResult:
        corpus = {d: Document(id=d, title="", text=t) for d, t in self.data["docs"].items()}
        queries = self.data["queries"]
        run = rerank(ctx, queries, corpus, {q: list(corpus) for q in queries})
        hits = {q: float(max(run[q], key=run[q].get) == self.data["gold"][q]) for q in queries}
        result = BenchmarkResult()
        result.add("Hits@1", MetricResult(sum(hits.values()) / len(hits), hits))
        return result
