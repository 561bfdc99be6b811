"""plan.txt: balanced accuracy (Wilson 95%) of each reranker judge on the gold check (gold:val
+ gold test), by set; McNemar between judges with Holm; the chosen judge on the review items."""

import json
import sys
from itertools import combinations

from dualview.data.gold_validation import validation_assignment
from dualview.data.gold import load_gold
from dualview.proportions import mcnemar_exact, wilson_interval
from dualview.report.significance import holm

JUDGES = ["zs-1.5b", "orig", "DV"]
data = {j: json.load(open(f"probe-{j}.json")) for j in JUDGES}


def outcomes(j):
    return {(r["pair_id"], side): r[f"{side}_right"] for r in data[j]["rows"] for side in "ab"}


def share(k, n):
    lo, hi = wilson_interval(k, n)
    return {"right": k, "n": n, "accuracy": round(k / n, 4), "wilson95": [round(lo, 4), round(hi, 4)]}


out = {"plan": "docs/results/judge-trained-reranker/plan.txt", "judges": {}, "paired": []}
for j in JUDGES:
    rows = data[j]["rows"]
    entry = {}
    for name, sel in (("gold-val", "gold-val"), ("gold-test", "gold-test"), ("both", None)):
        rs = [r for r in rows if sel is None or r["set"] == sel]
        a = sum(r["a_right"] for r in rs)
        b = sum(r["b_right"] for r in rs)
        entry[name] = {
            "pairs": len(rs), "balanced": share(a + b, 2 * len(rs)),
            "a_side": share(a, len(rs)), "b_side": share(b, len(rs)),
            "pairs_both_right": share(sum(r["a_right"] and r["b_right"] for r in rs), len(rs)),
        }
    entry["trusted"] = entry["both"]["balanced"]["wilson95"][0] >= 0.75
    out["judges"][j] = entry
ps = []
for first, second in combinations(JUDGES, 2):
    x, y = outcomes(first), outcomes(second)
    only_first = sum(x[k] and not y[k] for k in x)
    only_second = sum(y[k] and not x[k] for k in x)
    p = mcnemar_exact(only_first, only_second)
    ps.append(p)
    out["paired"].append({"first": first, "second": second, "right_by_first_alone": only_first,
                          "right_by_second_alone": only_second, "mcnemar_p": round(p, 4)})
for entry, p in zip(out["paired"], holm(ps)):
    entry["holm_p"] = round(p, 4)
review = json.load(open("review-DV.json"))
side = validation_assignment(load_gold("train"))
kinds = {}
for r in review["rows"]:
    k = kinds.setdefault(r["kind"], {"n": 0, "accepted": 0, "accepted_fit": 0, "n_fit": 0})
    fit = side.get(r["instance"]) == "fit"
    k["n"] += 1; k["accepted"] += r["accepted"]; k["n_fit"] += fit; k["accepted_fit"] += r["accepted"] and fit
writer = [r for r in review["rows"] if r["kind"] in ("reversal", "near_copy", "other")]
acc = [r for r in writer if r["accepted"]]
real = sum(r["kind"] == "reversal" for r in acc)
out["review"] = {"judge": "DV", "items": "docs/review/qwen1.5b-writer-40 (labels: helper-32, an AI reviewer)",
                 "by_label": kinds, "real_among_accepted": share(real, len(acc)),
                 "real_without_judge": share(sum(r["kind"] == "reversal" for r in writer), len(writer)),
                 "pairs_scored": review["stats"]}
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(json.dumps(out, indent=1)[:4000])
