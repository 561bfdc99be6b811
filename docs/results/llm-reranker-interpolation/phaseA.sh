#!/bin/bash
# Phase A (validation): each LoRA reranker of each seed over embedded:minilm's top 5 on gold-val,
# at the 10 weights of plan.txt (the scores come from the runs' score cache). One folder per
# seed, the models linked under the names orig and DV.
cd /work/main/runs/h37Q
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
set -e
M=/work/main/runs
W=""; for w in 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1.0; do W="$W --interpolate $w"; done
for S in 1 2; do
  O=$M/h37Q-orig; V=$M/h37Q-dv; [ $S = 1 ] || { O=$O-s$S; V=$V-s$S; }
  mkdir -p s$S; cd s$S
  ln -sfn $(ls -d $O/train-Ins-orig-*)/model orig; ln -sfn $(ls -d $V/train-Ins-DV-gold-*)/model DV
  date -u +"s$S val start %T"; cat /proc/loadavg
  /usr/bin/time -f "s$S val: wall %e s" dualview eval embedded:minilm --reranker orig --reranker DV \
    -b gold-val --top-k 5 $W -o val
  cd ..
done
echo done
