"""Read evaluation result JSONs and training logs into report rows.

Each benchmark's metadata says its columns (`dualview.eval.benchmarks.meta.BenchmarkMeta`:
the paper's ``FollowIR p-MRR``, ``FollowIR Score``, ``InfoSearch <dim> p-MRR``, ``MAIR <task>
nDCG@10``; ``<label> <metric>`` for the other benchmarks' headline metrics; every metric of a
benchmark that declares none), the scale of each (IR measures are stored as fractions and
shown x100) and whether its files feed the error analysis; nothing here names a benchmark.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dualview.errors import DataError, warn_once
from dualview.eval.benchmarks import benchmark_meta
from dualview.eval.benchmarks.meta import ReportColumn, report_columns
from dualview.eval.layout import MTEB_FOLDER, model_slug
from dualview.io.files import read_json_file
from dualview.report.table import ConfigResult
from dualview.train.step_log import read_loss_log


def column_specs(kind: str, label: str, metrics: dict[str, float]) -> dict[str, ReportColumn]:
    """Report column -> the metric behind it (a `ReportColumn`: its name and scale), as the
    benchmark's metadata declares (`dualview.eval.benchmarks.meta.report_columns`)."""
    return report_columns(benchmark_meta(kind), label, metrics)


def column_sources(kind: str, label: str, metrics: dict[str, float]) -> dict[str, str]:
    """Report column -> the benchmark's metric name behind it."""
    return {column: spec.metric for column, spec in column_specs(kind, label, metrics).items()}


def paper_columns(kind: str, label: str, metrics: dict[str, float]) -> dict[str, float]:
    """Map one benchmark's metrics to report columns (values already x100)."""
    sources = column_specs(kind, label, metrics)
    return {column: spec.shown(metrics[spec.metric]) for column, spec in sources.items()}


NO_PER_QUERY = "no per-query values in its result file"


def metric_per_query(
    name: str, metrics: Mapping[str, Any], per_query: Mapping[str, Any]
) -> tuple[dict[str, float], str]:
    """Each query's value of the metric ``name`` of one result file and ``""``, or ``{}``
    and why there are none: the one place a table metric meets its per-query values.

    A metric with per-query values of its own (``per_query[name]``) uses them. One without is
    the unweighted mean of its parts' metrics ``<part>/<name>`` (`BenchmarkResult.add_mean`:
    FollowIR's ``p-MRR`` and ``Score`` over its sets): its queries are the parts' (ids
    ``<part>/<qid>``), each value weighted by ``n / (parts x queries of its part)`` (``n``:
    all the parts' queries), so that their plain mean is the metric's value: a paired test
    tests the table's number, each part counting once as in the table. The parts are used
    only when they reproduce the stored value.
    """
    own = per_query.get(name)
    if isinstance(own, dict) and own:
        return {str(q): float(v) for q, v in own.items()}, ""
    parts = {
        key.rpartition("/")[0]: values
        for key, values in per_query.items()
        if key.rpartition("/")[0] and key.rpartition("/")[2] == name
        if isinstance(values, dict) and values
    }
    if not parts:
        return {}, NO_PER_QUERY
    n = sum(len(values) for values in parts.values())
    out = {
        f"{part}/{q}": n / (len(parts) * len(values)) * float(v)
        for part, values in parts.items()
        for q, v in values.items()
    }
    if not math.isclose(sum(out.values()) / n, float(metrics[name]), rel_tol=1e-9, abs_tol=1e-9):
        parts_text = ", ".join(f"{part}/{name}" for part in parts)
        return {}, f"its value is not the mean of its parts' per-query values ({parts_text})"
    return out, ""


def query_values(
    kind: str, label: str, payload: dict[str, Any]
) -> tuple[dict[str, dict[str, list[float]]], dict[str, str]]:
    """Per report column, each query's value (x100 like the column) as a one-run list
    (`metric_per_query`), and for each column without per-query values, why."""
    meta = benchmark_meta(kind)
    per_query = payload.get("per_query") or {}
    if meta is not None and meta.pairing == "none":
        per_query = {}
    out: dict[str, dict[str, list[float]]] = {}
    notes: dict[str, str] = {}
    for column, spec in column_specs(kind, label, payload["metrics"]).items():
        values, why = metric_per_query(spec.metric, payload["metrics"], per_query)
        if values:
            out[column] = {q: [spec.shown(v)] for q, v in values.items()}
        else:
            notes[column] = why
    return out, notes


def part_title(label: str, part: str) -> str:
    """A benchmark part's name in figure titles: ``followir Robust04``, or the label alone
    when it already names the part (a one-set FollowIR folder named ``followir``)."""
    return label if part.lower() in label.lower() else f"{label} {part}"


def pmrr_per_query(label: str, payload: dict[str, Any]) -> dict[str, list[float]]:
    """Per-query p-MRR values for plots: the overall ``p-MRR`` when it has per-query values
    (paired sets), otherwise one entry per ``<set>/p-MRR`` (FollowIR sets, InfoSearch dims)."""
    per_query = payload.get("per_query", {})
    if per_query.get("p-MRR"):
        return {label: [float(v) for v in per_query["p-MRR"].values()]}
    out: dict[str, list[float]] = {}
    for name, values in per_query.items():
        part, _, metric = name.rpartition("/")
        if metric == "p-MRR" and part and values:
            out[part_title(label, part)] = [float(v) for v in values.values()]
    return out


