"""Which benchmarks a choice may be made on: the protocol that selects nothing on test data.

Every choice of a sweep (step budget, τ, view policy, which checkpoint) is made on one
metric of a *validation* set (``-b gold-val``: `dualview.data.gold_validation`); the gold
test split and the phenomenon set are reported, never selected on. `selection_benchmark`
returns the evaluation spec a ``select:`` metric reads and refuses, with one located line:

- a metric of no benchmark the experiment evaluates;
- a benchmark whose metadata says it is held out (role ``held_out``: the phenomenon set);
- a paired-layout set that holds gold test split instances (the same query and instruction
  as a gold test record), whatever its path or name: e.g. ``paired=`` the bundled gold test
  set (``dualview/demo/data/eval/paired``).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from dualview.data.gold import load_gold
from dualview.errors import ConfigError
from dualview.eval.benchmarks import BENCHMARKS, data_path, parse_spec, spec_label
from dualview.io.files import iter_json_lines


def metric_benchmark(metric: str, specs: list[str]) -> str | None:
    """The spec among ``specs`` whose report columns ``metric`` names (``"gold-val p-MRR"``:
    the spec labelled ``gold-val``); the longest label wins; None when none does."""
    found = [s for s in specs if metric.startswith(spec_label(s) + " ")]
    return max(found, key=lambda s: len(spec_label(s)), default=None)


@cache
def _gold_test_keys() -> frozenset[tuple[str, str]]:
    """(query, instruction) of every gold test record (both views)."""
    return frozenset((r.query, r.instruction) for r in load_gold("test"))


def gold_test_pairs(folder: Path) -> int:
    """How many pairs of a paired-layout ``folder`` are gold test split instances (0 when it
    has no ``pairs.jsonl``)."""
    pairs = folder / "pairs.jsonl"
    if not pairs.is_file():
        return 0
    keys = _gold_test_keys()
    count = 0
    for _, row in iter_json_lines(pairs):
        side = row.get("a") if isinstance(row.get("a"), dict) else {}
        count += (str(row.get("query", "")), str(side.get("instruction", ""))) in keys
    return count


def selection_benchmark(metric: str, specs: list[str], where: str) -> str:
    """The evaluation spec that ``metric`` is chosen on, after the checks of the module
    docstring; ``where`` locates the error (``FILE: sweep: select: metric``)."""
    spec = metric_benchmark(metric, specs)
    if spec is None:
        labels = ", ".join(spec_label(s) for s in specs) or "none"
        raise ConfigError(
            f"{where}: {metric!r} is no column of the evaluated benchmarks ({labels}); "
            "give '<benchmark> <metric>', e.g. 'gold-val p-MRR' with -b gold-val evaluated"
        )
    meta = BENCHMARKS.get(parse_spec(spec)[0]).meta
    if meta.role == "held_out":
        raise ConfigError(
            f"{where}: {spec} is held out ({meta.reference}): reported, never selected on; "
            "select on a validation split (gold-val)"
        )
    folder = data_path(spec)
    n_test = gold_test_pairs(folder) if folder is not None else 0
    if n_test:
        raise ConfigError(
            f"{where}: {spec} holds {n_test} gold test split instances: the test split is "
            "reported, never selected on; select on a validation split (gold-val)"
        )
    return spec
