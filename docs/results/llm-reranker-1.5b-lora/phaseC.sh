#!/bin/bash
# Phase C (report sets, at the weights chosen on gold-val only): usage phaseC.sh WORIG WDV
# gold test split + phenomenon set into test/, MS MARCO (first 100 queries) into msmarco/,
# each arm at its chosen W and at 1.0, bf16, one after the other (2 threads); the first stage
# alone and the zero-shot 1.5B at its chosen weight (1.0) come from the zero-shot study's
# cache (runs/h37Z), run again here into the same folders.
cd /work/main/runs/h37L
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=2 MKL_NUM_THREADS=2
set -e
GOLD="paired=/work/main/src/dualview/demo/data/eval/paired"
MS="beir=/work/shared/data/msmarco-1743"
ln -sfn ../h37Z/zs-1.5b zs-1.5b
one() {  # one RERANKER W SET ARGS...
  local R=$1 W=$2 S=$3; shift 3
  local I="--interpolate $W"; [ "$W" = "1.0" ] || I="$I --interpolate 1.0"
  date -u +"$R $S start %T"; cat /proc/loadavg
  /usr/bin/time -f "$R $S: wall %e s, user %U s, sys %S s" dualview eval embedded:minilm \
    --reranker $R --reranker-precision bf16 $I "$@" --top-k 5 -o $S > logC-$R-$S.log 2>&1
  date -u +"$R $S end %T"; cat /proc/loadavg
}
dualview eval embedded:minilm -b "$GOLD" -b phenomena -o test > logC-first-test.log 2>&1
dualview eval embedded:minilm -b "$MS" --limit 100 -o msmarco > logC-first-msmarco.log 2>&1
one DV $2 test -b "$GOLD" -b phenomena
one orig $1 test -b "$GOLD" -b phenomena
one DV $2 msmarco -b "$MS" --limit 100
one orig $1 msmarco -b "$MS" --limit 100
one zs-1.5b 1.0 test -b "$GOLD" -b phenomena
one zs-1.5b 1.0 msmarco -b "$MS" --limit 100
echo done
