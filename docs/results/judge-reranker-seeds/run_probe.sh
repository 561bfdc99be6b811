#!/bin/bash
# plan.txt (docs/results/judge-reranker-seeds): the gold check of seeds 2-3's rerankers.
cd /work/main/runs/h36S
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
for j in DV-s2 DV-s3 orig-s2 orig-s3; do
  f=$(readlink -f ../h37M/$j)
  /usr/bin/time -f "$j: wall %e s, user %U s" python probe.py $j $f probe-$j.json > probe-$j.log 2>&1
  tail -1 probe-$j.log
done
echo done
