#!/bin/bash
# Phase A (validation): every reranker of every seed over embedded:minilm's top 20 on gold-val,
# at the 10 weights of plan.txt. One folder per seed, the models under the names D, orig, DV.
cd /work/main/runs/h37I
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
set -e
M=/work/main/runs
D=$(ls -d $M/h37F-distill/train-Ins-DV-gold-*)/model
W=""; for w in 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1.0; do W="$W --interpolate $w"; done
for S in 1 2 3; do
  R=$M/h37F-arms; [ $S = 1 ] || R=$M/h37F-arms-s$S
  ls -d $R/train-Ins-orig-*/model >/dev/null 2>&1 || { echo "seed $S: no arms"; continue; }
  mkdir -p s$S; cd s$S
  ln -sfn $D D; ln -sfn $(ls -d $R/train-Ins-orig-*)/model orig; ln -sfn $(ls -d $R/train-Ins-DV-gold-*)/model DV
  date -u +"s$S val start %T"; cat /proc/loadavg
  /usr/bin/time -f "s$S val: wall %e s" nice -n 5 dualview eval embedded:minilm --reranker D --reranker orig --reranker DV \
    -b gold-val --top-k 20 $W -o val
  cd ..
done
echo done
