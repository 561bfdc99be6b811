"""Cross-encoder on CPU: our scoring and training step against sentence-transformers.

One MiniLM-based cross-encoder (the embedded all-MiniLM-L6-v2 with a new one-logit head,
seed 0), saved once by dualview and loaded by both sides, so both hold the same weights:

- **scoring**: `CrossEncoderReranker.score` against ``CrossEncoder.predict`` on the same
  (query + instruction, passage) pairs of the gold training set, same batch size, same
  maximum length (read from the folder), raw logits on both sides (checked equal);
- **training step**: our `dualview.train.rerank_step.rerank_step` with ``rerank_bce`` against
  sentence-transformers' ``BinaryCrossEntropyLoss`` called as ``CrossEncoderTrainer``'s
  ``compute_loss`` calls it (text pairs in, the loss tokenizes), each followed by backward and
  an AdamW step, on the same batches' labelled pairs (each record's positive and its ``k``
  labelled negatives). The Hugging Face ``Trainer`` loop around ``compute_loss`` is left out:
  it only adds time to the sentence-transformers side. Ours runs without GradCache, so on
  CPU it scores length-sorted chunks of pairs (`rerank_step.PLAIN_CPU_CHUNK_TOKENS`), each
  with its graph, where sentence-transformers pads the whole batch to its longest pair; the
  losses differ only by dropout masks. Two data settings: ``orig``
  (instruction records only) and ``dv`` (orig + dv pairs co-batched, as dualview trains).

The two sides alternate call by call in one process (a change of load on this shared
machine hits both alike); the ratio is their median time over ours, in wall time and in the
process's CPU time (steadier on a loaded machine).

    .venv/bin/python benchmarks/cross_encoder_cpu.py [--pairs 256] [--steps 4] [--threads N]

Run it on an idle machine: with more busy threads than cores, each of torch's parallel
regions can wait a scheduler slice at its barrier, and our step (a few length-sorted chunks,
so more, smaller regions) suffers more from that than one padded batch does.

Writes ``benchmarks/results/cross_encoder_cpu.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from _machine import machine_line, machine_start, write_result

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "cross_encoder_cpu.json"
DATA = ROOT / "src" / "dualview" / "data" / "gold" / "train.jsonl"


def build_model(folder: Path, args: argparse.Namespace):
    import torch

    from dualview.models.config import ModelConfig
    from dualview.models.rerankers import build_reranker, load_reranker

    torch.manual_seed(0)
    config = ModelConfig(
        kind="cross_encoder",
        query_max_length=args.query_length,
        document_max_length=args.document_length,
    )
    build_reranker(config).save(folder)
    return load_reranker(folder, "cpu")


def scoring_pairs(records: list, count: int) -> tuple[list[str], list[str], list[str]]:
    """(query, instruction, passage) of each record's positive and negatives, ``count`` in all."""
    from dualview.retrieval.text import doc_text

    queries, instructions, passages = [], [], []
    for record in records:
        for doc in [*record.positives, *record.negatives()]:
            queries.append(record.query)
            instructions.append(record.instruction)
            passages.append(doc_text(doc))
    return queries[:count], instructions[:count], passages[:count]


