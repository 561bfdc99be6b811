#!/bin/bash
# orig seed 2 again after DV seed 2 (its first try stopped at the step-8 checkpoint on a full
# disk; it resumes from its step-4 checkpoint, and its new checkpoints hold only the adapter).
cd /work/main
while pgrep -f train_s2b > /dev/null; do sleep 20; done
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
C=configs/experiments/gold-fit-llm-reranker-1.5b-cpu.yaml
date -u +"h37L-orig-s2 (again) start %T"
/usr/bin/time -f "h37L-orig-s2 again: wall %e s, user %U s" dualview run $C --set name=h37L-orig-s2 --set seed=2 \
  --set "mixes=[{name: Ins-orig, preset: ins-orig, size: 124}]" > runs/h37M/h37L-orig-s2-again.log 2>&1
date -u +"h37L-orig-s2 (again) end %T"
