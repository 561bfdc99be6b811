"""Kill test for every stage: SIGKILL at seeded write points, rerun, compare byte for byte.

A tiny experiment (stub LLM, a random-init 2-layer encoder, a dozen records) runs once
uninterrupted: that is the reference. Then, in a fresh run folder, each stage in turn
(seed, synth, verify, mix, train, eval, report, and ``dualview mine`` on the mix) is killed
:data:`KILLS` times with SIGKILL at seeded random *fault points* (the writers'
``fault_point``: after each record, before each rename, after each checkpoint file;
``DUALVIEW_FAULT_KILL_AT=N`` makes the process kill itself at its N-th point inside the stage
named by ``DUALVIEW_FAULT_SCOPE``), resumed by the next attempt, and finally completed by
the real entry point (``python -m dualview run``). The final files must equal the
reference byte for byte (timing fields aside), with no record lost or duplicated.

Attempts fork from a server process that has imported dualview and torch once
(multiprocessing "forkserver"), so a kill point costs milliseconds, not an interpreter start.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from dualview.io.atomic import write_jsonl
from dualview.synth.testing import StubServer
from tests.conftest import FIXTURES
from tests.helpers import make_record, run_cli

KILLS = 20
PAIRED = FIXTURES / "eval" / "paired"
# Wall-clock measurements and this attempt's own bookkeeping (how much it did itself,
# whether it resumed): the only fields allowed to differ.
TIMING_KEYS = {"seconds", "wall_s", "latency_s", "started_at", "elapsed_s", "tokens_per_s",
               "tflops", "hw_tflops", "mfu", "hfu", "this_run_units", "resumed"}  # fmt: skip


def experiment(root: Path, url: str, tiny: Path) -> Path:
    plain = root / "plain.jsonl"
    write_jsonl(
        plain,
        [
            make_record(f"q{i}", view="plain", query=f"question {i} about topic {i % 3}")
            for i in range(12)
        ],
    )
    job = {"backend": {"kind": "openai", "model": "stub", "base_url": url},
           "runner": {"concurrency": 3}}  # fmt: skip
    config = {
        "name": "kill",
        "run_dir": str(root / "run"),
        "seed": 3,
        "seeding": {"source": {"path": str(plain), "views": ["plain"]}, "job": job},
        "synthesis": {"job": job},
        "verification": {"enabled": True, "job": job},
        "mixes": [{"name": "orig", "preset": "ins-orig", "size": 8}],
        "negatives": {"total": 3},
        "training": {
            "config": {
                "model": {"name_or_path": str(tiny), "query_max_length": 16,
                          "document_max_length": 32},
                "data": {"train_file": "unused", "num_workers": 0},
                "output_dir": "unused",
                "batch_size": 2,
                "epochs": 2,
                "checkpoint_every": 1,
            }
        },
        "evaluation": {"benchmarks": [f"paired={PAIRED}"], "batch_size": 4},
    }  # fmt: skip
    path = root / "experiment.yaml"
    path.write_text(yaml.safe_dump(config))
    (root / "mine.yaml").write_text(
        yaml.safe_dump({"model": str(tiny), "num_negatives": 2, "rank_end": 6, "batch_size": 4})
    )
    return path


def mine_argv(root: Path) -> list[str]:
    (mix,) = (root / "run").glob("mix-orig-*/train.jsonl")
    return ["mine", str(mix), "--out", str(root / "mined" / "mined.jsonl"),
            "--config", str(root / "mine.yaml")]  # fmt: skip


def attempt(config: str, stage: str, kill_at: int | None, log: str | None, argv) -> None:
    """One attempt in a forked child: run the pipeline up to ``stage`` (or ``argv``)."""
    os.environ.pop("DUALVIEW_FAULT_KILL_AT", None)
    if kill_at is not None:
        os.environ["DUALVIEW_FAULT_KILL_AT"] = str(kill_at)
    if log is not None:
        os.environ["DUALVIEW_FAULT_LOG"] = log
    os.environ["DUALVIEW_FAULT_SCOPE"] = stage
    import torch

    torch.set_num_threads(1)
    if argv is not None:
        from dualview.cli import main
        from dualview.io.faults import fault_scope

        fault_scope(stage)
        sys.argv = ["dualview", *argv]
        main()
        return
    from dualview.pipeline.build import build_pipeline
    from dualview.pipeline.experiment import load_experiment

    pipeline = build_pipeline(load_experiment(Path(config)))
    names = [s.name for s in pipeline.stages]
    pipeline.stages = pipeline.stages[: names.index(stage) + 1]
    pipeline.run()


def run_attempt(ctx, *args) -> int:
    process = ctx.Process(target=attempt, args=args)
    process.start()
    process.join(300)
    assert process.exitcode is not None, "an attempt hung"
    return process.exitcode


def is_cache(path: Path) -> bool:
    """LLM caches: lines in completion order (concurrent requests), compared as key sets."""
    return path.name.endswith("cache.jsonl")


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (locks and caches aside), JSON without timing fields."""
    files = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.name.endswith(".lock") or is_cache(path):
            continue
        data = path.read_bytes()
        if path.suffix == ".json":
            data = _untimed(data)
        elif path.suffix == ".jsonl":
            data = b"".join(_untimed(line) for line in data.splitlines(keepends=True))
        files[str(path.relative_to(folder))] = data
    return files


