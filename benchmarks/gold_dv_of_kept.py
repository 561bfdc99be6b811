"""The gold set's hand-written dual views of exactly the instances an LLM run kept (issue 36).

An LLM arm (`configs/experiments/gold-fit-dv-llm-cpu.yaml`) trains Ins-DV-llm on the V gold
originals whose LLM-written reversal its judge kept, each with that reversal. Its
hand-written counterpart on the same instances needs a source that holds every original of
the gold split (the same pool of originals and passages as the LLM arm) and the gold dual
view of just those V originals. This writes that source:

- every orig record of ``gold:SPLIT``, in the split's order;
- the gold dv record of each orig whose LLM dual view is in KEPT (a ``dualview run`` verify
  stage's ``kept.jsonl``, or any file of dv records whose ``parent_id`` is a gold orig id).

An experiment with ``instructions: {path: OUT, views: [orig, dv]}``, ``synthesis: {enabled:
false}`` and the mix ``{preset: ins-dv, size: 2V}`` then trains on the same V originals, chosen
by the same seeded order (`dualview.data.mix.plan_mix`), as the LLM arm's Ins-DV-llm.

Usage:
  python benchmarks/gold_dv_of_kept.py KEPT.jsonl OUT.jsonl [--split fit]
"""

from __future__ import annotations

import argparse
import json

from dualview.data.gold_folds import gold_source_files, load_gold_source
from dualview.data.gold_pairs import gold_pairs
from dualview.data.jsonl import iter_records
from dualview.errors import DataError
from dualview.io.atomic import write_jsonl
from dualview.io.paths import check_outputs


def gold_dv_of_kept(kept_file: str, split: str) -> list:
    """The split's orig records, then the gold dv of each orig with a kept LLM dual view."""
    records = load_gold_source(split)
    gold_dv = {orig.id: dv for orig, dv in gold_pairs(records)}
    kept = [r for r in iter_records(kept_file) if r.view == "dv"]
    unknown = [str(r.parent_id) for r in kept if r.parent_id not in gold_dv]
    if unknown:
        raise DataError(kept_file, None, "parent_id", f"not an orig of gold:{split}: {unknown[0]}")
    origs = [r for r in records if r.view == "orig"]
    chosen = {r.parent_id for r in kept}
    return origs + [gold_dv[o.id] for o in origs if o.id in chosen]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("kept", help="dv records of the LLM arm (its verify stage's kept.jsonl)")
    parser.add_argument("out", help="the source to write (JSONL, dualview records)")
    parser.add_argument("--split", default="fit", help="the gold source name (gold:SPLIT)")
    args = parser.parse_args()
    try:
        check_outputs([args.out], [args.kept, *gold_source_files(args.split)])
        rows = gold_dv_of_kept(args.kept, args.split)
    except DataError as exc:
        parser.error(str(exc))
    write_jsonl(args.out, rows)
    dv = sum(r.view == "dv" for r in rows)
    print(json.dumps({"out": args.out, "orig": len(rows) - dv, "dv": dv}))


if __name__ == "__main__":
    main()
