"""Every GPU measurement in one call: kernel checks, training variants, the baseline,
encoding and the host ceiling, each part with its own time budget, one summary table.

A GPU comes in windows of about 15 minutes with its start included, so this script is sized
to finish in about 7 minutes on one H100 or H200 and to lose nothing when a part fails:
every part runs in its own subprocess with its own time limit, writes its JSON into
``--out`` as it goes, and a part (or a training variant) that fails, stalls or runs out of
time is recorded with its error while the script goes on. Parts, in order:

1. ``checks``: the new CUDA code paths against the padded path on a small random BERT
   (forward embeddings and gradients, relative error): packed attention through SDPA on
   nested tensors and through PyTorch's flash varlen kernel, and ``compile: layers``
   (eval mode, no dropout) against eager. ``checks.json``.
2. ``train``: ``gpu_train.py`` at the paper's shape (XLM-R-large, bf16, 64 queries, 992
   documents of ~487 tokens) for the current path (``ours``) and each new variant
   (``--train-variants``; modifiers in ``gpu_train.py``): s/step, MFU, HFU, peak memory and
   the loss of every step against ``ours``. ``train.json``.
3. ``st``: sentence-transformers' CachedMNRL on the same batches, once. ``st.json``.
4. ``rerank``: the reranker families' steps on the same kind of records (listwise over each
   record's 31 candidates, 16 records per step, pairs cut to 512 tokens): a cross-encoder on
   the bert-base backbone and an LLM reranker on a random-init Qwen2.5-0.5B-shaped decoder,
   each as today and with ``compile: layers`` (``--rerank-variants``). ``rerank.json``.
5. ``encode``: ``gpu_encode.py`` on 512-token texts for bert-base and XLM-R-large: ours with
   8 and 16 tokenizer workers, the pre-tokenized ``ids`` path (the device-side ceiling, ids
   made once and shared by both shapes through the token-id cache) and sentence-transformers
   in fp32 and bf16. ``encode.json``.
6. ``host``: ``host_ceiling.py`` with 1, 8 and 16 tokenizer workers (512-token texts).
   ``host.json``.

The backbones are built once (random init) and shared by the parts. Progress lines carry
the time of day; the summary table comes last. ``--tiny`` runs the same parts on CPU with
the tiny shape in about two minutes (``tests/test_bench_gpu_all.py``).

    python3 benchmarks/gpu_all.py --tokenizer .gpu/tokenizer --out $OUT     # GPU machine
    .venv/bin/python benchmarks/gpu_all.py --tiny --out /tmp/gpu_all          # CPU rehearsal
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
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PARTS = ("checks", "train", "st", "rerank", "encode", "host")
#: Training variants by default, most informative first (later ones are skipped when the
#: train part's budget runs out).
TRAIN_VARIANTS = (
    "ours",
    "ours+layers+flash",  # the fastest path measured (benchmarks/README.md)
    "ours+layers+flash+retain0",  # the same, only the last GradCache chunk kept
    "ours+layers+flash+profile",
    "ours+layers+bucket64",
    "ours+tokens16384",
    "ours+packed",
    "ours+unfused",
)
#: Reranker variants (gpu_train.py's ``ce`` and ``llm`` families).
RERANK_VARIANTS = "ce,ce+layers,llm,llm+layers"
#: Encoding variants (gpu_encode.py): ours with the default 8 and with 16 tokenizer workers,
#: the pre-tokenized ceiling, and sentence-transformers.
DEFAULT_ENCODE = "st-fp32,st-bf16,ours,ours-w16,ids,ids+compile"
#: Seconds per part on a GPU (about 6.5 minutes with the backbones), and on CPU (--tiny).
BUDGETS = {"checks": 35, "train": 175, "st": 55, "rerank": 150, "encode": 70, "host": 35}
TINY_BUDGETS = {"checks": 60, "train": 150, "st": 45, "rerank": 90, "encode": 60, "host": 60}
#: A part's subprocess is killed this long after its budget (its JSON so far stays).
GRACE_S = 15
#: Share of the later parts' budgets kept for them when time runs short (``--total-s``).
RESERVE = 0.6
#: A part is skipped with less than this many seconds for it.
MIN_PART_S = 10


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


def run_part(name: str, cmd: list[str], budget: float, out: Path) -> dict[str, Any]:
    """Run one part's command with a hard limit; its outcome (the JSON it wrote is read
    back by the summary)."""
    log(f"== {name}: {' '.join(cmd[1:])} (budget {budget:.0f} s)")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, timeout=budget + GRACE_S, check=False)
        status = "ok" if proc.returncode == 0 else f"exit code {proc.returncode}"
    except subprocess.TimeoutExpired:
        status = f"killed after {budget + GRACE_S:.0f} s"
    except OSError as exc:
        status = f"could not start: {exc}"
    wall = round(time.perf_counter() - started, 1)
    log(f"== {name}: {status} in {wall} s")
    return {"part": name, "status": status, "wall_s": wall, "json": str(out)}


def build_backbones(args: argparse.Namespace, folder: Path) -> dict[str, Path]:
    """One random-init backbone per shape the parts use, built once."""
    from _gpu import build_backbone

    shapes = [args.train_shape] if {"train", "st"} & set(args.parts) else []
    shapes += args.encode_shapes if {"encode", "host"} & set(args.parts) else []
    shapes += [args.ce_shape, args.llm_shape] if "rerank" in args.parts else []
    built = {}
    for shape in dict.fromkeys(shapes):
        started = time.perf_counter()
        built[shape] = build_backbone(shape, args.tokenizer, folder / shape)
        log(f"backbone {shape} built in {time.perf_counter() - started:.1f} s")
    return built


def train_cmd(args: argparse.Namespace, backbone: Path, variants: str, out: Path, budget: float):
    sizes = (
        ["--batch-size", "4", "--negatives", "3", "--max-length", "64", "--texts", "msmarco"]
        if args.tiny
        else ["--max-length", "512", "--texts", "long"]
    )
    cmd = [sys.executable, str(HERE / "gpu_train.py"), "--shape", args.train_shape]
    cmd += ["--backbone", str(backbone), "--tokenizer", args.tokenizer, *sizes]
    cmd += ["--steps", str(args.steps), "--warmup", str(args.warmup), "--st-steps", "1"]
    cmd += ["--variants", variants, "--budget-s", str(budget), "--out", str(out)]
    return cmd


def rerank_cmd(args: argparse.Namespace, backbones: Path, out: Path, budget: float):
    """gpu_train.py's reranker families, their backbones built by `build_backbones`."""
    cmd = train_cmd(args, backbones / args.train_shape, args.rerank_variants, out, budget)
    cmd += ["--ce-backbone", str(backbones / args.ce_shape)]
    cmd += ["--llm-backbone", str(backbones / args.llm_shape)]
    return [*cmd, "--rerank-batch-size", "4" if args.tiny else "16"]


