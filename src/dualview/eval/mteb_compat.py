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
``ndcg_at_10`` main, ``recall_at_100``, ``mrr_at_10``; `BEIR_TASKS`). Everything else is
skipped, and said so (`MtebMapping.skipped`: a line on stderr and the result JSON's
``mteb`` entry): dualview's own benchmarks (``paired``, ``phenomena``), InfoSearch and MAIR
(no mteb task), a FollowIR set or BEIR folder that is not mteb's data (a local BEIR folder,
MS MARCO, whose mteb task scores the dev split).

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
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from dualview.eval.benchmarks import parse_spec
from dualview.eval.layout import model_slug
from dualview.io.atomic import atomic_write_text

REVISION = "no_revision_available"  # mteb's folder name for a model without a revision
FOLLOWIR_TASKS = {
    "Robust04": "Robust04InstructionRetrieval",
    "Core17": "Core17InstructionRetrieval",
    "News21": "News21InstructionRetrieval",
}
#: BEIR datasets (the Hub repository's name, ``BeIR/<name>`` or mteb's copy ``mteb/<name>``)
#: -> mteb's task on the same data and split (``test``, what `Beir` reads). MS MARCO is
#: missing on purpose: mteb scores its ``dev`` split.
BEIR_TASKS = {
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
#: Why a benchmark kind has no mteb result files at all.
NO_MTEB_TASK = {
    "paired": "dualview's own benchmark: mteb has no task for it",
    "phenomena": "dualview's own benchmark: mteb has no task for it",
    "infosearch": "mteb has no InfoSearch task",
    "mair": "mteb has no MAIR task",
}
# dualview metric name -> mteb score key
IR_KEYS = {
    "MAP@1000": "map_at_1000",
    "nDCG@5": "ndcg_at_5",
    "nDCG@10": "ndcg_at_10",
    "Recall@100": "recall_at_100",
    "MRR@10": "mrr_at_10",
    "Robustness@10": "robustness_at_10",
}


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


def _ir_scores(metrics: dict[str, float], prefix: str = "") -> dict[str, float]:
    """mteb's score keys of the IR measures in ``metrics`` named ``<prefix><measure>``."""
    return {
        IR_KEYS[name[len(prefix) :]]: value
        for name, value in metrics.items()
        if name.startswith(prefix) and name[len(prefix) :] in IR_KEYS
    }


def _followir(payload: dict[str, Any], out: MtebMapping) -> None:
    metrics, seconds = payload["metrics"], _seconds(payload)
    sets = [name.split("/", 1)[0] for name in metrics if name.endswith("/p-MRR")]
    for display in sets:
        task = FOLLOWIR_TASKS.get(display)
        if task is None:
            known = ", ".join(FOLLOWIR_TASKS)
            out.skip(f"followir set {display}", f"not one of mteb's FollowIR sets ({known})")
            continue
        p_mrr = metrics[f"{display}/p-MRR"] / 100.0  # ours x100, mteb's a fraction
        og = _ir_scores(metrics, f"{display}/")
        out.results[task] = task_result(task, p_mrr, {"p-MRR": p_mrr, "og": og}, seconds)


def _instructir(payload: dict[str, Any], out: MtebMapping) -> None:
    scores = _ir_scores(payload["metrics"])
    if "robustness_at_10" not in scores:
        out.skip("instructir", "the result has no Robustness@10, mteb's main score")
        return
    main = scores["robustness_at_10"]
    out.results["InstructIR"] = task_result("InstructIR", main, scores, _seconds(payload))


def _beir(payload: dict[str, Any], out: MtebMapping) -> None:
    _, subsets, path = parse_spec(payload["benchmark"].get("spec", "beir"))
    if path is not None or not subsets:
        why = "a local folder, whose data need not be mteb's (beir:BeIR/NAME reads the Hub's)"
        out.skip("beir", why)
        return
    name = subsets[0].rsplit("/", 1)[-1].lower()
    task = BEIR_TASKS.get(name)
    if task is None:
        out.skip(f"beir {subsets[0]}", SPLIT_DIFFERS.get(name, "no mteb task on this dataset"))
        return
    scores = _ir_scores(payload["metrics"])
    if "ndcg_at_10" not in scores:
        out.skip(f"beir {subsets[0]}", "the result has no nDCG@10, mteb's main score")
        return
    out.results[task] = task_result(task, scores["ndcg_at_10"], scores, _seconds(payload))


def _seconds(payload: dict[str, Any]) -> float:
    return float(payload.get("seconds") or 0.0)


#: benchmark kind -> what fills its `MtebMapping`
MAPPERS: dict[str, Callable[[dict[str, Any], MtebMapping], None]] = {
    "followir": _followir,
    "instructir": _instructir,
    "beir": _beir,
}


def mteb_mapping(payload: dict[str, Any]) -> MtebMapping:
    """The mteb task results of one ``dualview eval`` result, and what was skipped, why."""
    kind = payload["benchmark"].get("name", "")
    out = MtebMapping()
    mapper = MAPPERS.get(kind)
    if mapper is None:
        out.skip(kind, NO_MTEB_TASK.get(kind, "no mteb task is mapped for this benchmark"))
    else:
        mapper(payload, out)
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
