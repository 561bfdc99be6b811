"""mteb interoperability: results in mteb's format, and local FollowIR folders as mteb tasks.

`write_mteb_results` turns a ``dualview eval`` result of a benchmark mteb also has into
mteb's result files (one ``TaskResult`` JSON per task), so numbers line up with the
leaderboard's and tools that read mteb results can load them::

    OUT/mteb/<model>/no_revision_available/model_meta.json
    OUT/mteb/<model>/no_revision_available/Robust04InstructionRetrieval.json

Mapped: FollowIR's sets (``Robust04InstructionRetrieval``, ``Core17...``, ``News21...``:
``p-MRR`` as mteb's fraction, main score, plus the original-instruction run's ``og``
scores), InstructIR (``InstructIR``: ``robustness_at_10``, mteb's main score, and
``ndcg_at_10``) and BEIR sets read from the Hub (``beir:BeIR/scifact`` -> ``SciFact``:
``ndcg_at_10`` main, ``recall_at_100``, ``mrr_at_10``). Everything else is skipped, and said
so (`MtebMapping.skipped`: a line on stderr and the result JSON's ``mteb`` entry):
dualview's own benchmarks (``paired``, ``phenomena``), InfoSearch and MAIR (no mteb task),
a FollowIR set or BEIR folder that is not mteb's data (a local BEIR folder, MS MARCO, whose
mteb task scores the dev split). Each benchmark declares its tasks, main score and skip
reasons in its metadata (`dualview.eval.benchmarks.meta.MtebTasks`); this module only reads
them, so a benchmark registered from outside the package is exported the same way.

A two-stage result (`dualview.eval.two_stage`) goes under its model name
``<reranker>@<first stage>``; its ``rerank`` record (reranker, first stage, k) is written
as ``dualview_rerank`` into ``model_meta.json`` and into each task JSON (a top-level key
that mteb's loader ignores).

`followir_task` wraps a local FollowIR set folder as an mteb task (same layout as
`dualview.eval.benchmarks.followir`), so the same model and data can be run through
mteb itself: the tests check that mteb's p-MRR equals ours. mteb is imported lazily (it is
in the ``dev`` extra).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from dualview.eval.benchmarks import benchmark_meta, parse_spec
from dualview.eval.benchmarks.meta import (
    MTEB_SCORE_KEYS,
    NO_MTEB,
    BenchmarkMeta,
    MtebTasks,
)
from dualview.eval.layout import model_slug
from dualview.io.atomic import atomic_write_text

REVISION = "no_revision_available"  # mteb's folder name for a model without a revision
IR_KEYS = MTEB_SCORE_KEYS  # dualview metric name -> mteb score key


@dataclass
class MtebMapping:
    """What one ``dualview eval`` result gives in mteb's format: task name -> TaskResult
    JSON, and ``skipped``: what has no mteb file, each with the reason."""

    results: dict[str, dict] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def skip(self, what: str, why: str) -> None:
        self.skipped.append({"what": what, "why": why})

    def summary(self) -> dict[str, Any]:
        """The result JSON's ``mteb`` entry: the mapped tasks and what was skipped, why."""
        return {"tasks": sorted(self.results), "skipped": self.skipped}


def _version() -> str:
    try:
        return metadata.version("mteb")
    except metadata.PackageNotFoundError:
        return "not installed"


def task_result(task: str, main_score: float, scores: dict[str, Any], seconds: float) -> dict:
    """One mteb ``TaskResult`` JSON (test split, default subset, English)."""
    entry = {"hf_subset": "default", "languages": ["eng-Latn"], "main_score": main_score}
    return {
        "dataset_revision": REVISION,
        "task_name": task,
        "mteb_version": _version(),
        "scores": {"test": [{**entry, **scores}]},
        "evaluation_time": seconds,
        "kg_co2_emissions": None,
    }


def _seconds(payload: dict[str, Any]) -> float:
    return float(payload.get("seconds") or 0.0)


def _subsets(kind: str, tasks: MtebTasks, payload: dict[str, Any], out: MtebMapping) -> list[str]:
    """The result's subsets, as ``tasks.subsets`` says (see `MtebTasks`): ``[""]`` for the
    whole result, its parts, or the Hub dataset its spec names; none (and a skip) for a
    local folder where the data must be mteb's."""
    if tasks.subsets == "whole":
        return [""]
    if tasks.subsets == "parts":
        suffix = f"/{tasks.main_score}"
        return [name[: -len(suffix)] for name in payload["metrics"] if name.endswith(suffix)]
    _, subsets, path = parse_spec(payload["benchmark"].get("spec", kind))
    if path is not None or not subsets:
        out.skip(kind, tasks.local)
        return []
    return [subsets[0]]


def _subset_key(tasks: MtebTasks, subset: str) -> str:
    """How ``tasks.tasks`` names a subset: a Hub dataset by its name, lower case."""
    return subset.rsplit("/", 1)[-1].lower() if tasks.subsets == "hub_dataset" else subset


def _task_scores(
    meta: BenchmarkMeta, subset: str, metrics: dict[str, float]
) -> tuple[float, dict[str, Any]] | None:
    """mteb's main score and score entries of one subset (its metrics ``<subset>/NAME``, or
    all for the whole result); None when it lacks the main score."""
    tasks = meta.mteb
    prefix = f"{subset}/" if tasks.subsets == "parts" else ""
    own = {n[len(prefix) :]: v for n, v in metrics.items() if n.startswith(prefix)}
    if tasks.main_score not in own:
        return None
    main = own[tasks.main_score] / (100.0 if meta.scale(tasks.main_score) == "percent" else 1.0)
    keys = tasks.keys(_subset_key(tasks, subset))
    scores = {keys[n]: v for n, v in own.items() if n in keys and n != tasks.main_score}
    if tasks.others_under is not None:
        return main, {tasks.main_score_key: main, tasks.others_under: scores}
    return main, {**scores, tasks.main_score_key: main}


