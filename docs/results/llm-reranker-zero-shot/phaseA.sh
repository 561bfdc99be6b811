#!/bin/bash
# Phase A (validation): each zero-shot reranker over embedded:minilm's top 5 on gold-val, at the
# 10 weights of plan.txt, scored in bf16.
cd /work/main/runs/h37Z
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
set -e
W=""; for w in 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1.0; do W="$W --interpolate $w"; done
for R in zs-0.5b zs-1.5b; do
  date -u +"$R val start %T"; cat /proc/loadavg
  /usr/bin/time -f "$R val: wall %e s, user %U s, sys %S s" dualview eval embedded:minilm \
    --reranker $R --reranker-precision bf16 -b gold-val --top-k 5 $W -o val > logA-$R.log 2>&1
  date -u +"$R val end %T"; cat /proc/loadavg
done
echo done