def add_payload(row: ConfigResult, payload: dict[str, Any]) -> None:
    """One evaluation result (the JSON `dualview eval` writes, or one read back from mteb's
    files by `dualview.report.mteb_results`) into ``row``: its columns, per-query values (or
    why there are none) and a paired benchmark's data files."""
    bench = payload["benchmark"]
    kind, bench_label = bench["name"], bench["label"]
    row.metrics.update(paper_columns(kind, bench_label, payload["metrics"]))
    row.per_query.update(pmrr_per_query(bench_label, payload))
    values, notes = query_values(kind, bench_label, payload)
    row.query_values.update(values)
    row.query_notes.update(notes)
    meta = benchmark_meta(kind)
    if meta is not None and meta.pairing == "instruction_pairs":
        row.sources[bench_label] = [str(f) for f in bench.get("files", [])]


def _add_result(row: ConfigResult, path: Path) -> dict[str, Any]:
    """One evaluation JSON into ``row`` (`add_payload`); its payload. A file of another
    shape is a located error."""
    payload = read_json_file(path)
    try:
        add_payload(row, payload)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise DataError(path, None, "json", f"not a dualview eval result ({exc!r})") from None
    return payload


def eval_file_row(name: str, path: Path) -> ConfigResult:
    """A row named ``name`` from one evaluation JSON of ``dualview eval`` (its columns, as a
    report shows them)."""
    row = ConfigResult(name)
    _add_result(row, path)
    return row


SUMMARY = "summary.json"  # what `dualview eval` writes beside its model folders
MTEB_MODEL_META = "model_meta.json"  # beside an mteb model's task results
REPORT_MARK = "report.md"  # a report written into an eval folder is not a model's folder


def is_eval_folder(folder: Path) -> bool:
    """Whether ``folder`` is a `dualview eval` result folder (``summary.json`` beside one
    folder per model) or one model's folder in it (``<benchmark>.json`` results, and no
    mteb ``model_meta.json``)."""
    if (folder / SUMMARY).is_file():
        return True
    return any(folder.glob("*.json")) and not (folder / MTEB_MODEL_META).exists()


def _model_folders(folder: Path) -> list[Path]:
    """An eval folder's model folders: those its ``summary.json`` lists first (in its order),
    then any other (an earlier call's models), by name; ``folder`` itself when it is one
    model's folder. The mteb copies and reports written into it are left out."""
    if not (folder / SUMMARY).is_file():
        return [folder]
    found = sorted(
        d
        for d in folder.iterdir()
        if d.is_dir() and d.name != MTEB_FOLDER and not (d / REPORT_MARK).exists()
        if any(d.glob("*.json"))
    )
    summary = read_json_file(folder / SUMMARY)
    listed = summary.get("models") if isinstance(summary, dict) else None
    listed = listed if isinstance(listed, list) else []
    order = [model_slug(m) for m in listed if isinstance(m, str)]
    rank = {slug: i for i, slug in enumerate(order)}
    return sorted(found, key=lambda d: rank.get(d.name, len(rank)))


def model_folder_row(folder: Path) -> ConfigResult:
    """One model's results (every ``<benchmark>.json`` of its folder) as a row named by the
    model name they store (the folder's name when they store none)."""
    row = ConfigResult(folder.name)
    names = []
    for path in sorted(folder.glob("*.json")):
        model = _add_result(row, path).get("model")
        if isinstance(model, dict) and isinstance(model.get("name"), str):
            names.append(model["name"])
    row.name = names[0] if names else folder.name
    return row


def first_stage_row(folder: Path) -> ConfigResult | None:
    """The first stage alone of a reranked model's folder (its results' ``first_stage``
    entries, `dualview.eval.run.FirstStageAlone`) as a row named by it; None without."""
    row = None
    for path in sorted(folder.glob("*.json")):
        payload = read_json_file(path)
        first = payload.get("first_stage") if isinstance(payload, dict) else None
        if isinstance(first, dict):
            row = row or ConfigResult(str(first.get("name") or "first stage"))
            try:
                add_payload(row, {**payload, **first, "benchmark": payload["benchmark"]})
            except (KeyError, TypeError, AttributeError, ValueError) as exc:
                why = f"first_stage: not a dualview eval result ({exc!r})"
                raise DataError(path, None, "json", why) from None
    return row


def eval_folder_rows(folder: Path) -> list[ConfigResult]:
    """Report rows of a `dualview eval` result folder, one per model (`model_folder_row`),
    each reranked model preceded by its first stage alone (`first_stage_row`) unless the
    folder holds that model's own results."""
    folders = _model_folders(folder)
    rows = [model_folder_row(d) for d in folders]
    names = {row.name for row in rows}
    out: list[ConfigResult] = []
    for model_folder, row in zip(folders, rows, strict=True):
        first = first_stage_row(model_folder)
        if first is not None and first.name not in names:
            names.add(first.name)
            out.append(first)
        out.append(row)
    return out


def collect_rows(
    eval_dir: str | Path,
    configurations: dict[str, str],
    loss_logs: dict[str, Path] | None = None,
) -> list[ConfigResult]:
    """Rows for ``configurations`` (label -> model name as given to ``evaluate``)."""
    rows = []
    for label, model_name in configurations.items():
        row = ConfigResult(label)
        folder = Path(eval_dir) / model_slug(model_name)
        for path in sorted(folder.glob("*.json")):
            _add_result(row, path)
        if loss_logs and label in loss_logs:
            row.loss_curve = loss_curve(label, Path(loss_logs[label]))
        rows.append(row)
    return rows


def loss_curve(label: str, path: Path) -> list[tuple[int, float]]:
    """The training loss of row ``label`` from its log; a warning on stderr when the log is
    missing or has no loss values (the loss figure then has no curve for it)."""
    curve = read_loss_log(path)
    if not curve:
        why = "has no loss values" if path.is_file() else "does not exist"
        warn_once(f"warning: {path}: training log of {label!r} {why}; no loss curve for it")
    return curve
