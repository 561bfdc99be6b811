"""Reranker scoring in fp32 against bf16 (``dualview eval --reranker-precision``): speed and
whether the ranking survives.

One saved reranker folder (``--folder``: e.g. a zero-shot LLM reranker of the embedded
Qwen2.5-Coder models; default a random LM of the 0.5B model's shape, seed 0: speed does not
depend on weights, agreement does) is opened once per precision through the same call
``dualview eval`` makes (`dualview.eval.two_stage.open_reranker`, score cache off) and scores
the same pairs: each gold training record's query and instruction with its positive and its
negatives, a group of candidates as a first stage's top k would be. The precisions alternate
call by call in one process (a change of load on this shared machine hits both alike);
``speedup`` is fp32's median wall time over the precision's, ``cpu_speedup`` the same in
process CPU time. Agreement with fp32: the largest score difference, the share of groups
whose top candidate is the same, and the mean Kendall tau of each group's order.

    .venv/bin/python benchmarks/reranker_precision.py --folder runs/h37Z/zs-0.5b --threads 2
    .venv/bin/python benchmarks/reranker_precision.py --tiny --out /tmp/rp.json   # smoke run

Writes ``benchmarks/results/reranker_precision.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _machine import machine_line, machine_start, write_result
from reranker_throughput import DATA, LLM_SHAPES, build_llm_reranker

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "reranker_precision.json"


def scoring_groups(
    records: list, count: int
) -> tuple[list[list[int]], list[str], list[str], list[str]]:
    """Each record's (query, instruction, passage) triples, its positive first, until ``count``
    pairs; and the index groups of each record's candidates."""
    from dualview.retrieval.text import doc_text

    groups: list[list[int]] = []
    queries: list[str] = []
    instructions: list[str] = []
    passages: list[str] = []
    for record in records:
        docs = [*record.positives, *record.negatives()]
        if len(queries) + len(docs) > count:
            break
        groups.append(list(range(len(queries), len(queries) + len(docs))))
        queries += [record.query] * len(docs)
        instructions += [record.instruction] * len(docs)
        passages += [doc_text(doc) for doc in docs]
    return groups, queries, instructions, passages


def kendall_tau(a: list[float], b: list[float]) -> float:
    """Kendall's tau-a of two score lists over the same items (ties count as discordant)."""
    n, concordant = len(a), 0
    pairs = n * (n - 1) // 2
    for i in range(n):
        for j in range(i + 1, n):
            concordant += 1 if (a[i] - a[j]) * (b[i] - b[j]) > 0 else -1
    return concordant / pairs if pairs else 1.0


def agreement(groups: list[list[int]], full: Any, other: Any) -> dict[str, float]:
    """How far ``other``'s scores are from the baseline's (``full``); whether each group's
    order holds."""
    import numpy as np

    top = [int(np.argmax(full[g])) == int(np.argmax(other[g])) for g in groups]
    taus = [kendall_tau(list(full[g]), list(other[g])) for g in groups]
    return {
        "max_abs_diff": round(float(np.abs(full - other).max()), 6),
        "same_top1": round(sum(top) / len(top), 4),
        "mean_kendall_tau": round(statistics.fmean(taus), 4),
        "ties": int(sum(len(set(other[g].tolist())) < len(g) for g in groups)),
    }


def bench(folder: Path, records: list, args: argparse.Namespace) -> list[dict[str, Any]]:
    from dualview.eval.two_stage import open_reranker

    groups, queries, instructions, passages = scoring_groups(records, args.pairs)
    opened = {
        p: open_reranker(str(folder), "cpu", args.batch_size, False, p) for p in args.precisions
    }
    scorers = {
        p: (lambda r=r.reranker: r.score(queries, instructions, passages, args.batch_size))
        for p, r in opened.items()
    }
    scores = {p: fn() for p, fn in scorers.items()}  # also the warm-up
    times: dict[str, list[float]] = {p: [] for p in scorers}
    cpu: dict[str, list[float]] = {p: [] for p in scorers}
    for _ in range(args.repeats):
        for p, fn in scorers.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            times[p].append(time.perf_counter() - start)
            cpu[p].append(time.process_time() - start_cpu)
    base = args.precisions[0]
    runs = []
    for p in scorers:
        wall, used = statistics.median(times[p]), statistics.median(cpu[p])
        runs.append(
            {
                "precision": p,
                "pairs": len(queries),
                "groups": len(groups),
                "batch_size": args.batch_size,
                "pairs_per_s": round(len(queries) / wall, 3),
                "speedup": round(statistics.median(times[base]) / wall, 3),
                "cpu_speedup": round(statistics.median(cpu[base]) / used, 3),
                **agreement(groups, scores[base], scores[p]),
                "fingerprint": opened[p].fingerprint,
                "times_s": [round(t, 4) for t in times[p]],
                "cpu_times_s": [round(t, 4) for t in cpu[p]],
            }
        )
    return runs


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, help="a saved reranker (default: a random LM)")
    parser.add_argument("--precisions", default="fp32,bf16", help="the first is the baseline")
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--query-length", type=int, default=96)
    parser.add_argument("--document-length", type=int, default=160)
    parser.add_argument("--llm-shape", choices=sorted(LLM_SHAPES), default="qwen2.5-0.5b")
    parser.add_argument("--llm-tokenizer", default="embedded:qwen2.5-coder-0.5b")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--tiny", action="store_true", help="smoke run: a tiny LM, 16 pairs")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    args.precisions = args.precisions.split(",")
    if args.tiny:  # one token per byte
        args.pairs, args.repeats, args.llm_shape, args.llm_tokenizer = 16, 2, "tiny", "bytes"
        args.query_length, args.document_length = 512, 1024
    return args


def main() -> None:
    args = parse_args()
    from dualview.errors import DataError
    from dualview.io.paths import check_outputs

    try:  # the result never lands on what the benchmark reads
        check_outputs([args.out], [args.data, args.folder])
    except DataError as exc:
        raise SystemExit(f"reranker_precision.py: {exc}") from None
    import torch

    from dualview.data.jsonl import iter_records

    if args.threads:
        torch.set_num_threads(args.threads)
    machine = machine_start()
    records = list(iter_records(args.data))
    with tempfile.TemporaryDirectory(prefix="rerank-precision-") as tmp:
        folder = args.folder or build_llm_reranker(Path(tmp) / "llm", args)
        runs = bench(folder, records, args)
    result = write_result(args.out, "reranker_precision", args, {"runs": runs}, machine)
    print(
        f"{'precision':<10}{'pairs/s':>9}{'speedup':>9}{'cpu':>7}{'max|diff|':>11}{'top1':>7}{'tau':>7}"
    )
    for run in runs:
        print(
            f"{run['precision']:<10}{run['pairs_per_s']:>9}{run['speedup']:>9}"
            f"{run['cpu_speedup']:>7}{run['max_abs_diff']:>11}{run['same_top1']:>7}"
            f"{run['mean_kendall_tau']:>7}"
        )
    print(machine_line(result["machine"]))


if __name__ == "__main__":
    main()
