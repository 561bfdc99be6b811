"""Query encode cost of InF-Embed concatenation vs cross-attention on FollowIR-shaped data.

FollowIR-shaped: a few long instructions, each shared by many short queries. Concatenation
encodes every ``"{query} {instruction}"`` text through the backbone; cross-attention
(``model.interaction: cross_attention``) encodes each distinct instruction and query once and
joins them with the head (:func:`dualview.models.interaction.encode_instructed_queries`).
Both use the same saved model (the embedded all-MiniLM-L6-v2 with an identity-initialised
head) through :class:`dualview.retrieval.encode.Encoder` without the cache, so the times are
what ``dualview eval`` spends on queries. Queries are MS MARCO queries, instructions are
MS MARCO passages (FollowIR instructions are paragraph-long narratives).

    .venv/bin/python benchmarks/interaction_encode.py [--instructions 8] [--queries-per 32]

Writes ``benchmarks/results/interaction_encode.json`` and prints a table; the ratio is
concat time / cross-attention time (best of ``--repeats`` alternating rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

from _machine import machine_end, machine_line, machine_start

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "interaction_encode.json"
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "msmarco-1743"


def followir_shaped(folder: Path, n_instructions: int, per: int) -> list[tuple[str, str]]:
    """``(query, instruction)`` pairs: ``per`` distinct queries for each instruction."""
    from dualview.data.formats.beir import load_corpus
    from dualview.io.files import iter_json_lines

    passages = sorted((d.text for d in load_corpus(folder / "corpus.jsonl").values()), key=len)
    instructions = passages[-n_instructions:]  # the longest passages, narrative-like
    rows = islice(iter_json_lines(folder / "queries.jsonl"), n_instructions * per)
    queries = [row["text"] for _, row in rows]
    return [(queries[i * per + k], ins) for i, ins in enumerate(instructions) for k in range(per)]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--instructions", type=int, default=8)
    parser.add_argument("--queries-per", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from dualview.models.bi_encoder import BiEncoder
    from dualview.models.config import ModelConfig
    from dualview.retrieval.encode import Encoder
    from dualview.retrieval.text import InstructedQuery

    info = machine_start()
    pairs = followir_shaped(args.data, args.instructions, args.queries_per)
    folder = Path(tempfile.mkdtemp(prefix="interaction-encode-")) / "model"
    config = ModelConfig(query_max_length=512, interaction="cross_attention")
    BiEncoder(config).save(folder)
    encoder = Encoder(str(folder), batch_size=args.batch_size, cache=False, show_progress=False)
    joined = [f"{q} {i}" for q, i in pairs]
    instructed = [InstructedQuery(t, q, i) for t, (q, i) in zip(joined, pairs, strict=True)]
    encoder.encode(joined[:16])  # warm-up
    concat_s, xattn_s = [], []
    for _ in range(args.repeats):
        concat_s.append(timed(lambda: encoder.encode(joined)))
        xattn_s.append(timed(lambda: encoder.encode(instructed)))
    best_c, best_x = min(concat_s), min(xattn_s)
    n = len(pairs)
    result = {
        "model": "embedded:minilm + identity cross-attention head",
        "pairs": n,
        "instructions": args.instructions,
        "queries_per_instruction": args.queries_per,
        "batch_size": args.batch_size,
        "concat_s": concat_s,
        "cross_attention_s": xattn_s,
        "concat_queries_per_s": n / best_c,
        "cross_attention_queries_per_s": n / best_x,
        "ratio_concat_over_cross_attention": best_c / best_x,
        "machine": (info := machine_end(info)),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(
        f"{n} queries, {args.instructions} instructions x {args.queries_per},"
        f" best of {args.repeats}"
    )
    print(f"{'interaction':<18} {'time':>10} {'queries/s':>10}")
    print(f"{'concat':<18} {best_c:>9.2f}s {n / best_c:>10.1f}")
    print(f"{'cross_attention':<18} {best_x:>9.2f}s {n / best_x:>10.1f}")
    print(f"concat / cross-attention time: {best_c / best_x:.2f}x")
    print(machine_line(info))
    print(f"-> {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
