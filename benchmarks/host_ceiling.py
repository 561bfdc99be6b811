"""Host-side ceiling: how fast the host can feed the model, measured with a null backbone.

The model's forward is replaced by a module that returns zeros of the right shape, so what is
timed is everything around it: reading, tokenizing, collating, handing batches between
processes. Two paths, each the real code:

- **encoding** (`dualview.retrieval.encode.Encoder` -> `dualview.retrieval.inference`): the
  embedded MiniLM's tokenizer, cache off, ``--workers`` tokenizer processes (``1,2``), on
  512-token texts (``long``) and MS MARCO passages (``msmarco``, the passages of
  ``../shared/data/msmarco-1743``, repeated to ``--n``). Beside them, in the same rounds, the
  raw tokenizer alone on the same batches, single-threaded (``raw``): the reference rate.
  Reported: texts/s, real tokens/s, ratio to ``raw``, padding share, bytes handed from the
  workers to the main process per text.
- **training batch** (`dualview.train.batching` + `dualview.train.loader`): the paper's shape
  (64 queries = 32 orig/dv pairs, 30 negatives each, 992 distinct 512-token documents) read
  from a JSONL file through the offset index. ``prepare_s``: seconds to read, build and
  tokenize one batch by one worker. ``stall``: the real `contrastive_step` runs on a null
  `BiEncoder` (GradCache chunks, padding, loss, backward on a zero backbone), topped up with
  a sleep to ``--device-s`` per step (the GPU's share of a step), while 2 loader workers
  prefetch; the time the step waited for its batch is the stall (the first batch, which
  nothing could prefetch, is reported apart).

    .venv/bin/python benchmarks/host_ceiling.py            # minutes on 2 cores
    .venv/bin/python benchmarks/host_ceiling.py --tiny     # tests/test_bench_host_ceiling.py
    .venv/bin/python benchmarks/host_ceiling.py --profile  # cProfile of both paths, inline

Writes ``benchmarks/results/host_ceiling.json`` (or ``--out``) and prints a table.
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # every rate here is single-threaded per process

import argparse
import cProfile
import io
import json
import pstats
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _gpu import build_backbone, make_texts, vocabulary_words
from _machine import machine_end, machine_line, machine_start

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "host_ceiling.json"
MSMARCO = ROOT.parent / "shared" / "data" / "msmarco-1743" / "corpus.jsonl"
TOKENIZER = "embedded:minilm"
#: GPU share of one paper-shape step by default: bert-base shape, 992 x ~487-token documents,
#: GradCache (4 forward-equivalents) at 40% MFU of an H100 (dualview.perf), about 0.9 s.
DEFAULT_DEVICE_S = 0.9
#: GradCache token budget per chunk measured on an H100 for the paper config (README).
CHUNK_TOKENS = 50_754
#: Goals (issue 25): encode host path vs the raw tokenizer on 512-token texts.
GOAL_RATIO = {1: 0.8, 2: 1.5}
GOAL_PREPARE_S = 1.5


def log(message: str) -> None:
    print(message, flush=True)


# -- null backbones -------------------------------------------------------------------------


def null_sentence_model(model: Any) -> Any:
    """Replace the forward of SentenceTransformer ``model`` by zeros [batch, dim]; returns the
    null module, which tallies the batches it was handed (bytes, positions)."""
    import torch
    from torch import nn

    class NullSentenceForward(nn.Module):
        def __init__(self, dim: int) -> None:
            super().__init__()
            self.dim = dim
            self.bytes = 0
            self.texts = 0
            self.zeros: dict[int, Any] = {}  # one output per batch size: its cost is no host's

        def forward(self, features: dict[str, Any]) -> dict[str, Any]:
            ids = features["input_ids"]
            self.bytes += sum(
                v.numel() * v.element_size() for v in features.values() if torch.is_tensor(v)
            )
            rows = ids.shape[0] if ids.dim() == 2 else len(features.get("cu_seq_lens", [0])) - 1
            self.texts += rows
            if rows not in self.zeros:
                self.zeros[rows] = torch.zeros(rows, self.dim)
            return {"sentence_embedding": self.zeros[rows]}

    getter = getattr(model, "get_embedding_dimension", None)
    getter = getter or model.get_sentence_embedding_dimension
    null = NullSentenceForward(int(getter()))
    object.__setattr__(model, "forward", null)  # the instance's forward, not a submodule
    return null


def null_backbone(config: Any) -> Any:
    """A backbone whose last hidden state is a zero tensor [B, T, H] (one expanded parameter,
    so that backward runs through the real step)."""
    import torch
    from torch import nn

    class NullBackbone(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = config
            self.anchor = nn.Parameter(torch.zeros(1, 1, config.hidden_size))

        def forward(self, input_ids: Any, attention_mask: Any = None, **_: Any) -> Any:
            batch, width = input_ids.shape
            hidden = self.anchor.expand(batch, width, config.hidden_size)
            return type("Out", (), {"last_hidden_state": hidden})()

    return NullBackbone()


# -- texts ----------------------------------------------------------------------------------


def msmarco_texts(n: int) -> list[str]:
    """The MS MARCO passages (title + text, as documents are read), repeated to ``n``; a
    repeat starts with its round number, so that no text is a duplicate (the encoder encodes
    a duplicate once)."""
    from dualview.data.schema import Document
    from dualview.retrieval.text import doc_text

    rows = [json.loads(line) for line in MSMARCO.read_text(encoding="utf-8").splitlines()]
    passages = [
        doc_text(Document(id=r["_id"], title=r.get("title", ""), text=r["text"])) for r in rows
    ]
    rounds = [f"{i // len(passages)} " if i >= len(passages) else "" for i in range(n)]
    return [rounds[i] + passages[i % len(passages)] for i in range(n)]


def case_texts(kind: str, n: int, model: str = TOKENIZER) -> list[str]:
    if kind == "msmarco":
        return msmarco_texts(n)
    return make_texts(vocabulary_words(model), n, "long", seed=7)


# -- encoding -------------------------------------------------------------------------------


def load_model(max_length: int, name: str = TOKENIZER) -> Any:
    from dualview.retrieval.encode import load_sentence_transformer

    model = load_sentence_transformer(name, device="cpu")
    model.max_seq_length = max_length
    return model


def cpu_seconds() -> float:
    """User + system CPU of this process and its reaped children (the tokenizer workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_raw(model: Any, texts: list[str], batch_size: int, max_length: int) -> dict[str, Any]:
    """The tokenizer alone on the encoder's batches (length-sorted, padded to tensors)."""
    ordered = sorted(texts, key=len, reverse=True)
    tokenizer = model.tokenizer
    tokens = positions = 0
    cpu, start = cpu_seconds(), time.perf_counter()
    for i in range(0, len(ordered), batch_size):
        out = tokenizer(
            ordered[i : i + batch_size],
            padding=True,
            truncation=True,
            max_length=max_length,
            return_tensors="pt",
        )
        tokens += int(out["attention_mask"].sum())
        positions += int(out["attention_mask"].numel())
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "cpu_s": cpu_seconds() - cpu,
        "tokens": tokens,
        "positions": positions,
        "bytes": None,
    }


