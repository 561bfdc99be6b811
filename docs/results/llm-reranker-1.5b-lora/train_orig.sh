#!/bin/bash
# The orig arm after the DV arm (two 1.5B trainings do not fit in 24 GiB: the first try of
# orig beside DV was killed for memory after 138 s, before its first step).
cd /work/main
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2  # the 2 cores are free by then
while pgrep -f "name=h37L-dv" > /dev/null; do sleep 10; done
date -u +"orig start %T"
/usr/bin/time -f "h37L-orig: wall %e s, user %U s" dualview run \
  configs/experiments/gold-fit-llm-reranker-1.5b-cpu.yaml --set name=h37L-orig \
  --set "mixes=[{name: Ins-orig, preset: ins-orig, size: 124}]" > runs/h37L/h37L-orig.log 2>&1
date -u +"orig end %T"
