#!/bin/bash
# The reports of plan.txt (4 comparisons per metric, Holm).
cd /work/main/runs/h37L
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1
D=/work/main/docs/results/llm-reranker-1.5b-lora
F=embedded:minilm; WO=$1; WV=$2
C="--compare orig~$WO@$F:$F --compare DV~$WV@$F:$F --compare DV~$WV@$F:orig~$WO@$F --compare DV~$WV@$F:zs-1.5b@$F"
dualview report test -o $D/test $C --flips DV~$WV@$F:$F \
  --metrics "paired p-MRR,paired nDCG@10,paired pairwise,phenomena p-MRR,phenomena nDCG@10"
dualview report msmarco -o $D/msmarco $C --flips none --metrics "beir nDCG@10"
