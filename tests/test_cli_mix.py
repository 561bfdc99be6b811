"""``dualview mix`` / ``dualview export`` from the command line, and the export formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualview.data.export import export, iter_exported
from dualview.data.formats import parquet
from dualview.data.jsonl import iter_records
from dualview.data.mix import build_mix, preset_config
from tests.helpers import run_cli
from tests.test_data_mix import N_WITH_DV, generated_set


@pytest.fixture
def inputs(tmp_path: Path) -> list[str]:
    return [str(p) for p in generated_set(tmp_path / "in").values()]


def test_cli_mix_preset_writes_file_and_manifest(inputs, tmp_path):
    out = tmp_path / "train.jsonl"
    proc = run_cli(
        "mix", *inputs, "--preset", "ins-dv", "--size", "24", "--seed", "3", "-o", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((tmp_path / "train.jsonl.manifest.json").read_text())
    assert manifest["counts"] == {"dv": 12, "orig": 12}
    assert manifest["seed"] == 3
    assert sum(1 for _ in iter_records(out)) == 24


def test_cli_mix_custom_yaml_with_override(inputs, tmp_path):
    spec = tmp_path / "mix.yaml"
    spec.write_text(
        "name: mine\nsize: 12\nparts:\n  - {view: orig, share: 1}\n  - {view: plain, share: 1}\n"
    )
    out = tmp_path / "train.jsonl"
    proc = run_cli(
        "mix", *inputs, "--config", str(spec), "--set", "negatives.total=4", "-o", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    records = list(iter_records(out))
    assert len(records) == 12 and max(len(r.negatives()) for r in records) == 4


def test_cli_mix_not_enough_dv_is_one_line_exit_2(inputs, tmp_path):
    proc = run_cli(
        "mix", *inputs, "--preset", "all-dv", "--size", "90", "-o", str(tmp_path / "t.jsonl")
    )
    assert proc.returncode == 2
    assert f"{45 - N_WITH_DV} missing" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_cli_mix_unknown_config_key_exit_2(inputs, tmp_path):
    spec = tmp_path / "mix.yaml"
    spec.write_text("size: 4\nparts: [{view: orig, share: 1}]\nsead: 3\n")
    proc = run_cli("mix", *inputs, "--config", str(spec), "-o", str(tmp_path / "t.jsonl"))
    assert proc.returncode == 2 and "sead: unknown key" in proc.stderr


@pytest.fixture
def mixed(inputs, tmp_path) -> Path:
    out = tmp_path / "train.jsonl"
    build_mix(inputs, preset_config("all-dv", 20, seed=1), out)
    return out


def test_export_parquet_round_trips_and_carries_manifest(mixed, tmp_path):
    out = tmp_path / "train.parquet"
    result = export(mixed, out, "parquet")
    assert result.rows == 20
    assert list(parquet.read(out)) == list(iter_records(mixed))
    assert (tmp_path / "train.parquet.manifest.json").exists()


def test_export_st_columns_have_fixed_negative_count(mixed, tmp_path):
    minimum = min(len(r.negatives()) for r in iter_records(mixed))
    result = export(mixed, tmp_path / "st.parquet", "st-parquet")
    rows = list(iter_exported(tmp_path / "st.parquet"))
    assert result.negative_columns == minimum and len(rows) == 20
    assert set(rows[0]) == {"anchor", "positive", *(f"negative_{i}" for i in range(1, minimum + 1))}
    first = next(iter(iter_records(mixed)))
    assert rows[0]["anchor"] == f"{first.query} {first.instruction}"
    assert rows[0]["negative_1"] == first.instruction_negatives[0].text


def test_export_st_with_explicit_count_skips_short_rows(mixed, tmp_path):
    counts = [len(r.negatives()) for r in iter_records(mixed)]
    result = export(mixed, tmp_path / "st.parquet", "st-parquet", negatives=30)
    assert result.skipped == sum(c < 30 for c in counts)
    assert result.rows == sum(c >= 30 for c in counts)


def test_export_hf_datasets_loads_back(mixed, tmp_path):
    from datasets import load_from_disk

    export(mixed, tmp_path / "hf", "hf")
    dataset = load_from_disk(str(tmp_path / "hf"))
    assert len(dataset) == 20 and dataset[0]["id"] == next(iter(iter_records(mixed))).id
    assert (tmp_path / "hf" / "manifest.json").exists()
    export(mixed, tmp_path / "hf-st", "hf-st")
    assert "anchor" in load_from_disk(str(tmp_path / "hf-st")).column_names


def test_cli_export(mixed, tmp_path):
    proc = run_cli("export", str(mixed), str(tmp_path / "o.parquet"), "--to", "st-parquet")
    assert proc.returncode == 0, proc.stderr
    assert len(list(iter_exported(tmp_path / "o.parquet"))) == 20
