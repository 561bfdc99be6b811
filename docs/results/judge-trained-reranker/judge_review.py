"""Plan.txt part 2: a reranker judges the reviewed items as verify judges a lone dual view
(N* must outscore P+ under the candidate, P+ must outscore N* under the original)."""

import json
import sys
from collections import Counter

from dualview.eval.two_stage import open_reranker

K = "/work/main/docs/review/qwen1.5b-writer-40"
units = [json.loads(line) for line in open("/work/main/runs/review-judge-units.jsonl")]
key = {f"item-{json.loads(line)['item']:02d}": json.loads(line) for line in open(f"{K}/key.jsonl")}
labels = {f"item-{json.loads(line)['item']:02d}": json.loads(line)["label"] for line in open(f"{K}/labels.jsonl")}
fit = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else set()


def text(d):
    return f"{d['title']} {d['text']}".strip() if d.get("title") else d["text"]


reranker = open_reranker(sys.argv[1], "cpu", 8, True, "bf16")
q, i, p = [], [], []
for u in units:
    n_star = u["positives"][0]
    p_plus = next(d for d in u["instruction_negatives"] if d["id"] == u["meta"]["orig_positive_id"])
    for instr in (u["instruction"], u["meta"]["orig_instruction"]):
        for d in (n_star, p_plus):
            q.append(u["query"]); i.append(instr); p.append(text(d))
s = reranker.score(q, i, p).reshape(-1, 4)
rows = []
for u, (rn, rp, on, op) in zip(units, s.tolist()):
    k = key[u["id"]]
    kind = k["kind"] if k["kind"] != "llm" else labels[u["id"]]
    rows.append({"item": u["id"], "kind": kind, "instance": k["instance"],
                 "accepted": rn > rp and op > on, "scores": [rn, rp, on, op]})
json.dump({"judge": sys.argv[1], "rows": rows, "stats": vars(reranker.stats)}, open(sys.argv[2], "w"), indent=1)
for kind in sorted({r["kind"] for r in rows}):
    sel = [r for r in rows if r["kind"] == kind]
    print(kind, f"{sum(r['accepted'] for r in sel)}/{len(sel)}")
