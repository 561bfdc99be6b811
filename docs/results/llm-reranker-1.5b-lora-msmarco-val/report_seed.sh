#!/bin/bash
# bash report_seed.sh SEED: a later seed's reports (plan.txt and its amendments: the same 4
# comparisons per metric, Holm), at that seed's chosen weights (chosen_weights_sSEED.json);
# the tables also list the columns of the other seeds, which share the folders. Seeds 2 and 3
# were reported with per-seed copies of it; run again, seed 3 writes the same files and seed 2
# the same comparisons, its tables then listing seed 3's columns too.
S=${1:?usage: report_seed.sh SEED}
cd /work/main/runs/h37M
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1
D=/work/main/docs/results/llm-reranker-1.5b-lora-msmarco-val
F=embedded:minilm
col() {  # col ARM FILE: the arm's column at its chosen weight
  python -c "import json; w=json.load(open('$2'))['arms']['$1']['weight']; print('$1' + ('' if w == 1.0 else f'~{w}') + '@$F')"
}
O=$(col orig-s$S chosen_weights_s$S.json); V=$(col DV-s$S chosen_weights_s$S.json); Z=$(col zs-1.5b chosen_weights.json)
C="--compare $O:$F --compare $V:$F --compare $V:$O --compare $V:$Z"
dualview report test -o $D/test-s$S $C --flips $V:$F \
  --metrics "paired p-MRR,paired nDCG@10,paired pairwise,phenomena p-MRR,phenomena nDCG@10"
dualview report msmarco -o $D/msmarco-s$S $C --flips none --metrics "beir nDCG@10"
