"""Choosing a reranker's interpolation weight on a validation set, never on a test set.

``dualview eval --interpolate W`` (`dualview.retrieval.fusion`) gives one column per
weight. `choose_weight` reads those columns' values of one metric on a validation set and
returns the weight with the highest mean over the given rerankers and evaluation folders
(the seeds of one arm: several rerankers in one folder, or one name in one folder per
seed), the smaller weight on a tie (the one nearer the first stage). The set must be one a
choice may be made on (`dualview.eval.selection.selection_benchmark`): the phenomenon set and any
set holding gold test split instances are refused, so the weight reported on them was not
chosen on them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path

from dualview.errors import DataError, DualviewError
from dualview.eval.benchmarks import spec_label
from dualview.eval.selection import selection_benchmark
from dualview.eval.two_stage import reranked_name
from dualview.io.files import read_json_file

#: ``values[column][benchmark label][metric]``: a summary's means (`Summary.values`).
Values = Mapping[str, Mapping[str, Mapping[str, float]]]


@dataclass(frozen=True)
class WeightChoice:
    """The chosen ``weight``, the ``metric`` it was chosen on (``"gold-val p-MRR"``) and the
    mean of that metric over the rerankers at every weight (``means``)."""

    weight: float
    metric: str
    means: dict[float, float]


def read_values(eval_dir: str | Path) -> Values:
    """The means of a ``dualview eval`` output folder: its ``summary.json`` (the last call's
    columns), plus every column an earlier call into the same folder left there (the
    ``<model>/<benchmark>.json`` results the summary does not list), so a grid of weights or
    rerankers evaluated over several calls is read whole."""
    path = Path(eval_dir) / "summary.json"
    if not path.is_file():
        raise DualviewError(f"{path}: no summary.json (is it a dualview eval --out folder?)")
    summary = read_json_file(path)
    values = summary.get("values") if isinstance(summary, dict) else None
    if not isinstance(values, dict):
        raise DataError(path, None, "values", "expected an object of the columns' means")
    merged = {column: dict(benchmarks) for column, benchmarks in values.items()}
    for column, label, metrics in _result_means(Path(eval_dir)):
        merged.setdefault(column, {}).setdefault(label, metrics)
    return merged


def _result_means(eval_dir: Path) -> list[tuple[str, str, dict[str, float]]]:
    """``(column, benchmark label, metrics)`` of each result file one folder down (the mteb
    copies lie deeper; a JSON that is not a result is passed over)."""
    found = []
    for result_path in sorted(eval_dir.glob("*/*.json")):
        result = read_json_file(result_path)
        model = result.get("model") if isinstance(result, dict) else None
        bench = result.get("benchmark") if isinstance(result, dict) else None
        metrics = result.get("metrics") if isinstance(result, dict) else None
        if isinstance(model, dict) and isinstance(bench, dict) and isinstance(metrics, dict):
            column, label = model.get("name"), bench.get("label")
            if isinstance(column, str) and isinstance(label, str):
                found.append((column, label, metrics))
    return found


def choose_weight(
    values: Values | Sequence[Values],
    rerankers: Sequence[str],
    first_stage: str,
    weights: Sequence[float],
    metric: str,
    specs: Sequence[str],
) -> WeightChoice:
    """The weight of the highest mean ``metric`` over ``rerankers`` (module docstring).

    Args:
        values: the evaluation's means (`read_values`, `Summary.values`), or a list of
            them (one evaluation folder per seed): the mean is over all of them.
        rerankers: the reranker names as evaluated (``--reranker`` values).
        first_stage: the first stage they reranked (``embedded:minilm``, ``bm25``).
        weights: the weights evaluated (``--interpolate`` values; 1 is the reranker alone).
        metric: ``"<benchmark label> <metric>"``, e.g. ``"gold-val p-MRR"``.
        specs: the benchmark specs evaluated (``-b`` values): the metric's set is checked
            to be one a choice may be made on.
    """
    if not rerankers or not weights:
        raise DualviewError("choose a weight: give at least one reranker and one weight")
    spec = selection_benchmark(metric, list(specs), "choose a weight")
    label = spec_label(spec)
    name = metric[len(label) + 1 :]
    runs = [values] if isinstance(values, Mapping) else list(values)
    means: dict[float, float] = {}
    for weight in sorted(set(weights)):
        found = []
        for run, reranker in product(runs, rerankers):
            column = reranked_name(reranker, first_stage, weight)
            value = run.get(column, {}).get(label, {}).get(name)
            if value is None:
                raise DualviewError(
                    f"{column}: no {label!r} {name!r} among the results; evaluate it with "
                    f"--reranker {reranker} --interpolate {weight:g} -b {spec}"
                )
            found.append(float(value))
        means[weight] = sum(found) / len(found)
    best = max(means.values())
    return WeightChoice(min(w for w, v in means.items() if v == best), metric, means)


__all__ = ["Values", "WeightChoice", "choose_weight", "read_values"]
