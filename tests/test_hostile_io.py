"""Hostile files and faults against the readers and writers (issue 35, items 1, 14, 19, 23-25).

A complete last line without its newline is data, not a torn line; readers never write; a
failed append leaves the file byte for byte as it was; every file read whole accepts a BOM
and CRLF and is capped in size; a lone surrogate escape is one located error; a ``--set``
value that is not YAML names its key.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import dualview
from dualview.config import ConfigError, apply_overrides, load_config, parse_yaml_mapping
from dualview.errors import DataError
from dualview.io import append, files
from dualview.io.append import AppendJsonlWriter, iter_appended_lines, repair_torn_tail
from dualview.io.atomic import atomic_write_json, write_jsonl
from dualview.io.files import decode_line, read_input_text, read_json_file
from dualview.review.app import create_app
from dualview.review.items import load_review_set
from dualview.review.store import make_verdict, read_verdicts
from dualview.train.config import TrainConfig
from tests.helpers import make_record
from tests.review_fixtures import write_dv_file


def _verdicts(path: Path, n: int) -> bytes:
    items = [{"item": f"it{i}", "stratum": "s", "judge": None, "expected": None} for i in range(n)]
    write_jsonl(path, [make_verdict(item, "ann", "valid", None, "") for item in items])
    return path.read_bytes()


def _main(argv: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    from dualview.cli import main

    monkeypatch.setattr(sys, "argv", ["dualview", *argv])
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- item 1: a complete last line is kept; readers never write ----------------------------


def test_review_stats_counts_a_last_verdict_without_newline_and_writes_nothing(
    tmp_path, monkeypatch, capsys
) -> None:
    path = tmp_path / "v.jsonl"
    before = _verdicts(path, 5).rstrip(b"\n")
    path.write_bytes(before)
    code, out, err = _main(["review", "stats", str(path)], monkeypatch, capsys)
    assert code == 0, err
    assert "Verdicts: 5 on 5 items" in out
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.jsonl"]  # no lock file either


def test_a_reader_skips_a_torn_last_line_and_leaves_it(tmp_path) -> None:
    path = tmp_path / "v.jsonl"
    _verdicts(path, 2)
    with path.open("ab") as handle:
        handle.write('{"item": "it2", "reviewer": "ann", "note": "caf\u00e9'.encode()[:-1])
    before = path.read_bytes()
    assert [row["item"] for row in read_verdicts(path)] == ["it0", "it1"]
    assert path.read_bytes() == before


def test_a_bad_line_that_is_not_the_torn_tail_is_still_an_error(tmp_path) -> None:
    path = tmp_path / "v.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": \n{"a": 2}\n')
    with pytest.raises(DataError, match=r"v\.jsonl:2: json: invalid JSON"):
        list(iter_appended_lines(path))
    path.write_bytes(b'{"a": 1}\n{"a": NaN}')  # complete, so not torn: strict JSON applies
    with pytest.raises(DataError, match=r"v\.jsonl:2: json: invalid JSON"):
        list(iter_appended_lines(path))


@pytest.mark.parametrize(
    ("content", "kept"),
    [
        (b'{"a": 1}\n{"a": 2}', b'{"a": 1}\n{"a": 2}\n'),  # complete: the newline is added
        (b'{"a": 1}\r\n{"a": 2}\r', b'{"a": 1}\r\n{"a": 2}\r\n'),
        (b'\xef\xbb\xbf{"a": 2}', b'\xef\xbb\xbf{"a": 2}\n'),  # one line after a BOM
        (b'{"a": 1}\n{"a": 2', b'{"a": 1}\n'),  # torn: cut
        (b'{"a": 1}\n{"a": "caf\xc3', b'{"a": 1}\n'),  # torn inside a UTF-8 character
        (b'{"a": 1}\n' + b'{"x": "' + b"y" * 10_000, b'{"a": 1}\n'),  # longer than a block
        (b'{"a": 1', b""),
    ],
)
def test_repair_cuts_only_a_torn_last_line(tmp_path, content: bytes, kept: bytes) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(content)
    assert repair_torn_tail(path) == len(content) - min(len(content), len(kept))
    assert path.read_bytes() == kept
    with AppendJsonlWriter(path) as writer:
        writer.write({"a": 3})
    assert [row["a"] for _, row in iter_appended_lines(path)][-1] == 3


def test_a_resumed_training_log_keeps_a_complete_last_step(tmp_path) -> None:
    from dualview.train.trainer import truncate_log

    path = tmp_path / "train_log.jsonl"
    path.write_bytes(b'{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5}')
    truncate_log(path, 2)
    assert [row["step"] for _, row in iter_appended_lines(path)] == [1, 2]


# -- item 23: a failed append leaves the file exactly as before ---------------------------


def _half_then_fail(code: int):
    """``os.write`` on a filling disk: half of the first call is written, then ``code``."""
    real_write = os.write
    calls = []

    def write(fd: int, data) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(code, os.strerror(code))

    return write


def _failing(code: int):
    def fail(*args) -> None:
        raise OSError(code, os.strerror(code))

    return fail


@pytest.mark.parametrize("fault", [errno.ENOSPC, errno.EIO])
@pytest.mark.parametrize("at", ["write", "fsync"])
def test_a_failed_append_leaves_the_file_as_it_was(tmp_path, monkeypatch, fault, at) -> None:
    path = tmp_path / "cache.jsonl"
    with AppendJsonlWriter(path) as writer:
        writer.write({"n": 1})
    before = path.read_bytes()
    writer = AppendJsonlWriter(path, sync_every=2)
    writer.write({"n": 2, "text": "x" * 5000})
    if at == "write":
        monkeypatch.setattr(append.os, "write", _half_then_fail(fault))
    else:
        monkeypatch.setattr(append.os, "fsync", _failing(fault))
    with pytest.raises(DataError, match=r"cache\.jsonl: write: .*previous file is unchanged"):
        writer.write({"n": 3})  # the second line: both are appended and synced together
    assert path.read_bytes() == before
    monkeypatch.undo()
    writer.close()  # nothing waits any more: closing writes nothing
    assert path.read_bytes() == before
    with AppendJsonlWriter(path) as again:
        again.write({"n": 2})
    assert [row["n"] for _, row in iter_appended_lines(path)] == [1, 2]


def test_lines_flushed_before_a_failure_stay(tmp_path, monkeypatch) -> None:
    path = tmp_path / "cache.jsonl"
    writer = AppendJsonlWriter(path, sync_every=64)
    writer.write({"n": 1})
    writer.flush()
    writer.write({"n": 2})
    monkeypatch.setattr(append.os, "write", _half_then_fail(errno.ENOSPC))
    with pytest.raises(DataError):
        writer.flush()
    monkeypatch.undo()
    writer.close()
    assert path.read_bytes() == b'{"n": 1}\n'


def test_the_review_page_on_a_full_disk_says_not_saved_and_keeps_the_file(
    tmp_path, monkeypatch
) -> None:
    data = write_dv_file(tmp_path / "dv.jsonl", {"law": 2})
    review = load_review_set(str(data), n=2, seed=0)
    client = TestClient(create_app(review, "ann"), base_url="http://127.0.0.1")
    body = {"index": 0, "item": review.items[0].id, "reviewer": "ann", "verdict": "valid"}
    assert client.post("/api/verdict", json=body).status_code == 200
    before = Path(review.verdicts).read_bytes()
    monkeypatch.setattr(append.os, "write", _half_then_fail(errno.ENOSPC))
    answer = client.post("/api/verdict", json={**body, "note": "n" * 1500})
    monkeypatch.undo()
    assert answer.status_code == 507
    assert "no space left on the device" in answer.json()["error"]
    assert Path(review.verdicts).read_bytes() == before
    assert [row["note"] for row in read_verdicts(review.verdicts)] == [""]


# -- item 24: one reader policy (BOM and CRLF) for every file read whole -----------------


def _bom_crlf(text: str) -> bytes:
    return b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode()


def test_a_reranker_description_with_bom_and_crlf_is_read(tmp_path) -> None:
    from dualview.models.reranker import RERANKER_FILE, reranker_kind

    (tmp_path / RERANKER_FILE).write_bytes(_bom_crlf('{\n  "kind": "cross_encoder"\n}\n'))
    assert reranker_kind(tmp_path) == "cross_encoder"


def test_json_and_yaml_files_with_bom_and_crlf_are_read(tmp_path) -> None:
    (tmp_path / "a.json").write_bytes(_bom_crlf('{\n  "a": [1, 2]\n}\n'))
    assert read_json_file(tmp_path / "a.json") == {"a": [1, 2]}
    config = tmp_path / "train.yaml"
    config.write_bytes(_bom_crlf("model:\n  name_or_path: m\ndata:\n  train_file: t\n"))
    loaded = load_config(TrainConfig, config, ["output_dir=o"])
    assert loaded.model.name_or_path == "m"


# Modules that read a file whole without `dualview.io.files`, each on purpose. Any other
# module reads JSON and YAML through `read_json_file` / `read_input_text` / `read_yaml`.
OWN_READERS = {
    "config.py": "the YAML reader itself (over read_input_text)",
    "lock.py": "its lock file, below the io layer",
    "pipeline/stages.py": "its stage marker: a damaged one reruns the stage",
    "train/trainer.py": "its training log, rewritten on resume",
    "train/checkpoint.py": "its checkpoint state",
    "eval/run.py": "its earlier result: an unreadable one is recomputed",
    "models/gguf.py": "its checksum stamp: an unreadable one is recomputed",
    "synth/backends/local.py": "its checksum stamp: an unreadable one is recomputed",
    "synth/bench.py": "hashes the gold split it has read",
    "cli/bench.py": "prints the Markdown it has just written",
    "review/app.py": "the page's packaged static files",
    "demo/__init__.py": "packaged data",
    "demo/starter.py": "the packaged starter configs it rewrites",
    "docgen/results_doc.py": "the documentation pages it regenerates",
}
WHOLE_READ = re.compile(r"\.read_(text|bytes)\(|json\.load\(|yaml\.(safe_)?load\(")


def test_files_read_whole_go_through_the_one_reader() -> None:
    """One reader policy (BOM, CRLF, size cap, located errors): a new whole-file read outside
    `dualview.io` fails here until it uses the shared readers or is listed with its reason."""
    root = Path(dualview.__file__).parent
    found = {
        path.relative_to(root).as_posix()
        for path in root.rglob("*.py")
        if not path.relative_to(root).as_posix().startswith("io/")
        and WHOLE_READ.search(path.read_text(encoding="utf-8"))
    }
    assert found <= set(OWN_READERS), sorted(found - set(OWN_READERS))


# -- item 25: files read whole are capped before they are read ---------------------------


def test_a_file_larger_than_the_cap_is_refused_before_reading(tmp_path, monkeypatch) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as handle:  # sparse: the size without the bytes
        handle.truncate(files.MAX_FILE_BYTES + 1)
    reads = []
    monkeypatch.setattr(files, "decode_text", lambda *a: reads.append(a) or "")
    with pytest.raises(DataError, match=r"big\.yaml: file: larger than 64 MiB"):
        read_input_text(big)
    assert reads == []
    with pytest.raises(ConfigError, match=r"^\S*big\.yaml: file: larger than 64 MiB"):
        load_config(TrainConfig, big)


def test_a_device_without_a_size_is_cut_off_at_the_cap(monkeypatch) -> None:
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 1 << 16)
    with pytest.raises(DataError, match=r"/dev/zero: file: larger than 0.0625 MiB"):
        read_json_file("/dev/zero")


# -- item 19: lone surrogate escapes are one located error everywhere ---------------------


@pytest.mark.parametrize(
    ("line", "field"),
    [
        (r'{"id": "a", "query": "x\ud800y"}', "query"),
        (r'{"id": "a", "positives": [{"text": "ok"}, {"text": "\uDC80"}]}', "positives.1.text"),
        (r'{"meta": {"\udfff": 1}}', "meta.(key)"),
        (r'{"a": "\ude00\ud83d"}', "a"),  # a pair in the wrong order is two lone ones
    ],
)
def test_a_lone_surrogate_is_named_with_its_line_and_field(line: str, field: str) -> None:
    with pytest.raises(DataError) as caught:
        decode_line(line.encode(), "in.jsonl", 7)
    assert str(caught.value).startswith(f"in.jsonl:7: {field}: lone surrogate \\u")


@pytest.mark.parametrize(
    "line", [r'{"q": "\ud83d\ude00"}', r'{"q": "\\ud800"}', '{"q": "\U0001f600"}']
)
def test_pairs_and_escaped_backslashes_are_text(line: str) -> None:
    assert decode_line(line.encode(), "in.jsonl", 1) == json.loads(line)


def test_deep_nesting_is_checked_without_recursion(tmp_path) -> None:
    deep = "[" * 900 + r'"\ud800"' + "]" * 900
    (tmp_path / "deep.json").write_text(deep)
    with pytest.raises(DataError, match=r"deep\.json: (0\.)+0: lone surrogate"):
        read_json_file(tmp_path / "deep.json")


def test_yaml_configs_refuse_lone_surrogates() -> None:
    with pytest.raises(ConfigError, match=r"^c\.yaml: model\.query_template: lone surrogate"):
        parse_yaml_mapping('model:\n  query_template: "\\ud800 {query}"\n', "c.yaml")


@pytest.mark.parametrize("command", [["data", "validate"], ["data", "stats"]])
def test_data_commands_report_the_line_of_a_lone_surrogate(
    command, tmp_path, monkeypatch, capsys
) -> None:
    path = tmp_path / "in.jsonl"
    rows = [make_record("r1"), make_record("r2", query="q \udc80 x")]
    path.write_text("".join(json.dumps(r.to_json_dict()) + "\n" for r in rows))  # escaped
    code, _, err = _main([*command, str(path)], monkeypatch, capsys)
    assert code == 2 and "Traceback" not in err
    assert err.strip() == (
        f"error: {path}:2: query: lone surrogate \\udc80 is not Unicode text (write the character)"
    )


@pytest.mark.parametrize(
    "write",
    [
        lambda p: write_jsonl(p, [{"q": "ok"}, {"q": "a \udc80"}]),
        lambda p: atomic_write_json(p, {"q": "a \udc80"}),
        lambda p: AppendJsonlWriter(p).write({"q": "a \udc80"}),
    ],
    ids=["write_jsonl", "atomic_write_json", "AppendJsonlWriter"],
)
def test_writers_refuse_a_lone_surrogate_and_keep_the_file(tmp_path, write) -> None:
    # none comes from a file (the readers refuse it); a server's reply could still hold one
    path = tmp_path / "out.jsonl"
    path.write_bytes(b'{"q": "before"}\n')
    with pytest.raises(DataError, match=r"out\.jsonl: write: lone surrogate \\udc80"):
        write(path)
    assert path.read_bytes() == b'{"q": "before"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]


# -- item 14: a --set value that is not YAML ----------------------------------------------


@pytest.mark.parametrize(
    "item", ["model.query_template=Q: {query} I: {instruction}", "name=[", "a.b={x: [}"]
)
def test_a_set_value_that_is_not_yaml_names_the_key(item: str) -> None:
    key = item.split("=")[0]
    with pytest.raises(ConfigError) as caught:
        apply_overrides({}, [item])
    message = str(caught.value)
    assert message.startswith(f"--set {key}: invalid YAML value (") and "\n" not in message
    assert item.split("=", 1)[1] not in message  # the value is not echoed (it may be secret)


def test_a_template_with_a_colon_is_set_by_quoting_it() -> None:
    item = 'model.query_template="Q: {query} I: {instruction}"'
    data = apply_overrides({}, [item])
    assert data == {"model": {"query_template": "Q: {query} I: {instruction}"}}


def test_the_cli_reports_a_bad_set_value_in_one_line(tmp_path, monkeypatch, capsys) -> None:
    config = tmp_path / "train.yaml"
    config.write_text("model:\n  name_or_path: m\ndata:\n  train_file: t\noutput_dir: o\n")
    bad = "model.query_template=Q: {query} I: {instruction}"
    code, _, err = _main(["train", str(config), "--set", bad], monkeypatch, capsys)
    assert code == 2 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("error: --set model.query_template: invalid YAML value")
