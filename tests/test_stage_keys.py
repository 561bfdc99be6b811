"""Stage keys come from each stage's frozen params model (`dualview.pipeline.params`); the
keys of the committed experiments, and of one that sets every field added after its stage
existed, are pinned to the values the hand-declared ``params=`` dicts gave before, so every
run folder made before keeps its finished stages. Input files are hashed by name here, so
a change to the bundled data does not move the pins (the keys hash their content)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from dualview.pipeline import stages
from dualview.pipeline.build import build_pipeline
from dualview.pipeline.experiment import EvaluationSpec, Experiment, load_experiment
from dualview.pipeline.params import EvalParams, MixParams, VerifyParams

ROOT = Path(__file__).parent.parent
JOB = {"backend": {"kind": "openai", "model": "stub", "base_url": "http://127.0.0.1:9/v1"}}


def _inline(changed: bool) -> Experiment:
    """An experiment with every kind of stage; ``changed``: the fields added since their
    stage existed set away from their defaults."""
    data: dict[str, Any] = {
        "name": "keys",
        "seeding": {"source": {"path": "tests/fixtures/synth/orig.jsonl"}, "job": JOB},
        "synthesis": {"job": JOB, "limit": 4},
        "verification": {"enabled": True, "job": JOB},
        "mixes": [{"name": "m", "preset": "ins-dv", "size": 8}],
        "training": {
            "config": {"data": {"train_file": "x"}, "output_dir": "x", "batch_size": 2},
            "overrides": {"max_steps": 3},
        },
        "evaluation": {"benchmarks": ["followir=src/dualview/demo/data/eval/followir"]},
    }
    if changed:
        data["extra_dv"] = "first"
        data["evaluation"]["precision"] = "fp32"
    return Experiment.model_validate(data)


EXPERIMENTS = {
    "gold-cpu": lambda: load_experiment("configs/experiments/gold-cpu.yaml"),
    "gold-cpu-llm": lambda: load_experiment("configs/experiments/gold-cpu-llm.yaml"),
    "inline": lambda: _inline(False),
    "inline-changed": lambda: _inline(True),
}

# stage -> key[:16], computed by the code before the params models (hand-declared dicts),
# except the train stages of the two committed experiments and what follows them (eval,
# report): those changed on purpose when the experiment's seed became the trainer's seed
# (`OLD_SEED_KEYS` below are their keys before, which `training.overrides.seed=42` restores),
# and every stage from synth on of the experiments with a reverse stage, on purpose when the
# reverse parser became version 5 (a worked example's original instruction is rejected; the
# cached answers are replayed to the new parser, no LLM call repeated)
PINNED: dict[str, dict[str, str]] = {
    "gold-cpu": {
        "data": "a39a72bfce5d9962",
        "eval": "c3c62e337d15c027",
        "mix-Ins-DV-gold": "bf1bae1c2ecafb3a",
        "mix-Ins-orig": "b43513adc9a1fa16",
        "report": "7135bac696b0f00f",
        "train-Ins-DV-gold": "444394555260230c",
        "train-Ins-orig": "8b9edcb511a81d31",
    },
    "gold-cpu-llm": {
        "data": "f0086328dd2aac63",
        "eval": "adc8751a9e3cbb29",
        "mix-Ins-DV-llm": "1e3817baeab684c0",
        "mix-Ins-orig-matched": "5d6cbf4c852020af",
        "report": "4545977af85f3731",
        "synth": "fcdff364605ad107",
        "train-Ins-DV-llm": "e88257e40fb36163",
        "train-Ins-orig-matched": "b255023b9b42e1da",
        "verify": "7bc632e1a81a8d36",
    },
    "inline": {
        "data": "1b0f4249bf9b0ec4",
        "eval": "c5d66d22f02abf62",
        "mix-m": "8bade7e4bec16aac",
        "report": "b4f48a272f2d2d87",
        "synth": "202e761716c3e78d",
        "train-m": "86327ff430d35152",
        "verify": "4636b885ee366729",
    },
    "inline-changed": {
        "data": "1b0f4249bf9b0ec4",
        "eval": "d3cc2345bbd11b1c",
        "mix-m": "a59c4431de815c05",
        "report": "742494d3a69e4957",
        "synth": "202e761716c3e78d",
        "train-m": "98fe47c03fe15dfa",
        "verify": "9e8c5653ba987d38",
    },
}


@pytest.fixture
def keys_by_name(monkeypatch: pytest.MonkeyPatch):
    def by_name(path: Path) -> str:
        return hashlib.sha256(f"input:{Path(path).name}".encode()).hexdigest()

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(stages, "hash_path", by_name)

    def keys(name: str) -> dict[str, str]:
        return {p.stage.name: p.key[:16] for p in build_pipeline(EXPERIMENTS[name]()).plan()}

    return keys


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_stage_keys_are_those_of_the_hand_declared_params(keys_by_name, name: str) -> None:
    assert keys_by_name(name) == PINNED[name], (
        f"the stage keys of {name} changed: every run folder made before reruns these stages. "
        "A new params field needs a default that keeps the old behaviour "
        "(dualview.pipeline.params); if the experiment config itself changed on purpose, "
        "update PINNED"
    )


#: the train stages' keys before the experiment's seed reached the trainer (the base file's
#: seed, 42, won): the run folders made then
#: (gold-cpu-llm's moved with the reverse parser's version 5 as well, so they do not return)
OLD_SEED_KEYS = {
    "gold-cpu": {"train-Ins-DV-gold": "1f87aabd27bd1bb0", "train-Ins-orig": "9a396d11a6c13d63"},
}


@pytest.mark.parametrize("name", sorted(OLD_SEED_KEYS))
def test_the_old_trainer_seed_gives_the_old_train_keys(keys_by_name, name: str) -> None:
    """``--set training.overrides.seed=42`` reruns a folder made before the seed change."""
    path = f"configs/experiments/{name}.yaml"
    EXPERIMENTS[f"{name}-seed42"] = lambda: load_experiment(path, ["training.overrides.seed=42"])
    try:
        keys = keys_by_name(f"{name}-seed42")
    finally:
        del EXPERIMENTS[f"{name}-seed42"]
    assert {k: v for k, v in keys.items() if k.startswith("train-")} == OLD_SEED_KEYS[name]


def test_a_field_at_its_default_is_not_keyed_and_a_set_one_is() -> None:
    plain = VerifyParams(job={}, task={})
    assert plain.key() == {"job": {}, "task": {}}
    assert VerifyParams(job={}, task={}, extra_dv="last").key()["extra_dv"] == "last"
    mix = MixParams(mix={}, seed=1, negatives={"total": 0})
    assert mix.key() == {"mix": {}, "seed": 1, "negatives": {"total": 0}}
    auto = EvalParams.of(EvaluationSpec(benchmarks=["phenomena"]), {}).key()["evaluation"]
    assert "precision" not in auto and "bm25" not in auto["rerank"]
    spec = EvaluationSpec(benchmarks=["phenomena"], precision="fp32")
    assert EvalParams.of(spec, {}).key()["evaluation"]["precision"] == "fp32"


def test_a_field_added_to_the_evaluation_section_must_be_declared(monkeypatch) -> None:
    spec = EvaluationSpec(benchmarks=["phenomena"])
    monkeypatch.setattr(EvaluationSpec, "model_dump", lambda self: {"new": 1})
    with pytest.raises(ValueError, match="new"):
        EvalParams.of(spec, {})
