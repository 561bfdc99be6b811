"""What each `dualview run` of an experiment cost on this machine (issue 36: CPU hours).

For each NAME, reads three files the run's wrapper wrote beside the run folder:

- ``NAME.log``: the run's output; each ``✓ STAGE finished in X s`` line is a stage's wall
  time, each plan line of a ``cached`` (skipped) or ``reusable`` (copied from
  ``--reuse-from``) stage one that did not run here;
- ``NAME.time``: GNU ``/usr/bin/time -v`` of the run (wall, user + system CPU, peak RSS);
- ``NAME.load``: ``TIME LOAD1 LOAD5 LOAD15`` every 60 s while the run lasted.

Writes OUT (JSON) and prints a table: per run the stage wall times, run wall and CPU hours,
and the 1-minute load average (min, mean, max), so a reader can tell a quiet machine's
figure from a loaded one's.

Usage:
  python benchmarks/run_timings.py RUNS_DIR OUT.json NAME [NAME ...] [--machine TEXT]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from dualview.errors import DataError
from dualview.io.atomic import atomic_write_text
from dualview.io.paths import check_outputs

STAGE_DONE = re.compile(r"✓ (\S+) finished in ([0-9.]+) s")
NOT_RUN = re.compile(r"^[│|]\s*(\S+)\s*[│|]\s*(cached|reusable)")
TIME_FIELDS = {
    "User time (seconds)": "user_s",
    "System time (seconds)": "system_s",
    "Maximum resident set size (kbytes)": "max_rss_kb",
    "Elapsed (wall clock) time (h:mm:ss or m:ss)": "wall",
}


def _seconds(clock: str) -> float:
    """``h:mm:ss`` or ``m:ss.ss`` as seconds."""
    total = 0.0
    for part in clock.split(":"):
        total = total * 60 + float(part)
    return total


def gnu_time(path: Path) -> dict[str, float]:
    """Wall, CPU seconds and peak RSS (MB) from a ``/usr/bin/time -v`` report."""
    found: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, _, value = line.strip().rpartition(": ")
        if name in TIME_FIELDS:
            found[TIME_FIELDS[name]] = value
    missing = sorted(set(TIME_FIELDS.values()) - set(found))
    if missing:
        raise DataError(path, None, missing[0], "not in this /usr/bin/time -v report")
    cpu = float(found["user_s"]) + float(found["system_s"])
    wall = _seconds(found["wall"])
    return {
        "run_wall_s": round(wall, 1),
        "run_cpu_s": round(cpu, 1),
        "run_cpu_h": round(cpu / 3600, 3),
        "max_rss_mb": round(float(found["max_rss_kb"]) / 1024),
    }


def load_samples(path: Path) -> dict[str, Any]:
    """Start, end and the 1-minute load average's min, mean, max."""
    rows = [line.split() for line in path.read_text(encoding="utf-8").splitlines() if line]
    if not rows:
        raise DataError(path, None, "load", "no samples")
    loads = [float(row[1]) for row in rows]
    mean = sum(loads) / len(loads)
    return {
        "first_sample": rows[0][0],
        "last_sample": rows[-1][0],
        "load1_min_mean_max": [min(loads), round(mean, 2), max(loads)],
    }


def run_timing(runs_dir: Path, name: str) -> dict[str, Any]:
    """One run's timing record from its three files."""
    log = (runs_dir / f"{name}.log").read_text(encoding="utf-8")
    stages = {m[1]: float(m[2]) for m in STAGE_DONE.finditer(log)}
    not_run = [m[1] for line in log.splitlines() if (m := NOT_RUN.match(line))]
    return {
        "stage_wall_s": stages,
        "stages_not_run": not_run,
        **gnu_time(runs_dir / f"{name}.time"),
        **load_samples(runs_dir / f"{name}.load"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("runs_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("names", nargs="+")
    parser.add_argument("--machine", default="2 CPU cores")
    args = parser.parse_args()
    inputs = [args.runs_dir / f"{n}.{ext}" for n in args.names for ext in ("log", "time", "load")]
    try:
        check_outputs([args.out], inputs)
    except DataError as exc:
        parser.error(str(exc))
    runs = {name: run_timing(args.runs_dir, name) for name in args.names}
    total = sum(r["run_cpu_h"] for r in runs.values())
    result = {
        "machine": args.machine,
        "load_average_source": "1-minute load average of /proc/loadavg, sampled every 60 s",
        "runs": runs,
        "total_cpu_h": round(total, 3),
    }
    atomic_write_text(args.out, json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print("| run | wall h | CPU h | load1 min/mean/max | slowest stages (s) |")
    print("|---|---:|---:|---|---|")
    for name, r in runs.items():
        slow = sorted(r["stage_wall_s"].items(), key=lambda kv: -kv[1])[:3]
        stages = ", ".join(f"{k} {v:.0f}" for k, v in slow)
        load = "/".join(str(x) for x in r["load1_min_mean_max"])
        print(
            f"| {name} | {r['run_wall_s'] / 3600:.2f} | {r['run_cpu_h']:.2f} | {load} | {stages} |"
        )
    print(f"total CPU hours: {total:.2f}")


if __name__ == "__main__":
    main()
