"""Sweeps: one experiment file, a grid of settings and seeds, one run folder per arm and seed.

An experiment file with a ``sweep:`` block expands into arms (the conventions follow W&B
sweeps for the file and Hydra's multirun for the folders; docs/architecture/sweeps.md)::

    sweep:
      method: grid                 # the only method: every combination, in file order
      parameters:                  # key path -> values (or {values: [...]}, W&B's form)
        training.overrides.data.view_policy: [together, separate]
        training.overrides.max_steps: [40, 160]
      groups:                      # keys set together, one named option at a time
        fold:                      # (Hydra's config groups): label fold=ldo-1, ...
          ldo-1: {instructions.path: "gold:ldo-1-train", evaluation.benchmarks: [...]}
          ldo-2: {instructions.path: "gold:ldo-2-train", evaluation.benchmarks: [...]}
      seeds: [1, 2, 3]             # each arm once per seed (written to `seed_keys`)
      seed_keys: [seed]            # default: the experiment's seed (mix sampling)
      control: Ins-orig            # the report's control: a configuration, arm or row
      select: gold-val p-MRR       # the one column choices are made on (a validation set)

- A key path names a key of the experiment (``training.overrides.max_steps``). Everything
  after ``overrides`` is one key of that flat map (``data.view_policy``), exactly what
  ``--set training.overrides.data.view_policy=separate`` means for the trainer.
- The grid is every combination of the parameters' values and the groups' options
  (parameters first, the first varying slowest). A group sets all the keys of its option;
  its label part is ``group=option``.
- Arm ``max_steps=40,view_policy=separate`` (shortest unambiguous key suffixes, Hydra's
  override dirname) of seed 1 runs in ``SWEEP_DIR/max_steps=40,view_policy=separate/seed=1``
  (``SWEEP_DIR``: the experiment's ``run_dir``, default ``runs/<name>``).
- Every arm is an ordinary run: its stages are cached by key, so a killed sweep resumes
  where it stopped, and a new value or seed runs only the new arms. Stages that several arms
  share (data, mixes when only training changes) are copied from the arm that ran them
  (``reuse_from``), not recomputed.
- ``select``: the report column that chooses, for each configuration, its arm (steps, τ,
  view policy: whatever the grid varies), mean over seeds; it must be a validation set's
  column (`dualview.eval.selection`: never the gold test split nor the phenomenon set, which
  are reported, never selected on). Without it the report chooses nothing.
- ``sweep.json`` in the sweep folder lists the arms and seeds; ``dualview report SWEEP_DIR``
  reports the whole sweep (`dualview.report.sweep_report`).
- Several processes can work through one sweep at once as agents (W&B's ``wandb agent``):
  ``dualview run FILE --agent`` in each. An agent skips every arm run whose folder another
  live process holds and takes the next; the run folders' locks are the only coordination,
  so agents may start at any time, on one machine or several sharing the folder.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, StrictInt, field_validator
from rich.console import Console
from rich.table import Table

from dualview.config import (
    ConfigError,
    StrictModel,
    apply_overrides,
    read_yaml,
    set_dotted,
    validate_config,
)
from dualview.eval.selection import selection_benchmark
from dualview.lock import LOCK_FILE, LockedError, exclusive, folder_lock
from dualview.pipeline.build import build_pipeline, resolve_stages
from dualview.pipeline.experiment import FLAT_MAPS, Experiment
from dualview.pipeline.runner import run_experiment
from dualview.pipeline.stages import Pipeline, read_done
from dualview.progress import clock_text
from dualview.run_folder import SweepArm, SweepManifest, write_sweep_manifest

SWEEP_KEY = "sweep"
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
_WORD = re.compile(r"[A-Za-z0-9_-]+")
MAX_LABEL = 120

Builder = Callable[[Experiment, list[Path] | None], Pipeline]


class SweepSpec(StrictModel):
    """The ``sweep:`` block (module docstring)."""

    method: Literal["grid"] = "grid"
    parameters: dict[str, list[Any]] = Field(default_factory=dict)
    groups: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    seeds: list[StrictInt] = Field(default_factory=list)  # true is not the seed 1
    seed_keys: list[str] = Field(default_factory=lambda: ["seed"], min_length=1)
    control: str | None = None
    select: str | None = Field(None, description="validation column choices are made on")

    @field_validator("parameters", mode="before")
    @classmethod
    def _values(cls, raw: Any) -> Any:
        """``key: [a, b]`` or W&B's ``key: {values: [a, b]}``; at least one value each."""
        if not isinstance(raw, dict):
            return raw
        out = {}
        for key, spec in raw.items():
            values = (
                spec.get("values") if isinstance(spec, dict) and set(spec) == {"values"} else spec
            )
            if not isinstance(values, list) or not values:
                raise ValueError(f"{key}: give a non-empty list of values (or {{values: [...]}})")
            if len({json.dumps(v, sort_keys=True, default=str) for v in values}) != len(values):
                raise ValueError(f"{key}: repeated value in {values}")
            out[key] = values
        return out

    @field_validator("groups")
    @classmethod
    def _options(
        cls, groups: dict[str, dict[str, dict[str, Any]]]
    ) -> dict[str, dict[str, dict[str, Any]]]:
        """Group names are plain words; each group has options, each setting some keys."""
        for name, options in groups.items():
            if not _WORD.fullmatch(name):
                raise ValueError(f"{name}: a group name is a plain word (letters, digits, _ -)")
            if not options:
                raise ValueError(f"{name}: give at least one option")
            for option, sets in options.items():
                if not sets:
                    raise ValueError(f"{name}: {option}: the option sets no key")
        return groups

    @field_validator("seeds")
    @classmethod
    def _unique_seeds(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"repeated seed in {seeds}")
        return seeds


