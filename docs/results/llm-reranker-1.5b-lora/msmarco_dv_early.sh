#!/bin/bash
# The DV arm on MS MARCO (phase C's step, at its chosen weight 0.8 and 1.0), started beside
# phase C's orig test run so that the goal's third condition is known sooner; phase C's own
# call for it later reuses these results.
cd /work/main/runs/h37L
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
date -u +"DV msmarco (early) start %T"
/usr/bin/time -f "DV msmarco (early): wall %e s, user %U s" dualview eval embedded:minilm \
  --reranker DV --reranker-precision bf16 --interpolate 0.8 --interpolate 1.0 \
  -b beir=/work/shared/data/msmarco-1743 --limit 100 --top-k 5 -o msmarco > logC-DV-msmarco-early.log 2>&1
date -u +"DV msmarco (early) end %T"
