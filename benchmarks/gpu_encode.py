"""Encoding throughput, ours against sentence-transformers: texts/s, tokens/s, TFLOP/s, MFU.

For each backbone shape (``--shapes``: random-init models of the paper's shapes built from
configs, :mod:`_gpu`; tokenizer from ``--tokenizer``) and each text profile (``--texts``:
``msmarco`` passage lengths or ``long``, 512+ tokens), in one run, alternating rounds, best of
``--repeats``:

- ``st-fp32``: ``SentenceTransformer.encode`` as it comes (fp32), the baseline;
- ``st-bf16``: the same on a bf16 copy of the model (``model.to(torch.bfloat16)``);
- ``ours``: :class:`dualview.retrieval.encode.Encoder` with the cache off and its default
  precision (bf16 on CUDA, fp32 on CPU), tokenizer workers on CUDA;
- ``ours-wN``: the same with ``N`` tokenizer worker processes;
- ``ids+compile``: ``ids`` with each transformer layer compiled (``Encoder(compile=True)``;
  one untimed encoding of all texts first compiles every width it will see);
- ``ids``: ``Encoder(token_cache=...)``, the device-side ceiling: token ids made once
  (`dualview.models.token_cache`, shared by every shape: they all use ``--tokenizer``, so
  the second shape reads the first's ids back) by one untimed encoding (``ids_prepare_s``),
  then read from that cache in the timed call: no tokenizer in the loop.

``--variants`` picks among them (default ``st-fp32,st-bf16,ours``); ``--backbones DIR`` reuses
``DIR/<shape>`` folders where they exist (``benchmarks/gpu_all.py`` builds them once).

Both normalize the vectors. On CUDA the baselines encode the first quarter of the texts
(they are tokenizer-bound and slow; the texts are drawn at random, so any slice has the same
length profile); ``ours`` encodes all ``--n``. Reported per run: texts/s, real tokens/s,
achieved TFLOP/s (:func:`dualview.perf.encoder_flops`, one forward, real tokens only), MFU
against the device's dense bf16 peak (n/a on CPU), peak GPU memory (weights + the run's
working memory), padding (share of padded positions), and ours / baseline throughput.
``min_cosine_vs_st_fp32`` checks that our vectors are the fp32 ones (random weights, so
only gross errors show).

    .venv/bin/python benchmarks/gpu_encode.py --tiny                 # CPU smoke test (default
                                                                     # on a machine without CUDA)
    python3 benchmarks/gpu_encode.py --tokenizer .gpu/tokenizer --out $OUT/gpu_encode.json

Writes ``benchmarks/results/gpu_encode.json`` (or ``--out``) and prints a table.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _gpu import build_backbone, make_texts, vocabulary_words
from _machine import machine_end, machine_line, machine_start

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "gpu_encode.json"
VARIANTS = ("st-fp32", "st-bf16", "ours")
#: Every variant name this script knows (``ours-wN``: N tokenizer workers).
KNOWN = ("st-fp32", "st-bf16", "ours", "ours-wN", "ids", "ids+compile")
#: Texts per (shape, profile) by default: about 4 minutes for the four GPU cases on an H100.
DEFAULT_N = {
    ("bert-base", "msmarco"): 20_000,
    ("bert-base", "long"): 10_000,
    ("xlmr-large", "msmarco"): 8_000,
    ("xlmr-large", "long"): 4_000,
    ("tiny", "msmarco"): 1_000,
    ("tiny", "long"): 200,
}
#: Share of the texts the (slow) baselines encode on CUDA.
BASELINE_SHARE = 4
#: Throughput goals of ours on CUDA, texts/s.
GOALS = {("bert-base", "long"): 2_500, ("xlmr-large", "long"): 1_200}


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def token_lengths(model: Any, texts: list[str]) -> list[int]:
    """Real tokens of each text as the model reads it (truncated at its max length)."""
    ids = model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)["input_ids"]
    return [len(x) for x in ids]


def st_padded_tokens(texts: list[str], lengths: list[int], batch_size: int) -> int:
    """Positions sentence-transformers runs on: it sorts by characters, pads per batch."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    return sum(max(lengths[i] for i in b) * len(b) for b in batches)


def weights_gib(model: Any) -> float:
    return sum(p.numel() * p.element_size() for p in model.parameters()) / 2**30


def timed(fn: Any, texts: list[str], cuda: bool) -> tuple[float, float | None, Any]:
    """``(seconds, working GPU memory in GiB or None, vectors)`` of ``fn(texts)``."""
    import torch

    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    start = time.perf_counter()
    vectors = fn(texts)
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    extra = (torch.cuda.max_memory_allocated() - before) / 2**30 if cuda else None
    return seconds, extra, vectors


