"""The ``machine`` block every benchmark writes beside its numbers.

One shape for all benchmarks, so results from different scripts and machines compare:
platform, Python, CPU model and usable cores, torch build and threads, the GPU when there is
one, and the load average before and after the run (these machines are shared, so a high
load marks numbers as upper bounds on time and lower bounds on rates).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path
from typing import Any


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _torch_info() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.is_available(),
    }
    if info["cuda"]:
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def machine_start(*, with_torch: bool = True, note: str | None = None) -> dict[str, Any]:
    """Facts about this machine, taken before the benchmark runs."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu_name(),
        "cores": usable_cores(),
        "load_avg_before": load_avg(),
    }
    if with_torch:
        info.update(_torch_info())
    if note:
        info["note"] = note
    return info


def machine_end(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` with the load average after the run added."""
    return {**info, "load_avg_after": load_avg()}


def machine_line(info: dict[str, Any]) -> str:
    """One printable line: where the numbers were taken."""
    where = f"{info['cpu']}, {info['cores']} cores"
    if info.get("gpu"):
        where += f", {info['gpu']}"
    load = f"load {info['load_avg_before']}"
    if "load_avg_after" in info:
        load += f" -> {info['load_avg_after']}"
    return f"machine: {where}; {load}"


def write_result(
    out: Path,
    benchmark: str,
    args: argparse.Namespace,
    body: dict[str, Any],
    machine: dict[str, Any],
) -> dict[str, Any]:
    """Write a benchmark's JSON result to ``out``: its name, its arguments (paths as text),
    ``body`` and the machine (with the load after the run); returns the result."""
    result = {
        "benchmark": benchmark,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        **body,
        "machine": machine_end(machine),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result
