#!/bin/bash
# Seed 3's reports (plan.txt, amendment of session 22: the same 4 comparisons per metric,
# Holm), at its chosen weights; the tables also list the columns of seeds 1 and 2, which share
# the folders.
cd /work/main/runs/h37M
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1
D=/work/main/docs/results/llm-reranker-1.5b-lora-msmarco-val
F=embedded:minilm
col() {  # col ARM FILE: the arm's column at its chosen weight
  python -c "import json; w=json.load(open('$2'))['arms']['$1']['weight']; print('$1' + ('' if w == 1.0 else f'~{w}') + '@$F')"
}
O=$(col orig-s3 chosen_weights_s3.json); V=$(col DV-s3 chosen_weights_s3.json); Z=$(col zs-1.5b chosen_weights.json)
C="--compare $O:$F --compare $V:$F --compare $V:$O --compare $V:$Z"
dualview report test -o $D/test-s3 $C --flips $V:$F \
  --metrics "paired p-MRR,paired nDCG@10,paired pairwise,phenomena p-MRR,phenomena nDCG@10"
dualview report msmarco -o $D/msmarco-s3 $C --flips none --metrics "beir nDCG@10"
