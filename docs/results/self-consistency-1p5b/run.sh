#!/bin/bash
# plan.txt: first run with --set samples=3 (12:05-13:11 UTC, log run.log), stopped by
# sc-watch.sh when candidate 3 began (amendment 2); then the same command with samples=2 on the
# same folder (every call from the caches, 3.6 s; run-k2.log) wrote bench.json
# (benchmarks/results/bench_synth_sc_1p5b.json). The judge's gold-check cache was copied in
# from the full-split judge run first (runs/judge-lo-1p5b/judge).
cd /work/main
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
date -u +"start %T"
/usr/bin/time -f "wall %e s, user %U s" dualview bench-synth --llm-backend local --model embedded:qwen2.5-coder-1.5b --shots 2 \
    --max-tokens 160 --set reverse.constrained=true --set verify.scoring=logodds \
    --set verify.distractors=0 --set samples=${SAMPLES:-2} --concurrency 1 \
    --set backend.engine=openvino --set backend.n_threads=2 --out runs/sc-1p5b
date -u +"end %T"
# the review kit (all 37 kept reversals + 20 gold controls), reviewed blind by helper-38:
#   python benchmarks/writer_review_kit.py build runs/sc-1p5b/shots-2/kept.jsonl KIT KEY --llm 37
#   python benchmarks/writer_review_kit.py score KIT/labels.jsonl KEY/key.jsonl review.jsonl --reviewer helper-38
#   dualview review stats review.jsonl --json stats.json
#   python docs/results/self-consistency-1p5b/summarize.py runs/sc-1p5b KEY/key.jsonl KIT/labels.jsonl summary.json
