"""plan.txt (docs/results/judge-reranker-seeds): balanced accuracy (Wilson 95%) of each judge on
the gold check, seed ensembles by the mean score, the swap rule, McNemar + Holm over the 3
planned comparisons."""

import json
import sys
from statistics import mean

from dualview.proportions import mcnemar_exact, wilson_interval
from dualview.report.significance import holm

S1 = "/work/main/docs/results/judge-trained-reranker"
single = {"zs-1.5b": f"{S1}/probe-zs-1.5b.json", "DV": f"{S1}/probe-DV.json", "orig": f"{S1}/probe-orig.json"}
single |= {j: f"probe-{j}.json" for j in ("DV-s2", "DV-s3", "orig-s2", "orig-s3")}
ENSEMBLES = {"DV-ens3": ["DV", "DV-s2", "DV-s3"], "orig-ens3": ["orig", "orig-s2", "orig-s3"],
             "all-ens6": ["DV", "DV-s2", "DV-s3", "orig", "orig-s2", "orig-s3"]}
PLANNED = [("DV-ens3", "DV"), ("DV-ens3", "zs-1.5b"), ("all-ens6", "zs-1.5b")]

scores = {}  # judge -> {(set, pair_id): {"a|a": ..}}
for j, path in single.items():
    scores[j] = {(r["set"], r["pair_id"]): r["scores"] for r in json.load(open(path))["rows"]}
keys = list(scores["DV"])
for e, members in ENSEMBLES.items():
    scores[e] = {k: {c: mean(scores[m][k][c] for m in members) for c in scores["DV"][k]} for k in keys}


def outcomes(j):
    """(pair, side) -> right: under a, a's passage above b's; under b the reverse."""
    out = {}
    for k in keys:
        s = scores[j][k]
        out[k + ("a",)] = s["a|a"] > s["a|b"]
        out[k + ("b",)] = s["b|b"] > s["b|a"]
    return out


def share(k, n):
    lo, hi = wilson_interval(k, n)
    return {"right": k, "n": n, "accuracy": round(k / n, 4), "wilson95": [round(lo, 4), round(hi, 4)]}


result = {"plan": "docs/results/judge-reranker-seeds/plan.txt", "ensembles": ENSEMBLES, "judges": {}, "planned": []}
for j in scores:
    o = outcomes(j)
    entry = {}
    for name, sel in (("gold-val", "gold-val"), ("gold-test", "gold-test"), ("both", None)):
        ks = [k for k in keys if sel is None or k[0] == sel]
        right = sum(o[k + (side,)] for k in ks for side in "ab")
        s = [scores[j][k] for k in ks]
        entry[name] = {
            "pairs": len(ks), "balanced": share(right, 2 * len(ks)),
            "pairs_both_right": share(sum(o[k + ("a",)] and o[k + ("b",)] for k in ks), len(ks)),
            "swap_rule": share(sum((x["a|a"] - x["a|b"]) + (x["b|b"] - x["b|a"]) > 0 for x in s), len(ks)),
        }
    entry["meets_issue_bar"] = entry["both"]["balanced"]["accuracy"] >= 0.75
    entry["trusted"] = entry["both"]["balanced"]["wilson95"][0] >= 0.75
    result["judges"][j] = entry
ps = []
for first, second in PLANNED:
    x, y = outcomes(first), outcomes(second)
    a = sum(x[k] and not y[k] for k in x)
    b = sum(y[k] and not x[k] for k in x)
    ps.append(mcnemar_exact(a, b))
    result["planned"].append({"first": first, "second": second, "right_by_first_alone": a,
                              "right_by_second_alone": b, "mcnemar_p": round(ps[-1], 4)})
for entry, p in zip(result["planned"], holm(ps)):
    entry["holm_p"] = round(p, 4)
json.dump(result, open(sys.argv[1], "w"), indent=1)
print(f"{'judge':10} {'val':>6} {'test':>6} {'both':>6} {'wilson':>14} {'both-right':>10} {'swap':>6}")
for j, e in result["judges"].items():
    b = e["both"]
    print(f"{j:10} {e['gold-val']['balanced']['accuracy']:6.3f} {e['gold-test']['balanced']['accuracy']:6.3f} "
          f"{b['balanced']['accuracy']:6.3f} {str(b['balanced']['wilson95']):>14} "
          f"{b['pairs_both_right']['accuracy']:10.3f} {b['swap_rule']['accuracy']:6.3f}")
for p in result["planned"]:
    print(p)
