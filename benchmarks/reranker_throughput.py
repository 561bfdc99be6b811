"""Reranker scoring throughput: a dualview reranker folder scored by dualview and by
sentence-transformers' ``CrossEncoder`` loading the same folder (issue 37's throughput goal).

Two folders, each saved once by dualview (random weights, seed 0: speed does not depend on
them) and loaded by both sides, so both hold the same weights:

- **llm_reranker**: a Qwen2 causal LM (``--llm-shape``: ``tiny``, or ``qwen2.5-0.5b``, the
  embedded Qwen2.5-Coder-0.5B's shape) with ``--llm-tokenizer``'s tokenizer, scored as answer
  log-odds (`dualview.models.llm_reranker`); sentence-transformers reads the folder as a
  ``CrossEncoder`` (causal LM + ``LogitScore``, the files `LlmReranker.save` writes);
- **cross_encoder**: a BERT cross-encoder (``--ce-backbone``: the embedded MiniLM, or a tiny
  random BERT with ``--tiny``) with a one-logit head.

Both sides score the same (query + instruction, passage) pairs of the gold training set
(each record's positive and negatives), same batch size, same length limits (within them the
scores agree: ``max_abs_diff``; the default limits cut no gold text). The sides alternate
call by call in one process (a change of load on this shared machine hits both alike);
``speedup`` is their median wall time over ours, ``cpu_speedup`` the same in process CPU time
(steadier on a loaded machine). Goal: ``speedup`` >= 1.0 on CPU for each folder.

    .venv/bin/python benchmarks/reranker_throughput.py [--pairs 64] [--llm-shape qwen2.5-0.5b]
    .venv/bin/python benchmarks/reranker_throughput.py --tiny --out /tmp/rt.json   # smoke run

Writes ``benchmarks/results/reranker_throughput.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _gpu import build_backbone, tokenizer_folder
from _machine import machine_line, machine_start, write_result
from cross_encoder_cpu import cpu_ratio, scoring_pairs

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "reranker_throughput.json"
DATA = ROOT / "src" / "dualview" / "data" / "gold" / "train.jsonl"

#: Qwen2 shapes of the LLM reranker: the embedded 0.5B model's, and a tiny one for smoke runs.
LLM_SHAPES: dict[str, dict[str, Any]] = {
    "qwen2.5-0.5b": {
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": True,
    },
    "tiny": {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
    },
}


def llm_tokenizer(name: str, folder: Path) -> Any:
    """The tokenizer: an embedded GGUF's (``embedded:qwen2.5-coder-0.5b``, with its chat
    template), a folder's, or ``bytes``: Qwen2's tokenizer class over raw bytes with ``true``
    and ``false`` as tokens (`tests.tiny_lm`, the tests' tiny LLM rerankers; no chat template)."""
    from transformers import AutoTokenizer

    from dualview.models.llm_reranker import backbone_source

    if name == "bytes":
        sys.path.insert(0, str(ROOT))
        from tests.tiny_lm import byte_tokenizer

        return byte_tokenizer(folder, whole_words=("true", "false"))
    source, gguf_file = backbone_source(name)
    if gguf_file is None:
        return AutoTokenizer.from_pretrained(tokenizer_folder(source))
    return AutoTokenizer.from_pretrained(source, gguf_file=gguf_file)


def build_llm_reranker(folder: Path, args: argparse.Namespace) -> Path:
    """A random Qwen2 LM of ``args.llm_shape`` with ``args.llm_tokenizer``, saved as an LLM
    reranker folder (chat template applied when the tokenizer has one)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from dualview.models.config import ModelConfig
    from dualview.models.rerankers import build_reranker

    lm_folder = folder / "lm"
    tok = llm_tokenizer(args.llm_tokenizer, lm_folder)
    config = Qwen2Config(
        vocab_size=len(tok),
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        **LLM_SHAPES[args.llm_shape],
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(lm_folder)
    tok.save_pretrained(lm_folder)
    model = ModelConfig(
        kind="llm_reranker",
        name_or_path=str(lm_folder),
        query_max_length=args.query_length,
        document_max_length=args.document_length,
        llm_reranker={"chat_template": bool(getattr(tok, "chat_template", None))},
    )
    return build_reranker(model).save(folder / "reranker")


def build_cross_encoder(folder: Path, args: argparse.Namespace) -> Path:
    """A cross-encoder on ``args.ce_backbone`` (a tiny random BERT with ``--tiny``) with a new
    one-logit head (seed 0), saved."""
    import torch

    from dualview.models.config import ModelConfig
    from dualview.models.rerankers import build_reranker

    backbone = args.ce_backbone
    if args.tiny:
        backbone = str(build_backbone("tiny", "embedded:minilm", folder / "bert"))
    config = ModelConfig(
        kind="cross_encoder",
        name_or_path=backbone,
        query_max_length=args.query_length,
        document_max_length=args.document_length,
    )
    torch.manual_seed(0)
    return build_reranker(config).save(folder / "reranker")


def bench_folder(name: str, folder: Path, records: list, args: argparse.Namespace) -> dict:
    """Our `load_reranker(folder).score` against ``CrossEncoder(folder).predict``."""
    import numpy as np
    from sentence_transformers import CrossEncoder

    from dualview.data.formats.common import join_query_instruction
    from dualview.io.files import read_json_file
    from dualview.models.rerankers import RERANKER_FILE, load_reranker

    ours = load_reranker(folder, "cpu")
    template = read_json_file(folder / RERANKER_FILE)["query_template"]
    theirs = CrossEncoder(str(folder), device="cpu")
    queries, instructions, passages = scoring_pairs(records, args.pairs)
    pairs = [
        (join_query_instruction(q, i, template), p)
        for q, i, p in zip(queries, instructions, passages, strict=True)
    ]
    score = lambda: ours.score(queries, instructions, passages, batch_size=args.batch_size)  # noqa: E731
    predict = lambda: theirs.predict(pairs, batch_size=args.batch_size)  # noqa: E731
    worst = float(np.abs(score() - np.asarray(predict())).max())  # also the warm-up
    times: dict[str, list[float]] = {"ours": [], "theirs": []}
    cpu: dict[str, list[float]] = {"ours": [], "theirs": []}
    for _ in range(args.repeats):
        for side, fn in (("ours", score), ("theirs", predict)):
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            times[side].append(time.perf_counter() - start)
            cpu[side].append(time.process_time() - start_cpu)
    ours_s, theirs_s = statistics.median(times["ours"]), statistics.median(times["theirs"])
    return {
        "reranker": name,
        "pairs": len(pairs),
        "batch_size": args.batch_size,
        "max_abs_diff": worst,
        "ours_pairs_per_s": round(len(pairs) / ours_s, 2),
        "theirs_pairs_per_s": round(len(pairs) / theirs_s, 2),
        "speedup": round(theirs_s / ours_s, 3),
        "cpu_speedup": cpu_ratio(cpu),
        "times_s": {k: [round(t, 6) for t in v] for k, v in times.items()},
        "cpu_times_s": {k: [round(t, 6) for t in v] for k, v in cpu.items()},
    }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    # limits no gold text reaches (262 bytes of query text, 962 of passage): identity holds
    # only within them (past them sentence-transformers cuts the prompt, we cut each text)
    parser.add_argument("--query-length", type=int, default=128)
    parser.add_argument("--document-length", type=int, default=384)
    parser.add_argument("--llm-shape", choices=sorted(LLM_SHAPES), default="qwen2.5-0.5b")
    parser.add_argument(
        "--llm-tokenizer", default="embedded:qwen2.5-coder-0.5b", help="or a folder, or bytes"
    )
    parser.add_argument("--ce-backbone", default="embedded:minilm")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--tiny", action="store_true", help="smoke run: tiny models, 8 pairs")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.tiny:  # one token per byte
        args.pairs, args.repeats, args.llm_shape, args.llm_tokenizer = 8, 2, "tiny", "bytes"
        args.query_length, args.document_length = 512, 1024
    return args


def main() -> None:
    args = parse_args()
    import torch

    from dualview.data.jsonl import iter_records

    if args.threads:
        torch.set_num_threads(args.threads)
    machine = machine_start()
    records = list(iter_records(args.data))
    runs = []
    with tempfile.TemporaryDirectory(prefix="rerank-tput-") as tmp:
        builders = {"llm_reranker": build_llm_reranker, "cross_encoder": build_cross_encoder}
        for name, build in builders.items():
            folder = build(Path(tmp) / name, args)
            runs.append(bench_folder(name, folder, records, args))
    result = write_result(args.out, "reranker_throughput", args, {"runs": runs}, machine)
    header = f"{'ours':>10}{'sentence-transformers':>24}{'ratio':>8}{'cpu ratio':>11}"
    print(f"{'reranker (pairs/s)':<20}{header}")
    for run in runs:
        print(
            f"{run['reranker']:<20}{run['ours_pairs_per_s']:>10}{run['theirs_pairs_per_s']:>24}"
            f"{run['speedup']:>8}{run['cpu_speedup']:>11}"
        )
    print(machine_line(result["machine"]))


if __name__ == "__main__":
    main()
