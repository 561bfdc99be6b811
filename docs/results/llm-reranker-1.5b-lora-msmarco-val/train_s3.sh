#!/bin/bash
# Seed 3 of both arms (plan.txt, amendment of session 22), one after the other (one 1.5B
# training fits in memory at a time), 2 threads each, nothing else running.
cd /work/main
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
C=configs/experiments/gold-fit-llm-reranker-1.5b-cpu.yaml
arm() {  # arm NAME MIX
  date -u +"$1 start %T"
  /usr/bin/time -f "$1: wall %e s, user %U s" dualview run $C --set name=$1 --set seed=3 \
    --set "mixes=[$2]" > runs/h37M/$1.log 2>&1
  date -u +"$1 end %T"
}
arm h37L-dv-s3 "{name: Ins-DV-gold, preset: ins-dv, size: 124}"
arm h37L-orig-s3 "{name: Ins-orig, preset: ins-orig, size: 124}"
echo done
