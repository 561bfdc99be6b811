from __future__ import annotations

import json

from dualview.data.jsonl import iter_records
from tests.conftest import FIXTURES
from tests.helpers import make_record, run_cli


def _broken_file(tmp_path):
    path = tmp_path / "in.jsonl"
    rows = [json.dumps(make_record(f"r{i}").to_json_dict()) for i in range(4)]
    rows[2] = '{"id": "r2", "view": "orig", "query": "q"'  # line 3 is cut short
    path.write_text("\n".join(rows) + "\n")
    return path


def test_convert_promptriever_via_cli(tmp_path):
    out = tmp_path / "out.jsonl"
    result = run_cli(
        "data",
        "convert",
        "--from",
        "promptriever",
        str(FIXTURES / "formats/promptriever.jsonl"),
        str(out),
    )
    assert result.returncode == 0, result.stderr
    orig, plain = list(iter_records(out))
    assert (orig.view, orig.query) == ("orig", "what causes tides in the ocean")
    assert orig.instruction.endswith("technical accounts with equations are not relevant.")
    assert [d.id for d in orig.positives] == ["7001"]
    assert len(orig.instruction_negatives) == 2
    assert orig.instruction_negatives[1].id == "7005"
    assert plain.view == "plain" and plain.meta["counterpart_id"] == orig.id


def test_broken_line_gives_located_error_and_exit_2(tmp_path):
    path = _broken_file(tmp_path)
    out = tmp_path / "out.jsonl"
    result = run_cli("data", "convert", str(path), str(out))
    assert result.returncode == 2
    assert f"{path}:3: json:" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()
    validate = run_cli("data", "validate", str(path))
    assert validate.returncode == 2 and f"{path}:3:" in validate.stderr


def test_zero_width_query_fails_validate_with_located_error(tmp_path):
    good = make_record("a").to_json_dict()
    bad = make_record("b").to_json_dict()
    bad["query"] = "\u200b\u200b"
    path = tmp_path / "zw.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (good, bad)) + "\n", encoding="utf-8")
    result = run_cli("data", "validate", str(path))
    assert result.returncode == 2
    assert f"{path}:2:" in result.stderr and "query" in result.stderr
    assert "Traceback" not in result.stderr


def test_skip_invalid_writes_rejects(tmp_path):
    path = _broken_file(tmp_path)
    out = tmp_path / "out.jsonl"
    rejects = tmp_path / "rejects.jsonl"
    result = run_cli(
        "data", "convert", "--skip-invalid", "--rejects-path", str(rejects), str(path), str(out)
    )
    assert result.returncode == 0, result.stderr
    assert [r.id for r in iter_records(out)] == ["r0", "r1", "r3"]
    (entry,) = [json.loads(x) for x in rejects.read_text().splitlines()]
    assert entry["line"] == 3 and entry["field"] == "json" and "invalid JSON" in entry["reason"]
    assert "1 invalid line(s) skipped" in result.stderr


def test_stats_on_shared_msmarco(msmarco_dir):
    result = run_cli("data", "stats", "--from", "beir", str(msmarco_dir), "--json")
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["records"] == 1743
    assert stats["views"] == {"plain": 1743}
    assert stats["duplicate_record_ids"] == 0
    table = run_cli("data", "stats", "--from", "beir", str(msmarco_dir))
    assert "1,743" in table.stdout


def test_unknown_format_is_a_clear_error(tmp_path):
    result = run_cli("data", "convert", "--from", "nope", "a", str(tmp_path / "b"))
    assert result.returncode == 2 and "unknown input format 'nope'" in result.stderr
