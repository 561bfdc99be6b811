"""plan.txt's rule for one seed's arms (`python choose_seed.py SEED`, seeds 2 and later): per
arm, the weights whose MS MARCO-val nDCG@10 is at most 0.5 below the first stage alone on the
same queries; among them the best gold-val p-MRR (ties: smaller). Reads msmarco-val/ and
val-sSEED/, writes chosen_weights_sSEED.json (choose_s2.py is seed 2's run of the same rule)."""

import json
import sys

from dualview.eval.interpolation import read_values

WEIGHTS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
F = "embedded:minilm"
MARGIN = 0.5
seed = int(sys.argv[1])
ms = read_values("msmarco-val")
first = 100 * ms[F]["beir"]["nDCG@10"]  # values hold nDCG as a fraction; points here
gv = read_values(f"val-s{seed}")


def column(arm, w):
    return f"{arm}@{F}" if w == 1.0 else f"{arm}~{w}@{F}"


out = {"seed": seed, "first_stage_msmarco_val_ndcg10": first, "margin": MARGIN, "arms": {}}
for arm in (f"orig-s{seed}", f"DV-s{seed}"):
    val = {w: gv[column(arm, w)]["gold-val"]["p-MRR"] for w in WEIGHTS}
    msv = {w: 100 * ms[column(arm, w)]["beir"]["nDCG@10"] for w in WEIGHTS}
    ok = [w for w in WEIGHTS if msv[w] >= first - MARGIN]
    best = max(ok, key=lambda w: (val[w], -w)) if ok else None
    out["arms"][arm] = {"weight": best, "admissible": ok,
                        "gold_val_pmrr": {str(w): round(v, 4) for w, v in val.items()},
                        "msmarco_val_ndcg10": {str(w): round(v, 4) for w, v in msv.items()}}
    print(arm, "chosen", best, "admissible", ok)
    print("  gold-val p-MRR", {w: round(v, 2) for w, v in val.items()})
    print("  msmarco-val nDCG@10", {w: round(v, 2) for w, v in msv.items()}, "first", round(first, 2))
json.dump(out, open(f"chosen_weights_s{seed}.json", "w"), indent=1)
