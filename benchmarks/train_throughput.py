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

Each (trainer, data) cell runs in its own subprocess (clean peak-memory numbers and steps/s);
then, per data setting, one more subprocess runs both trainers interleaved step by step, so a
change of load on a shared machine hits both alike: the speed-up is taken from that run. Step
0 is a warm-up; ``--steps`` steps are timed. Peak memory is the process's max RSS on CPU
(``torch.cuda.max_memory_allocated`` on GPU).

    .venv/bin/python benchmarks/train_throughput.py [--batch-size 8] [--negatives 4] [--steps 5]

Writes ``benchmarks/results/train_throughput.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from _machine import machine_end, machine_line, machine_start

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
    from dualview.retrieval.text import doc_text

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


def build_trainer(args: argparse.Namespace, trainer: str, device: str):
    """A ``step(batch) -> documents encoded`` closure and its parameters."""
    import torch

    from dualview.resources import resolve_model_path

    torch.manual_seed(0)
    if trainer == "ours":
        from dualview.models.bi_encoder import BiEncoder
        from dualview.models.config import ModelConfig
        from dualview.train.objectives import RelationInfoNCE
        from dualview.train.step import contrastive_step

        config = ModelConfig(
            name_or_path=args.model,
            query_max_length=args.query_length,
            document_max_length=args.document_length,
        )
        model = BiEncoder(config).to(device)
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
        mnrl = MultipleNegativesRankingLoss(model, scale=50.0)

        def step(batch) -> int:
            mnrl(st_features(model, batch, args.negatives), None).backward()
            return len(batch.records) * (1 + args.negatives)

    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def full_step(batch) -> int:
        documents = step(batch)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return documents

    return full_step


def run_cell(args: argparse.Namespace) -> dict:
    """Worker: time one trainer (or both, interleaved step by step) on one data setting."""
    import torch

    torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    batches = load_batches(args)
    names = ["ours", "st"] if args.trainer == "both" else [args.trainer]
    steps = {name: build_trainer(args, name, device) for name in names}
    seconds = dict.fromkeys(names, 0.0)
    documents: dict[str, list[int]] = {name: [] for name in names}
    for index, batch in enumerate(batches):
        for name in names:  # interleaved: load changes hit both trainers alike
            start = time.perf_counter()
            documents[name].append(steps[name](batch))
            if device == "cuda":
                torch.cuda.synchronize()
            if index > 0:  # step 0 is the warm-up
                seconds[name] += time.perf_counter() - start
    peak = (
        torch.cuda.max_memory_allocated() / 2**20
        if device == "cuda"
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    )
    return {
        "trainer": args.trainer,
        "setting": args.setting,
        "steps_per_s": {name: args.steps / seconds[name] for name in names},
        "documents_per_step": {name: sum(documents[name][1:]) / args.steps for name in names},
        "queries_per_step": args.batch_size,
        "peak_memory_mib": round(peak, 1),
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
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--query-length", type=int, default=64)
    parser.add_argument("--document-length", type=int, default=128)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--trainer", choices=["ours", "st", "both"], help=argparse.SUPPRESS)
    parser.add_argument("--setting", choices=["orig", "dv"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(run_cell(args)))
        return
    info = machine_start()
    separate = {(t, s): spawn(args, t, s) for s in ("orig", "dv") for t in ("st", "ours")}
    interleaved = {s: spawn(args, "both", s) for s in ("orig", "dv")}
    speedup = {
        s: interleaved[s]["steps_per_s"]["ours"] / interleaved[s]["steps_per_s"]["st"]
        for s in ("orig", "dv")
    }
    result = {
        "benchmark": "train_throughput",
        "machine": machine_end(info),
        "settings": {
            k: str(v) for k, v in vars(args).items() if k not in ("worker", "trainer", "setting")
        },
        "separate_processes": list(separate.values()),
        "interleaved": list(interleaved.values()),
        "speedup_ours_over_st_interleaved": speedup,
        "goals": {
            "orig_not_slower": speedup["orig"] >= 1.0,
            "dv_at_least_1.5x": speedup["dv"] >= 1.5,
        },
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"{'setting':8} {'trainer':8} {'steps/s sep':>11} {'steps/s intl':>12} "
        f"{'docs/step':>10} {'peak MiB':>9}"
    )
    for (trainer, setting), cell in separate.items():
        mixed = interleaved[setting]
        print(
            f"{setting:8} {trainer:8} {cell['steps_per_s'][trainer]:11.3f} "
            f"{mixed['steps_per_s'][trainer]:12.3f} "
            f"{cell['documents_per_step'][trainer]:10.1f} {cell['peak_memory_mib']:9.0f}"
        )
    print(f"speed-up ours/st (interleaved): orig {speedup['orig']:.2f}x, dv {speedup['dv']:.2f}x")
    print(machine_line(result["machine"]))


if __name__ == "__main__":
    main()
