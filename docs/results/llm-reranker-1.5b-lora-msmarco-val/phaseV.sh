#!/bin/bash
# MS MARCO validation slice (plan.txt): first stage alone, then each arm at every weight of the
# grid (scores cached after the first weight), 2 threads, one arm after the other.
cd /work/main/runs/h37M
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
set -e
for r in orig DV zs-1.5b; do ln -sfn $(readlink -f ../h37L/$r) $r; done
MS="beir=/work/shared/data/msmarco-1743"
W=""; for w in 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1.0; do W="$W --interpolate $w"; done
dualview eval embedded:minilm -b "$MS" --skip 500 --limit 200 -o msmarco-val > logV-first.log 2>&1
for r in DV orig zs-1.5b; do
  date -u +"$r start %T"; cat /proc/loadavg
  /usr/bin/time -f "$r msmarco-val: wall %e s, user %U s" dualview eval embedded:minilm \
    --reranker $r --reranker-precision bf16 $W -b "$MS" --skip 500 --limit 200 --top-k 5 \
    -o msmarco-val > logV-$r.log 2>&1
  date -u +"$r end %T"; cat /proc/loadavg
done
echo done
