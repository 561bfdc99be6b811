#!/bin/bash
# Phase A (validation): each LoRA arm over embedded:minilm's top 5 on gold-val at the 10
# weights of plan.txt, bf16 (the scores come from the runs' score cache), with the first
# stage alone; the models linked under the names orig and DV.
cd /work/main/runs/h37L
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
set -e
ln -sfn $(ls -d ../h37L-orig/train-Ins-orig-*)/model orig
ln -sfn $(ls -d ../h37L-dv/train-Ins-DV-gold-*)/model DV
W=""; for w in 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1.0; do W="$W --interpolate $w"; done
dualview eval embedded:minilm -b gold-val -o val > logA-first.log 2>&1
/usr/bin/time -f "val: wall %e s" dualview eval embedded:minilm --reranker orig --reranker DV \
  --reranker-precision bf16 -b gold-val --top-k 5 $W -o val > logA.log 2>&1
echo done
