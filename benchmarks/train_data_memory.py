"""Memory of the trainer's data: the whole file as a list of records vs the offset index.

Writes a synthetic training file (``--records`` orig records plus as many dv records, each
with a positive and ``--negatives`` passages of ``--words`` words), then, each in a fresh
process, (a) loads it as ``list(iter_records(...))`` (what the trainer did before) and (b)
opens it as :class:`dualview.data.record_index.IndexedRecords` (what it does now); both then
build the same ``--batches`` batches. Reports peak resident memory (ru_maxrss) of each process
over a bare-interpreter baseline, load time, and seconds per batch, and checks that both
produced identical batches. Writes ``benchmarks/results/train_data_memory.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _machine import machine_end, machine_line, machine_start

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "train_data_memory.json"
WORDS = [
    "river",
    "market",
    "signal",
    "harbor",
    "crystal",
    "engine",
    "lantern",
    "meadow",
    "quarry",
    "velvet",
]


def passage(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def write_file(path: Path, records: int, negatives: int, words: int) -> None:
    rng = random.Random(0)
    with path.open("w", encoding="utf-8") as out:
        for i in range(records):
            docs = [{"id": f"d{i}-{k}", "text": passage(rng, words)} for k in range(negatives + 1)]
            orig = {
                "id": f"o{i}",
                "view": "orig",
                "query": f"query {i}",
                "instruction": f"instruction {i}",
                "positives": docs[:1],
                "instruction_negatives": docs[1:2],
                "hard_negatives": docs[2:],
            }
            dv = {
                **orig,
                "id": f"v{i}",
                "view": "dv",
                "parent_id": f"o{i}",
                "instruction": f"reversed {i}",
                "positives": docs[1:2],
                "instruction_negatives": docs[:1],
            }
            out.write(json.dumps(orig) + "\n" + json.dumps(dv) + "\n")


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(mode: str, path: Path, batches: int, negatives: int) -> dict:
    from dualview.data.jsonl import iter_records
    from dualview.data.record_index import IndexedRecords
    from dualview.train.batching import BatchStream, DataPosition

    baseline = peak_rss_mib()
    started = time.perf_counter()
    records = list(iter_records(path)) if mode == "list" else IndexedRecords(path)
    load_s = time.perf_counter() - started
    stream = BatchStream(records, batch_size=32, num_negatives=negatives, seed=0)
    digest = hashlib.sha256()
    started = time.perf_counter()
    for count, (_, batch) in enumerate(stream.iterate(DataPosition(), epochs=1), start=1):
        digest.update("\n".join(batch.query_texts + batch.doc_ids).encode())
        if count == batches:
            break
    batch_s = (time.perf_counter() - started) / batches
    return {
        "mode": mode,
        "load_s": round(load_s, 2),
        "s_per_batch": round(batch_s, 4),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "over_baseline_mib": round(peak_rss_mib() - baseline, 1),
        "batches_sha256": digest.hexdigest(),
    }


def spawn(mode: str, path: Path, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--worker", mode, "--file", str(path)]
    cmd += ["--batches", str(args.batches), "--negatives", str(args.negatives)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20000, help="instances (x2 records)")
    parser.add_argument("--negatives", type=int, default=30)
    parser.add_argument("--words", type=int, default=60)
    parser.add_argument("--batches", type=int, default=50)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--worker", choices=["list", "indexed"], help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.file, args.batches, args.negatives)))
        return
    info = machine_start(with_torch=False)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.jsonl"
        write_file(path, args.records, args.negatives, args.words)
        size_mib = path.stat().st_size / 2**20
        rows = [spawn(mode, path, args) for mode in ("list", "indexed")]
    same = rows[0]["batches_sha256"] == rows[1]["batches_sha256"]
    ratio = rows[0]["over_baseline_mib"] / max(rows[1]["over_baseline_mib"], 1.0)
    result = {
        "benchmark": "train_data_memory",
        "file": {"records": 2 * args.records, "negatives": args.negatives, "mib": size_mib},
        "results": rows,
        "identical_batches": same,
        "memory_ratio_list_over_indexed": round(ratio, 2),
        "machine": machine_end(info),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"{2 * args.records} records, {args.negatives} negatives, file {size_mib:.0f} MiB")
    print(f"{'mode':8} {'load s':>8} {'s/batch':>8} {'peak MiB':>9} {'over base':>10}")
    for r in rows:
        print(
            f"{r['mode']:8} {r['load_s']:8.2f} {r['s_per_batch']:8.4f} "
            f"{r['peak_rss_mib']:9.0f} {r['over_baseline_mib']:10.0f}"
        )
    print(f"memory list / indexed: {ratio:.1f}x; identical batches: {same}")
    print(machine_line(result["machine"]))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
