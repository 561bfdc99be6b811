#!/bin/bash
# The probe of plan.txt: the LLM stages of the shots config on the first 60 pairs; stopped when
# the run reaches its first training stage (a probe of seeding, reversal and judging only).
cd /work/main
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
N=msmarco-seeded-shots-probe60-s1
date -u +"start %T"
/usr/bin/time -f "wall %e s, user %U s" dualview run configs/experiments/msmarco-seeded-dv-llm-shots-cpu.yaml \
  --set seeding.source.limit=60 --set synthesis.limit=60 --set name=$N > runs/$N.log 2>&1 &
PID=$!
while kill -0 $PID 2>/dev/null; do
  if grep -q "running train-" runs/$N.log; then pkill -INT -f "name=$N"; date -u +"stopped at training %T"; fi
  sleep 10
done
wait $PID
date -u +"end %T"
