"""The interpolation weight of each arm, chosen on gold-val only (plan.txt).

usage: choose.py FIRST_STAGE OUT.json VAL_FOLDER...  (one `dualview eval` folder per seed)
"""

import json
import sys

from dualview.eval.interpolation import choose_weight, read_values

WEIGHTS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
first_stage, out_path, folders = sys.argv[1], sys.argv[2], sys.argv[3:]
runs = [read_values(folder) for folder in folders]
chosen = {}
for arm in ("orig", "DV"):
    c = choose_weight(runs, [arm], first_stage, WEIGHTS, "gold-val p-MRR", ["gold-val"])
    means = {str(w): round(m, 4) for w, m in c.means.items()}
    chosen[arm] = {"weight": c.weight, "metric": c.metric, "seeds": len(runs), "means": means}
    print(arm, c.weight, {w: round(m, 2) for w, m in c.means.items()})
with open(out_path, "w") as handle:
    json.dump(chosen, handle, indent=1)
