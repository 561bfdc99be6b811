"""Reverse + verify with the embedded local LLM on the 20 self-made demo records.

Reports what share of answers followed the format, what share was accepted, judged
impossible or rejected (by reason), the verify swap accuracy of the accepted dual views (the
same small model as judge), and seconds per record. Writes
``benchmarks/results/synth_local_quality.json``. Timings on a shared machine are upper bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

from _machine import machine_end, machine_start
from dualview.data.jsonl import iter_records, write_jsonl
from dualview.synth.backends import build_backend
from dualview.synth.backends.base import BackendConfig, SamplingParams
from dualview.synth.reverse import ReverseTask
from dualview.synth.runner import Runner, RunnerConfig
from dualview.synth.verify import VerifyConfig, VerifyTask

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "synth" / "orig.jsonl"
RESULTS = ROOT / "benchmarks" / "results" / "synth_local_quality.json"
FORMAT_FAILURES = ("no_answer", "multiple_answers", "malformed")


def run(task, backend_config: BackendConfig, params: SamplingParams, source: Path, out: Path):
    started = time.perf_counter()
    runner = Runner(task, build_backend(backend_config), params, RunnerConfig(concurrency=1))
    stats = runner.run(lambda: task.units(iter_records(source)), out)
    return stats, time.perf_counter() - started


def reasons(out: Path) -> Counter[str]:
    dropped = out.with_name(out.name + ".dropped.jsonl")
    return Counter(json.loads(line)["reason"].split(":")[0] for line in dropped.open())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded:qwen2.5-coder-0.5b")
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    os.environ.setdefault("DUALVIEW_NO_PROGRESS", "1")
    backend = BackendConfig(kind="local", model=args.model)
    params = SamplingParams(max_tokens=args.max_tokens)
    info = machine_start(
        with_torch=False, note="shared machine: timings include model load and contention"
    )
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "orig.jsonl"
        write_jsonl(source, list(iter_records(FIXTURE))[: args.limit])
        dv = Path(tmp) / "dv.jsonl"
        rev, rev_s = run(ReverseTask(), backend, params, source, dv)
        why = reasons(dv)
        kept = Path(tmp) / "verified.jsonl"
        ver, ver_s = run(VerifyTask(VerifyConfig(distractors=1)), backend, params, dv, kept)
        samples = [
            {"query": r.query, "orig": r.meta["orig_instruction"], "new": r.instruction}
            for r in iter_records(dv)
        ]
    units = rev["units"]
    outcomes = rev["outcomes"]
    format_failures = sum(why[code] for code in FORMAT_FAILURES)
    report = {
        "benchmark": "synth_local_quality",
        "model": rev["model"],
        "records": units,
        "reverse_outcomes": outcomes,
        "rejection_reasons": dict(why),
        "format_followed_share": (units - outcomes["skipped"] - format_failures) / units,
        "accepted_share": outcomes["ok"] / units,
        "impossible_share": outcomes["impossible"] / units,
        "reverse_seconds_per_record": rev_s / units,
        "reverse_tokens": [rev["tokens_in"], rev["tokens_out"]],
        "verify_outcomes": ver["outcomes"],
        "verify_summary": ver["summary"],
        "verify_seconds_per_record": ver_s / max(1, ver["units"]),
        "samples": samples,
        "machine": machine_end(info),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    for key in (
        "model",
        "records",
        "reverse_outcomes",
        "rejection_reasons",
        "format_followed_share",
        "accepted_share",
        "impossible_share",
        "reverse_seconds_per_record",
        "verify_summary",
        "verify_seconds_per_record",
    ):
        print(f"{key}: {report[key]}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
