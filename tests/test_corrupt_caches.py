"""Damaged caches (LLM cache, stage markers, embedding cache) are detected, reported once,
and the damaged entries recomputed: never a crash, never a wrong reuse."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np

from dualview.data.jsonl import iter_records
from dualview.io.atomic import write_jsonl
from dualview.pipeline.stages import DONE_FILE, Pipeline, Stage
from dualview.synth.backends.base import BackendConfig, SamplingParams
from dualview.synth.backends.openai_http import OpenAIBackend
from dualview.synth.reverse import ReverseTask
from dualview.synth.runner import Runner, RunnerConfig
from dualview.synth.testing import StubServer
from tests.test_synth_adversarial import records


def synth(server: StubServer, source: Path, out: Path) -> dict:
    task = ReverseTask()
    backend = OpenAIBackend(BackendConfig(kind="openai", model="stub", base_url=server.base_url))
    runner = Runner(task, backend, SamplingParams(), RunnerConfig(concurrency=2))
    return runner.run(lambda: task.units(iter_records(source)), out)


def test_damaged_llm_cache_lines_are_redone_and_reported_once(tmp_path, capsys) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_jsonl(source, records(8))
    with StubServer() as server:
        synth(server, source, out)
        reference = out.read_bytes()
        cache = tmp_path / "out.jsonl.cache.jsonl"
        lines = cache.read_bytes().splitlines(keepends=True)
        damaged = [
            b"\x00\xff garbage that is not JSON\n",  # instead of line 0
            b'{"key": "%s", "outcome": {"status": 3}}\n' % json.loads(lines[1])["key"].encode(),
            b'["a list", "not an entry"]\n',  # instead of line 2
        ]
        torn = lines[-1][: len(lines[-1]) // 2]  # a kill mid-write of the last line
        cache.write_bytes(b"".join(damaged + lines[3:-1]) + torn)
        out.unlink()
        capsys.readouterr()
        before = server.requests
        stats = synth(server, source, out)
        redone = server.requests - before
    assert out.read_bytes() == reference  # same records, nothing reused wrongly
    assert redone == 4 and stats.this_run_units == 4  # 3 damaged + 1 torn, nothing more
    err = capsys.readouterr().err
    assert err.count("damaged line(s) ignored") == 1, err
    keys = [json.loads(line)["key"] for line in cache.read_bytes().splitlines()[3:]]
    assert len(keys) == len(set(keys)) == 8


def test_a_damaged_stage_marker_reruns_the_stage(tmp_path, capsys) -> None:
    calls = []

    def work(out: Path, _: dict) -> dict:
        calls.append(out)
        (out / "result.txt").write_text("done\n")
        return {"n": len(calls)}

    pipeline = Pipeline(tmp_path / "run", [Stage("work", work, params={"a": 1})])
    (stage_dir,) = pipeline.run().values()
    assert len(calls) == 1
    pipeline.run()
    assert len(calls) == 1  # cached
    for garbage in (b'{"key": "trunc', b"\xff\xfe", b"[1, 2]", b'{"key": "another stage"}'):
        (stage_dir / DONE_FILE).write_bytes(garbage)
        pipeline.run()
    assert len(calls) == 5  # each damaged marker: the stage ran again, no crash
    assert json.loads((stage_dir / DONE_FILE).read_text())["n"] == 5
    err = capsys.readouterr().err
    assert err.count("damaged stage marker removed") == 1  # reported once per process


def test_a_damaged_embedding_cache_is_rebuilt_and_bad_vectors_recomputed(
    tmp_path, capsys, monkeypatch
):
    from dualview.retrieval.encode import EmbeddingCache, Encoder
    from tests.train_tiny import make_tiny_encoder

    monkeypatch.setenv("DUALVIEW_CACHE", str(tmp_path / "cache"))  # this test's database only

    tiny = make_tiny_encoder(tmp_path / "tiny")
    texts = ["first text", "second text", "third one"]
    fresh = Encoder(str(tiny), cache=False, show_progress=False).encode(texts)
    encoder = Encoder(str(tiny), show_progress=False)
    db = encoder.cache.path
    encoder.encode(texts)
    encoder.cache.close()

    # A wrong-size vector in the database: ignored and recomputed.
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE emb SET vec = ?", (b"\x00\x01\x02",))
    again = Encoder(str(tiny), show_progress=False)
    np.testing.assert_allclose(again.encode(texts), fresh, rtol=1e-5, atol=1e-6)
    again.cache.close()
    assert "damaged entries ignored and recomputed" in capsys.readouterr().err

    # A file that is no database at all: moved aside, started afresh.
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"this is not a sqlite database" * 100)
    cache = EmbeddingCache(db.stem, root=db.parent.parent)
    assert len(cache) == 0 and Path(f"{db}.damaged").exists()
    cache.close()
    rebuilt = Encoder(str(tiny), show_progress=False)
    np.testing.assert_allclose(rebuilt.encode(texts), fresh, rtol=1e-5, atol=1e-6)
    assert "damaged embedding cache" in capsys.readouterr().err