def _map_tasks(kind: str, meta: BenchmarkMeta, payload: dict[str, Any], out: MtebMapping) -> None:
    tasks, seconds = meta.mteb, _seconds(payload)
    for subset in _subsets(kind, tasks, payload, out):
        what = tasks.what.format(kind=kind, subset=subset).strip()
        task = tasks.tasks.get(_subset_key(tasks, subset))
        if task is None:
            out.skip(what, tasks.no_task.get(_subset_key(tasks, subset), tasks.unknown))
            continue
        found = _task_scores(meta, subset, payload["metrics"])
        if found is None:
            out.skip(what, f"the result has no {tasks.main_score}, mteb's main score")
            continue
        out.results[task] = task_result(task, *found, seconds)


def mteb_mapping(payload: dict[str, Any]) -> MtebMapping:
    """The mteb task results of one ``dualview eval`` result, and what was skipped, why, as
    its benchmark's metadata says (`dualview.eval.benchmarks.meta.MtebTasks`)."""
    kind = payload["benchmark"].get("name", "")
    meta = benchmark_meta(kind)
    out = MtebMapping()
    tasks = NO_MTEB if meta is None else meta.mteb
    if meta is None or tasks.skip is not None:
        out.skip(kind, tasks.skip or "")
    else:
        _map_tasks(kind, meta, payload, out)
    return out


def mteb_task_results(payload: dict[str, Any]) -> dict[str, dict]:
    """mteb task name -> TaskResult JSON for one ``dualview eval`` result (may be empty)."""
    return mteb_mapping(payload).results


def skip_lines(payload: dict[str, Any], mapping: MtebMapping) -> list[str]:
    """One line per skipped part, for the command's output."""
    label = payload["benchmark"].get("label") or payload["benchmark"].get("name", "")
    model = payload["model"]["name"]
    return [
        f"mteb: no result file for {label} ({model}): {s['what']}: {s['why']}"
        for s in mapping.skipped
    ]


def write_mteb_results(payload: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """Write the mteb result files of ``payload`` under ``out_dir/mteb/``; their paths. What
    has no mteb task is said on stderr, a line each (`skip_lines`)."""
    mapping = mteb_mapping(payload)
    for line in skip_lines(payload, mapping):
        print(line, file=sys.stderr, flush=True)
    if not mapping.results:
        return []
    model = payload["model"]
    folder = Path(out_dir) / "mteb" / model_slug(model["name"]).replace("/", "__") / REVISION
    meta = {"name": model["name"], "revision": REVISION, "embed_dim": model.get("dim")}
    meta.update(framework=["Sentence Transformers"], loader="dualview")
    if payload.get("rerank") is not None:
        meta["dualview_rerank"] = payload["rerank"]
    atomic_write_text(folder / "model_meta.json", json.dumps(meta, indent=2))
    paths = []
    for task, result in mapping.results.items():
        if payload.get("rerank") is not None:
            result["dualview_rerank"] = payload["rerank"]
        paths.append(folder / f"{task}.json")
        atomic_write_text(paths[-1], json.dumps(result, indent=2))
    return paths


def followir_task(folder: str | Path, name: str = "LocalFollowIR") -> Any:
    """An mteb instruction-reranking task over a local FollowIR set folder (needs mteb)."""
    from datasets import Dataset
    from mteb._evaluators.retrieval_metrics import evaluate_p_mrr_change
    from mteb.abstasks import AbsTaskRetrieval
    from mteb.abstasks.task_metadata import TaskMetadata

    from dualview.eval.benchmarks.followir import FollowIRSet, changed_documents

    data = FollowIRSet(Path(folder))
    qids = data.qids
    metadata_ = TaskMetadata(
        name=name,
        description=f"FollowIR set read from {folder} by dualview.",
        reference="https://arxiv.org/abs/2403.15246",
        dataset={"path": str(folder), "revision": REVISION},
        type="InstructionReranking",
        category="t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        main_score="p-MRR",
        date=("2024-01-01", "2024-01-02"),
        domains=["News", "Written"],
        task_subtypes=[],
        license="not specified",
        annotations_creators="derived",
        dialect=[],
        sample_creation="found",
        bibtex_citation="",
    )
    changed = changed_documents({q: data.qrels_og[q] for q in qids}, data.qrels_changed)

    class LocalFollowIR(AbsTaskRetrieval):
        metadata = metadata_

        def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
            corpus = Dataset.from_list(
                [{"id": d, "title": doc.title, "text": doc.text} for d, doc in data.corpus.items()]
            )
            rows, qrels, top = [], {}, {}
            for q in qids:
                for key in ("og", "changed"):
                    qid = f"{q}-{key}"
                    text, instruction = (
                        data.queries[q]["text"],
                        data.queries[q][f"instruction_{key}"],
                    )
                    rows.append({"id": qid, "text": text, "instruction": instruction})
                    qrels[qid] = dict(
                        (data.qrels_og if key == "og" else data.qrels_changed).get(q, {})
                    )
                    top[qid] = list(data.candidates[q])
            split = {
                "corpus": corpus,
                "queries": Dataset.from_list(rows),
                "relevant_docs": qrels,
                "top_ranked": top,
            }
            self.dataset = {"default": {"test": split}}
            self.data_loaded = True

        def task_specific_scores(self, scores, qrels, results, hf_split, hf_subset):
            return evaluate_p_mrr_change(qrels, results, changed, self.k_values)

    return LocalFollowIR()
