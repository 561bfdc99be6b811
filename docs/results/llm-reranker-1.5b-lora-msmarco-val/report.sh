#!/bin/bash
# The reports of plan.txt (4 comparisons per metric, Holm), at the chosen weights.
cd /work/main/runs/h37M
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1
D=/work/main/docs/results/llm-reranker-1.5b-lora-msmarco-val
F=embedded:minilm
col() {  # col ARM: the arm's column at its chosen weight
  python -c "import json; w=json.load(open('chosen_weights.json'))['arms']['$1']['weight']; print('$1' + ('' if w == 1.0 else f'~{w}') + '@$F')"
}
O=$(col orig); V=$(col DV); Z=$(col zs-1.5b)
C="--compare $O:$F --compare $V:$F --compare $V:$O --compare $V:$Z"
dualview report test -o $D/test $C --flips $V:$F \
  --metrics "paired p-MRR,paired nDCG@10,paired pairwise,phenomena p-MRR,phenomena nDCG@10"
dualview report msmarco -o $D/msmarco $C --flips none --metrics "beir nDCG@10"
dualview report msmarco-val -o $D/msmarco-val --flips none --metrics "beir nDCG@10"
