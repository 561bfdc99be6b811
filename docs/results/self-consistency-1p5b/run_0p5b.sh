#!/bin/bash
cd /work/main
. .venv/bin/activate
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
date -u +"start %T"
/usr/bin/time -f "wall %e s, user %U s" dualview bench-synth --llm-backend local --model embedded:qwen2.5-coder-0.5b \
    --judge-model embedded:qwen2.5-coder-1.5b --shots 2 --max-tokens 160 \
    --set reverse.constrained=true --set verify.scoring=logodds --set verify.distractors=0 \
    --concurrency 1 --set backend.engine=openvino --set backend.n_threads=2 --out runs/sc-0p5b
date -u +"end %T"
