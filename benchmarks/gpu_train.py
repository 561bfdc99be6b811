"""Training efficiency at the paper's shape: tokens/s, analytic TFLOP/s, MFU, peak memory.

Builds a random-init backbone from a config of the paper's shapes (``--shape xlmr-large``:
bge-m3 class, 568M; ``bert-base``: gte-multilingual-base class; ``tiny`` for CPU smoke
tests; tokenizer from the embedded MiniLM or ``--tokenizer``), writes synthetic dual-view
training records (an ``orig`` and its ``dv`` share their 1 + ``--negatives`` documents, 2 of
them instruction negatives that swap roles; document lengths ``--texts long`` (512+ tokens)
or ``msmarco`` (MS MARCO passage lengths)), and runs the real trainer
(:class:`dualview.train.trainer.Trainer`) on it, one variant per subprocess:

- ``fixed32``: the settings of the shipped paper config before this benchmark existed
  (GradCache 32 texts per chunk, batches tokenized in the training process);
- ``ours``: the defaults (GradCache ``auto``: token-budget chunks of length-sorted texts,
  tokenization in 2 loader workers, bf16 autocast, fused AdamW);
- ``ours-compile``: ``ours`` with ``compile: true``;
- ``st``: sentence-transformers' ``CachedMultipleNegativesRankingLoss`` (GradCache, mini-batch
  32) on the same batches, bf16 autocast, AdamW: it encodes every (query, document) column;
- ``ce`` and ``llm``: the reranker steps on the same records (listwise over each record's
  1 + ``--negatives`` candidates, ``--rerank-batch-size`` records per step): a cross-encoder
  on a ``--ce-shape`` backbone (bert-base) and an LLM reranker on a random-init
  ``--llm-shape`` decoder (Qwen2.5-0.5B class); GradCache ``auto`` as for ``ours``;
- ``ours+MOD+MOD...`` (also ``ce+MOD``, ``llm+MOD``): options of the trainer (`MODIFIERS`):
  ``noretain`` (``gradcache_retain_last: false``: every chunk runs twice, as before),
  ``retainN`` (``gradcache_retain_tokens: N``; ``retain0``: only the last chunk keeps its
  graph, the behaviour before trailing chunks that fit the measured memory did), ``unfused``
  (``optim.fused: false``), ``compile`` (whole backbone, dynamic shapes), ``layers``
  (``compile: layers``), ``bucketN`` (``pad_multiple: N``), ``packed`` (``model.unpadded``,
  kernel ``auto``), ``flash`` (packed through ``varlen_kernel: torch_flash``), ``tokensN``
  (``gradcache_max_tokens: N``: the chunk-budget sweep), ``profile`` (one torch profiler
  table over the run, top ops by device time, in the JSON).

``--budget-s`` bounds the whole run: a variant that cannot start in time is recorded as
skipped, and each variant's stall limit is cut to what is left. The JSON is rewritten after
every variant, so a run killed from outside keeps what it measured. ``--backbone DIR``
reuses a backbone folder (``benchmarks/gpu_all.py`` builds one for every part).

The first ``--warmup`` steps are not timed. MFU and HFU count real tokens only (padding is
waste) with :func:`dualview.perf.training_flops` against the device's dense bf16 peak
(:data:`dualview.perf.PEAK_BF16_TFLOPS`; n/a on CPU): MFU by the PaLM definition (forward +
backward, 3 forward-equivalents, recomputation not counted), HFU with GradCache's no-grad
pass (4 forward-equivalents).
Losses of ``fixed32`` and ``ours`` are compared step by step (same seed, same batches).

    python benchmarks/gpu_train.py                       # GPU: xlmr-large, batch 64, 30 negatives
    python benchmarks/gpu_train.py --shape tiny --batch-size 4 --negatives 3 --steps 2  # CPU

Writes ``benchmarks/results/gpu_train.json`` (or ``--out``) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _gpu import SHAPES, build_backbone, make_texts, vocabulary_words
from _machine import machine_end, machine_line, machine_start

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "gpu_train.json"
VARIANTS = ("fixed32", "ours", "ours-compile", "st")
#: Variants that take modifiers: the bi-encoder and the two reranker families.
FAMILY_BASES = {"ours": "bi_encoder", "ce": "cross_encoder", "llm": "llm_reranker"}
#: ``ours+MOD``: what each modifier sets in the training config (``N``: a number).
MODIFIERS = (
    "noretain", "retainN", "unfused", "compile", "layers", "bucketN", "packed", "flash",
    "tokensN", "profile",
)  # fmt: skip


def parse_variant(name: str) -> tuple[str, list[str]]:
    """``(base, modifiers)`` of a variant name; ``ValueError`` for an unknown one."""
    if name == "ours-compile":  # the name before modifiers existed
        return "ours", ["compile"]
    base, *mods = name.split("+")
    if base not in ("fixed32", "st", *FAMILY_BASES) or (mods and base not in FAMILY_BASES):
        known = ", ".join((*VARIANTS, "ce", "llm"))
        raise ValueError(f"unknown variant {name!r} (known: {known}, ours/ce/llm+MOD)")
    for mod in mods:
        stem = mod.rstrip("0123456789")
        number = mod[len(stem) :]
        if (stem + "N" if number else stem) not in MODIFIERS:
            raise ValueError(
                f"unknown modifier {mod!r} in {name!r} (known: {', '.join(MODIFIERS)})"
            )
    return base, mods


def apply_modifiers(settings: dict, mods: list[str]) -> None:
    """Set in ``settings`` (a training config as a dict) what ``mods`` ask for."""
    for mod in mods:
        stem = mod.rstrip("0123456789")
        number = int(mod[len(stem) :]) if mod != stem else None
        if stem == "noretain":
            settings["gradcache_retain_last"] = False
        elif stem == "retain":
            settings["gradcache_retain_tokens"] = number
        elif stem == "unfused":
            settings["optim"]["fused"] = False
        elif stem == "compile":
            settings["compile"] = True
        elif stem == "layers":
            settings["compile"] = "layers"
        elif stem == "bucket":
            settings["pad_multiple"] = number
        elif stem in ("packed", "flash"):
            settings["model"]["unpadded"] = True
            if stem == "flash":
                settings["varlen_kernel"] = "torch_flash"
        elif stem == "tokens":
            settings["gradcache_max_tokens"] = number


def write_records(path: Path, args: argparse.Namespace) -> None:
    """``--batch-size * (warmup + steps)`` records: orig/dv pairs sharing their documents."""
    from dualview.data.schema import Document, Record
    from dualview.io.atomic import write_jsonl

    words = vocabulary_words(args.tokenizer)
    pairs = args.batch_size // 2 * (args.warmup + args.steps)
    per = 1 + args.negatives
    docs = make_texts(words, pairs * per, args.texts, seed=1)
    queries = make_texts(words, pairs, "query", seed=2)
    instructions = make_texts(words, 2 * pairs, "msmarco", seed=3)
    records = []
    for i in range(pairs):
        own = [Document(id=f"d{i}-{j}", text=docs[i * per + j]) for j in range(per)]
        positive, swapped, other = own[0], own[1:3], own[3:]
        records.append(
            Record(
                id=f"q{i}",
                view="orig",
                query=queries[i],
                instruction=instructions[2 * i],
                positives=[positive],
                instruction_negatives=swapped,
                hard_negatives=other,
            )
        )
        records.append(
            Record(
                id=f"q{i}-dv",
                parent_id=f"q{i}",
                view="dv",
                query=queries[i],
                instruction=instructions[2 * i + 1],
                positives=[swapped[0]],
                instruction_negatives=[positive, swapped[1]],
                hard_negatives=other,
            )
        )
    write_jsonl(path, records)


def train_config(args: argparse.Namespace, variant: str, model_dir: Path, work: Path):
    from dualview.train.config import TrainConfig

    base, mods = parse_variant(variant)
    if base in ("ce", "llm"):
        return _reranker_config(args, variant, base, mods, work)
    settings = {
        "model": {
            "name_or_path": str(model_dir),
            "pooling": "cls",
            "query_max_length": args.max_length,
            "document_max_length": args.max_length,
        },
        "data": {"train_file": str(work / "train.jsonl"), "num_negatives": args.negatives},
        "output_dir": str(work / variant),
        "batch_size": args.batch_size,
        "max_steps": args.warmup + args.steps,
        "checkpoint_every": 10_000,
        "optim": {"warmup_steps": 0, "schedule": "constant"},
        "seed": 1,
    }
    if base == "fixed32":
        settings.update(gradcache_chunk_size=32)
        settings["data"]["num_workers"] = 0
    else:
        settings.update(gradcache_chunk_size="auto")
        apply_modifiers(settings, mods)
    return TrainConfig.model_validate(settings)


def _reranker_config(args: argparse.Namespace, variant: str, base: str, mods, work: Path):
    """A reranker family's step on the same records: listwise over each record's candidates,
    the query with its instruction cut to 64 tokens (a quarter on short ``--max-length``),
    the pair to ``--max-length``."""
    from dualview.train.config import TrainConfig

    folder = args.ce_backbone if base == "ce" else args.llm_backbone
    settings = {
        "model": {
            "kind": FAMILY_BASES[base],
            "name_or_path": str(folder),
            "query_max_length": min(64, args.max_length // 4),
            "document_max_length": args.max_length - min(64, args.max_length // 4),
            "query_template": "{query} {instruction}",
            # transformers loads the decoder folder's WordPiece vocabulary as its own
            # byte-level tokenizer (one token per character): single-letter answers
            **({"llm_reranker": {"answers": ["y", "n"]}} if base == "llm" else {}),
        },
        "data": {"train_file": str(work / "train.jsonl"), "num_negatives": args.negatives},
        "loss": {"objective": "rerank_listwise", "temperature": 1.0},
        "output_dir": str(work / variant),
        "batch_size": args.rerank_batch_size,
        "max_steps": args.warmup + args.steps,
        "checkpoint_every": 10_000,
        "optim": {"warmup_steps": 0, "schedule": "constant"},
        "seed": 1,
        "gradcache_chunk_size": "auto",
    }
    apply_modifiers(settings, mods)
    return TrainConfig.model_validate(settings)


def run_ours(args: argparse.Namespace, variant: str, model_dir: Path, work: Path) -> dict:
    from dualview.perf import peak_memory_gib
    from dualview.train.trainer import LOG_FILE, Trainer

    trainer = Trainer(train_config(args, variant, model_dir, work))
    trainer.save_model = lambda: None  # the benchmark keeps no model (saving takes seconds)
    profile = "profile" in parse_variant(variant)[1]
    table = profiled(trainer.train) if profile else (trainer.train(), None)[1]
    bi_encoder = trainer.config.model.kind == "bi_encoder"  # the rerankers': test_gradcache
    replay = replay_difference(trainer) if bi_encoder else None
    log = [json.loads(line) for line in (work / variant / LOG_FILE).read_text().splitlines()]
    timed = log[args.warmup :]
    seconds = timed[-1]["elapsed_s"] - log[args.warmup - 1]["elapsed_s"]
    tokens = sum(r["tokens"] for r in timed)
    flops = sum(r["tflops"] * _step_seconds(log, i) for i, r in enumerate(log) if i >= args.warmup)
    hardware = sum(
        r["hw_tflops"] * _step_seconds(log, i) for i, r in enumerate(log) if i >= args.warmup
    )
    return {
        "variant": variant,
        "s_per_step": seconds / len(timed),
        "documents_per_step": sum(r["documents_encoded"] for r in timed) / len(timed),
        "tokens_per_s": tokens / seconds,
        "tflops": flops / seconds,
        "hw_tflops": hardware / seconds,
        "padding": sum(r["padding"] for r in timed) / len(timed),
        "peak_memory_gib": peak_memory_gib(),
        "losses": [r["loss"] for r in log],
        "chunking": repr(trainer.chunking),
        "gradcache_replay_max_abs_diff": replay,
        **({"profile": table} if table is not None else {}),
    }


def profiled(run) -> str:
    """Run ``run()`` under the torch profiler; the top ops by device (else CPU) time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        run()
    averages = prof.key_averages()
    for key in (("self_device_time_total", "self_cuda_time_total") if cuda else ()) + (
        "self_cpu_time_total",
    ):
        try:
            return averages.table(sort_by=key, row_limit=25)
        except (AttributeError, KeyError, ValueError):
            continue
    return averages.table(row_limit=25)