@dataclass(frozen=True)
class ArmRun:
    """One arm at one seed: its settings, label, run folder and validated experiment."""

    label: str
    settings: dict[str, Any]
    seed: int | None
    experiment: Experiment

    @property
    def run_dir(self) -> Path:
        return self.experiment.resolved_run_dir()


@dataclass
class Sweep:
    """An expanded sweep: the base experiment's folder, the spec and every arm run."""

    name: str
    sweep_dir: Path
    spec: SweepSpec
    runs: list[ArmRun] = field(default_factory=list)

    def manifest(self) -> SweepManifest:
        arms: dict[str, SweepArm] = {}
        for run in self.runs:
            arm = arms.setdefault(run.label, SweepArm(label=run.label, settings=run.settings))
            seed = "-" if run.seed is None else str(run.seed)
            arm.runs[seed] = str(run.run_dir.relative_to(self.sweep_dir))
        return SweepManifest(
            name=self.name,
            method=self.spec.method,
            parameters=self.spec.parameters,
            groups=self.spec.groups,
            seeds=self.spec.seeds,
            control=self.spec.control,
            select=self.spec.select,
            arms=list(arms.values()),
        )


MANIFEST_LOCK = ".sweep-manifest.lock"


def set_key(data: dict[str, Any], key: str, value: Any) -> None:
    """Set ``a.b.c`` in nested ``data``; below a flat map (``overrides``) the rest of the
    path is one key."""
    set_dotted(data, key, copy.deepcopy(value), FLAT_MAPS, f"sweep: {key}")


def short_names(keys: list[str]) -> dict[str, str]:
    """Each key's shortest dotted suffix that no other key ends with."""
    out = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            suffix = ".".join(parts[-n:])
            if not any(o != key and (o == suffix or o.endswith("." + suffix)) for o in keys):
                out[key] = suffix
                break
        else:
            out[key] = key
    return out


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def arm_label(settings: dict[str, Any], names: dict[str, str]) -> str:
    """Hydra's override dirname: ``max_steps=40,view_policy=separate`` (file-system safe)."""
    label = ",".join(
        f"{names[k]}={_UNSAFE.sub('_', _value_text(v)).strip('_')}" for k, v in settings.items()
    )
    return label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 13] + "~" + _digest(label)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _axes(spec: SweepSpec) -> list[tuple[str, list[tuple[Any, dict[str, Any]]]]]:
    """Each axis of the grid: its name and its choices, each a label value and the keys it
    sets (a parameter sets its own key; a group option sets all of its keys)."""
    axes = [(key, [(v, {key: v}) for v in values]) for key, values in spec.parameters.items()]
    for name, options in spec.groups.items():
        axes.append((name, [(option, dict(sets)) for option, sets in options.items()]))
    return axes


