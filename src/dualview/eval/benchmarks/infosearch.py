"""InfoSearch: instruction following over document attributes, one folder per dimension.

Layout of one dimension (upstream ``jianqunZ/<Dimension>-v1`` files)::

    <dim>/corpus.jsonl            {"_id", "title", "text"}
    <dim>/queries.jsonl           {"_id", "text", "only_instruction_changed",
                                   "only_instruction_reversed"}   (or "instruction_changed",
                                   "instruction_reversed")
    <dim>/qrels_og/test.tsv       relevance without instruction (original mode)
    <dim>/qrels_changed/test.tsv  relevance under the instruction (instructed mode)
    <dim>/qrels_reversed/test.tsv relevance under the reversed instruction (reversed mode)

``PATH`` is one dimension folder or a folder of them (``Length-v1/ Clarity-v1/ ...``). Every
query is searched over the dimension's whole corpus in three modes (bare query, query +
instruction, query + reversed instruction). Reported per dimension, named after its folder
without ``-v1`` (``Clarity`` is reported as ``keyword``, the attribute it tests):

- ``p-MRR`` (×100) from the instructed run to the reversed run, over the documents relevant
  in instructed mode and not in reversed mode (the reversed instruction removes them);
- ``nDCG@10`` of each mode against its own qrels.
"""

from __future__ import annotations

from pathlib import Path

from dualview.data.formats.beir import load_corpus, load_qrels
from dualview.errors import DataError
from dualview.eval.benchmarks.base import (
    Benchmark,
    BenchmarkMeta,
    BenchmarkResult,
    EvalContext,
    encode_corpus,
    hub_snapshot,
    require_file,
    retrieve,
)
from dualview.eval.benchmarks.followir import changed_documents
from dualview.eval.benchmarks.meta import MtebTasks, ReportColumn
from dualview.eval.metrics import ir_metrics, p_mrr
from dualview.io.files import iter_json_lines

DIMENSIONS = ("Audience", "Clarity", "Format", "Language", "Length", "Source")
ALIASES = {"clarity": "keyword"}
#: depth of the full-corpus ranking (upstream mteb default); ranks beyond count as missing
TOP_K = 1000


def dimension_name(folder: Path) -> str:
    base = folder.name.lower().removesuffix("-v1")
    return ALIASES.get(base, base)


def _instruction(row: dict, key: str, path: Path, line: int) -> str:
    for name in (f"only_instruction_{key}", f"instruction_{key}"):
        if isinstance(row.get(name), str):
            return row[name]
    raise DataError(path, line, f"only_instruction_{key}", "missing (a string is required)")


class InfoSearchDimension:
    """One dimension folder, loaded and checked."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.name = dimension_name(folder)
        self.corpus = load_corpus(require_file(folder / "corpus.jsonl"))
        self.queries: dict[str, dict[str, str]] = {}
        path = require_file(folder / "queries.jsonl")
        for line, row in iter_json_lines(path):
            if "_id" not in row or not isinstance(row.get("text"), str):
                raise DataError(path, line, "_id/text", "missing")
            self.queries[str(row["_id"])] = {
                "text": row["text"],
                "changed": _instruction(row, "changed", path, line),
                "reversed": _instruction(row, "reversed", path, line),
            }
        self.qrels = {
            mode: load_qrels(require_file(folder / f"qrels_{mode}" / "test.tsv"))
            for mode in ("og", "changed", "reversed")
        }
        self.files = [folder / "corpus.jsonl", path]
        self.files += [folder / f"qrels_{m}" / "test.tsv" for m in self.qrels]

    def evaluate(self, ctx: EvalContext, result: BenchmarkResult) -> None:
        qids = ctx.first([q for q in self.queries if q in self.qrels["changed"]])
        corpus_emb = encode_corpus(ctx, self.corpus)
        k = min(TOP_K, len(self.corpus))
        runs = {}
        for mode in ("og", "changed", "reversed"):
            texts = {
                q: self.queries[q]["text"]
                if mode == "og"
                else ctx.query_text(self.queries[q]["text"], self.queries[q][mode])
                for q in qids
            }
            runs[mode] = retrieve(ctx, texts, self.corpus, k, corpus_emb)
        changed = changed_documents(
            {q: self.qrels["changed"][q] for q in qids}, self.qrels["reversed"]
        )
        result.add(f"{self.name}/p-MRR", p_mrr(runs["changed"], runs["reversed"], changed))
        for mode, label in (
            ("og", "original"),
            ("changed", "instructed"),
            ("reversed", "reversed"),
        ):
            qrels = {q: self.qrels[mode].get(q, {}) for q in qids}
            result.add(
                f"{self.name}/{label} nDCG@10",
                ir_metrics(qrels, runs[mode], ["nDCG@10"])["nDCG@10"],
            )
        result.counts[f"{self.name}/queries"] = len(qids)


def find_dimensions(root: Path) -> list[Path]:
    if (root / "queries.jsonl").is_file():
        return [root]
    found = sorted(p for p in root.iterdir() if p.is_dir() and (p / "queries.jsonl").is_file())
    if not found:
        raise DataError(root, None, "folder", "no InfoSearch dimension (queries.jsonl) found")
    return found


class InfoSearch(Benchmark):
    """InfoSearch p-MRR per dimension present (see module docstring)."""

    meta = BenchmarkMeta(
        name="infosearch",
        description="Instruction following over document attributes (length, keyword, ...)",
        reference="https://arxiv.org/abs/2410.23841",
        main_score="p-MRR",
        hub_dataset="jianqunZ/<Dimension>-v1",
        columns=(
            ReportColumn(metric="*/p-MRR", column="InfoSearch {part} p-MRR", scale="percent"),
        ),
        mteb=MtebTasks(skip="mteb has no InfoSearch task"),
    )

    def __init__(self, path: Path | None, subsets: list[str] | None = None) -> None:
        if path is None:
            names = subsets or list(DIMENSIONS)
            folders = [hub_snapshot(f"jianqunZ/{n.capitalize()}-v1") for n in names]
            self.dims = [InfoSearchDimension(f) for f in folders]
            for dim, name in zip(self.dims, names, strict=True):
                dim.name = ALIASES.get(name.lower(), name.lower())
        else:
            folders = find_dimensions(Path(path))
            self.dims = [InfoSearchDimension(f) for f in folders]
            if subsets:
                wanted = {s.lower() for s in subsets}
                self.dims = [
                    d for d in self.dims if d.name in wanted or d.folder.name.lower() in wanted
                ]
        self.files = [f for d in self.dims for f in d.files]

    def evaluate(self, ctx: EvalContext) -> BenchmarkResult:
        result = BenchmarkResult()
        for dim in self.dims:
            dim.evaluate(ctx, result)
        result.add_mean("p-MRR", [f"{d.name}/p-MRR" for d in self.dims])
        return result
