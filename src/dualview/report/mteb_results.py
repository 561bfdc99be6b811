"""mteb result folders as report arms: the task results `dualview.eval.mteb_compat` writes,
and mteb itself writes for the same tasks, read back into dualview's metrics.

A folder is an mteb model's results when it holds ``model_meta.json`` beside one
``<Task>.json`` (mteb's ``TaskResult``) per task; a report argument may be that folder, the
model's folder above it (one per revision), a results root (``OUT/mteb``, mteb's
``results``) or mteb's cache folder above it, which give one arm per model. Read: the tasks
that registered benchmarks' metadata maps (`read_tasks`), back through the same mapping:
FollowIR's sets (``p-MRR``, mteb's fraction, shown x100; the set's Score from the
original-instruction run, ``og`` in mteb 2, ``individual.original`` in mteb 1) and
InstructIR (nDCG@10, Robustness@10). mteb files hold no per-query values, so their columns
get no paired test (the report says why).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dualview.errors import DataError, warn_once
from dualview.eval.benchmarks import BENCHMARKS, BenchmarkMeta, BenchmarkResult
from dualview.eval.benchmarks.meta import PART
from dualview.io.files import read_json_file
from dualview.report.collect import MTEB_MODEL_META, add_payload
from dualview.report.table import ConfigResult

#: mteb 1 kept a nested run's scores under ``individual``, by another name
MTEB1_NESTED = {"og": "original", "changed": "changed"}


@dataclass(frozen=True)
class ReadTask:
    """A benchmark's subset that an mteb task holds (`read_tasks`)."""

    kind: str
    meta: BenchmarkMeta
    subset: str


def read_tasks() -> dict[str, ReadTask]:
    """mteb task -> the benchmark subset it holds, from every registered benchmark's
    metadata (`MtebTasks`). A task of a Hub dataset (BEIR) is not read: its result does not
    say which spec (and so which report column) it came from."""
    out: dict[str, ReadTask] = {}
    for kind, cls in BENCHMARKS.items():
        tasks = cls.meta.mteb
        if tasks.skip is None and tasks.subsets != "hub_dataset":
            for subset, task in tasks.tasks.items():
                out[task] = ReadTask(kind, cls.meta, subset)
    return out


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


def _nested(scores: dict[str, Any], under: str) -> dict[str, Any]:
    """A nested run's scores (FollowIR's ``og``: mteb 2, then mteb 1's ``individual``)."""
    found = scores.get(under) or (scores.get("individual") or {}).get(MTEB1_NESTED.get(under))
    return found if isinstance(found, dict) else {}


def _subset_metrics(read: ReadTask, scores: dict[str, Any]) -> dict[str, float]:
    """dualview's metrics of one subset (``<subset>/NAME`` for a part) from its task scores."""
    tasks = read.meta.mteb
    names = {key: name for name, key in tasks.keys(read.subset).items()}
    found = _nested(scores, tasks.others_under) if tasks.others_under else scores
    metrics = {names[k]: float(v) for k, v in found.items() if k in names}
    main = float(scores[tasks.main_score_key])
    metrics[tasks.main_score] = (
        100.0 * main if read.meta.scale(tasks.main_score) == "percent" else main
    )
    prefix = f"{read.subset}/" if read.subset else ""
    return {f"{prefix}{name}": value for name, value in metrics.items()}


def _benchmark_metrics(reads: list[tuple[ReadTask, dict[str, Any]]]) -> dict[str, float]:
    """One benchmark's metrics from its tasks' scores; a headline metric of its parts is
    their mean (`BenchmarkResult.add_mean`: FollowIR's p-MRR and Score over its sets)."""
    result = BenchmarkResult()
    for read, scores in reads:
        result.metrics.update(_subset_metrics(read, scores))
    parts = [read.subset for read, _ in reads if read.subset]
    if parts:
        for column in reads[0][0].meta.columns:
            if not column.metric.startswith(PART):
                result.add_mean(column.metric, [f"{p}/{column.metric}" for p in parts])
    return result.metrics


def _payloads(tasks: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Eval-result-shaped payloads (no per-query values) of the tasks the report reads, one
    per benchmark."""
    known = read_tasks()
    by_kind: dict[str, list[tuple[ReadTask, dict[str, Any]]]] = {}
    for task, scores in tasks.items():
        by_kind.setdefault(known[task].kind, []).append((known[task], scores))
    return [
        {
            "benchmark": {"name": kind, "label": kind},
            "metrics": _benchmark_metrics(by_kind[kind]),
            "per_query": {},
        }
        for kind in sorted(by_kind)
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
    known = read_tasks()
    for path in sorted(folder.glob("*.json")):
        if path.name == MTEB_MODEL_META:
            continue
        task, scores = _test_scores(path, read_json_file(path))
        if task in known:
            tasks[task] = scores
        else:
            warn_once(f"warning: {path}: mteb task {task!r} has no report column; skipped")
    if not tasks:
        raise DataError(
            folder, None, "mteb", f"no task result the report reads ({', '.join(known)})"
        )
    row = ConfigResult(_model_name(folder))
    try:
        for payload in _payloads(tasks):
            add_payload(row, payload)
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(folder, None, "mteb", f"unreadable scores ({exc!r})") from None
    return row


def mteb_rows(folder: Path) -> list[ConfigResult]:
    """Report rows of an mteb result folder, one per model (`mteb_model_folders`)."""
    return [mteb_model_row(f) for f in mteb_model_folders(folder)]
