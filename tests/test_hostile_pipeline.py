"""Hostile use of experiments, sweeps, reports and estimates (issue 35, items 8, 11, 12, 13):
a dry run validates what the run will, sweep values are strictly typed and distinct, a
single-seed arm has no standard deviation anywhere, every output names an arm the same
way, and an estimate takes finite prices and speeds only."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from rich.console import Console

from dualview.config import ConfigError
from dualview.pipeline.sweep import load_sweep, run_sweep
from dualview.report.sweep_report import report_sweep
from dualview.report.table import ConfigResult, aggregate, to_csv, to_markdown
from dualview.synth.estimate import parse_price
from tests.helpers import run_cli
from tests.test_sweep import Calls, _fake_builder

ORIG = Path(__file__).parent / "fixtures" / "synth" / "orig.jsonl"


def _experiment(tmp_path: Path, sweep: dict[str, Any] | None = None) -> Path:
    """A small experiment on the gold set (no LLM stage); with a ``sweep:`` block if given."""
    config: dict[str, Any] = {
        "name": "hostile",
        "run_dir": str(tmp_path / "run"),
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
    }
    if sweep is not None:
        config["sweep"] = sweep
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _one_error_line(result: Any) -> str:
    """The single ``error: ...`` line of a failed command (exit 2, no traceback)."""
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


# -- item 8: a dry run validates every stage's config, as the run does ----------------------


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("training.overrides.no_such_key=1", "training: no_such_key: unknown key"),
        ("training.overrides.optim.lr=fast", "training: optim.lr: Input should be a valid number"),
        (
            "mixes=[{name: A, preset: ins-dv, size: 5}]",
            "mixes: A: preset ins-dv: size must be even",
        ),
    ],
)
def test_dry_run_fails_with_the_run_s_located_error(
    tmp_path: Path, override: str, message: str
) -> None:
    path = _experiment(tmp_path)
    dry = _one_error_line(run_cli("run", str(path), "--dry-run", "--set", override))
    assert dry.startswith(f"error: {path}: ") and message in dry
    real = _one_error_line(run_cli("run", str(path), "--set", override))
    assert real == dry
    assert not (tmp_path / "run").exists()  # nothing ran before the error


def test_dry_run_of_a_sweep_validates_each_arm_s_stage_configs(tmp_path: Path) -> None:
    sweep = {"parameters": {"training.overrides.max_steps": [2, "fast"]}}
    line = _one_error_line(run_cli("run", str(_experiment(tmp_path, sweep)), "--dry-run"))
    assert "sweep arm max_steps=fast: training: max_steps: Input should be a valid integer" in line
    assert not (tmp_path / "run").exists()


# -- item 12: sweep values of a strict type, and distinct ----------------------------------


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        ({"seeds": [True, 2]}, r"sweep: seeds\.0: Input should be a valid integer"),
        ({"seeds": [1.0, 2]}, r"sweep: seeds\.0: Input should be a valid integer"),
        (
            {"parameters": {"training.overrides.max_steps": [1, 1.0]}},
            r"sweep: parameters: training\.overrides\.max_steps: 1\.0 is a float, the setting "
            "takes an integer",
        ),
        (
            {"parameters": {"training.overrides.max_steps": [True, 2]}},
            r"training\.overrides\.max_steps: true is a boolean, the setting takes an integer",
        ),
        (
            {"parameters": {"training.overrides.compile": [0, 1]}},
            r"training\.overrides\.compile: 0 is an integer, the setting takes a boolean",
        ),
        (
            {"parameters": {"evaluation.batch_size": [4, 4.0]}},
            r"evaluation\.batch_size: 4\.0 is a float",
        ),
        (
            {"parameters": {"training.overrides.optim.lr": [1, 1.0]}},
            r"sweep: parameters: training\.overrides\.optim\.lr: 1 and 1\.0: the same settings",
        ),
        (
            {
                "groups": {
                    "g": {
                        "a": {"training.overrides.max_steps": 3},
                        "b": {"training.overrides.max_steps": 3},
                    }
                }
            },
            r"sweep: groups: g: a and b: the same settings",
        ),
    ],
)
def test_sweep_values_are_strict_and_distinct(
    tmp_path: Path, sweep: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        load_sweep(_experiment(tmp_path, sweep))
    assert str(err.value).startswith(str(tmp_path / "exp.yaml"))


def test_sweep_takes_yaml_exponent_strings_and_ints_for_floats(tmp_path: Path) -> None:
    # YAML 1.1 reads 1e-5 as a string: the setting's number, not a type error
    sweep = {"parameters": {"training.overrides.optim.lr": ["1e-5", 2, 3.5e-5]}, "seeds": [1, 2]}
    loaded = load_sweep(_experiment(tmp_path, sweep))
    assert loaded is not None and len(loaded.runs) == 6


# -- item 11: a single-seed arm has no sd; every output names each arm the same way ----------


def test_a_single_run_has_no_standard_deviation_in_csv_or_markdown() -> None:
    two = [[ConfigResult("A", {"m": 1.0})], [ConfigResult("A", {"m": 3.0})]]
    one = [[ConfigResult("B", {"m": 5.0})]]
    rows = aggregate(two) + aggregate(one)
    table = list(csv.reader(io.StringIO(to_csv(rows))))
    assert table[0] == ["configuration", "m", "m (sd)"]
    assert table[1] == ["A", "2.00", "1.41"] and table[2] == ["B", "5.00", ""]
    markdown = to_markdown(rows)
    assert "| A | 2.00 ± 1.41 |" in markdown and "| B | **5.00** |" in markdown


def _terminal_rows(text: str) -> list[str]:
    """First-column names of a printed table, a folded name joined back."""
    names: list[str] = []
    for line in text.splitlines():
        cells = line.split("│")
        if len(cells) < 3:
            continue
        if cells[2].strip():
            names.append(cells[1].strip())
        elif names:
            names[-1] += cells[1].strip()
    return names


@pytest.mark.parametrize("columns", ["200", "44"])
def test_sweep_report_of_a_single_seed_arm_agrees_everywhere(tmp_path: Path, columns: str) -> None:
    spec = {"parameters": {"training.overrides.data.view_policy": ["together", "separate"]}}
    sweep = load_sweep(_experiment(tmp_path, {**spec, "seeds": [1, 2]}))
    assert sweep is not None
    run_sweep(sweep, Console(file=io.StringIO()), build=_fake_builder(Calls()))
    shutil.rmtree(tmp_path / "run" / "view_policy=separate" / "seed=2")  # one seed left
    files = report_sweep(tmp_path / "run")
    table = {row[0]: row[1:] for row in csv.reader(io.StringIO(files.csv.read_text()))}
    single = "Ins-orig [view_policy=separate]"
    assert table[single][1] == ""  # no sd of one run
    assert table["Ins-orig [view_policy=together]"][1] not in ("", "-")
    markdown = files.markdown.read_text()
    assert f"| {single} | {table[single][0]} |" in markdown
    result = run_cli("report", str(tmp_path / "run"), env={"COLUMNS": columns})
    assert result.returncode == 0, result.stderr[-2000:]
    names = [n.replace(" ", "") for n in _terminal_rows(result.stdout)]
    expected = [n.replace(" ", "") for n in table if n not in ("configuration", "best")]
    assert names == expected  # every arm's full name, as in report.csv and report.md


# -- item 13: finite prices and speeds only, checked where the options are parsed -----------


@pytest.mark.parametrize("price", ["nan,inf", "1e400,1", "inf,1", "1,nan"])
def test_price_must_be_two_finite_non_negative_numbers(price: str) -> None:
    with pytest.raises(ConfigError, match="finite numbers >= 0"):
        parse_price(price)


@pytest.mark.parametrize(
    "flags",
    [
        ["--price-per-mtok", "nan,inf"],
        ["--price-per-mtok", "1e400,1"],
        ["--server-tokens-per-s", "nan"],
        ["--server-tokens-per-s", "-5"],
        ["--server-tokens-per-s", "1e400"],
    ],
)
def test_estimate_refuses_non_finite_figures(tmp_path: Path, flags: list[str]) -> None:
    out = tmp_path / "dv.jsonl"
    result = run_cli("reverse", str(ORIG), "-o", str(out), "--llm-backend", "openai",
                     "--model", "none", "--base-url", "http://127.0.0.1:9/v1", "--estimate",
                     *flags)  # fmt: skip
    line = _one_error_line(result)
    assert line.startswith(f"error: {flags[0]} ") and "finite" in line
    assert "nan" not in result.stdout and "inf" not in result.stdout
    assert list(tmp_path.iterdir()) == []


def test_run_dry_run_refuses_a_nan_speed_before_anything(tmp_path: Path) -> None:
    path = _experiment(tmp_path)
    result = run_cli("run", str(path), "--dry-run", "--server-tokens-per-s", "nan")
    assert (
        _one_error_line(result)
        == "error: --server-tokens-per-s 'nan': expected a finite number > 0"
    )
