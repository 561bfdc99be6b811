#!/bin/bash
# stop the k=3 run once candidate 2 is judged (plan amendment 2)
cd /work/main
while [ ! -d runs/sc-1p5b/shots-2/sample-2 ]; do sleep 5; done
pkill -INT -f "out runs/sc-1p5b"; date -u +"stopped %T"
sleep 20; pkill -f "out runs/sc-1p5b"; echo killed