def _untimed(line: bytes) -> bytes:
    try:
        obj = json.loads(line)
    except ValueError:
        return line
    return json.dumps(_drop_timing(obj), sort_keys=True).encode() + b"\n"


def _drop_timing(obj):
    if isinstance(obj, dict):
        return {k: _drop_timing(v) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, list):
        return [_drop_timing(v) for v in obj]
    return obj


def record_ids(folder: Path) -> dict[str, list[str]]:
    """Record ids per record file (outputs of seed/synth/verify/mix/mine)."""
    out = {}
    for path in folder.rglob("*.jsonl"):
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if lines and all("view" in obj and "id" in obj for obj in lines):
            out[str(path.relative_to(folder))] = [obj["id"] for obj in lines]
    return out


@pytest.mark.slow
def test_every_stage_killed_20_times_resumes_to_the_reference(tmp_path: Path) -> None:
    from tests.train_tiny import make_tiny_encoder

    tiny = make_tiny_encoder(tmp_path / "tiny")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "dualview.cli", "dualview.pipeline.build",
                                "dualview.train.trainer", "dualview.retrieval.encode"])  # fmt: skip
    rng = random.Random(1616)
    with StubServer() as server:
        config = experiment(tmp_path, server.base_url, tiny)
        stages = ["data", "synth", "verify", "mix-orig", "train-orig", "eval", "report"]

        # Reference: every stage uninterrupted, counting its fault points.
        log = tmp_path / "points.log"
        for stage in stages:
            assert run_attempt(ctx, str(config), stage, None, str(log), None) == 0
        assert run_attempt(ctx, str(config), "mine", None, str(log), mine_argv(tmp_path)) == 0
        points = {}
        for line in log.read_text().splitlines():
            scope = line.split("\t")[0]
            points[scope] = points.get(scope, 0) + 1
        reference = tmp_path / "reference"
        reference.mkdir()
        (tmp_path / "run").rename(reference / "run")
        (tmp_path / "mined").rename(reference / "mined")

        # Killed: each stage KILLS times at seeded points, then finished.
        kills: dict[str, int] = {}
        for stage in [*stages, "mine"]:
            argv = mine_argv(tmp_path) if stage == "mine" else None
            kills[stage] = 0
            while kills[stage] < KILLS:
                kill_at = rng.randint(1, points[stage])
                code = run_attempt(ctx, str(config), stage, kill_at, None, argv)
                if code == -9:
                    kills[stage] += 1
                    continue
                assert code == 0, f"{stage} attempt failed with exit code {code}"
                # Finished before the chosen point: start the stage over, keep killing.
                if argv is None:
                    (done,) = (tmp_path / "run").glob(f"{stage}-*/.done.json")
                    shutil.rmtree(done.parent)
                else:
                    shutil.rmtree(tmp_path / "mined")
            assert run_attempt(ctx, str(config), stage, None, None, argv) == 0

        final = run_cli("run", str(config), timeout=300)
        assert final.returncode == 0, final.stderr[-3000:]
        assert final.stderr.count("cached") >= len(stages)  # nothing left to do
    print(f"\nkill points per stage (reference run): {points}; kills: {kills}")
    assert all(n >= KILLS for n in kills.values()) and len(kills) == 8

    for name in ("run", "mined"):
        got, want = snapshot(tmp_path / name), snapshot(reference / name)
        assert sorted(got) == sorted(want), set(got) ^ set(want)
        different = [path for path in want if got[path] != want[path]]
        assert not different, f"files differ from the uninterrupted run: {different}"
        ids = record_ids(tmp_path / name)
        assert ids == record_ids(reference / name)
        for path, file_ids in ids.items():
            assert len(file_ids) == len(set(file_ids)), f"duplicated records in {path}"
    caches = sorted(p.relative_to(reference) for p in reference.rglob("*") if is_cache(p))
    assert caches
    for cache in caches:
        keys = [json.loads(line)["key"] for line in (tmp_path / cache).read_text().splitlines()]
        want = [json.loads(line)["key"] for line in (reference / cache).read_text().splitlines()]
        assert len(keys) == len(set(keys)) and set(keys) == set(want), f"{cache} differs"
