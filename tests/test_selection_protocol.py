"""Issue 36 item 4: a validation split of the gold train data is the only thing choices are
made on; the gold test split and the phenomenon set are reported, never selected on; the
additive orig+dv mix trains on as many orig instances as Ins-orig."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from dualview.config import ConfigError
from dualview.data import gold_folds, gold_validation
from dualview.data.gold import load_gold
from dualview.data.mix import plan_mix, preset_config
from dualview.data.record_index import RecordIndex
from dualview.eval.export import export_paired, write_validation_benchmark
from dualview.eval.selection import selection_benchmark
from dualview.io.atomic import write_jsonl
from dualview.pipeline.experiment import Experiment
from dualview.pipeline.sweep import load_sweep
from dualview.report.sweep_report import selected_pairs, selected_rows
from dualview.report.table import ConfigResult
from dualview.run_folder import SweepArm, SweepManifest, read_sweep_manifest, write_sweep_manifest

TEST_SET = "paired=src/dualview/demo/data/eval/paired"  # the bundled gold test split
SPECS = ["gold-val", TEST_SET, "phenomena"]


def _instances(records: list) -> set[str]:
    return {r.meta["instance"] for r in records}


def test_validation_split_partitions_the_train_instances_by_domain_share() -> None:
    train = load_gold("train")
    fit, val = (gold_validation.validation_records(p) for p in ("fit", "val"))
    assert _instances(fit) | _instances(val) == _instances(train)
    assert not _instances(fit) & _instances(val)
    assert not _instances(val) & _instances(load_gold("test"))
    assert len(fit) + len(val) == len(train)  # both views of an instance on one side
    per_domain = Counter(r.meta["domain"] for r in train if r.view == "orig")
    val_domain = Counter(r.meta["domain"] for r in val if r.view == "orig")
    assert val_domain == {d: math.ceil(0.2 * n) for d, n in per_domain.items()}
    # deterministic, and independent of the record order
    side = gold_validation.validation_assignment(list(reversed(train)))
    assert side == gold_validation.validation_assignment(train)


def test_fit_and_val_are_gold_source_names() -> None:
    assert gold_folds.load_gold_source("val") == gold_validation.validation_records("val")
    assert gold_folds.gold_source_files("fit") == [gold_folds.split_path("train")]


def test_bundled_validation_set_is_up_to_date(tmp_path: Path) -> None:
    """Fails when the gold set changed without `dualview data gold-build`."""
    folder = write_validation_benchmark(tmp_path / "val")
    for name in ("corpus.jsonl", "pairs.jsonl"):
        shipped = gold_validation.VAL_DIR / name
        assert (folder / name).read_text("utf-8") == shipped.read_text("utf-8"), name


def test_selection_accepts_the_validation_set_only(tmp_path: Path) -> None:
    where = "x.yaml: sweep: select"
    assert selection_benchmark("gold-val p-MRR", SPECS, where) == "gold-val"
    with pytest.raises(ConfigError, match=r"^x\.yaml: sweep: select: phenomena is held out"):
        selection_benchmark("phenomena p-MRR", SPECS, where)
    with pytest.raises(ConfigError, match="holds 57 gold test split instances"):
        selection_benchmark("paired p-MRR", SPECS, where)
    # a copy of the test split under another path is refused by its data, not its name
    copy = tmp_path / "my-val"
    export_paired(load_gold("test")[:8], copy)
    with pytest.raises(ConfigError, match="holds 4 gold test split instances"):
        selection_benchmark("paired nDCG@10", [f"paired={copy}"], where)
    with pytest.raises(ConfigError, match="no column of the evaluated benchmarks"):
        selection_benchmark("beir nDCG@10", SPECS, where)


def _sweep_file(tmp_path: Path, select: str) -> Path:
    config: dict[str, Any] = {
        "name": "val-sweep",
        "run_dir": str(tmp_path / "sweep"),
        "instructions": {"path": "gold:fit", "views": ["orig", "dv"], "limit": 8},
        "synthesis": {"enabled": False},
        "mixes": [{"name": "Ins-orig", "preset": "ins-orig", "size": 4}],
        "training": {"config": {"data": {"train_file": "x"}}, "overrides": {"max_steps": 2}},
        "evaluation": {"benchmarks": SPECS},
        "sweep": {"parameters": {"training.overrides.max_steps": [2, 4]}, "select": select},
    }
    path = tmp_path / "val-sweep.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_a_sweep_that_selects_on_test_data_is_refused(tmp_path: Path) -> None:
    """Refused when the file loads, before any arm's stages are built (so before any run)."""
    with pytest.raises(ConfigError, match=r"sweep: select: paired=.* gold test split"):
        load_sweep(_sweep_file(tmp_path, "paired p-MRR"))
    with pytest.raises(ConfigError, match=r"sweep: select: phenomena is held out"):
        load_sweep(_sweep_file(tmp_path, "phenomena negation/p-MRR"))


