#!/bin/bash
# Phase C (report sets, at the weights chosen on gold-val only): usage phaseC.sh WORIG WDV
# gold test split + phenomenon set into sS/test, MS MARCO (first 100 queries) into sS/msmarco;
# the two arms side by side, one thread each.
cd /work/main/runs/h37Q
. /work/main/.venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
WO=$1; WV=$2
GOLD="paired=/work/main/src/dualview/demo/data/eval/paired"
MS="beir=/work/shared/data/msmarco-1743"
one() {  # one SEED ARM W SETNAME ARGS...
  local S=$1 A=$2 W=$3 OUTN=$4; shift 4
  local I="--interpolate $W"; [ "$W" = "1.0" ] || I="$I --interpolate 1.0"
  cd s$S
  date -u +"s$S $A $OUTN start %T"
  /usr/bin/time -f "s$S $A $OUTN: wall %e s" dualview eval embedded:minilm --reranker $A $I "$@" \
    --top-k 5 -o $OUTN-$A > ../logC-s$S-$A-$OUTN.log 2>&1
  date -u +"s$S $A $OUTN end %T"
  cd ..
}
for S in 1 2; do
  one $S orig $WO test -b "$GOLD" -b phenomena &
  one $S DV $WV test -b "$GOLD" -b phenomena &
  wait
done
for S in 1 2; do
  one $S orig $WO msmarco -b "$MS" --limit 100 &
  one $S DV $WV msmarco -b "$MS" --limit 100 &
  wait
done
# one folder per seed and set with both arms (every reranker score from the score cache)
for S in 1 2; do
  cd s$S
  for pair in "orig $WO" "DV $WV"; do
    set -- $pair
    I="--interpolate $2"; [ "$2" = "1.0" ] || I="$I --interpolate 1.0"
    dualview eval embedded:minilm --reranker $1 $I -b "$GOLD" -b phenomena --top-k 5 -o test > ../logC-merge.log 2>&1
    dualview eval embedded:minilm --reranker $1 --interpolate $2 -b "$MS" --limit 100 --top-k 5 -o msmarco >> ../logC-merge.log 2>&1
  done
  cd ..
done
echo done
