#!/bin/bash
# Seed 2 of both arms (plan.txt), one after the other (one 1.5B training fits in memory at a
# time), 1 thread each beside phase V's scoring.
cd /work/main
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
C=configs/experiments/gold-fit-llm-reranker-1.5b-cpu.yaml
arm() {  # arm NAME MIX
  date -u +"$1 start %T"
  /usr/bin/time -f "$1: wall %e s, user %U s" dualview run $C --set name=$1 --set seed=2 \
    --set "mixes=[$2]" > runs/h37M/$1.log 2>&1
  date -u +"$1 end %T"
}
arm h37L-dv-s2 "{name: Ins-DV-gold, preset: ins-dv, size: 124}"
arm h37L-orig-s2 "{name: Ins-orig, preset: ins-orig, size: 124}"
echo done
