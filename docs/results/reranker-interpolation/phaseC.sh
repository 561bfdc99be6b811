#!/bin/bash
# Phase C (report sets, at the weights chosen on gold-val only): usage phaseC.sh WD WORIG WDV
# gold test split + phenomenon set into test/, MS MARCO (first 500 queries) into msmarco/.
cd /work/main/runs/h37I
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
set -e
WD=$1; WO=$2; WV=$3
GOLD="paired=/work/main/src/dualview/demo/data/eval/paired"
MS="beir=/work/shared/data/msmarco-1743"
for S in 1 2 3; do
  [ -d s$S ] || continue
  cd s$S
  for pair in "D $WD" "orig $WO" "DV $WV"; do
    set -- $pair
    date -u +"s$S $1 test start %T"; cat /proc/loadavg
    I="--interpolate $2"; [ "$2" = "1.0" ] || I="$I --interpolate 1.0"
    /usr/bin/time -f "s$S $1 test: wall %e s" nice -n 5 dualview eval embedded:minilm --reranker $1 \
      $I -b "$GOLD" -b phenomena --top-k 20 -o test
  done
  cd ..
done
for S in 1 2 3; do
  [ -d s$S ] || continue
  cd s$S
  for pair in "D $WD" "orig $WO" "DV $WV"; do
    set -- $pair
    date -u +"s$S $1 msmarco start %T"; cat /proc/loadavg
    /usr/bin/time -f "s$S $1 msmarco: wall %e s" nice -n 5 dualview eval embedded:minilm --reranker $1 \
      --interpolate $2 -b "$MS" --limit 500 --top-k 20 -o msmarco
  done
  cd ..
done
echo done
