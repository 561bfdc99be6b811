from __future__ import annotations

import pytest

from dualview.errors import DualviewError, Interrupted
from dualview.pipeline.experiment import EvaluationSpec
from dualview.pipeline.params import EvalParams
from dualview.pipeline.stages import Pipeline, Stage, read_done


def _pipeline(run_dir, source, calls, params_b=None, fail_in=None):
    def stage_a(out, up):
        calls.append("a")
        (out / "a.txt").write_text(source.read_text().upper())
        return {"rows": 1}

    def stage_b(out, up):
        calls.append("b")
        if fail_in == "b":
            (out / "partial").write_text("half")
            raise RuntimeError("killed")
        (out / "b.txt").write_text((up["a"] / "a.txt").read_text() + "!")

    def stage_c(out, up):
        calls.append("c")
        (out / "c.txt").write_text((up["a"] / "a.txt").read_text() + "?")

    return Pipeline(
        run_dir,
        [
            Stage("a", stage_a, inputs=[source]),
            Stage("b", stage_b, params=params_b or {"x": 1}, after=["a"]),
            Stage("c", stage_c, after=["a"]),
        ],
    )


def test_rerun_skips_finished_stages(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("hi")
    calls: list[str] = []
    out = _pipeline(tmp_path / "run", source, calls).run()
    assert calls == ["a", "b", "c"]
    assert (out["b"] / "b.txt").read_text() == "HI!"
    assert read_done(out["a"])["rows"] == 1
    _pipeline(tmp_path / "run", source, calls).run()
    assert calls == ["a", "b", "c"]


def test_change_reruns_only_dependents(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("hi")
    calls: list[str] = []
    _pipeline(tmp_path / "run", source, calls).run()
    calls.clear()
    _pipeline(tmp_path / "run", source, calls, params_b={"x": 2}).run()
    assert calls == ["b"]
    calls.clear()
    source.write_text("changed")
    out = _pipeline(tmp_path / "run", source, calls, params_b={"x": 2}).run()
    assert calls == ["a", "b", "c"]
    assert (out["c"] / "c.txt").read_text() == "CHANGED?"


def test_killed_stage_is_resumed_in_same_folder(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("hi")
    calls: list[str] = []
    with pytest.raises(RuntimeError):
        _pipeline(tmp_path / "run", source, calls, fail_in="b").run()
    plan = _pipeline(tmp_path / "run", source, calls).plan()
    assert [p.status for p in plan] == ["cached", "partial", "pending"]
    calls.clear()
    out = _pipeline(tmp_path / "run", source, calls).run()
    assert calls == ["b", "c"]
    assert (out["b"] / "partial").exists()  # same folder: the stage's own state survives


def test_dependency_order_is_checked(tmp_path):
    with pytest.raises(DualviewError, match="must come first"):
        Pipeline(tmp_path, [Stage("b", lambda o, u: None, after=["a"])])


def test_interrupted_training_is_not_marked_done(tmp_path, monkeypatch):
    from dualview.demo import EVAL_DIR
    from dualview.pipeline.build import build_pipeline
    from dualview.pipeline.experiment import Experiment
    from dualview.train import trainer

    calls = []

    def fake_train(config, resume=False, allow_config_change=False, overwrite=False):
        calls.append(resume)
        return trainer.TrainResult(None, steps=3, interrupted=True, first_loss=1, last_loss=1)

    monkeypatch.setattr(trainer, "train", fake_train)
    exp = Experiment.model_validate(
        {
            "name": "t",
            "run_dir": str(tmp_path / "run"),
            "instructions": {"path": "gold:train", "views": ["orig", "dv"], "limit": 8},
            "synthesis": {"enabled": False},
            "mixes": [{"name": "m", "preset": "ins-dv", "size": 4}],
            "training": {"config": {"data": {"train_file": "x"}, "output_dir": "x"}},
            "evaluation": {"benchmarks": [f"paired={EVAL_DIR / 'paired'}"]},
        }
    )
    pipeline = build_pipeline(exp)
    with pytest.raises(Interrupted, match="rerun to resume"):
        pipeline.run()
    status = {p.stage.name: p.status for p in pipeline.plan()}
    assert status == {
        "data": "cached", "mix-m": "cached", "train-m": "partial", "eval": "pending",
        "report": "pending",
    }  # fmt: skip
    assert calls == [False]


def test_reuse_from_copies_finished_stages_with_the_same_key(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("hi")
    calls: list[str] = []
    first = _pipeline(tmp_path / "run1", source, calls).run()
    calls.clear()
    # a second run with a different b: a and c are copied from run1, only b runs
    second = Pipeline(
        tmp_path / "run2",
        _pipeline(tmp_path / "run2", source, calls, params_b={"x": 2}).stages,
        reuse_from=[tmp_path / "run1"],
    )
    assert [p.status for p in second.plan()] == ["reusable", "pending", "reusable"]
    out = second.run()
    assert calls == ["b"]
    assert out["a"].parent == tmp_path / "run2"
    assert (out["a"] / "a.txt").read_text() == (first["a"] / "a.txt").read_text()
    assert (out["c"] / "c.txt").read_text() == "HI?"
    assert not list((tmp_path / "run2").glob(".*copying"))


def test_reuse_from_ignores_unfinished_or_mismatched_folders(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("hi")
    calls: list[str] = []
    with pytest.raises(RuntimeError):
        _pipeline(tmp_path / "run1", source, calls, fail_in="b").run()
    calls.clear()
    second = Pipeline(
        tmp_path / "run2",
        _pipeline(tmp_path / "run2", source, calls).stages,
        reuse_from=[tmp_path / "run1"],
    )
    assert [p.status for p in second.plan()] == ["reusable", "pending", "pending"]
    second.run()
    assert calls == ["b", "c"]  # b was unfinished in run1, so it runs here
    with pytest.raises(DualviewError, match="does not exist"):
        Pipeline(tmp_path / "run3", [], reuse_from=[tmp_path / "missing"])


def test_an_input_that_only_moved_keeps_the_stage_keys(tmp_path):
    """The key hashes an input's content, not its path: a project moved elsewhere (or the
    bundled data read from another install) finds its finished stages."""
    first, moved = tmp_path / "checkout-a" / "in.txt", tmp_path / "checkout-b" / "in.txt"
    for path in (first, moved):
        path.parent.mkdir()
        path.write_text("hi")
    calls: list[str] = []
    _pipeline(tmp_path / "run", first, calls).run()
    plan = _pipeline(tmp_path / "run", moved, calls).plan()
    assert [p.status for p in plan] == ["cached", "cached", "cached"]
    moved.write_text("changed")
    assert [p.status for p in _pipeline(tmp_path / "run", moved, calls).plan()] == [
        "pending",
        "pending",
        "pending",
    ]


def test_run_folders_keyed_by_input_paths_are_still_found(tmp_path, monkeypatch):
    """Folders an older version named by path-keyed keys stay cached (and a partial one is
    resumed in place) instead of being recomputed after the upgrade."""
    from dualview.pipeline import stages

    source = tmp_path / "in.txt"
    source.write_text("hi")
    calls: list[str] = []
    with monkeypatch.context() as old_version:
        old_version.setattr(stages, "stage_key", stages.path_keyed_stage_key)
        with pytest.raises(RuntimeError):
            _pipeline(tmp_path / "run", source, calls, fail_in="b").run()
        old_dirs = {p.stage.name: p.out_dir for p in _pipeline(tmp_path / "run", source, []).plan()}
    plan = _pipeline(tmp_path / "run", source, calls).plan()
    assert [p.status for p in plan] == ["cached", "partial", "pending"]
    assert [p.out_dir for p in plan[:2]] == [old_dirs["a"], old_dirs["b"]]
    calls.clear()
    out = _pipeline(tmp_path / "run", source, calls).run()
    assert calls == ["b", "c"]
    assert out["b"] == old_dirs["b"] and (out["b"] / "partial").exists()
    assert out["c"] != old_dirs["c"]  # a stage that never ran gets today's key
    calls.clear()
    _pipeline(tmp_path / "run", source, calls).run()
    assert calls == []


def test_evaluation_precision_enters_the_stage_key_only_when_set():
    auto = EvaluationSpec(benchmarks=["phenomena"])
    key = EvalParams.of(auto, {}).key()["evaluation"]
    assert "precision" not in key  # keys from before the field still match
    before = {k: v for k, v in auto.model_dump().items() if k != "precision"}
    newer = ("interpolate", "precision")  # rerank fields added later, keyed only when set
    before["rerank"] = {k: v for k, v in before["rerank"].items() if k not in newer}
    assert key == before  # nor do rerank.interpolate (1) and .precision (auto) at their defaults
    fp32 = EvaluationSpec(benchmarks=["phenomena"], precision="fp32")
    assert EvalParams.of(fp32, {}).key()["evaluation"]["precision"] == "fp32"
    with pytest.raises(ValueError, match="precision"):
        EvaluationSpec(benchmarks=["phenomena"], precision="fp64")
