#!/bin/bash
# Both arms of plan.txt side by side, one thread each (dualview run: train, then gold-val at W=1).
cd /work/main
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
C=configs/experiments/gold-fit-llm-reranker-1.5b-cpu.yaml
arm() {  # arm NAME MIX
  /usr/bin/time -f "$1: wall %e s, user %U s" dualview run $C --set name=$1 \
    --set "mixes=[$2]" > runs/h37L/$1.log 2>&1
}
date -u +"start %T"
arm h37L-orig "{name: Ins-orig, preset: ins-orig, size: 124}" &
arm h37L-dv "{name: Ins-DV-gold, preset: ins-dv, size: 124}" &
wait
date -u +"end %T"
