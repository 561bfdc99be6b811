"""Progress in logs: outside a terminal, long work prints plain periodic lines (rate, ETA);
``DUALVIEW_NO_PROGRESS=1`` silences them; eval's and mine's library entry points report.

pytest's captured stderr is not a terminal, so `dualview.progress` is in its ``lines`` mode
here once ``DUALVIEW_NO_PROGRESS`` (set for the suite by conftest) is removed.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from dualview import progress as progress_module
from dualview.errors import DualviewError
from dualview.eval.run import evaluate
from dualview.progress import make_progress, track
from dualview.retrieval.mine import MineConfig, mine_file
from dualview.synth.reverse import ReverseTask
from dualview.synth.testing import StubServer
from tests.test_synth_runner import FIXTURE as SYNTH_FIXTURE
from tests.test_synth_runner import run_task
from tests.train_tiny import make_tiny_encoder

FIX = Path(__file__).resolve().parent / "fixtures" / "eval"
LINE = re.compile(
    r"^(?P<what>[^:]+): (?P<done>\d+)/(?P<total>\d+) \(\d+%\), "
    r"(?:[\d,.]+/s|[\d.]+ s each), elapsed \d+:\d\d:\d\d, ETA \d+:\d\d:\d\d"
)


@pytest.fixture
def log_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """stderr as a log (not a terminal) and a line at every update."""
    monkeypatch.delenv("DUALVIEW_NO_PROGRESS", raising=False)
    monkeypatch.setenv("DUALVIEW_PROGRESS_INTERVAL", "0")


def progress_lines(err: str, others: bool = False) -> list[re.Match]:
    """Our progress lines in ``err``; ``others``: Hugging Face's own bars may be there too
    (a library call, not the CLI, which turns them off in logs: `tests/test_progress.py`)."""
    if not others:
        assert "\r" not in err and "\x1b" not in err  # plain lines: no redraws, no colours
    return [m for m in map(LINE.match, err.split("\n")) if m]


def test_a_loop_prints_plain_lines_with_rate_and_eta(log_lines, capsys) -> None:
    assert list(track(range(4), "counting")) == [0, 1, 2, 3]
    lines = progress_lines(capsys.readouterr().err)
    assert [(m["what"], m["done"], m["total"]) for m in lines] == [
        ("counting", str(i), "4") for i in range(1, 5)
    ]


def test_lines_come_at_most_once_per_interval_with_the_right_eta(capsys) -> None:
    """A fake clock: 10 items at 2 s each, a 5 s interval -> a line every third item."""
    now = [0.0]
    progress = progress_module.LineProgress(interval=5.0, clock=lambda: now[0])
    with progress:
        task = progress.add_task("work", total=10, status="")
        for _ in range(10):
            now[0] += 2.0
            progress.advance(task)
    shown = capsys.readouterr().err.splitlines()
    assert shown[0] == "work: 3/10 (30%), 2.0 s each, elapsed 0:00:06, ETA 0:00:14"
    assert len(shown) == 3 + 1  # at 6, 12, 18 s, and the last line at the end
    assert shown[-1].startswith("work: 10/10 (100%)") and shown[-1].endswith("ETA 0:00:00")


def test_a_resumed_task_counts_only_this_runs_work_in_its_rate() -> None:
    """The trainer starts its bar at the resumed step: the rate is this run's steps only."""
    now = [0.0]
    progress = progress_module.LineProgress(interval=0.0, clock=lambda: now[0])
    task = progress.add_task("training", total=1000, status="")
    progress.update(task, completed=900)
    now[0] = 50.0
    progress.update(task, advance=50, status="loss 0.5")
    line = progress.line(progress.tasks[task], now[0])
    assert line == ("training: 950/1000 (95%), 1.0/s, elapsed 0:00:50, ETA 0:00:50, loss 0.5")