def replay_difference(trainer) -> float:
    """GradCache's premise: a re-forward under the same RNG state (dropout on) gives the
    embeddings of the no-grad pass. Max |difference| over 8 long texts, under autocast."""
    import torch

    from dualview.train.gradcache import rng_state, set_rng_state

    model = trainer.model
    model.train()
    inputs = model.tokenize(["replay check " * 200] * 8, "document")
    state = rng_state()
    with torch.no_grad(), trainer._autocast():
        first = model.embed(inputs).float()
    set_rng_state(state)
    with trainer._autocast():
        second = model.embed(inputs).float()
    return float((first - second.detach()).abs().max())


def _step_seconds(log: list[dict], index: int) -> float:
    previous = log[index - 1]["elapsed_s"] if index else 0.0
    return log[index]["elapsed_s"] - previous


def run_st(args: argparse.Namespace, model_dir: Path, work: Path) -> dict:
    """sentence-transformers' CachedMNRL on our batches (every column encoded)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import (
        CachedMultipleNegativesRankingLoss,
    )

    from dualview.data.record_index import IndexedRecords
    from dualview.perf import ModelShape, peak_memory_gib, training_flops
    from dualview.retrieval.text import doc_text
    from dualview.train.batching import BatchStream

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(1)
    model = SentenceTransformer(str(model_dir), device=device)
    model.max_seq_length = args.max_length
    loss = CachedMultipleNegativesRankingLoss(model, scale=50.0, mini_batch_size=32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, fused=device == "cuda" or None)
    stream = BatchStream(IndexedRecords(work / "train.jsonl"), args.batch_size, "together", 30)
    shape = ModelShape.of(model[0].auto_model)
    autocast = torch.autocast(device, torch.bfloat16, enabled=device == "cuda")
    seconds = tokens = flops = hardware = 0.0
    for number, (_, batch) in enumerate(stream.iterate(stream.start(), 1)):
        start = time.perf_counter()
        columns = [batch.query_texts]
        columns += [
            [doc_text(r.documents()[j]) for r in batch.records] for j in range(1 + args.negatives)
        ]
        features = [model.tokenize(texts) for texts in columns]
        features = [
            {k: v.to(device) if hasattr(v, "to") else v for k, v in f.items()} for f in features
        ]
        with autocast:
            loss(features, None).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        if number >= args.warmup:
            seconds += time.perf_counter() - start
            lengths = [int(n) for f in features for n in f["attention_mask"].sum(1)]
            tokens += sum(lengths)
            model_flops, hardware_flops = training_flops(shape, lengths, rerun=lengths)
            flops += model_flops
            hardware += hardware_flops
        if number + 1 == args.warmup + args.st_steps:
            break
    steps = args.st_steps
    return {
        "variant": "st",
        "s_per_step": seconds / steps,
        "documents_per_step": args.batch_size * (1 + args.negatives),
        "tokens_per_s": tokens / seconds,
        "tflops": flops / seconds / 1e12,
        "hw_tflops": hardware / seconds / 1e12,
        "padding": None,
        "peak_memory_gib": peak_memory_gib(),
        "losses": None,
        "chunking": "mini_batch_size 32",
    }


def worker(args: argparse.Namespace) -> None:
    import faulthandler

    faulthandler.dump_traceback_later(args.stall_s, exit=True)  # a stalled run shows where
    model_dir, work = Path(args.model_dir), Path(args.work)
    result = (
        run_st(args, model_dir, work)
        if args.variant == "st"
        else run_ours(args, args.variant, model_dir, work)
    )
    print("RESULT " + json.dumps(result), flush=True)


def spawn(
    args: argparse.Namespace, variant: str, model_dir: Path, work: Path, limit: float
) -> dict:
    """Run one variant in a subprocess, echoing its output; past ``limit`` seconds it dumps
    its stacks and is reported as failed."""
    cmd = [sys.executable, __file__, "--worker", variant, "--model-dir", str(model_dir)]
    cmd += ["--work", str(work), "--stall-s", str(round(limit, 1))]
    keys = ("batch_size", "rerank_batch_size", "negatives", "steps", "warmup", "st_steps")
    for key in (*keys, "max_length", "ce_backbone", "llm_backbone"):
        if getattr(args, key) is not None:
            cmd += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    cmd += ["--texts", args.texts, "--tokenizer", args.tokenizer]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    log(f"[{variant}] running (limit {limit:.0f} s)")
    started = time.perf_counter()
    lines: list[str] = []
    with subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        for line in proc.stdout:
            lines.append(line.rstrip())
            if line.startswith(ECHOED):
                log(f"[{variant}] {line.rstrip()}")
    wall = round(time.perf_counter() - started, 1)
    results = [x for x in lines if x.startswith("RESULT ")]
    if proc.returncode != 0 or not results:
        print("\n".join(lines[-30:]), flush=True)
        return {"variant": variant, "error": failure(lines, proc.returncode), "wall_s": wall}
    result = json.loads(results[-1][len("RESULT ") :])
    result["wall_s"] = wall
    result["notes"] = [x for x in lines if x.startswith("gradcache")]
    log(f"[{variant}] {result['s_per_step']:.3f} s/step ({wall} s)")
    return result


#: Lines of a variant's output echoed with its name (steps, budget, errors, stall dumps).
ECHOED = ("step ", "gradcache", "Traceback", "Thread", "  File", "torch.", "RuntimeError")


def failure(lines: list[str], returncode: int) -> str:
    """One line saying why a variant failed: its last exception line, else the exit code."""
    errors = [x for x in lines if "Error" in x or "error:" in x or x.startswith("Timeout")]
    if errors:
        return errors[-1][:500]
    return f"exit code {returncode}: {(lines[-1] if lines else '')[:300]}"


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def compare_losses(a: list[float] | None, b: list[float] | None) -> dict | None:
    if not a or not b:
        return None
    diffs = [abs(x - y) for x, y in zip(a, b, strict=False)]
    return {"max_abs_diff": max(diffs), "mean_abs_diff": sum(diffs) / len(diffs), "a": a, "b": b}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--shape", default="xlmr-large", choices=["xlmr-large", "bert-base", "tiny"]
    )
    parser.add_argument("--tokenizer", default="embedded:minilm")
    parser.add_argument("--backbone", type=Path, help="reuse this backbone folder (--shape's)")
    parser.add_argument("--texts", default="long", choices=["long", "msmarco"])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--rerank-batch-size", type=int, default=16, help="records per step of ce / llm"
    )
    parser.add_argument("--ce-shape", default="bert-base", choices=sorted(SHAPES))
    parser.add_argument("--llm-shape", default="qwen2-0.5b", choices=sorted(SHAPES))
    parser.add_argument("--ce-backbone", type=Path, help="reuse this cross-encoder backbone")
    parser.add_argument("--llm-backbone", type=Path, help="reuse this decoder folder")
    parser.add_argument("--negatives", type=int, default=30)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--st-steps", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="also ours+MOD+MOD")
    parser.add_argument("--stall-s", type=float, default=300.0, help="per-variant time limit")
    parser.add_argument("--budget-s", type=float, default=None, help="limit for all variants")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--worker", dest="variant", help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.variants = [v for v in args.variants.split(",") if v]
    for name in args.variants + ([args.variant] if args.variant else []):
        try:
            parse_variant(name)
        except ValueError as exc:
            parser.error(str(exc))
    return args


def finish(results: list[dict], peak: float | None) -> None:
    """MFU, HFU, speed-up and losses of each variant against ``fixed32`` and ``ours``."""
    by_name = {r["variant"]: r for r in results if "s_per_step" in r}
    for r in by_name.values():
        r["mfu"] = r["tflops"] / peak if peak else None  # PaLM: forward + backward
        r["hfu"] = r["hw_tflops"] / peak if peak else None  # + GradCache's no-grad pass
    base = by_name.get("fixed32")
    for r in by_name.values():
        # against its family's variant without modifiers (ours for fixed32 and st)
        family = parse_variant(r["variant"])[0]
        ours = by_name.get(family if family in FAMILY_BASES else "ours")
        r["speedup_vs_fixed32"] = base["s_per_step"] / r["s_per_step"] if base else None
        r["speedup_vs_ours"] = ours["s_per_step"] / r["s_per_step"] if ours else None
        if ours and r is not ours and r.get("losses"):
            r["losses_vs_ours"] = compare_losses(ours.get("losses"), r["losses"])


def losses_of(results: list[dict], variant: str) -> list[float] | None:
    return next((r.get("losses") for r in results if r["variant"] == variant), None)


def write_result(args: argparse.Namespace, info: dict, peak, results: list[dict]) -> dict:
    finish(results, peak)
    result = {
        "benchmark": "gpu_train",
        "machine": machine_end(info),
        "peak_bf16_tflops": peak,
        "settings": {k: str(v) for k, v in vars(args).items() if k not in ("variant",)},
        "results": results,
        "losses_fixed32_vs_ours": compare_losses(
            losses_of(results, "fixed32"), losses_of(results, "ours")
        ),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def print_table(result: dict) -> None:
    print(
        f"{'variant':24} {'s/step':>7} {'docs':>5} {'tok/s':>9} {'TFLOP/s':>8} {'MFU':>6} "
        f"{'HFU':>6} {'pad':>5} {'mem GiB':>7} {'x fixed32':>9} {'x base':>6} {'loss max|d|':>11}"
    )
    for r in result["results"]:
        if "s_per_step" not in r:
            print(f"{r['variant']:24} {r.get('error') or r.get('skipped')}")
            continue
        mfu = f"{100 * r['mfu']:.1f}%" if r["mfu"] is not None else "n/a"
        hfu = f"{100 * r['hfu']:.1f}%" if r["hfu"] is not None else "n/a"
        pad = f"{r['padding']:.2f}" if r["padding"] is not None else "-"
        mem = f"{r['peak_memory_gib']:.1f}" if r["peak_memory_gib"] is not None else "-"
        speed = f"{r['speedup_vs_ours']:.2f}" if r["speedup_vs_ours"] else "-"
        base = f"{r['speedup_vs_fixed32']:.2f}" if r["speedup_vs_fixed32"] else "-"
        losses = r.get("losses_vs_ours")
        loss = f"{losses['max_abs_diff']:.4f}" if losses else "-"
        print(
            f"{r['variant']:24} {r['s_per_step']:7.3f} {r['documents_per_step']:5.0f} "
            f"{r['tokens_per_s']:9.0f} {r['tflops']:8.1f} {mfu:>6} {hfu:>6} {pad:>5} {mem:>7} "
            f"{base:>9} {speed:>6} {loss:>11}"
        )
    losses = result["losses_fixed32_vs_ours"]
    if losses:
        print(f"loss fixed32 vs ours: max |diff| {losses['max_abs_diff']:.4f} per step")
    print(machine_line(result["machine"]))


def main() -> None:
    args = parse_args()
    if args.variant:
        worker(args)
        return
    from dualview.perf import current_device_name, peak_tflops

    info = machine_start()
    peak = peak_tflops(current_device_name())
    deadline = time.monotonic() + (args.budget_s or float("inf"))
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="gpu-train-") as tmp:
        work = Path(tmp)
        model_dir = args.backbone or build_backbone(args.shape, args.tokenizer, work / "backbone")
        bases = {parse_variant(v)[0] for v in args.variants}
        if "ce" in bases and args.ce_backbone is None:
            args.ce_backbone = build_backbone(args.ce_shape, args.tokenizer, work / "ce")
        if "llm" in bases and args.llm_backbone is None:
            args.llm_backbone = build_backbone(args.llm_shape, args.tokenizer, work / "llm")
        write_records(work / "train.jsonl", args)
        for variant in args.variants:
            left = deadline - time.monotonic()
            if left < MIN_VARIANT_S:
                log(f"[{variant}] skipped: {max(left, 0):.0f} s left of --budget-s")
                results.append({"variant": variant, "skipped": "time budget spent"})
            else:
                results.append(spawn(args, variant, model_dir, work, min(args.stall_s, left)))
            result = write_result(args, info, peak, results)
    print_table(result)


#: A variant is not started with less time than this left of ``--budget-s`` (at the paper's
#: shape a variant needs about 35 s: start-up, model load and 3 steps).
MIN_VARIANT_S = 30.0


if __name__ == "__main__":
    main()
