"""Phase B: the weight of each LoRA arm, chosen on gold-val only (plan.txt)."""

import json

from dualview.eval.interpolation import choose_weight, read_values

WEIGHTS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
runs = [read_values("val")]
out = {}
for arm in ("orig", "DV"):
    c = choose_weight(runs, [arm], "embedded:minilm", WEIGHTS, "gold-val p-MRR", ["gold-val"])
    out[arm] = {"weight": c.weight, "metric": c.metric, "means": {str(k): round(v, 4) for k, v in c.means.items()}}
    print(arm, c.weight, {k: round(v, 2) for k, v in c.means.items()})
json.dump(out, open("chosen_weights.json", "w"), indent=1)
