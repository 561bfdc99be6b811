"""The Python API (`dualview.api`): lazy top-level names, objects in and out, nothing written
unless asked. The whole flow runs in ``tests/test_api_docs.py`` (the examples of docs/api.md)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import dualview
from dualview.data.schema import Record
from dualview.errors import ConfigError, DataError, DualviewError
from tests.conftest import FIXTURES

ORIG = FIXTURES / "synth" / "orig.jsonl"
PAIRED = f"paired={FIXTURES / 'eval' / 'paired'}"


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.train_tiny import make_tiny_encoder

    return str(make_tiny_encoder(tmp_path_factory.mktemp("api") / "tiny", dropout=0.0))


@pytest.fixture(scope="module")
def in_memory(tiny: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[object, list[str]]:
    """`evaluate` without ``out``, run in an empty current folder: (results, files left)."""
    folder = tmp_path_factory.mktemp("cwd")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        results = dualview.evaluate(tiny, PAIRED)
    return results, _files(folder)


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The process's temporary folder, empty: what the API leaves there can be seen."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_import_is_lazy_and_the_api_is_at_the_top_level() -> None:
    code = (
        "import sys, dualview\n"
        "assert 'torch' not in sys.modules and 'dualview.api' not in sys.modules\n"
        "names = [n for n in dualview.API if n in dir(dualview)]\n"
        "print(len(names), callable(dualview.synthesize), 'dualview.api' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(len(dualview.API)), "True", "True"]
    for name in ("synthesize", "train", "evaluate", "mine", "run_experiment", "report"):
        assert name in dualview.API


def test_train_and_report_are_their_subpackages_and_the_api_functions(monkeypatch) -> None:
    import dualview.api
    import dualview.report.table
    import dualview.train.config

    assert dualview.train.config.TrainConfig.__name__ == "TrainConfig"  # still the package
    assert dualview.report.table.__name__ == "dualview.report.table"
    assert "records" in inspect.signature(dualview.train).parameters
    monkeypatch.setattr(dualview.api, "train", lambda *a, **k: ("train", a, k))
    monkeypatch.setattr(dualview.api, "report", lambda *a, **k: ("report", a, k))
    assert dualview.train("c", records=[]) == ("train", ("c",), {"records": []})
    assert dualview.report("run") == ("report", ("run",), {})


def test_synthesize_takes_dicts_returns_records_and_keeps_nothing(private_tmp, tmp_path) -> None:
    rows = [json.loads(line) for line in ORIG.read_text().splitlines()[:4]]
    result = dualview.synthesize(rows, backend="stub")
    assert result.out is None and _files(private_tmp) == []  # nothing left behind
    assert [r.parent_id for r in result.records] == [row["id"] for row in rows]
    assert {r.view for r in result.records} == {"dv"} and result.stats["records_out"] == 4
    kept = dualview.synthesize([Record(**row) for row in rows], "stub", out=tmp_path / "dv.jsonl")
    assert kept.out == tmp_path / "dv.jsonl" and kept.out.is_file()
    assert (tmp_path / "dv.jsonl.stats.json").is_file()
    assert [r.instruction for r in kept.records] == [r.instruction for r in result.records]
    first = dualview.synthesize(ORIG, backend="stub", limit=2)
    assert [r.parent_id for r in first.records] == [row["id"] for row in rows[:2]]


def test_bad_records_backend_task_and_settings_are_one_line_errors() -> None:
    good = json.loads(ORIG.read_text().splitlines()[0])
    with pytest.raises(DataError, match=r"^records:2: query: "):
        dualview.synthesize([good, {**good, "id": "x", "query": ""}], backend="stub")
    with pytest.raises(ConfigError, match=r"backend 'nope': unknown; choose from .*stub"):
        dualview.synthesize(ORIG, backend="nope")
    with pytest.raises(ConfigError, match="task 'nope': unknown"):
        dualview.synthesize(ORIG, backend="stub", task="nope")
    with pytest.raises(ConfigError, match=r"^settings: unknown \['nope'\]; fields: query_"):
        dualview.evaluate("embedded:minilm", PAIRED, settings={"nope": 1})
    with pytest.raises(DualviewError, match=r"--reranker-precision: one of auto, .*not 'int4'"):
        dualview.evaluate("embedded:minilm", PAIRED, rerankers=[], reranker_precision="int4")


def test_evaluate_returns_per_query_results_and_writes_only_with_out(
    tiny, in_memory, tmp_path
) -> None:
    results, left = in_memory
    assert left == [] and results.files == [] and results.out is None
    (model,) = results.models
    per_query = results.per_query[model]["paired"]
    values = per_query["p-MRR"]  # one per pair and direction of the fixture's two pairs
    assert {key.split("/")[0] for key in values} == {"p1", "p2"} and len(values) == 4
    mean = sum(values.values()) / len(values)
    assert results.metrics[model]["paired"]["p-MRR"] == pytest.approx(mean)
    written = dualview.evaluate([tiny], [PAIRED], out=tmp_path / "eval")
    (path,) = written.files
    assert json.loads(path.read_text())["per_query"] == per_query
    assert (tmp_path / "eval" / "summary.md").read_text().strip() == written.table()
    first = dualview.evaluate(tiny, PAIRED, limit=1).per_query[model]["paired"]["p-MRR"]
    assert {key.split("/")[0] for key in first} == {"p1"}  # the first pair only
    rest = dualview.evaluate(tiny, PAIRED, skip=1).per_query[model]["paired"]["p-MRR"]
    assert {key.split("/")[0] for key in rest} == {"p2"}  # all but the first pair


def test_train_checks_the_config_before_writing_records(tmp_path) -> None:
    config = {"output_dir": str(tmp_path / "run"), "batch_size": 0}
    with pytest.raises(ConfigError, match=r"^TrainConfig: batch_size: "):
        dualview.train(config, dualview.read_records(ORIG))
    assert not (tmp_path / "run").exists()


def test_run_experiment_dry_run_plans_from_a_dict(tmp_path) -> None:
    experiment = {
        "name": "api",
        "run_dir": str(tmp_path / "run"),
        "instructions": {"path": str(ORIG)},
        "synthesis": {"enabled": False},
        "mixes": [{"name": "Ins-orig", "preset": "ins-orig", "size": 8}],
        "evaluation": {"benchmarks": [PAIRED]},
    }
    run = dualview.run_experiment(experiment, dry_run=True, quiet=True)
    assert run.report is None and run.run_dir == tmp_path / "run"
    assert {"data", "mix-Ins-orig", "train-Ins-orig", "eval", "report"} <= set(run.stages)
    assert not (tmp_path / "run").exists()  # planned, not run
    with pytest.raises(ConfigError, match=r"^Experiment: mixes: "):
        dualview.run_experiment({**experiment, "mixes": []}, dry_run=True, quiet=True)


def test_report_needs_results_written_to_a_folder(in_memory) -> None:
    with pytest.raises(ConfigError, match=r"evaluate\(\.\.\., out=FOLDER\) first"):
        dualview.report(in_memory[0])
