"""mteb result folders as report arms: the task results `dualview.eval.mteb_compat` writes,
and mteb itself writes for the same tasks, read back into dualview's metrics.

A folder is an mteb model's results when it holds ``model_meta.json`` beside one
``<Task>.json`` (mteb's ``TaskResult``) per task; a report argument may be that folder, the
model's folder above it (one per revision), a results root (``OUT/mteb``, mteb's
``results``) or mteb's cache folder above it, which give one arm per model. Read:
FollowIR's sets (``p-MRR``, mteb's fraction, shown x100; the set's Score from the
original-instruction run, ``og`` in mteb 2, ``individual.original`` in mteb 1) and
InstructIR (nDCG@10, Robustness@10). mteb files hold no per-query values, so their columns
get no paired test (the report says why).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dualview.errors import DataError, warn_once
from dualview.eval.benchmarks.base import BenchmarkResult
from dualview.eval.benchmarks.followir import SCORE_METRIC
from dualview.eval.mteb_compat import FOLLOWIR_TASKS, IR_KEYS
from dualview.io.files import read_json_file
from dualview.report.collect import MTEB_MODEL_META, add_payload
from dualview.report.table import ConfigResult

FOLLOWIR_SETS = {task: display for display, task in FOLLOWIR_TASKS.items()}
# mteb score key -> dualview metric name
METRIC_NAMES = {key: name for name, key in IR_KEYS.items()} | {"robustness_at_10": "Robustness@10"}
INSTRUCTIR_TASK = "InstructIR"
READ_TASKS = (*FOLLOWIR_SETS, INSTRUCTIR_TASK)


def mteb_model_folders(folder: Path) -> list[Path]:
    """The mteb model result folders (``model_meta.json``) that ``folder`` is or holds, up
    to three levels down (mteb's cache / ``results`` / model / revision), the shallowest
    found, sorted."""
    for pattern in ("", "*/", "*/*/", "*/*/*/"):
        found = sorted(p.parent for p in folder.glob(pattern + MTEB_MODEL_META))
        if found:
            return found
    return []


def _test_scores(path: Path, data: Any) -> tuple[str, dict[str, Any]]:
    """A TaskResult's task name and the scores of its test split's default subset."""
    try:
        entries = data["scores"].get("test") or next(iter(data["scores"].values()))
        entry = next((e for e in entries if e.get("hf_subset") == "default"), entries[0])
        return str(data.get("task_name") or path.stem), dict(entry)
    except (KeyError, TypeError, AttributeError, IndexError, StopIteration) as exc:
        raise DataError(path, None, "json", f"not an mteb task result ({exc!r})") from None


def _original_run(scores: dict[str, Any]) -> dict[str, Any]:
    """The original-instruction run's scores of a FollowIR task (mteb 2, then mteb 1)."""
    og = scores.get("og") or (scores.get("individual") or {}).get("original") or {}
    return og if isinstance(og, dict) else {}


def _followir_metrics(tasks: dict[str, dict[str, Any]]) -> dict[str, float]:
    """dualview's FollowIR metrics (per set and their mean) from mteb's task scores."""
    result = BenchmarkResult()
    for task, scores in tasks.items():
        display = FOLLOWIR_SETS[task]
        result.metrics[f"{display}/p-MRR"] = 100.0 * float(scores["p-MRR"])
        score_key = IR_KEYS[SCORE_METRIC[display.lower()]]
        if score_key in _original_run(scores):
            result.metrics[f"{display}/Score"] = float(_original_run(scores)[score_key])
    sets = [FOLLOWIR_SETS[task] for task in tasks]
    result.add_mean("p-MRR", [f"{s}/p-MRR" for s in sets])
    result.add_mean("Score", [f"{s}/Score" for s in sets])
    return result.metrics


def _payloads(tasks: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Eval-result-shaped payloads (no per-query values) of the tasks the report reads."""
    followir = {t: s for t, s in tasks.items() if t in FOLLOWIR_SETS}
    out = []
    if followir:
        out.append(("followir", _followir_metrics(followir)))
    if INSTRUCTIR_TASK in tasks:
        scores = tasks[INSTRUCTIR_TASK]
        metrics = {METRIC_NAMES[k]: float(v) for k, v in scores.items() if k in METRIC_NAMES}
        out.append(("instructir", metrics))
    return [
        {"benchmark": {"name": kind, "label": kind}, "metrics": metrics, "per_query": {}}
        for kind, metrics in out
    ]


def _model_name(folder: Path) -> str:
    """The name ``model_meta.json`` stores, else mteb's folder name (``org__model``)."""
    meta = read_json_file(folder / MTEB_MODEL_META)
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else folder.parent.name.replace("__", "/")


def mteb_model_row(folder: Path) -> ConfigResult:
    """One mteb model's results as a row named by its ``model_meta.json``; tasks without a
    report column are skipped with a warning; none with one is a located error."""
    tasks: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        if path.name == MTEB_MODEL_META:
            continue
        task, scores = _test_scores(path, read_json_file(path))
        if task in READ_TASKS:
            tasks[task] = scores
        else:
            warn_once(f"warning: {path}: mteb task {task!r} has no report column; skipped")
    if not tasks:
        raise DataError(
            folder, None, "mteb", f"no task result the report reads ({', '.join(READ_TASKS)})"
        )
    row = ConfigResult(_model_name(folder))
    for payload in _payloads(tasks):
        try:
            add_payload(row, payload)
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(folder, None, "mteb", f"unreadable scores ({exc!r})") from None
    return row


def mteb_rows(folder: Path) -> list[ConfigResult]:
    """Report rows of an mteb result folder, one per model (`mteb_model_folders`)."""
    return [mteb_model_row(f) for f in mteb_model_folders(folder)]
