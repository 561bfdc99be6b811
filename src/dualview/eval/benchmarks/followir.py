"""FollowIR (Robust04, Core17, News21): rerank given candidates under two instructions.

Layout of one set (the upstream ``jhu-clsp/<set>-instructions`` files)::

    <set>/corpus.jsonl          {"_id", "title", "text"}
    <set>/queries.jsonl         {"_id", "text", "instruction_og", "instruction_changed"}
    <set>/qrels_og/test.tsv     query-id <TAB> corpus-id <TAB> score   (header line)
    <set>/qrels_changed/test.tsv
    <set>/top_ranked.jsonl      {"qid", "pid"} per line, or {"query-id", "corpus-ids": [...]}

``PATH`` is one set folder or a folder of set folders (``robust04/ core17/ news21/``; any
sub-folder holding ``queries.jsonl`` is a set). Each query's candidates (``top_ranked``; the
whole corpus when the file is absent) are scored once with ``query + instruction_og`` and once
with ``query + instruction_changed``. Reported per set and averaged over sets:

A reranker (two-stage evaluation) scores every ``top_ranked`` candidate, as mteb does,
whatever the first stage.

- ``p-MRR`` (×100) over documents relevant under ``qrels_og`` and not under ``qrels_changed``;
- ``Score``: the paper's measure on the original-instruction run against ``qrels_og``:
  MAP@1000 (Robust04, Core17), nDCG@5 (News21); MAP@1000 for any other set name.
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
    check_known_docs,
    hub_snapshot,
    require_file,
    rerank,
)
from dualview.eval.benchmarks.meta import MTEB_SCORE_KEYS, MtebTasks, ReportColumn
from dualview.eval.metrics import ir_metrics, p_mrr
from dualview.io.files import iter_json_lines

HUB_SETS = {
    "robust04": "jhu-clsp/robust04-instructions",
    "core17": "jhu-clsp/core17-instructions",
    "news21": "jhu-clsp/news21-instructions",
}
SCORE_METRIC = {"robust04": "MAP@1000", "core17": "MAP@1000", "news21": "nDCG@5"}
DISPLAY = {"robust04": "Robust04", "core17": "Core17", "news21": "News21"}
#: mteb's task of each set (its display name)
MTEB_TASKS = {
    "Robust04": "Robust04InstructionRetrieval",
    "Core17": "Core17InstructionRetrieval",
    "News21": "News21InstructionRetrieval",
}


def read_instruction_queries(path: Path, fields: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """``queries.jsonl`` rows -> ``{_id: {"text": ..., field: ...}}``; every field required
    (an empty instruction is allowed)."""
    out: dict[str, dict[str, str]] = {}
    for line, row in iter_json_lines(require_file(path)):
        if "_id" not in row:
            raise DataError(path, line, "_id", "missing")
        if not isinstance(row.get("text"), str) or not row["text"].strip():
            raise DataError(path, line, "text", "missing or empty query text")
        entry = {"text": row["text"]}
        for name in fields:
            value = row.get(name)
            if not isinstance(value, str):
                raise DataError(path, line, name, "missing (a string is required)")
            entry[name] = value
        out[str(row["_id"])] = entry
    return out


def read_top_ranked(path: Path) -> dict[str, list[str]]:
    """Candidates per query from ``{"qid", "pid"}`` rows or ``{"query-id", "corpus-ids"}``."""
    out: dict[str, list[str]] = {}
    for line, row in iter_json_lines(path):
        if "qid" in row and "pid" in row:
            out.setdefault(str(row["qid"]), []).append(str(row["pid"]))
        elif "query-id" in row and isinstance(row.get("corpus-ids"), list):
            out.setdefault(str(row["query-id"]), []).extend(str(d) for d in row["corpus-ids"])
        else:
            raise DataError(path, line, "qid", "expected {qid, pid} or {query-id, corpus-ids}")
    return {q: list(dict.fromkeys(ds)) for q, ds in out.items()}


def changed_documents(
    og: dict[str, dict[str, int]], changed: dict[str, dict[str, int]]
) -> dict[str, list[str]]:
    """Documents relevant under the original instruction and not under the changed one."""
    return {
        qid: [d for d, r in docs.items() if r > 0 and changed.get(qid, {}).get(d, 0) <= 0]
        for qid, docs in og.items()
    }


class FollowIRSet:
    """One FollowIR set folder, loaded and checked."""

    def __init__(self, folder: Path, name: str | None = None) -> None:
        self.folder = folder
        self.name = (name or folder.name).lower()
        self.corpus = load_corpus(require_file(folder / "corpus.jsonl"))
        self.queries = read_instruction_queries(
            folder / "queries.jsonl", ("instruction_og", "instruction_changed")
        )
        self.qrels_og = load_qrels(require_file(folder / "qrels_og" / "test.tsv"))
        self.qrels_changed = load_qrels(require_file(folder / "qrels_changed" / "test.tsv"))
        top_path = folder / "top_ranked.jsonl"
        self.files = [folder / "corpus.jsonl", folder / "queries.jsonl"]
        self.files += [folder / "qrels_og" / "test.tsv", folder / "qrels_changed" / "test.tsv"]
        if top_path.is_file():
            self.candidates = read_top_ranked(top_path)
            self.files.append(top_path)
            for docs in self.candidates.values():
                check_known_docs(top_path, self.corpus, "pid", docs)
        else:
            self.candidates = {q: list(self.corpus) for q in self.queries}
        # Only judged queries are evaluated (as upstream).
        self.qids = [q for q in self.queries if q in self.qrels_og]

    @property
    def display(self) -> str:
        return DISPLAY.get(self.name, self.folder.name)

    def evaluate(self, ctx: EvalContext, result: BenchmarkResult) -> None:
        score_metric = SCORE_METRIC.get(self.name, "MAP@1000")
        qids = ctx.first(self.qids)
        texts = {
            key: {
                q: ctx.query_text(self.queries[q]["text"], self.queries[q][f"instruction_{key}"])
                for q in qids
            }
            for key in ("og", "changed")
        }
        og_run = rerank(ctx, texts["og"], self.corpus, self.candidates, rerank_all=True)
        new_run = rerank(ctx, texts["changed"], self.corpus, self.candidates, rerank_all=True)
        prefix = self.display
        result.add(
            f"{prefix}/p-MRR",
            p_mrr(
                og_run,
                new_run,
                changed_documents({q: self.qrels_og[q] for q in qids}, self.qrels_changed),
            ),
        )
        og_scores = ir_metrics({q: self.qrels_og[q] for q in qids}, og_run, [score_metric])
        result.add(f"{prefix}/Score", og_scores[score_metric])
        qrels_changed = {q: self.qrels_changed.get(q, {}) for q in qids}
        changed_scores = ir_metrics(qrels_changed, new_run, [score_metric])
        result.add(f"{prefix}/changed {score_metric}", changed_scores[score_metric])
        result.counts[f"{prefix}/queries"] = len(qids)


def find_sets(root: Path) -> list[Path]:
    """``root`` itself when it is a set, else its sub-folders that are sets (sorted)."""
    if (root / "queries.jsonl").is_file():
        return [root]
    sets = sorted(p for p in root.iterdir() if p.is_dir() and (p / "queries.jsonl").is_file())
    if not sets:
        raise DataError(root, None, "folder", "no FollowIR set (queries.jsonl) found")
    return sets


class FollowIR(Benchmark):
    """FollowIR p-MRR and Score per set and averaged (see module docstring)."""

    meta = BenchmarkMeta(
        name="followir",
        description="Instruction following by reranking under original and changed narratives",
        reference="https://arxiv.org/abs/2403.15246",
        main_score="p-MRR",
        hub_dataset="jhu-clsp/{robust04,core17,news21}-instructions",
        columns=(
            ReportColumn(metric="p-MRR", column="FollowIR p-MRR", scale="percent"),
            ReportColumn(metric="Score", column="FollowIR Score"),
        ),
        mteb=MtebTasks(
            subsets="parts",
            tasks=MTEB_TASKS,
            unknown=f"not one of mteb's FollowIR sets ({', '.join(MTEB_TASKS)})",
            main_score="p-MRR",
            main_score_key="p-MRR",
            # the set's Score is its original-instruction run's MAP@1000 or nDCG@5 (og)
            subset_score_keys={
                DISPLAY[s]: {"Score": MTEB_SCORE_KEYS[m]} for s, m in SCORE_METRIC.items()
            },
            others_under="og",
            what="{kind} set {subset}",
        ),
    )
    reranks_own_candidates = True

    def __init__(self, path: Path | None, subsets: list[str] | None = None) -> None:
        if path is None:
            names = [n.lower() for n in subsets or HUB_SETS]
            unknown = [n for n in names if n not in HUB_SETS]
            if unknown:
                raise DataError("followir", None, "subsets", f"no Hub set {unknown[0]!r}")
            self.sets = [FollowIRSet(hub_snapshot(HUB_SETS[n]), n) for n in names]
        else:
            folders = find_sets(Path(path))
            if subsets:
                wanted = {s.lower() for s in subsets}
                folders = [f for f in folders if f.name.lower() in wanted]
                if not folders:
                    raise DataError(path, None, "subsets", f"none of {subsets} found")
            self.sets = [FollowIRSet(f) for f in folders]
        self.files = [f for s in self.sets for f in s.files]

    def evaluate(self, ctx: EvalContext) -> BenchmarkResult:
        result = BenchmarkResult()
        for one in self.sets:
            one.evaluate(ctx, result)
        result.add_mean("p-MRR", [f"{s.display}/p-MRR" for s in self.sets])
        result.add_mean("Score", [f"{s.display}/Score" for s in self.sets])
        return result
