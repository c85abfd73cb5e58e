#!/usr/bin/env bash
# make demo: train a small byte-level GPT on the King James Bible, show the activation ledger
# (measured vs predicted) after the first step, live progress, and a text sample at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p runs
echo "== ctron demo: 4 layers, hidden 128, 4 heads, seq 128, batch 16, byte-level KJV =="
exec build/ctron train --layers 4 --hidden 128 --heads 4 --seq 128 --batch 16 --vocab 256 \
  --dropout 0.1 --steps ${DEMO_STEPS:-400} --lr 2e-3 --eval-every 100 --print-every 25 \
  --data data/kjv.txt --log runs/demo.jsonl --ledger --sample 400 --prompt "And God said"
