"""MAIR: any of its 126 instructed retrieval tasks (IFEval, InstructIR, DD-15, FR-21, ...).

Layout (the two upstream Hub repositories, ``MAIR-Bench/MAIR-Queries`` and
``MAIR-Bench/MAIR-Docs``, side by side)::

    <root>/MAIR-Queries/<Task>/queries.jsonl   {"qid", "instruction", "query",
                                                "labels": [{"id", "score"}, ...]}
    <root>/MAIR-Docs/<Task>/docs.jsonl         {"id", "doc"}

A task with several splits has ``<split>_queries.jsonl`` next to ``<split>_docs.jsonl``.
``PATH`` may also be one task folder holding both files. Subsets pick tasks by folder name
(``mair:IFEval,InstructIR=PATH``); without subsets every task found is evaluated.

Each query (``instruction query``: MAIR's own order, instruction first; ``--force-template``
applies ours instead) is searched over its task's documents; reported: ``<Task>/nDCG@10``
(split-wise values averaged) and their mean ``nDCG@10``.
"""

from __future__ import annotations

from pathlib import Path

from dualview.data.schema import Document
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
from dualview.eval.metrics import ir_metrics
from dualview.io.files import iter_json_lines
from dualview.resources import cache_dir

#: MAIR's upstream query text: the instruction first
MAIR_TEMPLATE = "{instruction} {query}"
TOP_K = 100


def read_docs(path: Path) -> dict[str, Document]:
    docs: dict[str, Document] = {}
    for line, row in iter_json_lines(require_file(path)):
        if "id" not in row or not isinstance(row.get("doc"), str) or not row["doc"].strip():
            raise DataError(path, line, "id/doc", "missing id or empty doc")
        docs[str(row["id"])] = Document(id=str(row["id"]), text=row["doc"])
    return docs


def read_queries(path: Path) -> tuple[dict[str, tuple[str, str]], dict[str, dict[str, int]]]:
    """``qid -> (query, instruction)`` and qrels from the ``labels`` lists."""
    queries: dict[str, tuple[str, str]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for line, row in iter_json_lines(require_file(path)):
        if "qid" not in row or not isinstance(row.get("query"), str):
            raise DataError(path, line, "qid/query", "missing")
        labels = row.get("labels")
        if not isinstance(labels, list):
            raise DataError(path, line, "labels", "expected a list of {id, score}")
        qid = str(row["qid"])
        queries[qid] = (row["query"], str(row.get("instruction") or ""))
        try:
            qrels[qid] = {str(x["id"]): int(x.get("score", 1)) for x in labels}
        except (KeyError, TypeError, ValueError):
            raise DataError(path, line, "labels", "each label needs an id and a score") from None
    return queries, qrels


class MairTask:
    """One task: its splits as (queries file, docs file) pairs."""

    def __init__(self, name: str, query_dir: Path, doc_dir: Path) -> None:
        self.name = name
        self.splits: list[tuple[Path, Path]] = []
        for qfile in sorted(query_dir.glob("*queries.jsonl")):
            dfile = doc_dir / qfile.name.replace("queries.jsonl", "docs.jsonl")
            self.splits.append((qfile, require_file(dfile)))
        if not self.splits:
            raise DataError(query_dir, None, "queries.jsonl", "no queries file in MAIR task")
        self.files = [f for pair in self.splits for f in pair]

    def evaluate(self, ctx: EvalContext, result: BenchmarkResult) -> None:
        means, per_query = [], {}
        for qfile, dfile in self.splits:
            queries, qrels = read_queries(qfile)
            queries = dict(ctx.first(list(queries.items())))
            qrels = {q: rels for q, rels in qrels.items() if q in queries}
            docs = read_docs(dfile)
            texts = {q: ctx.query_text(t, ins, MAIR_TEMPLATE) for q, (t, ins) in queries.items()}
            run = retrieve(ctx, texts, docs, min(TOP_K, len(docs)))
            scores = ir_metrics(qrels, run, ["nDCG@10"])["nDCG@10"]
            means.append(scores.mean)
            split = qfile.name.removesuffix("queries.jsonl").rstrip("_")
            per_query.update(
                {f"{split}:{q}" if split else q: v for q, v in scores.per_query.items()}
            )
        result.metrics[f"{self.name}/nDCG@10"] = sum(means) / len(means)
        result.per_query[f"{self.name}/nDCG@10"] = per_query
        result.counts[f"{self.name}/queries"] = len(per_query)


def find_tasks(root: Path, subsets: list[str] | None) -> list[MairTask]:
    if list(root.glob("*queries.jsonl")):
        return [MairTask(root.name, root, root)]
    qroot, droot = root / "MAIR-Queries", root / "MAIR-Docs"
    if not qroot.is_dir() or not droot.is_dir():
        raise DataError(root, None, "folder", "expected MAIR-Queries/ and MAIR-Docs/ (or a task)")
    names = sorted(p.name for p in qroot.iterdir() if p.is_dir())
    if subsets:
        missing = [s for s in subsets if s not in names]
        if missing:
            raise DataError(qroot, None, "subsets", f"no MAIR task {missing[0]!r}")
        names = [n for n in names if n in subsets]
    return [MairTask(n, qroot / n, droot / n) for n in names]


class MAIR(Benchmark):
    """MAIR nDCG@10 per task and averaged (see module docstring)."""

    meta = BenchmarkMeta(
        name="mair",
        description="Massive instructed retrieval benchmark, any task subset",
        reference="https://arxiv.org/abs/2410.10127",
        main_score="nDCG@10",
        hub_dataset="MAIR-Bench/MAIR-Queries + MAIR-Bench/MAIR-Docs",
        columns=(ReportColumn(metric="*/nDCG@10", column="MAIR {part} nDCG@10"),),
        mteb=MtebTasks(skip="mteb has no MAIR task"),
    )

    def __init__(self, path: Path | None, subsets: list[str] | None = None) -> None:
        if path is None:
            path = self._from_hub(subsets)
        self.tasks = find_tasks(Path(path), subsets)
        self.files = [f for t in self.tasks for f in t.files]

    @staticmethod
    def _from_hub(subsets: list[str] | None) -> Path:
        """Fetch only the chosen tasks of both Hub repositories; link them into one root."""
        if not subsets:
            raise DataError("mair", None, "subsets", "name the tasks to fetch: mair:IFEval,...")
        root = cache_dir() / "mair-hub"
        root.mkdir(parents=True, exist_ok=True)
        patterns = [f"{task}/*" for task in subsets]
        for repo in ("MAIR-Queries", "MAIR-Docs"):
            snapshot = hub_snapshot(f"MAIR-Bench/{repo}", allow_patterns=patterns)
            link = root / repo
            if link.is_symlink():
                link.unlink()
            link.symlink_to(snapshot, target_is_directory=True)
        return root

    def evaluate(self, ctx: EvalContext) -> BenchmarkResult:
        result = BenchmarkResult()
        for task in self.tasks:
            task.evaluate(ctx, result)
        result.add_mean("nDCG@10", [f"{t.name}/nDCG@10" for t in self.tasks])
        return result
