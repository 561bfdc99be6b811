"""Local LLM engines on this machine: install time, load time, tokens/s.

Compares the engines of :class:`dualview.synth.backends.local.LocalBackend` on the
embedded Qwen2.5-Coder-0.5B-Instruct Q4 GGUF (``--model`` names another, e.g.
``embedded:qwen2.5-coder-1.5b``):

- ``openvino``: OpenVINO GenAI from binary wheels, on a Q8_0 copy of the GGUF made once
  (``convert_s``; not part of ``load_s``);
- ``llama_cpp``: llama-cpp-python built from source (PyPI sdist);
- ``transformers``: transformers' GGUF loading (dequantized to float32; needs ``gguf``).

Each engine runs in its own subprocess (so imports count towards load time and memory is
not shared). Per engine: load seconds, prefill seconds for a ~300-token chat prompt, and a
greedy answer of up to ~100 tokens (end-to-end and decode-only tokens/s), peak RSS.
``--measure-install ENGINE`` also times ``pip install --no-deps --no-cache-dir`` of each engine's
extra package into a throw-away folder (a source build for llama-cpp-python); otherwise
``--install-seconds ENGINE=S`` records a time measured elsewhere.

    .venv/bin/python benchmarks/local_llm.py [--measure-install llama_cpp] [--threads 2]

Writes ``benchmarks/results/local_llm.json`` and prints a table. Other jobs on a shared
machine slow every number down: the load average before and after is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from _machine import load_avg, machine_end, machine_line, machine_start
from dualview.synth.backends.base import EMBEDDED_LLM

if TYPE_CHECKING:
    from dualview.synth.backends.base import Completion

RESULTS = Path(__file__).resolve().parent / "results" / "local_llm.json"
ENGINES = ("openvino", "llama_cpp", "transformers")
INSTALL_SPECS = {
    "openvino": ["openvino-genai>=2025.4,<2027", "openvino", "openvino-tokenizers"],
    # What each engine adds on top of dualview's core dependencies (torch, transformers).
    "llama_cpp": ["--no-binary", "llama-cpp-python", "llama-cpp-python>=0.3,<0.4"],
    "transformers": ["gguf>=0.10"],
}
PASSAGE = (
    "The city council approved a new bicycle lane network on Tuesday. The plan adds forty "
    "kilometres of protected lanes over three years, paid for by a regional transport grant. "
    "Shop owners on the main street worried about losing parking, while cycling groups said "
    "the network would finally connect the university with the train station. "
)


def bench_messages(variant: int) -> list[dict[str, str]]:
    """A fixed chat of roughly 300 prompt tokens asking for a long answer.

    Variants differ in their first words, so llama.cpp's prompt-prefix cache cannot carry
    work from one measured call into the next.
    """
    return [
        {"role": "system", "content": f"Session {variant}. You are a careful writer of prose."},
        {
            "role": "user",
            "content": "Read these news passages.\n\n"
            + "\n".join(f"Passage {i + 1}: {PASSAGE}" for i in range(4))
            + "\nWrite a detailed summary of at least ten sentences about the plan, its "
            "cost, who supports it and who opposes it.",
        },
    ]


def run_worker(engine: str, threads: int, new_tokens: int, model_name: str) -> dict:
    """Measure one engine in this process (called in a subprocess)."""
    import asyncio

    from dualview.synth.backends.base import BackendConfig, SamplingParams
    from dualview.synth.backends.gguf_requant import openvino_gguf
    from dualview.synth.backends.local import LocalBackend, model_sha256

    config = BackendConfig(kind="local", model=model_name, engine=engine, n_threads=threads)
    backend = LocalBackend(config)
    model, _ = backend._resolve()  # assemble the GGUF outside the timed load
    started = time.perf_counter()
    if engine == "openvino":  # the one-time Q8_0 copy, also outside the timed load
        openvino_gguf(model.path, model_sha256(backend.config.model))
    convert_s = time.perf_counter() - started
    started = time.perf_counter()
    backend.load()
    load_s = time.perf_counter() - started

    def ask(variant: int, max_tokens: int) -> Completion:
        params = SamplingParams(max_tokens=max_tokens)
        return asyncio.run(backend.complete(bench_messages(variant), params))

    ask(0, 4)  # warm-up: first-call allocations are not part of the rate
    answer = ask(1, new_tokens)  # prefill + decode of a fresh prompt
    prefill = ask(2, 1)  # prefill alone, same length, fresh prompt
    decode_s = max(answer.latency_s - prefill.latency_s, 1e-9)
    return {
        "engine": engine,
        "threads": threads,
        "identity": backend.identity,
        "convert_s": round(convert_s, 2),
        "load_s": round(load_s, 2),
        "prompt_tokens": answer.tokens_in,
        "prefill_s": round(prefill.latency_s, 2),
        "new_tokens": answer.tokens_out,
        "generate_s": round(answer.latency_s, 2),
        "tokens_per_s": round(answer.tokens_out / answer.latency_s, 2),
        "decode_tokens_per_s": round(max(answer.tokens_out - 1, 0) / decode_s, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "answer_head": answer.text[:160],
    }


def measure_install(engine: str) -> float:
    """Seconds to pip-install the engine's extra package (no cache) into a temp folder."""
    with tempfile.TemporaryDirectory() as target:
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
        command += ["--no-cache-dir", "--target", target, *INSTALL_SPECS[engine]]
        started = time.perf_counter()
        subprocess.run(command, check=True)
        return round(time.perf_counter() - started, 1)


