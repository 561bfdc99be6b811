#!/bin/bash
cd /work/main/runs/h36J
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
for j in DV orig zs-1.5b; do
  f=$(readlink -f ../h37L/$j)
  /usr/bin/time -f "$j: wall %e s, user %U s" python probe.py $j $f probe-$j.json > probe-$j.log 2>&1
  tail -2 probe-$j.log
done
echo done
