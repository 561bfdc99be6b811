"""Synthesis runner throughput against a stub LLM server with a fixed latency.

The stub (``python -m dualview.synth.testing``) runs in its own process and answers every
request after ``--latency`` seconds (250 ms by default). The runner (reverse task, OpenAI HTTP
backend, cache, ordered output) runs here at concurrency 1, 16, 64 and 256. With a fixed
latency L and concurrency C the ideal rate is C / L records per second; the table shows the
measured rate, its share of the ideal (goal: >= 0.8 at 64 and 256), and the runner's own CPU
time per record (this process only; the stub's CPU is not counted). ``--jitter J`` makes each
answer take L x U(1-J, 1+J) instead (same mean), like a batching server's varied lengths.
Records are built from the real MS MARCO passages in ``../shared/data/msmarco-1743`` so that
prompts have realistic sizes.

Writes ``benchmarks/results/synth_throughput.json``. On a shared machine other jobs slow the
numbers down: the load average is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _machine import machine_end, machine_line, machine_start
from dualview.data.formats.beir import read as read_beir
from dualview.data.jsonl import iter_records
from dualview.data.schema import Record
from dualview.io.atomic import write_jsonl
from dualview.synth.backends.base import BackendConfig, SamplingParams
from dualview.synth.reverse import ReverseTask
from dualview.synth.runner import RunnerConfig, make_runner

ROOT = Path(__file__).resolve().parents[1]
MSMARCO = ROOT.parent / "shared" / "data" / "msmarco-1743"
RESULTS = ROOT / "benchmarks" / "results" / "synth_throughput.json"
RAY_CPUS = 2


def make_records(n: int) -> list[Record]:
    """``n`` orig records: MS MARCO query + positive, the next query's passage as N*."""
    plain = list(read_beir(MSMARCO))
    records = []
    for i in range(n):
        row, other = plain[i % len(plain)], plain[(i + 1) % len(plain)]
        records.append(
            Record(
                id=f"b{i}",
                view="orig",
                query=row.query,
                instruction="Relevant passages give a direct, factual answer with numbers.",
                positives=row.positives,
                instruction_negatives=other.positives,
            )
        )
    return records


def start_stub(latency: float, jitter: float = 0.0, seed: int = 0) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "dualview.synth.testing", "--latency", str(latency)]
    process = subprocess.Popen(
        [*command, "--jitter", str(jitter), "--seed", str(seed)],
        stdout=subprocess.PIPE,
        text=True,
    )
    url = process.stdout.readline().strip() if process.stdout else ""
    if not url.startswith("http"):
        process.kill()
        raise SystemExit("the stub server did not start")
    return process, url


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by another process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    urls: list[str], concurrency: int, records: list[Record], workdir: Path, engine: str
) -> dict:
    source = workdir / f"in-{engine}-{concurrency}.jsonl"
    write_jsonl(source, records)
    task = ReverseTask()
    backend = BackendConfig(kind="openai", model="stub", base_url=urls)
    # Ray: one task per CPU of the local cluster, each with its share of the concurrency.
    per_task = -(-concurrency // RAY_CPUS)
    config = RunnerConfig(concurrency=concurrency, engine=engine, ray_batch_size=per_task)
    runner = make_runner(task, backend, SamplingParams(), config)
    cpu, wall = time.process_time(), time.perf_counter()
    out = workdir / f"out-{engine}-{concurrency}"
    stats = runner.run(lambda: task.units(iter_records(source)), out)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    assert stats["outcomes"]["ok"] == len(records), stats["outcomes"]
    return {"records": len(records), "wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.25)
    parser.add_argument("--jitter", type=float, default=0.0, help="latency x U(1-J, 1+J)")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 16, 64, 256])
    parser.add_argument(
        "--rounds", type=int, default=24, help="records = rounds x concurrency (steady state)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--engine", nargs="+", choices=["local", "ray"], default=["local"],
        help="runners to compare in one run (ray: a local Ray cluster of 2 CPUs)",
    )  # fmt: skip
    parser.add_argument("--endpoints", type=int, default=1, help="stub servers (base URLs)")
    args = parser.parse_args()
    os.environ.setdefault("DUALVIEW_NO_PROGRESS", "1")
    info = machine_start(
        with_torch=False, note="shared machine: other jobs were running; rates are lower bounds"
    )
    stubs = [start_stub(args.latency, args.jitter, seed) for seed in range(args.endpoints)]
    urls = [url for _, url in stubs]
    if "ray" in args.engine:
        import ray

        ray.init(num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for engine, level in [(e, lv) for e in args.engine for lv in args.levels]:
                n = max(args.rounds * level, 24)
                stub_cpu = sum(process_cpu_s(p.pid) for p, _ in stubs)
                result = measure(urls, level, make_records(n), Path(tmp), engine)
                stub_cpu = sum(process_cpu_s(p.pid) for p, _ in stubs) - stub_cpu
                ideal = level / args.latency
                rate = result["records"] / result["wall_s"]
                rows.append(
                    {
                        "engine": engine,
                        "endpoints": args.endpoints,
                        "concurrency": level,
                        **result,
                        "records_per_s": round(rate, 2),
                        "ideal_per_s": round(ideal, 2),
                        "share_of_ideal": round(rate / ideal, 3),
                        "runner_cpu_ms_per_record": round(1000 * result["cpu_s"] / n, 3),
                        "stub_cpu_ms_per_record": round(1000 * stub_cpu / n, 3),
                    }
                )
    finally:
        for process, _ in stubs:
            process.kill()
    report = {
        "benchmark": "synth_throughput",
        "latency_s": args.latency,
        "jitter": args.jitter,
        "results": rows,
        "goal": "share_of_ideal >= 0.8 at concurrency 64 (and at 256 for one engine)",
        "goal_met": any(r["concurrency"] == 64 and r["share_of_ideal"] >= 0.8 for r in rows),
        "goal_256_met": any(r["concurrency"] == 256 and r["share_of_ideal"] >= 0.8 for r in rows),
        "load_avg_1_5_15": list(os.getloadavg()),
        "note": "runner cpu = this process only (for ray: the driver, not the Ray workers)",
        "machine": machine_end(info),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"stub latency {args.latency * 1000:.0f} ms; {machine_line(report['machine'])}")
    print(
        f"{'engine':>6} {'endp':>4} {'conc':>5} {'records':>8} "
        f"{'rec/s':>8} {'ideal':>8} {'share':>6} "
        f"{'runner cpu ms/rec':>18} {'stub cpu ms/rec':>16}"
    )
    for r in rows:
        print(
            f"{r['engine']:>6} {r['endpoints']:>4} {r['concurrency']:>5} {r['records']:>8} "
            f"{r['records_per_s']:>8.1f} "
            f"{r['ideal_per_s']:>8.1f} {r['share_of_ideal']:>6.2f} "
            f"{r['runner_cpu_ms_per_record']:>18.2f} {r['stub_cpu_ms_per_record']:>16.2f}"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