def bench_scoring(ours, folder: Path, records: list, args: argparse.Namespace) -> dict:
    import numpy as np
    from sentence_transformers import CrossEncoder

    from dualview.data.formats.common import join_query_instruction

    theirs = CrossEncoder(str(folder), device="cpu")
    queries, instructions, passages = scoring_pairs(records, args.pairs)
    pairs = [
        (join_query_instruction(q, i, ours.template), p)
        for q, i, p in zip(queries, instructions, passages, strict=True)
    ]
    score = lambda: ours.score(queries, instructions, passages, batch_size=args.batch_size)  # noqa: E731
    predict = lambda: theirs.predict(pairs, batch_size=args.batch_size)  # noqa: E731
    worst = float(np.abs(score() - predict()).max())  # also the warm-up
    times: dict[str, list[float]] = {"ours": [], "theirs": []}
    cpu: dict[str, list[float]] = {"ours": [], "theirs": []}
    for _ in range(args.repeats):
        for name, fn in (("ours", score), ("theirs", predict)):
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            times[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    ours_s, theirs_s = statistics.median(times["ours"]), statistics.median(times["theirs"])
    return {
        "pairs": len(pairs),
        "batch_size": args.batch_size,
        "max_length": ours.max_length,
        "max_abs_diff": worst,
        "ours_pairs_per_s": round(len(pairs) / ours_s, 1),
        "theirs_pairs_per_s": round(len(pairs) / theirs_s, 1),
        "speedup": round(theirs_s / ours_s, 3),
        "cpu_speedup": cpu_ratio(cpu),
        "times_s": {k: [round(t, 3) for t in v] for k, v in times.items()},
        "cpu_times_s": {k: [round(t, 3) for t in v] for k, v in cpu.items()},
    }


def cpu_ratio(cpu: dict[str, list[float]]) -> float:
    """Their median CPU time over ours: less sensitive than wall time to other processes on
    a shared machine (it still counts our threads' spinning)."""
    return round(statistics.median(cpu["theirs"]) / statistics.median(cpu["ours"]), 3)


def training_batches(records: list, setting: str, args: argparse.Namespace) -> list:
    from dualview.train.batching import BatchStream, build_batch

    usable = [r for r in records if len(r.negatives()) >= args.negatives]
    if setting == "orig":
        chosen = [r for r in usable if r.view == "orig"]
    else:  # complete orig + dv pairs
        ids = {r.id for r in usable}
        paired = {r.parent_id for r in usable if r.view == "dv" and r.parent_id in ids}
        chosen = [r for r in usable if r.id in paired or r.parent_id in paired]
    stream = BatchStream(chosen, args.train_batch, "together", args.negatives, seed=0)
    plans = stream.plan(0)[: args.steps + 1]
    return [build_batch([chosen[i] for i in p], args.negatives, stream.template) for p in plans]


def bench_training(folder: Path, records: list, setting: str, args: argparse.Namespace) -> dict:
    import torch
    from sentence_transformers import CrossEncoder
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

    from dualview.models.rerankers import load_reranker
    from dualview.train.objectives.rerank import PointwiseBCE
    from dualview.train.rerank_step import rerank_step

    batches = training_batches(records, setting, args)
    ours = load_reranker(folder, "cpu").train()
    theirs = CrossEncoder(str(folder), device="cpu")
    theirs.train()
    their_loss = BinaryCrossEntropyLoss(theirs)
    optimizers = {
        "ours": torch.optim.AdamW(ours.parameters(), lr=2e-5),
        "theirs": torch.optim.AdamW(theirs.parameters(), lr=2e-5),
    }
    our_loss = PointwiseBCE()

    def our_step(batch) -> float:
        stats = rerank_step(ours, our_loss, batch)
        optimizers["ours"].step()
        optimizers["ours"].zero_grad(set_to_none=True)
        return stats.loss

    def their_step(batch) -> float:
        queries, passages = batch.pair_texts()
        rows, cols = batch.pair_index()
        labels = (batch.relations[rows, cols] == 1).float()
        loss = their_loss([queries, passages], labels)
        loss.backward()
        optimizers["theirs"].step()
        optimizers["theirs"].zero_grad(set_to_none=True)
        return float(loss.detach())

    times: dict[str, list[float]] = {"ours": [], "theirs": []}
    cpu: dict[str, list[float]] = {"ours": [], "theirs": []}
    losses: dict[str, list[float]] = {"ours": [], "theirs": []}
    for index, batch in enumerate(batches):
        for name, fn in (("ours", our_step), ("theirs", their_step)):
            start, start_cpu = time.perf_counter(), time.process_time()
            losses[name].append(round(fn(batch), 5))
            if index > 0:  # step 0 is the warm-up
                times[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
    ours_s, theirs_s = statistics.median(times["ours"]), statistics.median(times["theirs"])
    pairs = [int((b.relations != 0).sum()) for b in batches[1:]]
    return {
        "setting": setting,
        "records_per_batch": args.train_batch,
        "pairs_per_step": pairs,
        "ours_step_s": round(ours_s, 3),
        "theirs_step_s": round(theirs_s, 3),
        "speedup": round(theirs_s / ours_s, 3),
        "cpu_speedup": cpu_ratio(cpu),
        "cpu_times_s": {k: [round(t, 3) for t in v] for k, v in cpu.items()},
        "losses": losses,  # same weights, same pairs: they differ by dropout masks
        "times_s": {k: [round(t, 3) for t in v] for k, v in times.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--query-length", type=int, default=64)
    parser.add_argument("--document-length", type=int, default=192)
    parser.add_argument("--train-batch", type=int, default=4, help="records per step")
    parser.add_argument("--negatives", type=int, default=7)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument(
        "--threads", type=int, default=0, help="torch threads (0: torch's default, the cores)"
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    import torch

    from dualview.data.jsonl import iter_records

    if args.threads:
        torch.set_num_threads(args.threads)
    machine = machine_start()
    records = list(iter_records(args.data))
    with tempfile.TemporaryDirectory(prefix="xenc-bench-") as tmp:
        folder = Path(tmp) / "model"
        ours = build_model(folder, args)
        scoring = bench_scoring(ours, folder, records, args)
        training = [bench_training(folder, records, s, args) for s in ("orig", "dv")]
    body = {"scoring": scoring, "training": training}
    result = write_result(args.out, "cross_encoder_cpu", args, body, machine)
    print(f"{'what':<26}{'ours':>10}{'sentence-transformers':>24}{'ratio':>8}{'cpu ratio':>11}")
    print(
        f"{'scoring (pairs/s)':<26}{scoring['ours_pairs_per_s']:>10}"
        f"{scoring['theirs_pairs_per_s']:>24}{scoring['speedup']:>8}{scoring['cpu_speedup']:>11}"
    )
    for row in training:
        label = f"train step {row['setting']} (s)"
        print(
            f"{label:<26}{row['ours_step_s']:>10}{row['theirs_step_s']:>24}"
            f"{row['speedup']:>8}{row['cpu_speedup']:>11}"
        )
    print(machine_line(result["machine"]))


if __name__ == "__main__":
    main()
