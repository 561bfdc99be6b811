"""plan.txt's rule: per arm, the weights whose MS MARCO-val nDCG@10 is at most 0.5 below the
first stage alone on the same queries; among them the best gold-val p-MRR (ties: smaller)."""

import json

from dualview.eval.interpolation import read_values

WEIGHTS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
F = "embedded:minilm"
MARGIN = 0.5
ms = read_values("msmarco-val")
first = 100 * ms[F]["beir"]["nDCG@10"]  # values hold nDCG as a fraction; points here
gold_val = {
    **json.load(open("/work/main/docs/results/llm-reranker-1.5b-lora/chosen_weights.json")),
    **json.load(open("/work/main/docs/results/llm-reranker-zero-shot/chosen_weights.json")),
}


def column(arm, w):
    return f"{arm}@{F}" if w == 1.0 else f"{arm}~{w}@{F}"


out = {"first_stage_msmarco_val_ndcg10": first, "margin": MARGIN, "arms": {}}
for arm in ("orig", "DV", "zs-1.5b"):
    val = {w: gold_val[arm]["means"][str(w)] for w in WEIGHTS}
    msv = {w: 100 * ms[column(arm, w)]["beir"]["nDCG@10"] for w in WEIGHTS}
    ok = [w for w in WEIGHTS if msv[w] >= first - MARGIN]
    best = max(ok, key=lambda w: (val[w], -w)) if ok else None
    out["arms"][arm] = {"weight": best, "admissible": ok,
                        "gold_val_pmrr": {str(w): round(v, 4) for w, v in val.items()},
                        "msmarco_val_ndcg10": {str(w): round(v, 4) for w, v in msv.items()}}
    print(arm, "chosen", best, "admissible", ok)
    print("  gold-val p-MRR", {w: round(v, 2) for w, v in val.items()})
    print("  msmarco-val nDCG@10", {w: round(v, 2) for w, v in msv.items()}, "first", round(first, 2))
json.dump(out, open("chosen_weights.json", "w"), indent=1)
