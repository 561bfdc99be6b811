"""Streaming conversion of a large Parquet source: peak RSS and rows/s of `data convert`.

Generates N Promptriever-format rows (1 positive, 3 negative passages, 2 instruction
negatives with explanations; half the rows with an instruction) as a folder of Parquet files,
then runs ``dualview data convert FOLDER OUT --from promptriever`` in a child process and
reads its peak RSS (``ru_maxrss``). The same conversion of a tenth of the rows is the
baseline: streaming means the peak does not grow with the number of rows (goal: < 500 MB at
500k rows). Writes ``benchmarks/results/stream_convert.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from _machine import machine_end, machine_line, machine_start

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "stream_convert.json"
WORDS = [
    "river",
    "tomato",
    "garden",
    "planet",
    "signal",
    "market",
    "theory",
    "engine",
    "violin",
    "harbor",
    "winter",
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _passage(rng: random.Random, i: int, words: int, explain: bool = False) -> dict:
    doc = {"docid": f"d{i}", "title": _text(rng, 3), "text": _text(rng, words)}
    if explain:
        doc["explanation"] = _text(rng, 8)
    return doc


def _row(rng: random.Random, n: int, words: int) -> dict:
    instruct = n % 2 == 0
    qid = f"q{n // 2}" + ("-instruct" if instruct else "")
    query, instruction = _text(rng, 6), _text(rng, 15) if instruct else ""
    base = n * 10
    return {
        "query_id": qid,
        "query": f"{query} {instruction}".strip(),
        "only_query": query,
        "only_instruction": instruction,
        "has_instruction": instruct,
        "positive_passages": [_passage(rng, base, words)],
        "negative_passages": [_passage(rng, base + k, words) for k in range(1, 4)],
        "new_negatives": [_passage(rng, base + k, words, True) for k in (4, 5)] if instruct else [],
    }


def write_source(folder: Path, rows: int, words: int, per_file: int = 50_000) -> float:
    """Write ``rows`` rows as Parquet files of ``per_file`` rows; returns the size in MiB."""
    folder.mkdir(parents=True)
    rng = random.Random(0)
    for start in range(0, rows, per_file):
        path = folder / f"part-{start // per_file:05d}.parquet"
        with pq.ParquetWriter(path, _schema()) as writer:
            for lo in range(start, min(start + per_file, rows), 5000):
                chunk = [_row(rng, n, words) for n in range(lo, min(lo + 5000, rows))]
                writer.write_table(pa.Table.from_pylist(chunk, schema=_schema()))
    return sum(p.stat().st_size for p in folder.iterdir()) / 2**20


def _schema() -> pa.Schema:
    doc = pa.struct([("docid", pa.string()), ("title", pa.string()), ("text", pa.string())])
    neg = pa.struct([*doc, ("explanation", pa.string())])
    return pa.schema(
        [
            ("query_id", pa.string()),
            ("query", pa.string()),
            ("only_query", pa.string()),
            ("only_instruction", pa.string()),
            ("has_instruction", pa.bool_()),
            ("positive_passages", pa.list_(doc)),
            ("negative_passages", pa.list_(doc)),
            ("new_negatives", pa.list_(neg)),
        ]
    )


def convert(folder: Path, out: Path, rows: int) -> dict:
    """Run the CLI conversion in a child; its wall time, rows/s and peak RSS."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "DUALVIEW_NO_PROGRESS": "1"}
    cmd = [sys.executable, "-m", "dualview", "data", "convert", str(folder), str(out)]
    cmd += ["--from", "promptriever"]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, _, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    written = sum(1 for _ in out.open("rb")) if out.exists() else 0
    if written != rows:
        raise SystemExit(f"conversion wrote {written} of {rows} rows: {err[-2000:]}")
    return {
        "rows": rows,
        "seconds": round(seconds, 2),
        "rows_per_s": round(rows / seconds),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),  # Linux: KiB
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--words", type=int, default=40, help="words per passage")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    info = machine_start(with_torch=False)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for rows in (args.rows // 10, args.rows):
            folder = Path(tmp) / f"src-{rows}"
            mib = write_source(folder, rows, args.words)
            result = convert(folder, Path(tmp) / f"out-{rows}.jsonl", rows)
            results.append({**result, "parquet_mib": round(mib, 1)})
    ratio = results[1]["peak_rss_mib"] / results[0]["peak_rss_mib"]
    summary = {
        "benchmark": "stream_convert",
        "results": results,
        "rss_ratio_full_over_tenth": round(ratio, 2),
        "goal_peak_rss_mib": 500,
        "goal_met": results[1]["peak_rss_mib"] < 500,
        "machine": machine_end(info),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"{'rows':>8} {'parquet MiB':>11} {'seconds':>8} {'rows/s':>8} {'peak RSS MiB':>12}")
    for r in results:
        print(
            f"{r['rows']:8d} {r['parquet_mib']:11.1f} {r['seconds']:8.1f} "
            f"{r['rows_per_s']:8d} {r['peak_rss_mib']:12.1f}"
        )
    print(f"peak RSS {args.rows} rows / {args.rows // 10} rows: {ratio:.2f}x (goal < 500 MiB)")
    print(machine_line(summary["machine"]))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    main()