def encode_cmd(args: argparse.Namespace, backbones: Path, out: Path) -> list[str]:
    cmd = [sys.executable, str(HERE / "gpu_encode.py"), "--tokenizer", args.tokenizer]
    cmd += ["--backbones", str(backbones), "--texts", "long", "--repeats", "1"]
    cmd += ["--variants", args.encode_variants, "--n", str(args.encode_n), "--out", str(out)]
    if args.tiny:
        return [*cmd, "--tiny", "--device", "cpu"]
    return [*cmd, "--shapes", ",".join(args.encode_shapes)]


def host_cmd(args: argparse.Namespace, backbones: Path, out: Path) -> list[str]:
    """host_ceiling.py on 512-token texts, through the tokenizer of a built backbone (the
    embedded MiniLM is not on a GPU machine; the CPU-only packed-vs-padded part is left out)."""
    model = backbones / ("tiny" if args.tiny else "bert-base")
    cmd = [sys.executable, str(HERE / "host_ceiling.py"), "--texts", "long", "--out", str(out)]
    cmd += ["--model", str(model), "--no-packed"]
    if args.tiny:
        return [*cmd, "--tiny", "--workers", "1,2"]
    cmd += ["--workers", args.host_workers, "--n-long", "2048", "--repeats", "1"]
    return [*cmd, "--train-steps", "3", "--packed-texts", "32", "--packed-chunk", "16"]