def run_encoder(model: Any, texts: list[str], batch_size: int, workers: int) -> dict[str, Any]:
    """``Encoder.encode`` on the null model, worker start-up included."""
    from dualview.retrieval.encode import Encoder

    null = null_sentence_model(model)
    encoder = Encoder(
        model, batch_size=batch_size, cache=False, show_progress=False, num_workers=workers
    )
    cpu, start = cpu_seconds(), time.perf_counter()
    vectors = encoder.encode(texts)
    seconds = time.perf_counter() - start
    cpu = cpu_seconds() - cpu  # the workers have exited (and been reaped) by now
    assert vectors.shape[0] == len(texts) and null.texts == len(texts), "texts lost"
    stats = encoder.stats
    return {
        "seconds": seconds,
        "cpu_s": cpu,
        "tokens": stats.tokens,
        "positions": stats.padded_tokens,
        "bytes": null.bytes,
    }


def summarize(runs: list[dict[str, Any]], n: int) -> dict[str, Any]:
    best = min(runs, key=lambda r: r["seconds"])
    return {
        "texts": n,
        "times_s": [round(r["seconds"], 3) for r in runs],
        "best_s": round(best["seconds"], 3),
        "texts_per_s": round(n / best["seconds"], 1),
        # load-independent: texts per CPU-second, all processes together (best run)
        "texts_per_cpu_s": round(n / min(r["cpu_s"] for r in runs), 1),
        "tokens_per_s": round(best["tokens"] / best["seconds"], 1),
        "padding": round(1 - best["tokens"] / best["positions"], 4) if best["positions"] else 0.0,
        "bytes_per_text": round(best["bytes"] / n, 1) if best["bytes"] is not None else None,
    }