@dataclass
class Variant:
    """One way to encode: the call, the model it runs, our encoder (for its stats) or None."""

    encode: Callable[[list[str]], Any]
    model: Any
    encoder: Any = None


def make_variants(
    model: Any, args: argparse.Namespace, token_cache: Any = None
) -> dict[str, Variant]:
    import torch

    from dualview.retrieval.encode import Encoder

    def st(target: Any) -> Callable[[list[str]], Any]:
        return lambda texts: target.encode(
            texts, batch_size=args.batch_size, normalize_embeddings=True, show_progress_bar=False
        )

    half = copy.deepcopy(model).to(torch.bfloat16)
    variants: dict[str, Variant] = {}
    for name in args.variants:
        if name == "st-fp32":
            variants[name] = Variant(st(model), model)
        elif name == "st-bf16":
            variants[name] = Variant(st(half), half)
        elif name in ("ids", "ids+compile"):  # + each layer compiled (Encoder(compile=True))
            ids = Encoder(
                model, batch_size=args.batch_size, cache=False, show_progress=False,
                token_cache=token_cache, compile=name == "ids+compile",
            )  # fmt: skip
            variants[name] = Variant(ids.encode, None, ids)
        else:  # ours, ours-wN
            workers = int(name[len("ours-w") :]) if name.startswith("ours-w") else args.workers
            ours = Encoder(
                model, batch_size=args.batch_size, cache=False, show_progress=False,
                num_workers=workers,
            )  # fmt: skip
            variants[name] = Variant(ours.encode, None, ours)
    return variants


def variant_weights_gib(name: str, variant: Variant) -> float:
    if variant.model is not None:
        return weights_gib(variant.model)
    return weights_gib(variant.encoder.runner)


def run_rounds(
    variants: dict[str, Variant], texts: dict[str, list[str]], repeats: int, cuda: bool
) -> dict[str, dict[str, Any]]:
    """Alternate the variants ``repeats`` times; keep every time, the best run's details."""
    from dualview.retrieval.inference import EncodeStats

    runs: dict[str, dict[str, Any]] = {name: {"times_s": []} for name in variants}
    for number in range(1, repeats + 1):
        for name, variant in variants.items():
            if variant.encoder is not None:
                variant.encoder.stats = EncodeStats()  # count this run only
            seconds, extra, vectors = timed(variant.encode, texts[name], cuda)
            run = runs[name]
            if seconds <= min(run["times_s"], default=float("inf")):
                run.update(working_gib=extra, vectors=vectors)
                if variant.encoder is not None:
                    run["stats"] = variant.encoder.stats.to_dict()
            run["times_s"].append(round(seconds, 3))
            log(f"  round {number} {name:8} {len(texts[name]) / seconds:9.1f} texts/s")
    return runs


def summarize(
    name: str, run: dict[str, Any], n: int, lengths: list[int], context: dict[str, Any]
) -> dict[str, Any]:
    """Rates, TFLOP/s, MFU, memory and padding of one variant's best run."""
    from dualview.perf import encoder_flops

    best = min(run["times_s"])
    tokens = sum(lengths[:n])
    tflops = encoder_flops(context["shape"], lengths[:n], passes=1) / best / 1e12
    padded = run["stats"]["padded_tokens"] if "stats" in run else context["st_padded"][name]
    weights = context["weights_gib"][name]
    return {
        "texts": n,
        "times_s": run["times_s"],
        "best_s": best,
        "texts_per_s": round(n / best, 1),
        "tokens_per_s": round(tokens / best, 1),
        "tflops": round(tflops, 3),
        "mfu": round(tflops / context["peak"], 4) if context["peak"] else None,
        "peak_memory_gib": round(weights + run["working_gib"], 3)
        if run["working_gib"] is not None
        else None,
        "padding": round(1 - tokens / padded, 4) if padded else 0.0,
        **({"stats": run["stats"]} if "stats" in run else {}),
    }


def min_cosine(a: Any, b: Any) -> float:
    import numpy as np

    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return float((a * b).sum(axis=1).min())


