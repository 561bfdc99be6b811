from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualview.data.jsonl import RejectLog, iter_records
from dualview.errors import DataError
from dualview.io.append import AppendJsonlWriter, repair_torn_tail
from dualview.io.atomic import AtomicJsonlWriter, write_jsonl
from dualview.io.files import count_lines
from tests.helpers import make_record


def _write_with_bad_line(path: Path) -> None:
    good = [make_record(f"r{i}").to_json_dict() for i in range(4)]
    lines = [json.dumps(good[0]), json.dumps(good[1]), "{not json", json.dumps(good[2])]
    bad_field = dict(good[3])
    bad_field["view"] = "weird"
    lines.append(json.dumps(bad_field))
    path.write_text("\n".join(lines) + "\n")


def test_broken_line_is_reported_with_file_line_and_field(tmp_path):
    path = tmp_path / "data.jsonl"
    _write_with_bad_line(path)
    with pytest.raises(DataError) as info:
        list(iter_records(path))
    assert str(info.value).startswith(f"{path}:3: json: invalid JSON")


def test_field_errors_name_the_field(tmp_path):
    path = tmp_path / "data.jsonl"
    row = make_record().to_json_dict()
    row["positives"][0]["text"] = ""
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(DataError) as info:
        list(iter_records(path))
    assert info.value.line == 1
    assert info.value.field == "positives.0.text"


def test_skip_invalid_keeps_good_lines_and_logs_rejects(tmp_path):
    path = tmp_path / "data.jsonl"
    _write_with_bad_line(path)
    rejects = RejectLog(tmp_path / "rejects.jsonl")
    records = list(iter_records(path, skip_invalid=True, rejects=rejects))
    rejects.close()
    assert [r.id for r in records] == ["r0", "r1", "r2"]
    assert rejects.count == 2
    logged = [json.loads(line) for line in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    assert [(e["line"], e["field"]) for e in logged] == [(3, "json"), (5, "view")]
    assert logged[0]["raw"] == "{not json"


def test_atomic_writer_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.jsonl"
    write_jsonl(target, [make_record("keep")])
    with pytest.raises(RuntimeError), AtomicJsonlWriter(target) as writer:
        writer.write(make_record("new"))
        raise RuntimeError("killed")
    assert [r.id for r in iter_records(target)] == ["keep"]
    assert list(tmp_path.iterdir()) == [target]


def test_append_writer_repairs_torn_tail_and_resumes(tmp_path):
    target = tmp_path / "out.jsonl"
    with AppendJsonlWriter(target) as writer:
        writer.write({"a": 1})
        writer.write({"a": 2})
    with target.open("a") as handle:
        handle.write('{"a": 3, "partial')  # a kill mid-write
    assert repair_torn_tail(target) > 0
    with AppendJsonlWriter(target) as writer:
        writer.write({"a": 3})
    assert [json.loads(x)["a"] for x in target.read_text().splitlines()] == [1, 2, 3]
    assert count_lines(target) == 3


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        list(iter_records(tmp_path / "nope.jsonl"))