def measure_engine(engine: str, threads: int, new_tokens: int, model_name: str) -> dict:
    """Run one engine at one thread count in a fresh subprocess."""
    command = [sys.executable, __file__, "--worker", engine, "--threads", str(threads)]
    command += ["--new-tokens", str(new_tokens), "--model", model_name]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_table(rows: list[dict]) -> None:
    columns = ["engine", "threads", "install_s", "convert_s", "load_s", "prompt_tokens"]
    columns += ["prefill_s"]
    columns += ["new_tokens", "generate_s"]
    columns += ["tokens_per_s", "decode_tokens_per_s", "peak_rss_mb"]
    print(" | ".join(f"{c:>14}" for c in columns))
    for row in rows:
        print(" | ".join(f"{row.get(c, '-')!s:>14}" for c in columns))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--threads", default=str(os.cpu_count() or 1), help="comma list, e.g. 1,2")
    parser.add_argument("--new-tokens", type=int, default=100)
    parser.add_argument(
        "--model", default=EMBEDDED_LLM, help="backend.model (default: %(default)s)"
    )
    parser.add_argument(
        "--measure-install", action="append", default=[], choices=ENGINES, metavar="ENGINE"
    )
    parser.add_argument("--install-seconds", action="append", default=[], metavar="ENGINE=S")
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.worker:
        print(json.dumps(run_worker(args.worker, int(args.threads), args.new_tokens, args.model)))
        return
    given = dict(item.split("=", 1) for item in args.install_seconds)
    info = machine_start(
        with_torch=False, note="shared machine: other jobs were running; numbers are lower bounds"
    )
    rows = []
    for engine in args.engines.split(","):
        install_s = measure_install(engine) if engine in args.measure_install else None
        install_s = install_s or (float(given[engine]) if engine in given else None)
        for threads in args.threads.split(","):
            row = measure_engine(engine, int(threads), args.new_tokens, args.model)
            rows.append({**row, "install_s": install_s, "load_avg_after": load_avg()})
            print(json.dumps(rows[-1]), flush=True)
    result = {
        "benchmark": "local_llm",
        "model": args.model,
        "machine": {**machine_end(info), "threads_tried": args.threads},
        "install_measured_here": args.measure_install,
        "install_given": given,
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(machine_line(result["machine"]))
    print_table(rows)
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
