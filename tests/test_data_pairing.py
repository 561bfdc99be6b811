"""One orig/dv pairing rule (`dualview.data.pairing`) for mix, verify, export, bench, review."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualview.data.pairing import ExtraDvError, pair_views, read_pairs
from dualview.eval.export import dual_view_pairs
from dualview.io.atomic import write_jsonl
from dualview.pipeline.build import write_verify_units
from dualview.synth.verify import group_units
from tests.helpers import make_record, run_cli


def _records() -> list:
    """o1 with two dv records (line 2 and line 4 of the file), o2 with one, one orphan."""
    return [
        make_record("o1", query="what causes tides"),
        make_record("o1-dv-a", "dv", parent_id="o1", instruction="for physicists"),
        make_record("o2", query="why is the sky blue"),
        make_record("o1-dv-b", "dv", parent_id="o1", instruction="for sailors"),
        make_record("o2-dv", "dv", parent_id="o2"),
        make_record("lost-dv", "dv", parent_id="nobody"),
    ]


def test_pairs_follow_the_orig_order_and_orphans_are_counted() -> None:
    records = [r for r in _records() if r.id != "o1-dv-b"]
    pairing = pair_views(records)
    assert [(o.id, d.id) for o, d in pairing.pairs] == [("o1", "o1-dv-a"), ("o2", "o2-dv")]
    assert [r.id for r in pairing.orphans] == ["lost-dv"]
    assert pairing.summary()["dv_without_orig"] == 1


def test_a_second_dv_is_an_error_naming_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    write_jsonl(path, _records())
    with pytest.raises(ExtraDvError) as error:
        read_pairs([path])
    message = str(error.value)
    assert f"{path}:2" in message and f"{path}:4" in message and "'o1'" in message


@pytest.mark.parametrize(("policy", "kept"), [("first", "o1-dv-a"), ("last", "o1-dv-b")])
def test_an_explicit_policy_picks_one_and_reports_the_other(policy: str, kept: str) -> None:
    pairing = pair_views(_records(), policy)  # type: ignore[arg-type]
    assert pairing.dv_of["o1"].id == kept
    assert len(pairing.extra) == 1 and pairing.summary()["extra_dv_policy"] == policy
    assert [d.id for _, d in dual_view_pairs(_records(), policy)] == [kept, "o2-dv"]  # type: ignore[arg-type]


def test_mix_stops_on_two_dvs_for_one_orig_and_the_option_chooses(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    write_jsonl(path, _records())
    out = tmp_path / "mix.jsonl"
    args = ["mix", str(path), "-o", str(out), "--preset", "ins-dv", "--size", "4"]
    done = run_cli(*args)
    assert done.returncode == 2, done.stderr
    assert f"{path}:2" in done.stderr and f"{path}:4" in done.stderr
    assert not out.exists()
    done = run_cli(*args, "--extra-dv", "last")
    assert done.returncode == 0, done.stderr
    ids = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    assert "o1-dv-b" in ids and "o1-dv-a" not in ids
    manifest = json.loads((tmp_path / "mix.jsonl.manifest.json").read_text())
    assert manifest["eligibility"]["dv_extra_set_aside"] == 1
    assert manifest["eligibility"]["extra_dv_policy"] == "last"


def test_verify_units_pair_by_the_same_rule_as_mix(tmp_path: Path) -> None:
    """The pipeline's verify units and the mix keep the same dv; without a choice, both stop."""
    orig_file, dv_file = tmp_path / "orig.jsonl", tmp_path / "dv.jsonl"
    records = _records()
    write_jsonl(orig_file, [r for r in records if r.view == "orig"])
    write_jsonl(dv_file, [r for r in records if r.view == "dv"])
    with pytest.raises(ExtraDvError) as error:
        write_verify_units(orig_file, dv_file, tmp_path / "units.jsonl")
    assert f"{dv_file}:1" in str(error.value) and f"{dv_file}:2" in str(error.value)
    write_verify_units(orig_file, dv_file, tmp_path / "units.jsonl", "first")
    units = [json.loads(line)["id"] for line in (tmp_path / "units.jsonl").read_text().splitlines()]
    assert units == ["o1", "o1-dv-a", "o2", "o2-dv"]


def test_verify_cli_units_refuse_a_second_dv_of_the_same_orig() -> None:
    records = _records()
    unit = [records[0], records[1], records[3]]  # o1, o1-dv-a, o1-dv-b in a row
    with pytest.raises(ExtraDvError, match=r"o1-dv-a.*o1-dv-b"):
        list(group_units(unit))
    assert [len(u) for u in group_units(records[:3])] == [2, 1]
