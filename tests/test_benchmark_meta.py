"""Benchmark metadata drives the report and the mteb export (issue 32, item 4): each
benchmark declares its columns, pairing and mteb tasks; a benchmark registered from outside
the package is reported and exported without editing `dualview.report` or `mteb_compat`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from dualview.data.schema import Document
from dualview.eval.benchmarks import BENCHMARKS, Benchmark, BenchmarkResult, EvalContext
from dualview.eval.benchmarks.base import rerank
from dualview.eval.benchmarks.meta import BenchmarkMeta, MtebTasks, ReportColumn, scale_of
from dualview.eval.layout import display_value
from dualview.eval.metrics import MetricResult
from dualview.eval.mteb_compat import mteb_mapping, write_mteb_results
from dualview.eval.run import evaluate
from dualview.eval.two_stage import RerankSettings
from dualview.report.collect import add_payload, eval_folder_rows
from dualview.report.mteb_results import mteb_rows
from dualview.report.table import ConfigResult


def _followir_payload() -> dict:
    metrics = {
        "Robust04/p-MRR": 7.5,
        "Robust04/Score": 0.31,
        "Robust04/changed MAP@1000": 0.2,
        "News21/p-MRR": 2.5,
        "News21/Score": 0.42,
        "News21/changed nDCG@5": 0.3,
        "p-MRR": 5.0,
        "Score": 0.365,
    }
    return {
        "benchmark": {"name": "followir", "spec": "followir=x", "label": "followir"},
        "model": {"name": "runs/x/model", "dim": 32},
        "metrics": metrics,
        "seconds": 1.0,
    }


def test_followir_sets_score_goes_to_mteb_og_and_reads_back_as_the_score_column(
    tmp_path: Path,
) -> None:
    # Results store `<set>/Score` (MAP@1000 or nDCG@5 of the original-instruction run): the
    # mteb files must carry it under `og`, by the set's own measure.
    results = mteb_mapping(_followir_payload()).results
    robust = results["Robust04InstructionRetrieval"]["scores"]["test"][0]
    news = results["News21InstructionRetrieval"]["scores"]["test"][0]
    assert robust["og"] == {"map_at_1000": 0.31}
    assert news["og"] == {"ndcg_at_5": 0.42}
    assert robust["main_score"] == robust["p-MRR"] == pytest.approx(0.075)
    write_mteb_results(_followir_payload(), tmp_path)
    [row] = mteb_rows(tmp_path / "mteb")
    assert row.metrics["FollowIR Score"] == pytest.approx(100 * 0.365)
    assert row.metrics["FollowIR p-MRR"] == pytest.approx(5.0)


def test_every_builtin_declares_metadata_that_keeps_the_report_scales() -> None:
    for kind, cls in BENCHMARKS.items():
        meta = cls.meta
        assert isinstance(meta, BenchmarkMeta) and meta.name == kind
        for column in meta.columns:  # the scale the report used before: by the name
            assert column.scale == scale_of(column.metric), (kind, column.metric)
            assert column.shown(0.5) == display_value(column.metric, 0.5)
        assert meta.columns, kind
        assert meta.mteb.skip or meta.mteb.tasks, kind


def test_metadata_is_strict_and_frozen() -> None:
    with pytest.raises(ValidationError, match="extra"):
        BenchmarkMeta(name="x", description="", reference="", main_score="a", colums=())
    with pytest.raises(ValidationError, match="not one of the columns"):
        BenchmarkMeta(
            name="x", description="", reference="", main_score="a", columns=[{"metric": "b"}]
        )
    with pytest.raises(ValidationError, match="either skip or main_score"):
        MtebTasks(tasks={"": "T"})
    meta = BENCHMARKS.get("followir").meta
    with pytest.raises(ValidationError):
        meta.main_score = "Score"  # type: ignore[misc]


class Toy(Benchmark):
    """A benchmark from outside the package: two queries over two documents; Hits@1 (a
    fraction) and a made-up percent metric, plus one metric it does not headline."""

    meta = BenchmarkMeta(
        name="toybench",
        description="plugin benchmark of the metadata test",
        reference="tests/test_benchmark_meta.py",
        main_score="Hits@1",
        columns=(ReportColumn(metric="Hits@1"), ReportColumn(metric="gap", scale="percent")),
        mteb=MtebTasks(
            tasks={"": "ToyRetrieval"},
            main_score="Hits@1",
            main_score_key="hits_at_1",
            score_keys={"Hits@1": "hits_at_1", "debug": "debug_value"},
        ),
    )

    def __init__(self, path: Path | None, subsets: list[str] | None = None) -> None:
        self.files = [Path(path) / "toy.json"]  # type: ignore[arg-type]
        self.data = json.loads(self.files[0].read_text())

    def evaluate(self, ctx: EvalContext) -> BenchmarkResult:
        corpus = {d: Document(id=d, title="", text=t) for d, t in self.data["docs"].items()}
        queries = self.data["queries"]
        run = rerank(ctx, queries, corpus, {q: list(corpus) for q in queries})
        hits = {q: float(max(run[q], key=run[q].get) == self.data["gold"][q]) for q in queries}
        result = BenchmarkResult()
        result.add("Hits@1", MetricResult(sum(hits.values()) / len(hits), hits))
        result.add("gap", MetricResult(12.5, {q: 12.5 for q in queries}))
        result.add("debug", MetricResult(0.25, {q: 0.25 for q in queries}))
        return result


def test_a_benchmark_registered_from_outside_is_reported_and_exported(tmp_path: Path) -> None:
    data = tmp_path / "toy"
    data.mkdir()
    docs = {"d1": "apples grow on trees", "d2": "the sea is deep and blue"}
    toy = {"docs": docs, "queries": {"q1": "apples", "q2": "deep sea"}}
    toy["gold"] = {"q1": "d1", "q2": "d2"}
    (data / "toy.json").write_text(json.dumps(toy))
    BENCHMARKS.register("toybench", Toy)
    try:
        evaluate([], [f"toybench={data}"], tmp_path / "out", rerank=RerankSettings([], "bm25"))
        [row] = eval_folder_rows(tmp_path / "out")
    finally:
        BENCHMARKS.remove("toybench")
    # its headline metrics, as declared (a fraction x100, a percent as stored); not "debug"
    assert row.metrics == {"toybench Hits@1": 100.0, "toybench gap": 12.5}
    assert row.query_values["toybench Hits@1"] == {"q1": [100.0], "q2": [100.0]}
    [path] = (tmp_path / "out" / "mteb").rglob("ToyRetrieval.json")
    scores = json.loads(path.read_text())["scores"]["test"][0]
    assert (scores["main_score"], scores["hits_at_1"], scores["debug_value"]) == (1.0, 1.0, 0.25)
    saved = json.loads((tmp_path / "out" / "bm25" / "toybench.json").read_text())
    assert saved["mteb"] == {"tasks": ["ToyRetrieval"], "skipped": []}
    assert saved["benchmark"]["main_score"] == "Hits@1"


@pytest.mark.parametrize(
    ("pairing", "sources", "tested"),
    [("instruction_pairs", {"toy": ["f.jsonl"]}, True), ("queries", {}, True), ("none", {}, False)],
)
def test_pairing_decides_the_error_analysis_files_and_the_paired_tests(
    pairing: str, sources: dict, tested: bool
) -> None:
    class Paired(Toy):
        meta = Toy.meta.model_copy(update={"name": "toypairs", "pairing": pairing})

    payload = {
        "benchmark": {"name": "toypairs", "label": "toy", "files": ["f.jsonl"]},
        "metrics": {"Hits@1": 0.5},
        "per_query": {"Hits@1": {"q1": 1.0, "q2": 0.0}},
    }
    row = ConfigResult("arm")
    BENCHMARKS.register("toypairs", Paired)
    try:
        add_payload(row, payload)
    finally:
        BENCHMARKS.remove("toypairs")
    assert row.sources == sources
    assert ("toy Hits@1" in row.query_values) is tested
    assert ("toy Hits@1" in row.query_notes) is not tested
