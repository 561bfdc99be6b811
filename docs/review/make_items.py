"""Every reversal the embedded model wrote, as dual-view records for `dualview review`.

Reads the synth input (orig records) and the answer cache of its `dualview synth` run (one
line per orig record: its id and the model's raw answer) and turns each parsable
``<new_instruction>`` into the dual-view record the synth stage would have written (N* = the
first instruction negative, as with ``task.n_star=first``), whether or not the reversal parser
accepted it; ``meta.parse`` keeps the parser's verdict (``accepted`` or the rejection code),
so a review can be stratified by it.

    python docs/review/make_items.py ORIG.jsonl SYNTH_OUT.cache.jsonl ITEMS.jsonl
"""

from __future__ import annotations

import json
import re
import sys

from dualview.data.jsonl import iter_records, write_jsonl
from dualview.synth.reverse import make_dv_record

ANSWER = re.compile(r"<new_instruction>(.*?)</new_instruction>", re.S)


def main(source: str, cache: str, out: str) -> None:
    origs = {r.id: r for r in iter_records(source)}
    records = []
    with open(cache, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    for row in rows:
        orig = origs[row["unit"]]
        outcome = row["outcome"]
        found = ANSWER.search((outcome.get("raw") or [""])[0])
        if not found or not found.group(1).strip():
            continue
        model = "local:embedded:qwen2.5-coder-0.5b"
        dv = make_dv_record(orig, 0, found.group(1).strip(), model)
        parse = "accepted" if outcome["status"] == "ok" else outcome["reason"].split(":")[0]
        dv.meta.update({k: orig.meta[k] for k in ("domain", "constraint_type") if k in orig.meta})
        dv.meta["parse"] = parse
        records.append(dv)
    print(f"{write_jsonl(out, records)} reversals -> {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
