#!/bin/bash
# Seed 3 (plan.txt, amendment of session 22): after both seed-3 trainings, each seed-3 arm on
# gold-val and the MS MARCO validation slice at every weight, then (choose_seed.py 3, the same
# rule) the gold test split + phenomenon set and MS MARCO (first 100) at its chosen weight.
# Reported only if everything finished by 10:10 UTC.
cd /work/main/runs/h37M
while pgrep -f "train_s3" > /dev/null; do sleep 20; done
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
set -e
ln -sfn $(ls -d ../h37L-orig-s3/train-Ins-orig-*)/model orig-s3
ln -sfn $(ls -d ../h37L-dv-s3/train-Ins-DV-gold-*)/model DV-s3
GOLD="paired=/work/main/src/dualview/demo/data/eval/paired"
MS="beir=/work/shared/data/msmarco-1743"
W=""; for w in 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1.0; do W="$W --interpolate $w"; done
R="--reranker-precision bf16 --top-k 5"
step() {  # step NAME ARGS...: one dualview eval call, timed
  local N=$1; shift
  date -u +"$N start %T"; cat /proc/loadavg
  /usr/bin/time -f "$N: wall %e s, user %U s" dualview eval embedded:minilm "$@" > logS3-$N.log 2>&1
  date -u +"$N end %T"
}
for r in DV-s3 orig-s3; do
  step $r-val --reranker $r $R $W -b gold-val -o val-s3
  step $r-msval --reranker $r $R $W -b "$MS" --skip 500 --limit 200 -o msmarco-val
done
python choose_seed.py 3
for r in DV-s3 orig-s3; do
  w=$(python -c "import json; print(json.load(open('chosen_weights_s3.json'))['arms']['$r']['weight'])")
  [ "$w" = "None" ] && continue
  step $r-test --reranker $r $R --interpolate $w -b "$GOLD" -b phenomena -o test
  step $r-msmarco --reranker $r $R --interpolate $w -b "$MS" --limit 100 -o msmarco
done
echo done
