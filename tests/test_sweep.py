"""Sweeps: a `sweep:` block expands into arms x seeds, each cached per stage, one report."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from dualview.config import ConfigError
from dualview.eval.run import model_slug
from dualview.lock import LockedError, folder_lock
from dualview.pipeline.experiment import Experiment
from dualview.pipeline.stages import Pipeline, Stage
from dualview.pipeline.sweep import (
    arm_label,
    grid_table,
    load_sweep,
    run_sweep,
    set_key,
    short_names,
)
from dualview.report.sweep_report import control_pairs, report_sweep
from dualview.run_folder import read_sweep_manifest
from tests.helpers import run_cli

QUERIES = [f"q{i}" for i in range(24)]
FOLDS = Path(__file__).parents[1] / "src" / "dualview" / "data" / "gold" / "folds"
FOLD1, FOLD2 = (f"paired={FOLDS / f'ldo-{k}'}" for k in (1, 2))


def _write(tmp_path: Path, sweep: dict[str, Any], **extra: Any) -> Path:
    config = {
        "name": "study",
        "run_dir": str(tmp_path / "sweep"),
        "seed": 7,
        "instructions": {"path": "gold:train", "views": ["orig", "dv"], "limit": 8},
        "synthesis": {"enabled": False},
        "mixes": [
            {"name": "Ins-orig", "preset": "ins-orig", "size": 4},
            {"name": "Ins-DV", "preset": "ins-dv", "size": 4},
        ],
        "training": {
            "config": {"model": {"query_max_length": 16}, "data": {"train_file": "x"}},
            "overrides": {"max_steps": 2, "data.num_negatives": 2},
        },
        "evaluation": {"benchmarks": ["phenomena"]},
        "sweep": sweep,
        **extra,
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


GRID = {
    "parameters": {
        "training.overrides.data.view_policy": ["together", "separate"],
        "training.overrides.max_steps": {"values": [2, 4]},
    },
    "seeds": [1, 2],
}


def test_expansion_sets_keys_labels_folders_and_seeds(tmp_path: Path) -> None:
    sweep = load_sweep(_write(tmp_path, GRID))
    assert sweep is not None and sweep.sweep_dir == tmp_path / "sweep"
    assert [(r.label, r.seed) for r in sweep.runs] == [
        ("view_policy=together,max_steps=2", 1),
        ("view_policy=together,max_steps=2", 2),
        ("view_policy=together,max_steps=4", 1),
        ("view_policy=together,max_steps=4", 2),
        ("view_policy=separate,max_steps=2", 1),
        ("view_policy=separate,max_steps=2", 2),
        ("view_policy=separate,max_steps=4", 1),
        ("view_policy=separate,max_steps=4", 2),
    ]
    run = sweep.runs[5]
    exp = run.experiment
    assert exp.seed == 2
    # below `overrides` the rest of the path is one flat key, like the trainer's --set
    assert exp.training.overrides == {
        "max_steps": 2,
        "data.num_negatives": 2,
        "data.view_policy": "separate",
    }
    assert run.run_dir == tmp_path / "sweep" / "view_policy=separate,max_steps=2" / "seed=2"
    manifest = sweep.manifest()
    assert [a.label for a in manifest.arms] == list(dict.fromkeys(r.label for r in sweep.runs))
    assert manifest.arms[0].runs == {
        "1": "view_policy=together,max_steps=2/seed=1",
        "2": "view_policy=together,max_steps=2/seed=2",
    }


def test_a_group_sets_its_keys_together_and_labels_the_arm_by_option(tmp_path: Path) -> None:
    folds = {
        "fold": {
            "ldo-1": {"instructions.path": "gold:ldo-1-train", "evaluation.benchmarks": [FOLD1]},
            "ldo-2": {"instructions.path": "gold:ldo-2-train", "evaluation.benchmarks": [FOLD2]},
        }
    }
    path = _write(
        tmp_path,
        {"parameters": {"training.overrides.max_steps": [2, 4]}, "groups": folds, "seeds": [1]},
    )
    sweep = load_sweep(path)
    assert sweep is not None
    assert [r.label for r in sweep.runs] == [
        "max_steps=2,fold=ldo-1",
        "max_steps=2,fold=ldo-2",
        "max_steps=4,fold=ldo-1",
        "max_steps=4,fold=ldo-2",
    ]
    run = sweep.runs[3]
    assert run.settings == {
        "training.overrides.max_steps": 4,
        "instructions.path": "gold:ldo-2-train",
        "evaluation.benchmarks": [FOLD2],
    }
    exp = run.experiment
    assert exp.instructions is not None and exp.instructions.path == "gold:ldo-2-train"
    assert exp.evaluation.benchmarks == [FOLD2] and exp.training.overrides["max_steps"] == 4
    assert run.run_dir == tmp_path / "sweep" / "max_steps=4,fold=ldo-2" / "seed=1"
    assert sweep.manifest().groups == folds


def test_no_sweep_block_is_a_plain_experiment(tmp_path: Path) -> None:
    path = _write(tmp_path, {})
    data = yaml.safe_load(path.read_text())
    del data["sweep"]
    path.write_text(yaml.safe_dump(data))
    assert load_sweep(path) is None


def test_overrides_reach_the_sweep_block_and_seed_keys(tmp_path: Path) -> None:
    path = _write(tmp_path, {"seeds": [1]})
    sweep = load_sweep(
        path, ["sweep.seeds=[3,4]", "sweep.seed_keys=[seed,training.overrides.seed]"]
    )
    assert sweep is not None
    assert [(r.label, r.seed) for r in sweep.runs] == [("", 3), ("", 4)]
    exp = sweep.runs[1].experiment
    assert exp.seed == 4 and exp.training.overrides["seed"] == 4
    assert sweep.runs[1].run_dir == tmp_path / "sweep" / "default" / "seed=4"


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        ({"parameters": {"seed": []}}, "non-empty list"),
        ({"parameters": {"seed": [1, 1]}}, "repeated value"),
        ({"seeds": [1, 1]}, "repeated seed"),
        ({"method": "bayes"}, "method"),
        ({"parameters": {"evaluation.batch_sizes": [1]}}, "sweep arm batch_sizes=1"),
        ({"parameters": {"mixes": [[], []]}}, "mixes"),
        ({"grid": {}}, "grid"),
        ({"parameters": {"run_dir": ["a", "b"]}}, "set by the sweep"),
        ({"parameters": {"seed": [1, 2]}, "seeds": [3]}, "the seeds set it"),
        ({"groups": {"fold": {}}}, "at least one option"),
        ({"groups": {"fold": {"a": {}}}}, "sets no key"),
        ({"groups": {"a.b": {"x": {"seed": 1}}}}, "plain word"),
        ({"groups": {"g": {"x": {"run_dir": "elsewhere"}}}}, "groups: g: run_dir: set by"),
        (
            {"parameters": {"seed": [1, 2]}, "groups": {"g": {"x": {"seed": 3}}}},
            "seed: also set by seed",
        ),
        (
            {
                "parameters": {"training.overrides.max_steps": [2]},
                "groups": {"max_steps": {"x": {"seed": 3}}},
            },
            "named like a parameter",
        ),
    ],
)
def test_bad_sweeps_are_located_errors(tmp_path: Path, sweep: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        load_sweep(_write(tmp_path, sweep))
    assert "study.yaml" in str(err.value)


def test_helpers() -> None:
    keys = ["a.x.max_steps", "b.max_steps", "training.lr"]
    assert short_names(keys) == {
        "a.x.max_steps": "x.max_steps",
        "b.max_steps": "b.max_steps",
        "training.lr": "lr",
    }
    assert arm_label({"k": "a b/c", "n": [1, 2]}, {"k": "k", "n": "n"}) == "k=a_b_c,n=1_2"
    data: dict[str, Any] = {"training": {"overrides": {"max_steps": 1}}}
    set_key(data, "training.overrides.data.view_policy", "separate")
    set_key(data, "evaluation.batch_size", 4)
    assert data == {
        "training": {"overrides": {"max_steps": 1, "data.view_policy": "separate"}},
        "evaluation": {"batch_size": 4},
    }
    with pytest.raises(ConfigError, match="not a mapping"):
        set_key({"seed": 1}, "seed.x", 2)


def test_dry_run_with_the_real_stages_writes_nothing(tmp_path: Path) -> None:
    sweep = load_sweep(_write(tmp_path, GRID))
    assert sweep is not None
    console = Console(record=True, width=250)
    assert run_sweep(sweep, console, dry_run=True) == {}
    text = console.export_text()
    assert "view_policy=separate,max_steps=4" in text and "seed=<seed>" in text
    assert not (tmp_path / "sweep").exists()
    result = run_cli("run", str(tmp_path / "study.yaml"), "--dry-run")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "sweep study: 8 runs" in result.stderr and not (tmp_path / "sweep").exists()


# -- a sweep run with stand-in stages (no training): caching, extension, report ----------


class Calls:
    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []


def _fake_eval_payload(mix: str, exp: Experiment) -> dict[str, Any]:
    """Per-query p-MRR: DV is 15 points better only with view_policy=separate; the seed
    and the query add noise."""
    policy = exp.training.overrides.get("data.view_policy", "together")
    effect = 15.0 if (mix == "Ins-DV" and policy == "separate") else 0.0
    rng = random.Random(f"{mix}-{exp.seed}")
    values = {q: 10.0 + effect + rng.gauss(0, 3) + (i % 5) for i, q in enumerate(QUERIES)}
    mean = sum(values.values()) / len(values)
    return {
        "benchmark": {"name": "paired", "label": "paired", "files": []},
        "metrics": {"p-MRR": mean},
        "per_query": {"p-MRR": values},
    }


def _fake_builder(calls: Calls):
    def build(exp: Experiment, reuse_from: list[Path] | None) -> Pipeline:
        def data_fn(out: Path, up: dict[str, Path]) -> dict[str, Any]:
            calls.log.append(("data", str(out)))
            return {}

        def train_fn(out: Path, up: dict[str, Path]) -> dict[str, Any]:
            calls.log.append(("train", str(out)))
            return {}

        def eval_fn(out: Path, up: dict[str, Path]) -> dict[str, Any]:
            calls.log.append(("eval", str(out)))
            models = {"base": "base-model", "Ins-orig": "m-orig", "Ins-DV": "m-dv"}
            (out / "configurations.json").write_text(json.dumps({"models": models}))
            for mix, model in models.items():
                folder = out / "eval" / model_slug(model)
                folder.mkdir(parents=True)
                payload = _fake_eval_payload(mix, exp)
                (folder / "paired.json").write_text(json.dumps(payload))
            return {}

        settings = exp.training.model_dump(mode="json")
        stages = [
            Stage("data", data_fn, params={"limit": 8}),
            Stage("train", train_fn, params={"t": settings, "seed": exp.seed}, after=["data"]),
            Stage("eval", eval_fn, params={}, after=["train"]),
        ]
        return Pipeline(exp.resolved_run_dir(), stages, reuse_from)

    return build


def test_run_caches_resumes_extends_and_reports(tmp_path: Path) -> None:
    spec = {
        "parameters": {"training.overrides.data.view_policy": ["together", "separate"]},
        "seeds": [1, 2],
        "control": "Ins-orig",
    }
    calls = Calls()
    build = _fake_builder(calls)
    quiet = Console(file=open("/dev/null", "w"))  # noqa: SIM115
    sweep = load_sweep(_write(tmp_path, spec))
    assert sweep is not None
    run_sweep(sweep, quiet, build=build)
    kinds = [k for k, _ in calls.log]
    # the data stage ran once and was copied to the other three runs
    assert kinds.count("data") == 1 and kinds.count("train") == 4 and kinds.count("eval") == 4
    assert len(list((tmp_path / "sweep").glob("*/seed=*/data-*"))) == 4

    calls.log.clear()
    run_sweep(sweep, quiet, build=build)  # everything cached
    assert calls.log == []

    # a third seed and a new value: only the new arm runs run
    spec["seeds"] = [1, 2, 3]
    spec["parameters"]["training.overrides.data.view_policy"].append("random")
    bigger = load_sweep(_write(tmp_path, spec))
    assert bigger is not None
    console = Console(record=True, width=250)
    console.print(grid_table(bigger, build))
    table = console.export_text()
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in table.splitlines()]
    cached = [row for row in cells if row[2:7] == ["3", "3", "0", "0", "0"]]
    assert len(cached) == 4  # the four runs already done: every stage cached
    fresh = [row for row in cells if row[2:7] == ["3", "0", "1", "0", "2"]]
    assert len(fresh) == 5  # new runs: the shared data stage copied, train and eval to run
    calls.log.clear()
    run_sweep(bigger, quiet, build=build)
    ran = sorted(
        {Path(out).parent.relative_to(tmp_path / "sweep").as_posix() for _, out in calls.log}
    )
    assert ran == [
        "view_policy=random/seed=1",
        "view_policy=random/seed=2",
        "view_policy=random/seed=3",
        "view_policy=separate/seed=3",
        "view_policy=together/seed=3",
    ]
    assert [k for k, _ in calls.log].count("data") == 0

    manifest = read_sweep_manifest(tmp_path / "sweep")
    assert manifest.seeds == [1, 2, 3] and len(manifest.arms) == 3
    files = report_sweep(tmp_path / "sweep")
    report = files.markdown.read_text()
    assert "| Ins-DV [view_policy=separate] |" in report
    assert "Mean ± sample standard deviation over 3 runs" in report
    assert report.count("| base |") == 1
    rows = {(c["arm"], c["control"]): c for c in json.loads(files.significance.read_text())}
    assert set(rows) == {
        (f"Ins-DV [view_policy={p}]", f"Ins-orig [view_policy={p}]")
        for p in ("together", "separate", "random")
    }
    separate = rows[("Ins-DV [view_policy=separate]", "Ins-orig [view_policy=separate]")]
    together = rows[("Ins-DV [view_policy=together]", "Ins-orig [view_policy=together]")]
    assert separate["n_queries"] == len(QUERIES)  # seeds pooled by query
    assert separate["diff"] > 10 and separate["significant"]
    assert abs(together["diff"]) < 5 and not together["significant"]
    assert separate["p_holm"] >= separate["p_value"]  # Holm over the sweep's comparisons

    # the CLI: `dualview report SWEEP_DIR` is the same sweep report
    result = run_cli("report", str(tmp_path / "sweep"), "--out", str(tmp_path / "r"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| Ins-DV [view_policy=random] |" in (tmp_path / "r" / "report.md").read_text()


def test_control_can_be_an_arm_or_a_row(tmp_path: Path) -> None:
    sweep = load_sweep(_write(tmp_path, {**GRID, "seeds": []}))
    assert sweep is not None
    manifest = sweep.manifest()
    names = ["base"] + [f"{m} [{a.label}]" for a in manifest.arms for m in ("Ins-orig", "Ins-DV")]
    by_arm = manifest.model_copy(update={"control": "view_policy=together,max_steps=2"})
    pairs = control_pairs(by_arm, names)
    assert (
        "Ins-DV [view_policy=separate,max_steps=4]",
        "Ins-DV [view_policy=together,max_steps=2]",
    ) in pairs
    assert len(pairs) == 6  # 3 other arms x 2 configurations
    one_row = manifest.model_copy(update={"control": "Ins-orig [view_policy=together,max_steps=2]"})
    assert len(control_pairs(one_row, names)) == 7
    with pytest.raises(Exception, match="matches no row"):
        control_pairs(manifest.model_copy(update={"control": "nothing"}), names)
    # the default control with nothing to compare (one configuration) is no comparison
    only_orig = [n for n in names if not n.startswith("Ins-DV")]
    assert control_pairs(manifest, only_orig) == []


def test_a_failed_sweep_resumes_where_it_stopped(tmp_path: Path) -> None:
    spec = {"parameters": {"training.overrides.max_steps": [1, 2, 3]}}
    calls = Calls()
    fail = {"max_steps=2"}

    def build(exp: Experiment, reuse_from: list[Path] | None) -> Pipeline:
        pipeline = _fake_builder(calls)(exp, reuse_from)
        train = pipeline.stages[1]
        inner = train.fn

        def flaky(out: Path, up: dict[str, Path]) -> dict[str, Any]:
            inner(out, up)
            if out.parent.name in fail:
                raise RuntimeError("killed")
            return {}

        train.fn = flaky
        return pipeline

    quiet = Console(file=open("/dev/null", "w"))  # noqa: SIM115
    sweep = load_sweep(_write(tmp_path, spec))
    assert sweep is not None
    with pytest.raises(RuntimeError, match="killed"):
        run_sweep(sweep, quiet, build=build)
    assert read_sweep_manifest(tmp_path / "sweep").arms[2].label == "max_steps=3"  # written first
    partial = report_sweep(tmp_path / "sweep").markdown.read_text()
    assert "Left out (no evaluation results yet): max_steps=2; max_steps=3." in partial
    fail.clear()
    calls.log.clear()
    run_sweep(sweep, quiet, build=build)
    ran = [(k, Path(out).parent.name) for k, out in calls.log]
    assert ran == [
        ("train", "max_steps=2"),  # re-entered in its folder
        ("eval", "max_steps=2"),
        ("train", "max_steps=3"),
        ("eval", "max_steps=3"),
    ]
    assert len(list((tmp_path / "sweep" / "max_steps=2").glob("train-*"))) == 1


# -- agents: several processes working through one sweep ---------------------------------


def test_an_agent_skips_arm_runs_another_process_holds(tmp_path: Path) -> None:
    spec = {"parameters": {"training.overrides.max_steps": [1, 2, 3]}}
    calls = Calls()
    quiet = Console(file=open("/dev/null", "w"))  # noqa: SIM115
    sweep = load_sweep(_write(tmp_path, spec))
    assert sweep is not None
    held = tmp_path / "sweep" / "max_steps=2"
    with folder_lock(held), folder_lock(tmp_path / "sweep"):  # another process: arm 2, sweep
        with pytest.raises(LockedError):  # a plain sweep run needs the sweep to itself
            run_sweep(sweep, quiet, build=_fake_builder(calls))
        outputs = run_sweep(sweep, quiet, build=_fake_builder(calls), agent=True)
    assert sorted(Path(p).name for p in outputs) == ["max_steps=1", "max_steps=3"]
    assert {Path(out).parent.name for _, out in calls.log} == {"max_steps=1", "max_steps=3"}
    assert len(read_sweep_manifest(tmp_path / "sweep").arms) == 3  # the whole grid, for the report
    calls.log.clear()
    run_sweep(sweep, quiet, build=_fake_builder(calls), agent=True)  # released: it runs now
    assert {Path(out).parent.name for _, out in calls.log} == {"max_steps=2"}


def test_two_agents_share_the_arms_and_run_each_once(tmp_path: Path) -> None:
    spec = {"parameters": {"training.overrides.max_steps": [1, 2, 3, 4]}, "seeds": [1, 2]}
    calls = Calls()
    both_busy = threading.Barrier(2, timeout=30)
    first = threading.Lock()
    waited: list[str] = []

    def build(exp: Experiment, reuse_from: list[Path] | None) -> Pipeline:
        pipeline = _fake_builder(calls)(exp, reuse_from)
        inner = pipeline.stages[1].fn

        def train(out: Path, up: dict[str, Path]) -> dict[str, Any]:
            if len(waited) < 2:  # each agent's first training waits for the other's
                with first:
                    waited.append(out.parent.as_posix())
                both_busy.wait()
            return inner(out, up)

        pipeline.stages[1].fn = train
        return pipeline

    sweep = load_sweep(_write(tmp_path, spec))
    assert sweep is not None
    quiet = Console(file=open("/dev/null", "w"))  # noqa: SIM115
    errors: list[BaseException] = []

    def agent() -> None:
        try:
            run_sweep(sweep, quiet, build=build, agent=True)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=agent) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(set(waited)) == 2  # the two agents were in two different arm runs at once
    trained = [
        Path(out).parent.relative_to(tmp_path / "sweep") for k, out in calls.log if k == "train"
    ]
    assert len(trained) == len(set(trained)) == 8  # every arm run once, none twice
    assert len(read_sweep_manifest(tmp_path / "sweep").arms) == 4


def test_agent_flag_needs_a_sweep(tmp_path: Path) -> None:
    path = _write(tmp_path, GRID)
    raw = yaml.safe_load(path.read_text())
    raw.pop("sweep")
    path.write_text(yaml.safe_dump(raw))
    result = run_cli("run", str(path), "--agent")
    assert result.returncode == 2 and "has no sweep: block" in result.stderr