def bench_case(
    model: Any,
    shape: str,
    kind: str,
    words: list[str],
    args: argparse.Namespace,
    peak: Any,
    token_cache: Any = None,
) -> dict[str, Any]:
    """Every variant on one (shape, text profile)."""
    from dualview.perf import ModelShape
    from dualview.retrieval.inference import default_workers

    cuda = model.device.type == "cuda"
    n = args.n or DEFAULT_N.get((shape, kind), 1_000)
    n_base = max(1, n // BASELINE_SHARE) if cuda else n
    texts = make_texts(words, n, kind, seed=7)
    lengths = token_lengths(model, texts)
    variants = make_variants(model, args, token_cache)
    subsets = {name: texts[:n_base] if name.startswith("st-") else texts for name in variants}
    extra: dict[str, Any] = {}
    if "ids" in variants:  # one untimed encoding fills the token-id cache (or reads it)
        started = time.perf_counter()
        variants["ids"].encode(texts)
        extra["ids_prepare_s"] = round(time.perf_counter() - started, 3)
        extra["ids_cache"] = {"hits": token_cache.hits, "misses": token_cache.misses}
    if "ids+compile" in variants:  # untimed too: the compile of every width it will see
        started = time.perf_counter()
        variants["ids+compile"].encode(texts)
        extra["compile_warmup_s"] = round(time.perf_counter() - started, 3)
    log(f"[{shape}/{kind}] {n} texts, mean {sum(lengths) / n:.0f} tokens; warming up")
    for variant in variants.values():
        variant.encode(texts[: 4 * args.batch_size])
    runs = run_rounds(variants, subsets, args.repeats, cuda)
    context = {
        "shape": ModelShape.of(model[0].auto_model),
        "peak": peak,
        "st_padded": {
            v: st_padded_tokens(texts[:n_base], lengths[:n_base], args.batch_size)
            for v in ("st-fp32", "st-bf16")
        },
        "weights_gib": {name: variant_weights_gib(name, v) for name, v in variants.items()},
    }
    result = {
        name: summarize(name, runs[name], len(subsets[name]), lengths, context) for name in variants
    }
    case = {
        "shape": shape,
        "texts": kind,
        "n": n,
        "baseline_n": n_base,
        "mean_tokens": round(sum(lengths) / n, 1),
        "runs": result,
        **extra,
    }
    if "ids" in variants:
        extra_ids = variants["ids"].encoder
        case["ids_used_token_cache"] = extra_ids.used_token_cache
        case["ids_tokens_match"] = result["ids"]["stats"]["tokens"] == sum(lengths)
    ours = variants.get("ours")
    if ours is not None:
        workers = ours.encoder.num_workers
        case["ours_precision"] = ours.encoder.precision
        case["ours_workers"] = default_workers(str(model.device)) if workers is None else workers
        case["ours_tokens_match"] = result["ours"]["stats"]["tokens"] == sum(lengths)
    for name in variants:
        for base in ("st-fp32", "st-bf16"):
            if base in result and not name.startswith("st-"):
                rate = result[name]["texts_per_s"] / result[base]["texts_per_s"]
                case[f"{name}_vs_{base.replace('-', '_')}"] = round(rate, 3)
        if "st-fp32" in runs and not name.startswith("st-"):
            cosine = min_cosine(runs[name]["vectors"][:n_base], runs["st-fp32"]["vectors"])
            case[f"{name}_min_cosine_vs_st_fp32"] = round(cosine, 6)
    if "ids" in runs and "ids+compile" in runs:  # compiled layers against eager, all texts
        cosine = min_cosine(runs["ids+compile"]["vectors"], runs["ids"]["vectors"])
        case["compile_min_cosine_vs_ids"] = round(cosine, 6)
    if "ours_min_cosine_vs_st_fp32" in case:  # the key before variants were chosen
        case["min_cosine_vs_st_fp32"] = case["ours_min_cosine_vs_st_fp32"]
    return case


def bench_shape(shape: str, args: argparse.Namespace, device: str, peak: Any, tmp: Path) -> list:
    from dualview.models.token_cache import TokenIdCache
    from dualview.retrieval.encode import load_sentence_transformer

    folder = args.backbones / shape if args.backbones else None
    if folder is None or not folder.is_dir():
        log(f"[{shape}] building a random-init backbone")
        folder = build_backbone(shape, args.tokenizer, tmp / shape)
    model = load_sentence_transformer(str(folder), device=device)
    words = vocabulary_words(args.tokenizer)
    cache = TokenIdCache(tmp)  # one for all shapes: they share --tokenizer
    cases = [bench_case(model, shape, kind, words, args, peak, cache) for kind in args.texts]
    del model
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()
    return cases


def goals(cases: list[dict[str, Any]], cuda: bool) -> dict[str, bool]:
    """GPU: texts/s of ours at 512 tokens; CPU: ours within 10% of sentence-transformers."""
    if not cuda:
        return {
            f"{c['shape']}/{c['texts']} ours >= 0.9 st": c["ours_vs_st_fp32"] >= 0.9
            for c in cases
            if "ours_vs_st_fp32" in c
        }
    out = {}
    for c in cases:
        goal = GOALS.get((c["shape"], c["texts"]))
        if goal and "ours" in c["runs"]:
            out[f"{c['shape']}/{c['texts']} >= {goal} texts/s"] = (
                c["runs"]["ours"]["texts_per_s"] >= goal
            )
    return out


def print_table(cases: list[dict[str, Any]]) -> None:
    head = f"{'case':22} {'run':8} {'n':>6} {'texts/s':>9} {'tok/s':>10} {'TFLOP/s':>8} "
    first = next(iter(cases[0]["runs"])) if cases else "-"  # rates relative to it
    log(head + f"{'MFU':>6} {'GiB':>6} {'pad':>5} {'x ' + first:>9}")
    for c in cases:
        base = next(iter(c["runs"].values()))["texts_per_s"]  # the first variant
        for name, r in c["runs"].items():
            mfu = f"{r['mfu']:.3f}" if r["mfu"] is not None else "n/a"
            mem = f"{r['peak_memory_gib']:.2f}" if r["peak_memory_gib"] is not None else "n/a"
            log(
                f"{c['shape'] + '/' + c['texts']:22} {name:8} {r['texts']:>6} "
                f"{r['texts_per_s']:>9.1f} {r['tokens_per_s']:>10.0f} {r['tflops']:>8.2f} "
                f"{mfu:>6} {mem:>6} {r['padding']:>5.2f} {r['texts_per_s'] / base:>9.2f}"
            )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=None, help="bert-base,xlmr-large (CPU: tiny)")
    parser.add_argument("--texts", default="msmarco,long", help="msmarco,long")
    parser.add_argument("--tokenizer", default="embedded:minilm", help="or a tokenizer folder")
    parser.add_argument("--n", type=int, default=None, help="texts per case (default: table)")
    parser.add_argument("--batch-size", type=int, default=None, help="default: 128 GPU, 32 CPU")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--workers", type=int, default=None, help="ours: tokenizer processes")
    parser.add_argument("--device", default=None, help="default: cuda when there is one")
    parser.add_argument("--tiny", action="store_true", help="tiny shape: a quick smoke test")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=", ".join(KNOWN))
    parser.add_argument("--backbones", type=Path, default=None, help="reuse DIR/<shape>")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = args.device.startswith("cuda")
    args.shapes = args.shapes or ("bert-base,xlmr-large" if cuda and not args.tiny else "tiny")
    args.shapes = "tiny" if args.tiny else args.shapes
    args.shapes, args.texts = args.shapes.split(","), args.texts.split(",")
    args.batch_size = args.batch_size or (128 if cuda else 32)
    args.variants = [v for v in args.variants.split(",") if v]
    for name in args.variants:
        known = name in KNOWN or (name.startswith("ours-w") and name[6:].isdigit())
        if not known:
            parser.error(f"unknown variant {name!r} (known: {', '.join(KNOWN)})")
    return args


def write_result(
    args: argparse.Namespace, name: str | None, peak: Any, cases: list, info: dict
) -> dict[str, Any]:
    result = {
        "benchmark": "gpu_encode",
        "device": name or args.device,
        "peak_bf16_tflops": peak,
        "settings": {k: v if not isinstance(v, Path) else str(v) for k, v in vars(args).items()},
        "cases": cases,
        "goals": goals(cases, args.device.startswith("cuda")),
        "machine": machine_end(info),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = parse_args()
    from dualview.perf import peak_tflops

    info = machine_start()
    cuda = args.device.startswith("cuda")
    name = None
    if cuda:
        import torch

        name = torch.cuda.get_device_name(args.device)
    peak = peak_tflops(name)
    where = name or args.device
    log(f"gpu_encode: {args.shapes} x {args.texts} on {where}, batch {args.batch_size}")
    cases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gpu-encode-") as tmp:
        for shape in args.shapes:  # the JSON is rewritten after each shape
            cases += bench_shape(shape, args, args.device, peak, Path(tmp))
            result = write_result(args, name, peak, cases, info)
    print_table(cases)
    for goal, met in result["goals"].items():
        log(f"goal {goal}: {'met' if met else 'NOT met'}")
    log(machine_line(info))
    log(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