def checks_cmd(args: argparse.Namespace, out: Path) -> list[str]:
    cmd = [sys.executable, str(HERE / "gpu_checks.py"), "--out", str(out)]
    cmd += ["--tokenizer", args.tokenizer]
    return [*cmd, "--tiny"] if args.tiny else cmd


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for every JSON")
    parser.add_argument("--tokenizer", default="embedded:minilm", help="or a tokenizer folder")
    parser.add_argument("--parts", default=",".join(PARTS), help=",".join(PARTS))
    parser.add_argument("--train-variants", default=",".join(TRAIN_VARIANTS))
    parser.add_argument("--steps", type=int, default=2, help="timed training steps per variant")
    parser.add_argument("--warmup", type=int, default=1, help="untimed first steps")
    parser.add_argument("--rerank-variants", default=RERANK_VARIANTS)
    parser.add_argument("--encode-variants", default=DEFAULT_ENCODE)
    parser.add_argument("--encode-shapes", default="bert-base,xlmr-large", help="GPU shapes")
    parser.add_argument("--encode-n", type=int, default=None, help="texts per encode case")
    parser.add_argument("--host-workers", default="1,8,16")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every part budget")
    parser.add_argument("--total-s", type=float, default=None, help="limit for everything")
    parser.add_argument("--tiny", action="store_true", help="CPU rehearsal, tiny sizes")
    args = parser.parse_args(argv)
    args.parts = [p for p in args.parts.split(",") if p]
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s) {unknown} (known: {', '.join(PARTS)})")
    args.train_shape = "tiny" if args.tiny else "xlmr-large"
    args.encode_shapes = ["tiny"] if args.tiny else [x for x in args.encode_shapes.split(",") if x]
    args.ce_shape = "tiny" if args.tiny else "bert-base"
    args.llm_shape = "tiny-lm" if args.tiny else "qwen2-0.5b"
    if args.tiny:
        if args.train_variants == ",".join(TRAIN_VARIANTS):
            args.train_variants = "ours,ours+bucket64,ours+packed"
        if args.rerank_variants == RERANK_VARIANTS:
            args.rerank_variants = "ce,llm"
        if args.encode_variants == DEFAULT_ENCODE:
            args.encode_variants = "st-fp32,ours,ids"
        args.encode_n = args.encode_n or 48
    else:
        args.encode_n = args.encode_n or 3000
    args.budgets = {k: v * args.scale for k, v in (TINY_BUDGETS if args.tiny else BUDGETS).items()}
    return args


def command(name: str, args: argparse.Namespace, work: Path, budget: float) -> list[str]:
    out, backbone = args.out / f"{name}.json", work / "backbones" / args.train_shape
    if name == "checks":
        return checks_cmd(args, out)
    if name in ("train", "st"):
        variants = args.train_variants if name == "train" else "st"
        return train_cmd(args, backbone, variants, out, budget)
    if name == "rerank":
        return rerank_cmd(args, work / "backbones", out, budget)
    if name == "encode":
        return encode_cmd(args, work / "backbones", out)
    return host_cmd(args, work / "backbones", out)


def part_budget(args: argparse.Namespace, name: str, deadline: float) -> float:
    """The part's own budget, cut so that the later parts keep `RESERVE` of theirs before
    ``--total-s`` runs out."""
    later = args.parts[args.parts.index(name) + 1 :]
    reserve = RESERVE * sum(args.budgets[p] for p in later)
    return min(args.budgets[name], deadline - time.monotonic() - reserve - GRACE_S)


def run(args: argparse.Namespace, work: Path, deadline: float) -> list[dict[str, Any]]:
    build_backbones(args, work / "backbones")
    parts = []
    for name in args.parts:
        budget = part_budget(args, name, deadline)
        if budget < MIN_PART_S:
            log(f"== {name}: skipped, {budget:.0f} s left for it (--total-s)")
            parts.append({"part": name, "status": "skipped: --total-s spent", "wall_s": 0.0,
                          "json": str(args.out / f"{name}.json")})  # fmt: skip
            continue
        cmd = command(name, args, work, budget)
        parts.append(run_part(name, cmd, budget, args.out / f"{name}.json"))
    return parts


def read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def percent(value: float | None) -> str:
    return f"{100 * value:.1f}%" if value is not None else "n/a"


