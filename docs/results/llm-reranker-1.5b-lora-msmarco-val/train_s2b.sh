#!/bin/bash
# DV seed 2 again after the orig arm (its first try was OOM-killed at step 8 of 12 when a test
# run started beside it; `dualview run` resumes from its step-4 checkpoint).
cd /work/main
while pgrep -f train_s2.sh > /dev/null; do sleep 20; done
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
C=configs/experiments/gold-fit-llm-reranker-1.5b-cpu.yaml
date -u +"h37L-dv-s2 (again) start %T"
/usr/bin/time -f "h37L-dv-s2 again: wall %e s, user %U s" dualview run $C --set name=h37L-dv-s2 --set seed=2 \
  --set "mixes=[{name: Ins-DV-gold, preset: ins-dv, size: 124}]" > runs/h37M/h37L-dv-s2-again.log 2>&1
date -u +"h37L-dv-s2 (again) end %T"