def test_no_progress_prints_nothing(monkeypatch, capsys) -> None:
    monkeypatch.setenv("DUALVIEW_NO_PROGRESS", "1")
    monkeypatch.setenv("DUALVIEW_PROGRESS_INTERVAL", "0")
    assert list(track(range(3), "counting")) == [0, 1, 2]
    with make_progress() as progress:
        task = progress.add_task("answering", total=None, status="")
        progress.update(task, advance=5)
    assert capsys.readouterr().err == ""


def test_a_bad_interval_is_one_clear_error(monkeypatch) -> None:
    monkeypatch.delenv("DUALVIEW_NO_PROGRESS", raising=False)
    monkeypatch.setenv("DUALVIEW_PROGRESS_INTERVAL", "soon")
    with pytest.raises(DualviewError, match="DUALVIEW_PROGRESS_INTERVAL: 'soon'"):
        list(track(range(2), "counting"))


def test_evaluate_reports_encoding_and_search(log_lines, tmp_path: Path, capsys) -> None:
    model = make_tiny_encoder(tmp_path / "tiny")
    evaluate([str(model)], [f"beir={FIX / 'beir'}"], tmp_path / "out", cache=False)
    lines = progress_lines(capsys.readouterr().err, others=True)
    done = {m["what"]: (m["done"], m["total"]) for m in lines}
    corpus = sum(1 for _ in (FIX / "beir" / "corpus.jsonl").open())
    assert done["documents"] == (str(corpus), str(corpus))
    assert {"queries", "searching"} <= set(done)


class HashEncoder:
    """Deterministic vectors from text hashes: mining without a model."""

    fingerprint = "hash"

    def encode(self, texts, prompt=None, description="encoding"):
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8) for t in texts]
        vectors = np.asarray(rows, dtype=np.float32).reshape(len(texts), -1) - 128.0
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_mine_reports_the_records_it_mines(log_lines, tmp_path: Path, capsys) -> None:
    docs = [{"id": f"d{i}", "title": "", "text": f"passage number {i}"} for i in range(8)]
    records = [
        {"id": f"r{i}", "parent_id": None, "view": "plain", "query": f"question {i}",
         "instruction": "", "positives": [docs[i]], "instruction_negatives": [],
         "hard_negatives": []}
        for i in range(5)
    ]  # fmt: skip
    source = tmp_path / "records.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d["id"], "text": d["text"]}) + "\n" for d in docs))
    config = MineConfig(num_negatives=2, margin=None, records_per_chunk=2)
    mine_file(source, tmp_path / "mined.jsonl", config, corpus=corpus, encoder=HashEncoder())
    mining = [(m["done"], m["total"]) for m in progress_lines(capsys.readouterr().err)
              if m["what"] == "mining"]  # fmt: skip
    assert mining == [("2", "5"), ("4", "5"), ("5", "5")]


def test_outside_a_terminal_datasets_bars_are_turned_off(monkeypatch) -> None:
    """`export --to hf` saved through ``datasets``, whose bars filled logs: the switch the
    CLI flips outside a terminal (`quiet_library_bars`) now covers ``datasets`` too."""
    import datasets
    from huggingface_hub.utils import enable_progress_bars
    from transformers.utils import logging as transformers_logging

    from dualview.progress import quiet_library_bars

    for name in ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS"):
        monkeypatch.delenv(name, raising=False)
    datasets.enable_progress_bars()
    try:
        quiet_library_bars()
        assert datasets.are_progress_bars_disabled()
    finally:  # process-wide switches: back as they were for the other tests
        datasets.enable_progress_bars()
        enable_progress_bars()
        transformers_logging.enable_progress_bar()


def test_a_synthesis_run_reports_its_units(log_lines, tmp_path: Path, capsys) -> None:
    """The runner's display (`make_progress`) prints lines in a log: units answered of the
    input's, with the outcome counts as status."""
    with StubServer() as server:
        run_task(ReverseTask(), server.base_url, SYNTH_FIXTURE, tmp_path / "dv.jsonl")
    lines = progress_lines(capsys.readouterr().err)
    assert lines and lines[-1]["done"] == lines[-1]["total"] == "20"
    assert all(m["what"].startswith("reverse") for m in lines)
