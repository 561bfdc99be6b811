"""Training throughput: our trainer step vs sentence-transformers' MultipleNegativesRankingLoss.

Same model (default: the embedded all-MiniLM-L6-v2), same records (default: the bundled gold
training set), same batches (our ``together`` plan: an orig and its dv share a batch), same
``k`` labelled negatives per record, same temperature (ours tau = 0.02, theirs scale = 50),
AdamW on both. Our side runs :func:`dualview.train.step.contrastive_step` with in-batch
negatives on, so both contrast each query with every document of the batch; the difference
is that we encode each distinct document once, while MNRL encodes every (record, document)
column. Two data settings:

- ``orig``: instruction records only (no shared documents: expect parity);
- ``dv``: orig + dv pairs co-batched (their documents coincide: expect fewer encodings).

Each (trainer, data) cell runs in its own subprocess (clean peak-memory numbers): one warm-up
step, then ``--steps`` timed steps. Cells run ``--rounds`` times alternating; the best round is
kept to damp the noise of a shared machine. Peak memory is the process's max RSS on CPU
(``torch.cuda.max_memory_allocated`` on GPU).

    .venv/bin/python benchmarks/train_throughput.py [--batch-size 8] [--negatives 4] [--steps 5]

Writes ``benchmarks/results/train_throughput.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "train_throughput.json"
DEFAULT_DATA = ROOT / "src" / "dualview" / "data" / "gold" / "train.jsonl"


def load_batches(args: argparse.Namespace) -> list:
    """Our batches for the chosen data setting (records trimmed to exactly k negatives)."""
    from dualview.data.jsonl import iter_records
    from dualview.train.batching import BatchStream, build_batch

    usable = [r for r in iter_records(args.data) if len(r.negatives()) >= args.negatives]
    if args.setting == "orig":
        records = [r for r in usable if r.view == "orig"]
    else:  # complete orig + dv pairs only
        ids = {r.id for r in usable}
        paired = {r.parent_id for r in usable if r.view == "dv" and r.parent_id in ids}
        records = [r for r in usable if r.id in paired or r.parent_id in paired]
    stream = BatchStream(records, args.batch_size, "together", args.negatives, seed=0)
    plans = stream.plan(0)[: args.steps + 1]
    if len(plans) < args.steps + 1:
        raise SystemExit(f"only {len(plans)} batches; lower --steps or --batch-size")
    return [build_batch([records[i] for i in p], args.negatives, stream.template) for p in plans]


def st_features(model, batch, k: int) -> list[dict]:
    """MNRL's columns: anchor, positive, negative_1..k, each tokenized for its task."""
    from dualview.eval.benchmarks.base import doc_text

    records = batch.records
    columns = [
        (batch.query_texts, "query"),
        ([doc_text(r.positives[0]) for r in records], "document"),
    ]
    for n in range(k):
        columns.append(([doc_text(r.negatives()[n]) for r in records], "document"))
    device = model.device
    features = []
    for texts, task in columns:
        encoded = model.preprocess(texts, task=task)
        features.append(
            {key: v.to(device) if hasattr(v, "to") else v for key, v in encoded.items()}
        )
    return features


def run_cell(args: argparse.Namespace) -> dict:
    """Worker: time one trainer on one data setting; prints a JSON line."""
    import torch

    from dualview.resources import resolve_model_path

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    batches = load_batches(args)
    if args.trainer == "ours":
        from dualview.train.config import ModelConfig
        from dualview.train.losses import RelationInfoNCE
        from dualview.train.model import BiEncoder
        from dualview.train.step import contrastive_step

        model = BiEncoder(
            ModelConfig(
                name_or_path=args.model,
                query_max_length=args.query_length,
                document_max_length=args.document_length,
            )
        ).to(device)
        loss_fn = RelationInfoNCE(0.02, in_batch_negatives=True)

        def step(batch) -> int:
            contrastive_step(model, loss_fn, batch)
            return len(batch.doc_texts)
    else:
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.losses import (
            MultipleNegativesRankingLoss,
        )

        model = SentenceTransformer(resolve_model_path(args.model), device=device)
        model[0].query_length = args.query_length
        model[0].document_length = args.document_length
        model.max_seq_length = max(args.query_length, args.document_length)
        loss_fn = MultipleNegativesRankingLoss(model, scale=50.0)

        def step(batch) -> int:
            loss_fn(st_features(model, batch, args.negatives), None).backward()
            return len(batch.records) * (1 + args.negatives)

    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    rss_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    documents = []
    for index, batch in enumerate(batches):
        if index == 1:
            start = time.perf_counter()
        documents.append(step(batch))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    elapsed = time.perf_counter() - start
    peak = (
        torch.cuda.max_memory_allocated() / 2**20
        if device == "cuda"
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    )
    return {
        "trainer": args.trainer,
        "setting": args.setting,
        "steps_per_s": args.steps / elapsed,
        "documents_per_step": sum(documents[1:]) / args.steps,
        "queries_per_step": args.batch_size,
        "peak_memory_mib": round(peak, 1),
        "rss_after_load_mib": round(rss_loaded, 1),
        "device": device,
    }


def spawn(args: argparse.Namespace, trainer: str, setting: str) -> dict:
    cmd = [sys.executable, __file__, "--worker", "--trainer", trainer, "--setting", setting]
    for key in (
        "model",
        "data",
        "batch_size",
        "negatives",
        "steps",
        "threads",
        "query_length",
        "document_length",
    ):
        cmd += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{trainer}/{setting} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded:minilm")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--negatives", type=int, default=4)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--query-length", type=int, default=64)
    parser.add_argument("--document-length", type=int, default=128)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--trainer", choices=["ours", "st"], help=argparse.SUPPRESS)
    parser.add_argument("--setting", choices=["orig", "dv"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(run_cell(args)))
        return
    best: dict[tuple[str, str], dict] = {}
    load_before = os.getloadavg()
    for _ in range(args.rounds):
        for setting in ("orig", "dv"):
            for trainer in ("st", "ours"):
                cell = spawn(args, trainer, setting)
                key = (trainer, setting)
                if key not in best or cell["steps_per_s"] > best[key]["steps_per_s"]:
                    best[key] = cell
    speedup = {
        s: best[("ours", s)]["steps_per_s"] / best[("st", s)]["steps_per_s"] for s in ("orig", "dv")
    }
    result = {
        "benchmark": "train_throughput",
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg(),
            "python": platform.python_version(),
        },
        "settings": {
            k: str(v) for k, v in vars(args).items() if k not in ("worker", "trainer", "setting")
        },
        "cells": list(best.values()),
        "speedup_ours_over_st": speedup,
        "goals": {
            "orig_not_slower": speedup["orig"] >= 1.0,
            "dv_at_least_1.5x": speedup["dv"] >= 1.5,
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"{'setting':8} {'trainer':8} {'steps/s':>8} {'docs/step':>10} {'peak MiB':>9}")
    for cell in result["cells"]:
        print(
            f"{cell['setting']:8} {cell['trainer']:8} {cell['steps_per_s']:8.3f} "
            f"{cell['documents_per_step']:10.1f} {cell['peak_memory_mib']:9.0f}"
        )
    print(
        f"speed-up ours/st: orig {speedup['orig']:.2f}x, dv {speedup['dv']:.2f}x "
        f"(load average {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f}, shared machine)"
    )


if __name__ == "__main__":
    main()
