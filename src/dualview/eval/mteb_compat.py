"""mteb interoperability: results in mteb's format, and local FollowIR folders as mteb tasks.

`write_mteb_results` turns a ``dualview eval`` result of a benchmark mteb also has into
mteb's result files (one ``TaskResult`` JSON per task), so numbers line up with the
leaderboard's and tools that read mteb results can load them::

    OUT/mteb/<model>/no_revision_available/model_meta.json
    OUT/mteb/<model>/no_revision_available/Robust04InstructionRetrieval.json

Mapped today: FollowIR's sets (``Robust04InstructionRetrieval``, ``Core17...``,
``News21...``: ``p-MRR`` as mteb's fraction, main score, plus the original-instruction run's
``og`` scores) and InstructIR (``InstructIR``: nDCG@10 as main score). Other benchmarks have
no mteb twin with the same data and are skipped.

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
from importlib import metadata
from pathlib import Path
from typing import Any

from dualview.eval.layout import model_slug
from dualview.io.atomic import atomic_write_text

REVISION = "no_revision_available"  # mteb's folder name for a model without a revision
FOLLOWIR_TASKS = {
    "Robust04": "Robust04InstructionRetrieval",
    "Core17": "Core17InstructionRetrieval",
    "News21": "News21InstructionRetrieval",
}
# dualview metric name -> mteb score key
IR_KEYS = {"MAP@1000": "map_at_1000", "nDCG@5": "ndcg_at_5", "nDCG@10": "ndcg_at_10"}


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


def _followir(metrics: dict[str, float], seconds: float) -> dict[str, dict]:
    out = {}
    for display, task in FOLLOWIR_TASKS.items():
        if f"{display}/p-MRR" not in metrics:
            continue
        p_mrr = metrics[f"{display}/p-MRR"] / 100.0  # ours x100, mteb's a fraction
        og = {
            IR_KEYS[name.split("/", 1)[1]]: value
            for name, value in metrics.items()
            if name.startswith(f"{display}/") and name.split("/", 1)[1] in IR_KEYS
        }
        out[task] = task_result(task, p_mrr, {"p-MRR": p_mrr, "og": og}, seconds)
    return out


def _instructir(metrics: dict[str, float], seconds: float) -> dict[str, dict]:
    scores = {IR_KEYS[k]: v for k, v in metrics.items() if k in IR_KEYS}
    if "ndcg_at_10" not in scores:
        return {}
    return {"InstructIR": task_result("InstructIR", scores["ndcg_at_10"], scores, seconds)}


MAPPERS = {"followir": _followir, "instructir": _instructir}


def mteb_task_results(payload: dict[str, Any]) -> dict[str, dict]:
    """mteb task name -> TaskResult JSON for one ``dualview eval`` result (may be empty)."""
    mapper = MAPPERS.get(payload["benchmark"].get("name", ""))
    if mapper is None:
        return {}
    return mapper(payload["metrics"], float(payload.get("seconds") or 0.0))


def write_mteb_results(payload: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """Write the mteb result files of ``payload`` under ``out_dir/mteb/``; their paths."""
    results = mteb_task_results(payload)
    if not results:
        return []
    model = payload["model"]
    folder = Path(out_dir) / "mteb" / model_slug(model["name"]).replace("/", "__") / REVISION
    meta = {"name": model["name"], "revision": REVISION, "embed_dim": model.get("dim")}
    meta.update(framework=["Sentence Transformers"], loader="dualview")
    if payload.get("rerank") is not None:
        meta["dualview_rerank"] = payload["rerank"]
    atomic_write_text(folder / "model_meta.json", json.dumps(meta, indent=2))
    paths = []
    for task, result in results.items():
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
