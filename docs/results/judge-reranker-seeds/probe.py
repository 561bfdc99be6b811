"""The gold check (plan.txt) for reranker judges: scores of a's and b's satisfying passage
under both instructions, per pair, to a JSON file."""

import json
import sys
from pathlib import Path

from dualview.eval.two_stage import open_reranker

SETS = {
    "gold-val": Path("/work/main/src/dualview/data/gold/val"),
    "gold-test": Path("/work/main/src/dualview/demo/data/eval/paired"),
}


def load(folder: Path):
    corpus = {}
    for line in open(folder / "corpus.jsonl"):
        d = json.loads(line)
        text = f"{d.get('title', '')} {d['text']}".strip() if d.get("title") else d["text"]
        corpus[d["_id"]] = text
    pairs = [json.loads(line) for line in open(folder / "pairs.jsonl")]
    return corpus, pairs


name, folder, out = sys.argv[1], sys.argv[2], sys.argv[3]
reranker = open_reranker(folder, "cpu", 8, True, "bf16")
rows = []
for set_name, path in SETS.items():
    corpus, pairs = load(path)
    q, i, p, keys = [], [], [], []
    for pair in pairs:
        for side in ("a", "b"):
            for doc_side in ("a", "b"):
                q.append(pair["query"])
                i.append(pair[side]["instruction"])
                p.append(corpus[pair[doc_side]["satisfying"][0]])
                keys.append((pair["pair_id"], side, doc_side))
    scores = reranker.score(q, i, p)
    by = {k: float(s) for k, s in zip(keys, scores)}
    for pair in pairs:
        pid = pair["pair_id"]
        rows.append({
            "set": set_name, "pair_id": pid, "constraint": pair.get("constraint"),
            "a_right": by[(pid, "a", "a")] > by[(pid, "a", "b")],
            "b_right": by[(pid, "b", "b")] > by[(pid, "b", "a")],
            "scores": {f"{s}|{d}": by[(pid, s, d)] for s in "ab" for d in "ab"},
        })
json.dump({"judge": name, "folder": folder, "rows": rows, "stats": vars(reranker.stats)}, open(out, "w"), indent=1)
n = len(rows) * 2
right = sum(r["a_right"] + r["b_right"] for r in rows)
print(name, f"{right}/{n} = {right / n:.3f}")