def _row(name: str, val: float, test: float) -> ConfigResult:
    return ConfigResult(name, metrics={"gold-val p-MRR": val, "paired p-MRR": test})


def test_report_chooses_each_configuration_on_the_validation_column() -> None:
    arms = [SweepArm(label="max_steps=40"), SweepArm(label="max_steps=160")]
    manifest = SweepManifest(name="s", arms=arms, control="Ins-orig", select="gold-val p-MRR")
    rows = [
        ConfigResult("base", metrics={"gold-val p-MRR": 1.0}),
        _row("Ins-orig [max_steps=40]", 12.0, 30.0),
        _row("Ins-orig [max_steps=160]", 11.0, 40.0),  # better on test: not chosen
        _row("DV [max_steps=40]", 9.0, 20.0),
        _row("DV [max_steps=160]", 10.0, 10.0),
    ]
    chosen = selected_rows(manifest, rows)
    assert {k: r.name for k, r in chosen.items()} == {
        "Ins-orig": "Ins-orig [max_steps=40]",
        "DV": "DV [max_steps=160]",
    }
    assert selected_pairs(manifest, chosen) == [("DV [max_steps=160]", "Ins-orig [max_steps=40]")]
    assert selected_rows(manifest.model_copy(update={"select": None}), rows) == {}


def test_sweep_manifest_keeps_its_select_and_old_manifests_read(tmp_path: Path) -> None:
    manifest = SweepManifest(name="s", arms=[SweepArm(label="")], select="gold-val p-MRR")
    write_sweep_manifest(tmp_path, manifest)
    assert read_sweep_manifest(tmp_path).select == "gold-val p-MRR"
    write_sweep_manifest(tmp_path, manifest.model_copy(update={"select": None}))
    assert "select" not in json.loads((tmp_path / "sweep.json").read_text())  # as before
    assert read_sweep_manifest(tmp_path).select is None


def _experiment(mixes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": "e",
        "instructions": {"path": "gold:fit", "views": ["orig", "dv"]},
        "synthesis": {"enabled": False},
        "mixes": mixes,
        "evaluation": {"benchmarks": ["gold-val"]},
    }


@pytest.mark.parametrize("size", ["auto", 250, 124])
def test_additive_mix_must_match_ins_orig_in_orig_instances(size: Any) -> None:
    control = {"name": "Ins-orig", "preset": "ins-orig", "size": 124}
    additive = {"name": "orig+dv", "preset": "orig+dv", "size": size}
    with pytest.raises(ValueError, match=r"orig\+dv: trains on .*give size 248"):
        Experiment.model_validate(_experiment([control, additive]))
    matched = Experiment.model_validate(_experiment([control, {**additive, "size": 248}]))
    assert [m.size for m in matched.mixes] == [124, 248]
    Experiment.model_validate(_experiment([additive]))  # no ins-orig mix: nothing to match


def test_matched_additive_mix_trains_on_ins_orig_s_instances(tmp_path: Path) -> None:
    records = tmp_path / "fit.jsonl"
    write_jsonl(records, gold_folds.load_gold_source("fit"))

    def origs(preset: str, size: int) -> set[str]:
        with RecordIndex([records], pool_size=0, seed=1) as index:
            plan = plan_mix(index, preset_config(preset, size, seed=1))
        return {e.id for unit in plan.units for e in unit if e.view == "orig"}

    assert origs("orig+dv", 248) == origs("ins-orig", 124)
    assert len(origs("ins-orig", 124)) == 124


def test_a_gold_set_too_small_to_validate_on_writes_no_validation_set(tmp_path: Path) -> None:
    one = [r for r in load_gold("train") if r.meta["instance"] == "food-001"]
    write_jsonl(tmp_path / "train.jsonl", one)
    assert write_validation_benchmark(tmp_path / "val", tmp_path) is None
    assert not (tmp_path / "val").exists()
