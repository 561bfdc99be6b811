#!/bin/bash
# plan.txt: the gold check of seeds 2-3's rerankers, with session 21's probe.py (run from a
# copy of it in runs/h36S; the file is unchanged), then summarize.py summary.json.
cd /work/main/runs/h36S
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
P=/work/main/docs/results/judge-trained-reranker/probe.py
for j in DV-s2 DV-s3 orig-s2 orig-s3; do
  f=$(readlink -f ../h37M/$j)
  /usr/bin/time -f "$j: wall %e s, user %U s" python $P $j $f probe-$j.json > probe-$j.log 2>&1
  tail -1 probe-$j.log
done
echo done
