"""Any BEIR folder: plain retrieval, to check that general retrieval does not collapse.

Layout (`dualview.data.formats.beir`)::

    <dir>/corpus.jsonl      {"_id", "title", "text"}
    <dir>/queries.jsonl     {"_id", "text"}
    <dir>/qrels/test.tsv    query-id <TAB> corpus-id <TAB> score   (header line)

Every judged query is searched over the whole corpus (top 100). Reported: ``nDCG@10``,
``Recall@100`` and ``MRR@10`` (e.g. on ``../shared/data/msmarco-1743``).
"""

from __future__ import annotations

from pathlib import Path

from dualview.data.formats.beir import load_beir
from dualview.errors import DataError
from dualview.eval.benchmarks.base import (
    Benchmark,
    BenchmarkMeta,
    BenchmarkResult,
    EvalContext,
    hub_snapshot,
    retrieve,
)
from dualview.eval.benchmarks.meta import MtebTasks, ReportColumn
from dualview.eval.metrics import ir_metrics

METRICS = ("nDCG@10", "Recall@100", "MRR@10")
TOP_K = 100
#: BEIR datasets (the Hub repository's name, ``BeIR/<name>`` or mteb's copy ``mteb/<name>``)
#: -> mteb's task on the same data and split (``test``, what `Beir` reads). MS MARCO is
#: missing on purpose: mteb scores its ``dev`` split.
MTEB_TASKS = {
    "arguana": "ArguAna",
    "climate-fever": "ClimateFEVER",
    "dbpedia-entity": "DBPedia",
    "dbpedia": "DBPedia",
    "fever": "FEVER",
    "fiqa": "FiQA2018",
    "hotpotqa": "HotpotQA",
    "nfcorpus": "NFCorpus",
    "nq": "NQ",
    "quora": "QuoraRetrieval",
    "scidocs": "SCIDOCS",
    "scifact": "SciFact",
    "webis-touche2020": "Touche2020",
    "touche2020": "Touche2020",
    "trec-covid": "TRECCOVID",
}
#: BEIR datasets whose mteb task scores another split than dualview's ``test``.
SPLIT_DIFFERS = {"msmarco": "mteb's MSMARCO scores the dev split, dualview the test split"}


class Beir(Benchmark):
    """BEIR nDCG@10 / Recall@100 / MRR@10 (see module docstring)."""

    meta = BenchmarkMeta(
        name="beir",
        description="Plain retrieval on a BEIR folder",
        reference="https://arxiv.org/abs/2104.08663",
        main_score="nDCG@10",
        hub_dataset="BeIR/<name> (give the repository as the subset: beir:BeIR/scifact)",
        columns=(ReportColumn(metric="nDCG@10"), ReportColumn(metric="Recall@100")),
        mteb=MtebTasks(
            subsets="hub_dataset",
            tasks=MTEB_TASKS,
            no_task=SPLIT_DIFFERS,
            local="a local folder, whose data need not be mteb's (beir:BeIR/NAME reads the Hub's)",
            main_score="nDCG@10",
            main_score_key="ndcg_at_10",
        ),
    )

    def __init__(self, path: Path | None, subsets: list[str] | None = None, split: str = "test"):
        if path is None:
            if not subsets:
                raise DataError("beir", None, "subsets", "name the Hub repository: beir:ORG/NAME")
            path = hub_snapshot(subsets[0])
        folder = Path(path)
        self.data = load_beir(folder, split)
        self.files = [folder / "corpus.jsonl", folder / "queries.jsonl"]
        self.files.append(folder / "qrels" / f"{split}.tsv")

    def evaluate(self, ctx: EvalContext) -> BenchmarkResult:
        qids = ctx.first([q for q in self.data.qrels if q in self.data.queries])
        queries = {q: self.data.queries[q] for q in qids}
        run = retrieve(ctx, queries, self.data.corpus, min(TOP_K, len(self.data.corpus)))
        result = BenchmarkResult()
        scores = ir_metrics({q: self.data.qrels[q] for q in qids}, run, METRICS)
        for name in METRICS:
            result.add(name, scores[name])
        result.counts["queries"] = len(qids)
        result.counts["documents"] = len(self.data.corpus)
        return result
