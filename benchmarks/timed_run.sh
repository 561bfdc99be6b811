#!/bin/bash
# Run COMMAND as NAME under GNU time, sampling the 1-minute load every 60 s, for
# benchmarks/run_timings.py: writes RUNS_DIR/NAME.log (output, then "rc=N"), NAME.time
# (/usr/bin/time -v) and NAME.load ("TIME LOAD1 LOAD5 LOAD15" lines).
# Usage: benchmarks/timed_run.sh RUNS_DIR NAME COMMAND [ARG ...]
#   e.g. benchmarks/timed_run.sh runs gold-fit-dv-llm-s1 dualview run CONFIG --set name=...
set -u
if [ $# -lt 3 ]; then
  echo "usage: $0 RUNS_DIR NAME COMMAND [ARG ...]" >&2
  exit 2
fi
dir=$1; name=$2; shift 2
mkdir -p "$dir"
( while true; do echo "$(date -u +%FT%TZ) $(cut -d' ' -f1-3 /proc/loadavg)"; sleep 60; done ) \
  > "$dir/$name.load" &
sampler=$!
trap 'kill $sampler 2>/dev/null' EXIT
/usr/bin/time -v -o "$dir/$name.time" "$@" > "$dir/$name.log" 2>&1
rc=$?
echo "rc=$rc" >> "$dir/$name.log"
exit $rc
