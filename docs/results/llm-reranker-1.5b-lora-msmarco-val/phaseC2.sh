#!/bin/bash
# The report sets at the weights chosen by plan.txt's rule (chosen_weights.json), seed 1: the
# gold test split + phenomenon set into test/, MS MARCO (first 100) into msmarco/; every
# reranker score comes from the caches of session 20's phase C (no model runs on a new pair).
cd /work/main/runs/h37M
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
set -e
GOLD="paired=/work/main/src/dualview/demo/data/eval/paired"
MS="beir=/work/shared/data/msmarco-1743"
dualview eval embedded:minilm -b "$GOLD" -b phenomena -o test > logC2-first-test.log 2>&1
dualview eval embedded:minilm -b "$MS" --limit 100 -o msmarco > logC2-first-msmarco.log 2>&1
for r in orig DV zs-1.5b; do
  w=$(python -c "import json; print(json.load(open('chosen_weights.json'))['arms']['$r']['weight'])")
  [ "$w" = "None" ] && continue
  for s in test msmarco; do
    if [ $s = test ]; then B=(-b "$GOLD" -b phenomena); else B=(-b "$MS" --limit 100); fi
    /usr/bin/time -f "$r $s: wall %e s, user %U s" dualview eval embedded:minilm --reranker $r \
      --reranker-precision bf16 --interpolate $w --top-k 5 "${B[@]}" -o $s > logC2-$r-$s.log 2>&1
  done
done
echo done