def encode_case(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    n = args.n_long if kind == "long" else args.n_msmarco
    texts = case_texts(kind, n, args.model)
    model = load_model(args.max_length, args.model)
    variants = ["raw", *[f"workers={w}" for w in args.workers]]
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for round_ in range(args.repeats):
        for variant in variants:  # alternating rounds: a load change hits every variant
            if variant == "raw":
                run = run_raw(model, texts, args.batch_size, args.max_length)
            else:
                workers = int(variant.split("=")[1])
                run = run_encoder(model, texts, args.batch_size, workers)
            runs[variant].append(run)
            log(f"  {kind} round {round_ + 1} {variant}: {n / run['seconds']:.0f} texts/s")
    summary = {v: summarize(r, n) for v, r in runs.items()}
    raw, raw_cpu = summary["raw"]["texts_per_s"], summary["raw"]["texts_per_cpu_s"]
    for values in summary.values():
        values["vs_raw"] = round(values["texts_per_s"] / raw, 3)
        values["cpu_vs_raw"] = round(values["texts_per_cpu_s"] / raw_cpu, 3)
    return {"texts": kind, "n": n, "batch_size": args.batch_size, "runs": summary}


# -- padding, before and after packing ------------------------------------------------------


def padding_case(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """Padding share of encode batches and of GradCache chunks, padded and packed
    (`dualview.models.unpadded.pack`: the positions the model runs on)."""
    from dualview.models import unpadded
    from dualview.models.tokens import padded_width, plan_chunks, tokenize_texts

    model = load_model(args.max_length, args.model)
    texts = case_texts(kind, args.n_long if kind == "long" else args.n_msmarco, args.model)
    tokens = tokenize_texts(model.tokenizer, texts, args.max_length)
    lengths = tokens.lengths.tolist()
    by_chars = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # as the encoder sorts
    batches = [by_chars[i : i + args.batch_size] for i in range(0, len(texts), args.batch_size)]
    chunks = plan_chunks(lengths, max_tokens=CHUNK_TOKENS)
    packed = sum(int(unpadded.pack(tokens, c)["input_ids"].numel()) for c in chunks)
    return {
        "texts": kind,
        "mean_tokens": round(sum(lengths) / len(lengths), 1),
        "encode_batches_padded": round(unpadded.padding_share(lengths, batches, int), 4),
        "train_chunks_padded": round(
            unpadded.padding_share(lengths, chunks, lambda n: padded_width(n, args.max_length)), 4
        ),
        "packed": round(1 - sum(lengths) / packed, 4),
    }


def packed_vs_padded(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """CPU seconds of forward + backward of the embedded MiniLM on GradCache chunks of
    ``kind`` texts (one thread; eval mode, so both paths compute the same function),
    padded against packed (`model.unpadded`); alternating rounds, best of 3."""
    import torch

    from dualview.models.bi_encoder import BiEncoder
    from dualview.models.config import ModelConfig
    from dualview.models.tokens import plan_chunks

    texts = case_texts(kind, args.packed_texts)
    models = {
        name: BiEncoder(ModelConfig(name_or_path=TOKENIZER, unpadded=name == "packed")).eval()
        for name in ("padded", "packed")
    }
    tokens = models["padded"].tokenize_ids(texts, "document")
    chunks = plan_chunks(tokens.lengths, max_items=args.packed_chunk)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    best = {name: float("inf") for name in models}
    try:
        for _ in range(3):
            for name, model in models.items():
                start = time.thread_time()
                for chunk in chunks:
                    model.embed(model.pad(tokens, chunk, "document")).sum().backward()
                best[name] = min(best[name], time.thread_time() - start)
                model.zero_grad(set_to_none=True)
    finally:
        torch.set_num_threads(threads)
    return {
        "texts": kind,
        "n": len(texts),
        "chunk": args.packed_chunk,
        "padded_cpu_s": round(best["padded"], 3),
        "packed_cpu_s": round(best["packed"], 3),
        "packed_speedup": round(best["padded"] / best["packed"], 3),
    }


# -- training batches -----------------------------------------------------------------------


def write_training_file(path: Path, args: argparse.Namespace) -> None:
    """Paper-shape records: orig/dv pairs sharing their 1 + ``negatives`` documents."""
    from gpu_train import write_records

    shape = argparse.Namespace(
        tokenizer=args.model,
        batch_size=args.train_batch,
        negatives=args.negatives,
        warmup=0,
        steps=args.train_steps + 1,
        texts="long",
    )
    write_records(path, shape)


def training_parts(work: Path, args: argparse.Namespace) -> tuple[Any, Any, Any, Any]:
    """``(stream, prepare, null bi-encoder, loss)`` as the trainer builds them."""
    import functools

    from dualview.models.bi_encoder import BiEncoder
    from dualview.models.config import ModelConfig
    from dualview.train.batching import BatchStream
    from dualview.train.loader import BatchTokenizer
    from dualview.train.objectives import RelationInfoNCE
    from dualview.train.step import text_groups
    from dualview.train.trainer import load_training_records

    records = load_training_records(work / "train.jsonl")
    stream = BatchStream(records, args.train_batch, num_negatives=args.negatives, seed=1)
    backbone = build_backbone("tiny", args.model, work / "backbone")
    config = ModelConfig(
        name_or_path=str(backbone),
        pooling="cls",
        query_max_length=args.max_length,
        document_max_length=args.max_length,
    )
    model = BiEncoder(config)
    model.backbone = null_backbone(model.backbone.config)
    loss_fn = RelationInfoNCE()
    lengths = {"query": args.max_length, "document": args.max_length}
    prepare = BatchTokenizer(
        model.tokenizer, lengths, functools.partial(text_groups, loss_fn=loss_fn)
    )
    return stream, prepare, model, loss_fn


def prepare_times(stream: Any, prepare: Any, steps: int) -> tuple[list[float], Any]:
    """Seconds to read, build and tokenize each of the first ``steps`` batches, inline."""
    times, cpu, batch = [], [], None
    for _, indices in list(stream.plans(stream.start(), 1))[:steps]:
        start, thread = time.perf_counter(), time.thread_time()
        batch = prepare(stream.build(indices))
        times.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - thread)
    return times, cpu, batch


def tokenize_compare(tokenizer: Any, texts: list[str], max_length: int, rounds: int) -> dict:
    """Thread CPU seconds to tokenize a batch's documents: the ordinary tokenizer call with
    Python flattening (as before `dualview.models.token_ids`) against `tokenize_texts`, in
    alternating rounds; best of ``rounds``."""
    import torch

    from dualview.models.tokens import tokenize_texts

    def ordinary() -> Any:
        ids = tokenizer(
            texts,
            truncation=True,
            max_length=max_length,
            return_attention_mask=False,
            return_token_type_ids=False,
        )["input_ids"]
        return torch.tensor([t for s in ids for t in s], dtype=torch.int32)

    def ours() -> Any:
        return tokenize_texts(tokenizer, texts, max_length).ids

    best = {"call": float("inf"), "backend": float("inf")}
    for _ in range(rounds):
        for name, fn in (("call", ordinary), ("backend", ours)):
            start = time.thread_time()
            result = fn()
            best[name] = min(best[name], time.thread_time() - start)
        assert torch.equal(ordinary(), result), "token ids differ"
    return {
        "texts": len(texts),
        "call_cpu_s": round(best["call"], 3),
        "backend_cpu_s": round(best["backend"], 3),
        "speedup": round(best["call"] / best["backend"], 3),
    }


def stall_run(stream: Any, prepare: Any, model: Any, loss_fn: Any, args: argparse.Namespace):
    """Steps on the null model fed by 2 prefetching workers: wait per step, host step time."""
    from dualview.train.loader import prepared_batches
    from dualview.train.step import Chunking, contrastive_step

    chunking = Chunking(max_tokens=CHUNK_TOKENS)
    batches = prepared_batches(stream, stream.start(), 1, prepare, num_workers=2, prefetch=2)
    waits, host, padding, documents = [], [], [], 0
    for _ in range(args.train_steps):
        start = time.perf_counter()
        item = next(batches, None)
        waits.append(time.perf_counter() - start)
        if item is None:
            break
        _, batch = item
        start = time.perf_counter()
        stats = contrastive_step(model, loss_fn, batch, chunk_size=chunking)
        model.zero_grad(set_to_none=True)
        spent = time.perf_counter() - start
        host.append(spent)
        padding.append(1 - stats.tokens / stats.padded_tokens)
        documents = stats.documents
        time.sleep(max(0.0, args.device_s - spent))  # the GPU's share of the step
    batches.close()
    return waits, host, padding, documents


def train_case(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="host-ceiling-") as tmp:
        work = Path(tmp)
        write_training_file(work / "train.jsonl", args)
        stream, prepare, model, loss_fn = training_parts(work, args)
        times, cpu, batch = prepare_times(stream, prepare, args.train_steps)
        log(f"  prepare by one worker: {', '.join(f'{t:.2f}' for t in times)} s")
        log(f"  of which CPU: {', '.join(f'{t:.2f}' for t in cpu)} s")
        compare = tokenize_compare(model.tokenizer, batch.doc_texts, args.max_length, 3)
        log(f"  tokenize documents, CPU s: {compare}")
        waits, host, padding, documents = stall_run(stream, prepare, model, loss_fn, args)
        log(f"  waits with 2 workers: {', '.join(f'{w:.2f}' for w in waits)} s")
        tokens = {name: t for name, t in batch.tokens.items()}
        handed = sum(
            t.ids.numel() * t.ids.element_size() + t.lengths.numel() * 8 for t in tokens.values()
        )
        texts = sum(len(t) for t in tokens.values())
        return {
            "queries": len(batch.query_texts),
            "documents": len(batch.doc_texts),
            "document_tokens_mean": round(float(tokens["documents"].lengths.float().mean()), 1),
            "prepare_s": [round(t, 3) for t in times],
            "prepare_s_median": round(statistics.median(times), 3),
            # load-independent: CPU seconds of the preparing thread
            "prepare_cpu_s": [round(t, 3) for t in cpu],
            "prepare_cpu_s_median": round(statistics.median(cpu), 3),
            "tokenize_documents": compare,
            "device_s": args.device_s,
            "first_wait_s": round(waits[0], 3),
            "stall_s": [round(w, 3) for w in waits[1:]],
            "stall_s_max": round(max(waits[1:], default=0.0), 3),
            "stall_s_total": round(sum(waits[1:]), 3),
            "step_host_s_median": round(statistics.median(host), 3),
            "padding": round(statistics.mean(padding), 4),
            "bytes_per_text": round(handed / texts, 1),
            "documents_per_step": documents,
        }


# -- profile --------------------------------------------------------------------------------


def top_entries(profile: cProfile.Profile, limit: int) -> list[dict[str, Any]]:
    """The ``limit`` functions with the most own time."""
    stats = pstats.Stats(profile, stream=io.StringIO())
    rows = []
    for (path, line, name), (_, calls, own, total, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{Path(path).name}:{line}({name})" if line else name
        rows.append({"function": where, "calls": calls, "own_s": own, "total_s": total})
    rows.sort(key=lambda r: -r["own_s"])
    return [
        {**r, "own_s": round(r["own_s"], 3), "total_s": round(r["total_s"], 3)}
        for r in rows[:limit]
    ]


def profile_paths(args: argparse.Namespace) -> dict[str, Any]:
    """cProfile of the encode path inline (0 workers: the worker's and the main process's
    work in one process) on long texts, and of one training batch prepared inline."""
    model = load_model(args.max_length, args.model)
    texts = case_texts("long", args.n_long, args.model)
    profile = cProfile.Profile()
    profile.enable()
    run_encoder(model, texts, args.batch_size, 0)
    profile.disable()
    encode = top_entries(profile, args.profile_top)
    with tempfile.TemporaryDirectory(prefix="host-ceiling-") as tmp:
        work = Path(tmp)
        write_training_file(work / "train.jsonl", args)
        stream, prepare, _, _ = training_parts(work, args)
        prepare_times(stream, prepare, 1)  # warm: imports, first-call setup
        profile = cProfile.Profile()
        profile.enable()
        prepare_times(stream, prepare, 2)
        profile.disable()
    return {
        "encode_long_inline": encode,
        "train_prepare_2_batches": top_entries(profile, args.profile_top),
    }


# -- main -----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", default="long,msmarco", help="encode cases: long, msmarco")
    parser.add_argument("--n-long", type=int, default=2048)
    parser.add_argument("--n-msmarco", type=int, default=8192)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--workers", default="1,2", help="encoder tokenizer processes to compare")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--train-batch", type=int, default=64, help="queries per training batch")
    parser.add_argument("--negatives", type=int, default=30)
    parser.add_argument("--train-steps", type=int, default=6)
    parser.add_argument("--device-s", type=float, default=DEFAULT_DEVICE_S)
    parser.add_argument("--no-train", action="store_true", help="skip the training batch")
    parser.add_argument("--packed-texts", type=int, default=128, help="texts, packed vs padded")
    parser.add_argument("--packed-chunk", type=int, default=32, help="texts per chunk there")
    parser.add_argument("--profile", action="store_true", help="cProfile instead of timing")
    parser.add_argument("--profile-top", type=int, default=15)
    parser.add_argument("--tiny", action="store_true", help="smoke test sizes")
    parser.add_argument(
        "--model",
        default=TOKENIZER,
        help="whose tokenizer (a sentence-transformers name or folder; default the embedded "
        "MiniLM, which a GPU machine lacks: give a backbone folder there)",
    )
    parser.add_argument("--no-packed", action="store_true", help="skip packed vs padded (CPU)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.workers = [int(w) for w in args.workers.split(",") if w]
    if args.tiny:
        args.n_long, args.n_msmarco, args.repeats = 64, 128, 1
        args.train_batch, args.negatives, args.train_steps = 8, 3, 3
        args.batch_size, args.device_s = 16, 0.05
        args.packed_texts, args.packed_chunk = 8, 4
    return args


def goals(result: dict[str, Any]) -> dict[str, bool]:
    met = {}
    for case in result["encode"]:
        if case["texts"] != "long":
            continue
        for workers, ratio in GOAL_RATIO.items():
            run = case["runs"].get(f"workers={workers}")
            if run is not None:
                met[f"long workers={workers} >= {ratio}x raw"] = run["vs_raw"] >= ratio
    train = result.get("train")
    if train:
        met[f"train prepare <= {GOAL_PREPARE_S} s"] = train["prepare_s_median"] <= GOAL_PREPARE_S
        met["train never waited on (2 workers)"] = train["stall_s_max"] < 0.01
    return met


def print_table(result: dict[str, Any]) -> None:
    print(
        f"{'case':9} {'variant':10} {'texts/s':>8} {'tokens/s':>10} {'x raw':>6} "
        f"{'texts/cpu-s':>11} {'x raw':>6} {'pad':>6} {'B/text':>7}"
    )
    for case in result["encode"]:
        for variant, run in case["runs"].items():
            size = f"{run['bytes_per_text']:.0f}" if run["bytes_per_text"] is not None else "-"
            print(
                f"{case['texts']:9} {variant:10} {run['texts_per_s']:8.0f} "
                f"{run['tokens_per_s']:10.0f} {run['vs_raw']:6.2f} {run['texts_per_cpu_s']:11.0f} "
                f"{run['cpu_vs_raw']:6.2f} {run['padding']:6.3f} {size:>7}"
            )
    for case in result["padding"]:
        print(
            f"padding, {case['texts']} ({case['mean_tokens']:.0f} tokens): encode batches "
            f"{case['encode_batches_padded']:.3f}, training chunks "
            f"{case['train_chunks_padded']:.3f}, packed {case['packed']:.3f}"
        )
    for case in result["packed_vs_padded"]:
        print(
            f"MiniLM forward + backward, {case['texts']}, chunks of {case['chunk']}: padded "
            f"{case['padded_cpu_s']:.2f} CPU-s, packed {case['packed_cpu_s']:.2f} CPU-s "
            f"({case['packed_speedup']:.2f}x)"
        )
    train = result.get("train")
    if train:
        print(
            f"training batch ({train['queries']} queries, {train['documents']} documents of "
            f"{train['document_tokens_mean']:.0f} tokens): prepared in "
            f"{train['prepare_s_median']:.2f} s ({train['prepare_cpu_s_median']:.2f} CPU-s) by "
            f"one worker (documents' tokenizer CPU: ordinary call "
            f"{train['tokenize_documents']['call_cpu_s']:.2f} s, backend "
            f"{train['tokenize_documents']['backend_cpu_s']:.2f} s); with 2 workers and "
            f"{train['device_s']:.2f} s steps: first wait "
            f"{train['first_wait_s']:.2f} s, then max stall {train['stall_s_max']:.3f} s (host "
            f"part of the step {train['step_host_s_median']:.2f} s, padding {train['padding']:.3f})"
        )
    for goal, ok in result["goals"].items():
        print(f"goal {goal}: {'met' if ok else 'NOT met'}")
    print(machine_line(result["machine"]))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    info = machine_start()
    if args.profile:
        result = {"benchmark": "host_ceiling_profile", "profile": profile_paths(args)}
        result["machine"] = machine_end(info)
        for name, rows in result["profile"].items():
            print(name)
            for row in rows:
                own, total, calls = row["own_s"], row["total_s"], row["calls"]
                print(f"  {own:7.3f} {total:7.3f} {calls:>8} {row['function']}")
        print(machine_line(result["machine"]))
        out = args.out.with_name(args.out.stem + "_profile.json")
    else:
        encode = []
        for kind in args.texts.split(","):
            log(f"encoding, {kind} texts")
            encode.append(encode_case(kind, args))
        padding = [padding_case(kind, args) for kind in args.texts.split(",")]
        # 512-token chunks have ~1% padding; the CPU cost of the packed path
        packed = [] if args.no_packed else [packed_vs_padded("msmarco", args)]
        for case in packed:
            log(f"  padded vs packed forward + backward: {case}")
        train = None
        if not args.no_train:
            log("training batch")
            train = train_case(args)
        result = {
            "benchmark": "host_ceiling",
            "encode": encode,
            "padding": padding,
            "packed_vs_padded": packed,
            "train": train,
        }
        result["machine"] = machine_end(info)
        result["settings"] = {k: str(v) for k, v in vars(args).items()}
        result["goals"] = goals(result)
        print_table(result)
        out = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