def grid(spec: SweepSpec) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Every combination of the axes' choices, the first axis varying slowest: for each, the
    label parts (axis -> value or option) and the settings (key path -> value)."""
    axes = _axes(spec)
    points = []
    for combo in itertools.product(*(choices for _, choices in axes)):
        settings: dict[str, Any] = {}
        for _, sets in combo:
            settings.update(sets)
        parts = {name: value for (name, _), (value, _) in zip(axes, combo, strict=True)}
        points.append((parts, settings))
    return points


def _axis_where(source: str, axis: str, key: str) -> str:
    """Where a key of an axis is set: ``FILE: sweep: parameters`` or ``...: groups: NAME``."""
    return f"{source}: sweep: " + ("parameters" if axis == key else f"groups: {axis}")


def _check_keys(spec: SweepSpec, source: str) -> None:
    """Keys the sweep may not set (its own, the seeds'), and no key set by two axes."""
    owner: dict[str, str] = {}
    for axis, choices in _axes(spec):
        for key in {k for _, sets in choices for k in sets}:
            where = _axis_where(source, axis, key)
            if key == "run_dir" or key.startswith(f"{SWEEP_KEY}."):
                raise ConfigError(f"{where}: {key}: set by the sweep itself")
            if spec.seeds and key in spec.seed_keys:
                raise ConfigError(f"{where}: {key}: the seeds set it (seed_keys)")
            if owner.setdefault(key, axis) != axis:
                raise ConfigError(f"{where}: {key}: also set by {owner[key]}")


def _walk(node: Any, parts: list[str]) -> list[Any]:
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            return []
        node = node[part]
    return [node]


def effective_values(settings: dict[str, Any], key: str) -> list[Any]:
    """The values a sweep key path has once the stages resolved it (``settings``: what
    `resolve_stages` returns): below ``training.overrides`` or ``training.config``, in
    the training config of each backbone; elsewhere in the experiment. Empty where the
    path is not a validated setting (e.g. inside a free-form mapping)."""
    parts = key.split(".")
    if parts[:2] in (["training", "overrides"], ["training", "config"]) and len(parts) > 2:
        return [v for config in settings["training"].values() for v in _walk(config, parts[2:])]
    return [] if parts[0] == "training" else _walk(settings, parts)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    return {int: "an integer", float: "a number"}.get(type(value), type(value).__name__)


def coercion(given: Any, effective: Any) -> str | None:
    """What lax validation made of ``given`` that a strict field refuses (None when
    nothing): a boolean taken as a number (true as 1), a number as a boolean, a float as
    an integer (1.0 as 1). A string for a number stays allowed: YAML reads ``1e-5`` as one."""
    if (isinstance(given, bool) and _is_number(effective)) or (
        _is_number(given) and isinstance(effective, bool)
    ):
        return f"{_value_text(given)} is {_kind(given)}, the setting takes {_kind(effective)}"
    if type(given) is float and type(effective) is int:
        return f"{_value_text(given)} is a float, the setting takes an integer"
    if isinstance(given, list) and isinstance(effective, list) and len(given) == len(effective):
        pairs = list(zip(given, effective, strict=True))
    elif isinstance(given, dict) and isinstance(effective, dict):
        pairs = [(v, effective[k]) for k, v in given.items() if k in effective]
    else:
        return None
    return next((c for g, e in pairs if (c := coercion(g, e)) is not None), None)


def _check_types(
    settings: dict[str, Any], resolved: dict[str, Any], axes: dict[str, str], source: str
) -> None:
    """Each value the arm sets has the type its setting takes (`coercion`)."""
    for key, value in settings.items():
        for effective in effective_values(resolved, key):
            problem = coercion(value, effective)
            if problem is not None:
                raise ConfigError(f"{_axis_where(source, axes[key], key)}: {key}: {problem}")


def _check_distinct(
    seen: dict[str, tuple[str, dict[str, Any]]],
    resolved: dict[str, Any],
    label: str,
    parts: dict[str, Any],
    groups: dict[str, Any],
    source: str,
) -> None:
    """No two arms run the same settings (``max_steps: [1, 1.0]`` on a float setting, a
    group's options that set the same values): an error naming the axis that differs."""
    identity = json.dumps(resolved, sort_keys=True, default=str)
    other, other_parts = seen.setdefault(identity, (label, parts))
    if other == label:
        return
    axes = [a for a in parts if _value_text(parts[a]) != _value_text(other_parts[a])]
    values = "; ".join(
        f"{'groups' if axis in groups else 'parameters'}: {axis}: "
        f"{_value_text(other_parts[axis])} and {_value_text(parts[axis])}"
        for axis in axes
    )
    raise ConfigError(
        f"{source}: sweep: {values}: the same settings (arms {other!r} and {label!r} would "
        "run the same stages); keep one"
    )


def expand(raw: dict[str, Any], spec: SweepSpec, source: str) -> Sweep:
    """The arm runs of ``raw`` (an experiment mapping without its sweep block). Each arm
    run's stage configs are built and validated (`resolve_stages`), so a bad value fails
    here, before any run or dry run; values of a strict type (`coercion`) and arms with
    distinct settings only."""
    _check_keys(spec, source)
    axes = {key: axis for axis, choices in _axes(spec) for _, sets in choices for key in sets}
    seen: dict[str, tuple[str, dict[str, Any]]] = {}
    base = validate_config(Experiment, copy.deepcopy(raw), source)
    sweep_dir = base.resolved_run_dir()
    names = short_names(list(spec.parameters)) | {name: name for name in spec.groups}
    if len(set(names.values())) != len(names):
        raise ConfigError(f"{source}: sweep: a group is named like a parameter: {names}")
    sweep = Sweep(base.name, sweep_dir, spec)
    labels: set[str] = set()
    for parts, settings in grid(spec):
        label = arm_label(parts, names)
        if label in labels:
            raise ConfigError(f"{source}: sweep: two arms would share the folder {label!r}")
        labels.add(label)
        for seed in spec.seeds or [None]:
            data = copy.deepcopy(raw)
            for key, value in settings.items():
                set_key(data, key, value)
            if seed is not None:
                for key in spec.seed_keys:
                    set_key(data, key, seed)
            folder = sweep_dir / (label or "default")
            data["run_dir"] = str(folder / f"seed={seed}" if seed is not None else folder)
            where = f"{source}: sweep arm {label or 'default'}" + (
                f" seed {seed}" if seed is not None else ""
            )
            exp = validate_config(Experiment, data, where).located(where)
            if spec.select is not None:
                at = f"{where}: sweep: select"
                selection_benchmark(spec.select, exp.evaluation.benchmarks, at)
            resolved = resolve_stages(exp)
            _check_types(settings, resolved, axes, source)
            _check_distinct(seen, resolved, label, parts, spec.groups, source)
            sweep.runs.append(ArmRun(label, settings, seed, exp))
    return sweep


def load_sweep(path: str | Path, overrides: list[str] | None = None) -> Sweep | None:
    """The expanded sweep of an experiment file, or None when it has no ``sweep:`` block.
    ``--set`` overrides apply before expansion (``--set sweep.seeds=[1,2,3,4]`` too)."""
    raw = apply_overrides(read_yaml(path), overrides or [], FLAT_MAPS)
    block = raw.pop(SWEEP_KEY, None)
    if block is None:
        return None
    spec = validate_config(SweepSpec, block, f"{path}: sweep")
    return expand(raw, spec, str(path))


def _others(sweep: Sweep, run: ArmRun) -> list[Path]:
    """Run folders of the other arms that exist: finished stages with the same key are
    copied from them instead of rerun."""
    return [r.run_dir for r in sweep.runs if r is not run and r.run_dir.is_dir()]


def status_counts(pipeline: Pipeline) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in pipeline.plan():
        counts[item.status] = counts.get(item.status, 0) + 1
    return counts


#: A stage folder's name: ``<stage name>-<first 12 hex digits of its key>``.
_STAGE_FOLDER = re.compile(r"(?P<name>.+)-[0-9a-f]{12}")


def recorded_seconds(run_dirs: list[Path]) -> dict[str, dict[str, float]]:
    """Stage name -> key -> seconds of every finished stage (``.done.json``) in ``run_dirs``;
    a folder copied between arms has its original's key and counts once."""
    seconds: dict[str, dict[str, float]] = {}
    for run_dir in run_dirs:
        for folder in sorted(run_dir.iterdir()) if run_dir.is_dir() else []:
            match = _STAGE_FOLDER.fullmatch(folder.name)
            done = read_done(folder) if match and folder.is_dir() else {}
            if isinstance(done.get("seconds"), int | float):
                seconds.setdefault(match["name"], {})[done["key"]] = float(done["seconds"])
    return seconds


@dataclass
class StageTimings:
    """Recorded stage timings of a sweep's existing run folders: an arm's own runs (other
    seeds) first, else every arm's."""

    by_arm: dict[str, dict[str, dict[str, float]]]
    overall: dict[str, dict[str, float]]

    @classmethod
    def of(cls, sweep: Sweep) -> StageTimings:
        labels = {run.label for run in sweep.runs}
        by_arm = {
            label: recorded_seconds([r.run_dir for r in sweep.runs if r.label == label])
            for label in labels
        }
        return cls(by_arm, recorded_seconds([r.run_dir for r in sweep.runs]))

    def seconds(self, label: str, stage: str) -> float | None:
        """The mean recorded time of ``stage`` (None: no timing recorded)."""
        found = self.by_arm.get(label, {}).get(stage) or self.overall.get(stage)
        return sum(found.values()) / len(found) if found else None


#: What a dry run says each stage will do: its `PlannedStage.status`, except that a pending
#: stage an earlier arm of the sweep runs (same name and key) is copied, not run.
WILL = {"cached": "cached", "reusable": "copy", "partial": "resume", "pending": "run"}


@dataclass
class ArmPlan:
    """What running one arm run will really do: stages by what happens to them, and the
    estimated seconds of those that run (``untimed``: stages to run with no timing)."""

    run: ArmRun
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    untimed: list[str] = field(default_factory=list)

    @property
    def to_run(self) -> int:
        return self.counts.get("run", 0) + self.counts.get("resume", 0)


def plan_sweep(sweep: Sweep, build: Builder = build_pipeline) -> list[ArmPlan]:
    """Each arm run's stages as a run in order will treat them: cached ones skipped, a stage
    that another arm has finished or runs earlier in this sweep copied (shared stages run
    once), the rest run or resumed, each estimated from `StageTimings`."""
    timings = StageTimings.of(sweep)
    produced: set[tuple[str, str]] = set()
    plans = []
    for run in sweep.runs:
        plan = ArmPlan(run)
        for item in build(run.experiment, _others(sweep, run)).plan():
            will = WILL[item.status]
            if will == "run" and (item.stage.name, item.key) in produced:
                will = "copy"
            produced.add((item.stage.name, item.key))
            plan.counts[will] = plan.counts.get(will, 0) + 1
            if will in ("run", "resume"):
                _add_time(plan, timings.seconds(run.label, item.stage.name), item.stage.name)
        plans.append(plan)
    return plans


def _add_time(plan: ArmPlan, seconds: float | None, stage: str) -> None:
    if seconds is None:
        plan.untimed.append(stage)
    else:
        plan.seconds += seconds


def time_text(seconds: float, untimed: list[str], to_run: int) -> str:
    """``0:12:30``, ``0:12:30 + 2 untimed``, ``no timing recorded`` or ``-`` (nothing runs)."""
    if not to_run:
        return "-"
    if len(untimed) == to_run:
        return "no timing recorded"
    return clock_text(seconds) + (f" + {len(untimed)} untimed" if untimed else "")


def _summary(plans: list[ArmPlan]) -> str:
    """The whole sweep: stages that run, are copied, skipped, and the estimated time."""
    total = {w: sum(p.counts.get(w, 0) for p in plans) for w in ("run", "resume", "copy")}
    cached = sum(p.counts.get("cached", 0) for p in plans)
    untimed = sorted({stage for p in plans for stage in p.untimed})
    to_run = sum(p.to_run for p in plans)
    if not to_run:
        estimate = "-"
    elif sum(len(p.untimed) for p in plans) == to_run:
        estimate = "no timing recorded"
    else:
        estimate = clock_text(sum(p.seconds for p in plans)) + (
            f" for the timed stages (no timing recorded for {', '.join(untimed)})"
            if untimed
            else ""
        )
    return (
        f"will run {total['run']} stages and resume {total['resume']}; "
        f"{total['copy']} shared stages copied, {cached} cached; estimated time: {estimate}"
    )


def grid_table(sweep: Sweep, build: Builder = build_pipeline) -> Table:
    """The grid with what each arm run will really do (`plan_sweep`): stages cached, copied
    from another arm (shared stages run once), resumed or run, and the estimated time from
    the stage timings already recorded in the sweep's run folders."""
    plans = plan_sweep(sweep, build)
    table = Table(
        title=f"sweep {sweep.name}: {len(sweep.runs)} runs",
        caption=f"run folders: {sweep.sweep_dir}/<arm>/seed=<seed>\n{_summary(plans)}",
    )
    table.add_column("arm", overflow="fold")
    for column in ("seed", "stages", "cached", "to copy", "to resume", "to run", "est. time"):
        table.add_column(column, justify="right")
    for plan in plans:
        run, counts = plan.run, plan.counts
        table.add_row(
            run.label or "default",
            "-" if run.seed is None else str(run.seed),
            str(sum(counts.values())),
            *(str(counts.get(will, 0)) for will in ("cached", "copy", "resume", "run")),
            time_text(plan.seconds, plan.untimed, plan.to_run),
        )
    return table


def run_sweep(
    sweep: Sweep,
    console: Console | None = None,
    dry_run: bool = False,
    build: Builder = build_pipeline,
    agent: bool = False,
) -> dict[str, dict[str, Path]]:
    """Print the grid; unless ``dry_run``, write ``sweep.json`` and run every arm in order
    (each resumable and cached by stage). Returns ``run folder -> stage -> folder``.

    ``agent``: one of several processes working through the sweep. It takes no sweep-wide
    lock and skips each arm run that another process holds (left out of the result).
    """
    console = console or Console(stderr=True)
    console.print(grid_table(sweep, build))
    if dry_run:
        return {}
    sweep.sweep_dir.mkdir(parents=True, exist_ok=True)
    if agent:
        _write_manifest_as_agent(sweep)
        return _run_arms(sweep, console, build, agent=True)
    with folder_lock(sweep.sweep_dir):  # one sweep writer; each arm also locks its folder
        write_sweep_manifest(sweep.sweep_dir, sweep.manifest())
        return _run_arms(sweep, console, build, agent=False)


def _write_manifest_as_agent(sweep: Sweep) -> None:
    """Write ``sweep.json`` unless another agent is writing it (the same grid) right now."""
    try:
        with exclusive(sweep.sweep_dir / MANIFEST_LOCK, "sweep manifest"):
            write_sweep_manifest(sweep.sweep_dir, sweep.manifest())
    except LockedError:
        pass


def _run_arms(
    sweep: Sweep, console: Console, build: Builder, agent: bool
) -> dict[str, dict[str, Path]]:
    outputs: dict[str, dict[str, Path]] = {}
    for i, run in enumerate(sweep.runs, 1):
        seed = "" if run.seed is None else f", seed {run.seed}"
        name = f"arm {i}/{len(sweep.runs)}: {run.label or 'default'}{seed}"
        console.rule(name)
        try:
            outputs[str(run.run_dir)] = run_experiment(
                run.experiment, console, reuse_from=_others(sweep, run), build=build
            )
        except LockedError as exc:
            held = exc.lock_path and exc.lock_path.resolve() == (run.run_dir / LOCK_FILE).resolve()
            if not (agent and held):
                raise
            console.print(f"[yellow]{name} is run by another process: skipped[/]")
    return outputs
