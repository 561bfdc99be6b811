#!/bin/bash
# after seed 2's runs: phase A (gold-val grid), phase B (choose on gold-val), phase C (report sets)
cd /work/main/runs/h37Q
while pgrep -f "name=h37Q-(orig|dv)-s2 " >/dev/null; do sleep 15; done
./phaseA.sh > phaseA.log 2>&1 || { echo "phase A failed"; exit 1; }
/work/main/.venv/bin/python choose.py > choose.log 2>&1 || { echo "choose failed"; exit 1; }
WO=$(python3 -c 'import json; print(json.load(open("chosen_weights.json"))["orig"]["weight"])')
WV=$(python3 -c 'import json; print(json.load(open("chosen_weights.json"))["DV"]["weight"])')
echo "chosen: orig $WO, DV $WV"
./phaseC.sh $WO $WV > phaseC.log 2>&1
echo "chain done $(date -u +%T)"
