"""Leave-domains-out folds of the gold set, the bundled fold test sets, the orig+dv preset."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualview.data import gold_folds
from dualview.data.mix import preset_config
from dualview.errors import ConfigError
from dualview.eval.export import write_fold_benchmarks
from dualview.pipeline.experiment import load_experiment

ROOT = Path(__file__).resolve().parents[1]


def test_folds_hold_out_two_unseen_domains_and_cover_every_instance_once() -> None:
    records = gold_folds.all_gold_records()
    domains = gold_folds.domains_of(records)
    assert len(domains) == 10
    tested: list[str] = []
    for fold in range(1, 6):
        held = gold_folds.held_out_domains(fold, domains)
        assert len(held) == 2
        train = gold_folds.load_gold_source(f"ldo-{fold}-train")
        test = gold_folds.load_gold_source(f"ldo-{fold}-test")
        assert {r.meta["domain"] for r in test} == set(held)
        assert not {r.meta["domain"] for r in train} & set(held)
        assert len(train) + len(test) == len(records)
        tested += [r.id for r in test]
    assert sorted(tested) == sorted(r.id for r in records)


def test_fold_names_and_bad_folds() -> None:
    assert gold_folds.parse_fold_name("ldo-3-train") == (3, "train")
    assert gold_folds.parse_fold_name("train") is None
    assert len(gold_folds.gold_source_files("ldo-2-test")) == 2
    with pytest.raises(ConfigError, match=r"expected 1\.\.5"):
        gold_folds.load_gold_source("ldo-6-test")
    assert gold_folds.held_out_domains(3, list("abcdefg"), 3) == ["f", "g"]  # sizes 3, 2, 2


def test_bundled_fold_test_sets_are_up_to_date(tmp_path: Path) -> None:
    """Fails when the gold set changed without `dualview data gold-build`."""
    for folder in write_fold_benchmarks(tmp_path):
        shipped = gold_folds.FOLDS_DIR / folder.name
        for name in ("corpus.jsonl", "pairs.jsonl"):
            built = (folder / name).read_text(encoding="utf-8")
            assert built == (shipped / name).read_text(encoding="utf-8"), f"{folder.name}/{name}"


def test_ldo_experiment_config_loads_with_fold_overrides() -> None:
    exp = load_experiment(
        ROOT / "configs/experiments/gold-ldo-cpu.yaml",
        [
            "instructions.path=gold:ldo-4-train",
            "evaluation.benchmarks=[paired=src/dualview/data/gold/folds/ldo-4]",
            "training.overrides.max_steps=160",
        ],
    )
    assert exp.instructions is not None and exp.instructions.path == "gold:ldo-4-train"
    assert [m.name for m in exp.mixes] == ["Ins-orig", "Ins-DV-gold"]
    assert exp.training.overrides["max_steps"] == 160


def test_orig_plus_dv_preset_is_the_paired_mix_under_its_own_name() -> None:
    config = preset_config("orig+dv", 344)
    assert config.name == "orig+dv"
    assert [(p.view, p.share, p.paired) for p in config.parts] == [
        ("orig", 0.5, False),
        ("dv", 0.5, True),
    ]


def test_orig_plus_dv_is_a_valid_mix_name_and_label() -> None:
    from dualview.pipeline.experiment import MixSpec

    spec = MixSpec(name="orig+dv", preset="orig+dv", size="auto")
    assert spec.name == "orig+dv"
