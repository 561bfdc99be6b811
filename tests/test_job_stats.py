"""`JobStats`: the typed ``OUT.stats.json`` of an LLM job. Files written before the model
(``fixtures/synth/job_stats``: two shards of a stub reverse run and their merge, made by the
code before it; the committed docs' stats, one from before ``rejections``) load, write back
unchanged, and merge as they did."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dualview.errors import DataError
from dualview.synth.job_stats import JobStats, Outcomes, is_job_stats, read_job_stats
from dualview.synth.merge import merge_shards
from dualview.synth.task import STATUSES

ROOT = Path(__file__).parent.parent
OLD = Path(__file__).parent / "fixtures" / "synth" / "job_stats"
COMMITTED = sorted(ROOT.glob("docs/**/*.jsonl.stats.json")) + sorted(
    ROOT.glob("docs/results/*/*.stats.json")
)


@pytest.mark.parametrize(
    "path", [*sorted(OLD.glob("*.stats.json")), *COMMITTED], ids=lambda p: p.name
)
def test_stats_files_written_before_the_model_load_and_write_back_unchanged(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    stats = read_job_stats(path)
    assert stats.to_json() == data
    assert stats.outcomes.ok == data["outcomes"]["ok"] and stats.task == data["task"]


def test_the_committed_files_include_one_from_before_rejections() -> None:
    old = [p for p in COMMITTED if "rejections" not in json.loads(p.read_text())]
    assert old and read_job_stats(old[0]).rejections is None


def test_shards_written_before_the_model_merge_as_they_did(tmp_path: Path) -> None:
    folder = tmp_path / "shards"
    shutil.copytree(OLD, folder)
    merged = merge_shards(
        tmp_path / "merged.jsonl", [folder / "part1.jsonl", folder / "part0.jsonl"]
    )
    expected = json.loads((OLD / "merged.jsonl.stats.json").read_text())
    assert merged.to_json() == expected
    written = json.loads((tmp_path / "merged.jsonl.stats.json").read_text())
    assert written == expected
    assert merged.outcomes.ok == merged.records_out == 4


def test_a_stats_file_of_another_kind_is_a_located_error(tmp_path: Path) -> None:
    shutil.copytree(OLD, tmp_path / "shards")
    stats_file = tmp_path / "shards" / "part0.jsonl.stats.json"
    stats_file.write_text(json.dumps({"task": "reverse", "units": "many"}))
    with pytest.raises(DataError, match=r"part0\.jsonl\.stats\.json: units: .*synth run"):
        merge_shards(tmp_path / "m.jsonl", [tmp_path / "shards" / "part0.jsonl"])
    review = ROOT / "docs" / "review" / "gold-test-20.stats.json"
    assert not is_job_stats(json.loads(review.read_text()))


def test_outcomes_count_every_status_in_order() -> None:
    assert tuple(Outcomes.model_fields) == STATUSES
    partial = JobStats.model_validate(
        {"task": "t", "units": 1, "records_out": 0, "llm_calls": 1, "outcomes": {"ok": 1}}
    )
    assert partial.to_json()["outcomes"] == {"ok": 1} and partial.outcomes.error == 0


def test_the_dataset_card_reads_llm_stats_through_the_model(tmp_path: Path) -> None:
    from dualview.hub.provenance import llm_stage

    shutil.copytree(OLD, tmp_path / "shards")
    stage = llm_stage(tmp_path / "shards" / "part0.jsonl")
    assert stage is not None and stage["task"] == "reverse" and stage["outcomes"]["ok"] == 2
    stats_file = tmp_path / "shards" / "part1.jsonl.stats.json"
    stats_file.write_text(json.dumps({"task": "reverse", "units": "many", "model": "m"}))
    assert llm_stage(tmp_path / "shards" / "part1.jsonl") is None  # not a job's stats
