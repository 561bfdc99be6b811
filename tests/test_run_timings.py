"""``benchmarks/run_timings.py``: a run's stage times, CPU hours and load from its wrapper's
files (issue 36: the CPU hours each stage took)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from dualview.errors import DataError

SPEC = importlib.util.spec_from_file_location("run_timings", "benchmarks/run_timings.py")
assert SPEC is not None and SPEC.loader is not None
run_timings = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(run_timings)

TIME_V = """\tCommand being timed: "dualview run x.yaml"
\tUser time (seconds): 3000.50
\tSystem time (seconds): 600.25
\tPercent of CPU this job got: 171%
\tElapsed (wall clock) time (h:mm:ss or m:ss): 0:35:00
\tMaximum resident set size (kbytes): 2097152
"""
LOG = """│ data   │ reusable (copy) │ data-1 │ read │
│ synth  │ cached (skip)   │ synth-1 │ reverse │
│ train  │ pending (run) │ train-1 │ train │
✓ train-Ins-DV finished in 405.79 s
✓ eval finished in 40.13 s
"""


def test_a_runs_timing_reads_its_three_files(tmp_path: Path) -> None:
    (tmp_path / "r.time").write_text(TIME_V)
    (tmp_path / "r.log").write_text(LOG)
    (tmp_path / "r.load").write_text("2026-01-01T00:00:00Z 1.00 1 1\nT2 3.00 2 2\nT3 2.00 2 2\n")
    timing = run_timings.run_timing(tmp_path, "r")
    assert timing["stage_wall_s"] == {"train-Ins-DV": 405.79, "eval": 40.13}
    assert timing["stages_not_run"] == ["data", "synth"]
    assert timing["run_wall_s"] == 2100.0 and timing["run_cpu_s"] == 3600.8
    assert timing["run_cpu_h"] == 1.0 and timing["max_rss_mb"] == 2048
    assert timing["load1_min_mean_max"] == [1.0, 2.0, 3.0]
    assert timing["first_sample"] == "2026-01-01T00:00:00Z" and timing["last_sample"] == "T3"


def test_a_time_report_without_its_fields_is_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "r.time").write_text("\tUser time (seconds): 1.0\n")
    with pytest.raises(DataError, match=r"r\.time") as info:
        run_timings.gnu_time(tmp_path / "r.time")
    assert "max_rss_kb" in str(info.value)


def test_the_output_may_not_be_one_of_the_runs_files(tmp_path: Path) -> None:
    (tmp_path / "r.log").write_text(LOG)
    before = (tmp_path / "r.log").read_bytes()
    args = [str(tmp_path), str(tmp_path / "r.log"), "r"]
    done = subprocess.run([sys.executable, "benchmarks/run_timings.py", *args], capture_output=True)
    assert done.returncode == 2 and b"r.log" in done.stderr
    assert (tmp_path / "r.log").read_bytes() == before
