from __future__ import annotations

import pytest

from dualview.errors import DualviewError
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