def train_rows(data: dict[str, Any] | None, st: dict[str, Any] | None) -> list[str]:
    """One row per variant; ``x base``: against its family's variant without modifiers
    (``ours`` for the baselines)."""
    results = (data or {}).get("results", []) + (st or {}).get("results", [])
    ours = next((r for r in results if r["variant"] == "ours" and "s_per_step" in r), None)
    rows = []
    for r in results:
        if "s_per_step" not in r:
            rows.append(f"  {r['variant']:26} {r.get('error') or r.get('skipped')}"[:160])
            continue
        ratio = r.get("speedup_vs_ours")
        if r["variant"] == "st" and ours:  # st.json has no ours of its own
            ratio = ours["s_per_step"] / r["s_per_step"]
        losses = r.get("losses_vs_ours") or {}
        mem = r.get("peak_memory_gib")
        rows.append(
            f"  {r['variant']:26} {r['s_per_step']:7.3f} s/step  MFU {percent(r.get('mfu')):>6}"
            f"  HFU {percent(r.get('hfu')):>6}  mem {mem if mem is None else round(mem, 1)!s:>5}"
            f"  x base {ratio if ratio is None else round(ratio, 2)!s:>5}"
            f"  loss max|d| {losses.get('max_abs_diff', '-')!s:.6}"
            f"  replay {r.get('gradcache_replay_max_abs_diff', '-')!s:.6}"
        )
    return rows


def encode_rows(data: dict[str, Any] | None) -> list[str]:
    rows = []
    for case in (data or {}).get("cases", []):
        for name, r in case["runs"].items():
            rows.append(
                f"  {case['shape'] + '/' + case['texts']:18} {name:9} {r['texts_per_s']:9.1f} "
                f"texts/s  MFU {percent(r.get('mfu')):>6}  pad {r['padding']:.2f}"
            )
        if "ids_prepare_s" in case:
            rows.append(f"  {'':18} ids prepared in {case['ids_prepare_s']} s {case['ids_cache']}")
    return rows


def host_rows(data: dict[str, Any] | None) -> list[str]:
    rows = []
    for case in (data or {}).get("encode", []):
        for name, r in case["runs"].items():
            rows.append(
                f"  {case['texts']:9} {name:10} {r['texts_per_s']:9.1f} texts/s  "
                f"x raw {r.get('vs_raw', 1.0):.2f}"
            )
    return rows


def check_rows(data: dict[str, Any] | None) -> list[str]:
    return [
        f"  {c['name']:34} {c.get('status', 'ok'):6} {c.get('detail', '')}"[:160]
        for c in (data or {}).get("checks", [])
    ]


def summary(args: argparse.Namespace, parts: list[dict[str, Any]]) -> dict[str, Any]:
    out = args.out
    loaded = {p["part"]: read(Path(p["json"])) for p in parts}
    lines = ["", "==== summary ===="]
    for p in parts:
        lines.append(f"{p['part']}: {p['status']} ({p['wall_s']} s)")
    sections = {
        "checks": check_rows(loaded.get("checks")),
        "train": train_rows(loaded.get("train"), loaded.get("st")),
        "rerank": train_rows(loaded.get("rerank"), None),
        "encode": encode_rows(loaded.get("encode")),
        "host": host_rows(loaded.get("host")),
    }
    for name, rows in sections.items():
        if rows:
            lines += [f"-- {name}", *rows]
    machine = next((d["machine"] for d in loaded.values() if d and "machine" in d), None)
    if machine:
        lines.append(f"machine: {machine.get('gpu') or machine.get('cpu')}")
    print("\n".join(lines), flush=True)
    result = {"benchmark": "gpu_all", "parts": parts, "settings": vars_json(args)}
    (out / "gpu_all.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def vars_json(args: argparse.Namespace) -> dict[str, Any]:
    return {
        k: v if isinstance(v, (int, float, list, dict)) else str(v) for k, v in vars(args).items()
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    log(f"gpu_all: parts {','.join(args.parts)}; budgets {args.budgets}")
    deadline = time.monotonic() + (args.total_s or float("inf"))
    with tempfile.TemporaryDirectory(prefix="gpu-all-") as tmp:
        parts = run(args, Path(tmp), deadline)
    summary(args, parts)
    log(f"gpu_all: done in {time.perf_counter() - started:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
