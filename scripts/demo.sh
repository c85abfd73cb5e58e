#!/usr/bin/env bash
# make demo: learn a BPE vocabulary on the King James Bible, train a small GPT on its tokens with
# the activation ledger (measured vs predicted) after the first step and live progress, save a
# checkpoint, and generate text from it with the KV cache.
set -euo pipefail
cd "$(dirname "$0")/.."
ctron=build/ctron
mkdir -p runs
if [ ! -s data/kjv-bpe8192.json ]; then
  echo "== learning a BPE vocabulary of 8192 tokens on data/kjv.txt =="
  $ctron tokenize train --vocab 8192 --in data/kjv.txt --out data/kjv-bpe8192.json
fi
if [ ! -s data/kjv-bpe8192.bin ]; then
  $ctron tokenize encode --tokenizer data/kjv-bpe8192.json --in data/kjv.txt --out data/kjv-bpe8192.bin --val-frac 0.1
fi
rm -rf runs/demo
echo "== training: 4 layers, hidden 128, 4 heads, seq 128 tokens, batch 16, vocab 8192 =="
$ctron train --layers 4 --hidden 128 --heads 4 --seq 128 --batch 16 --vocab 8192 --dropout 0.1 \
  --steps "${DEMO_STEPS:-300}" --lr 3e-3 --eval-every 100 --print-every 25 \
  --data data/kjv-bpe8192.bin --val-data data/kjv-bpe8192_val.bin --tokenizer data/kjv-bpe8192.json \
  --ckpt-dir runs/demo --log runs/demo.jsonl
echo
echo "== ctron generate --ckpt runs/demo --prompt 'And God said' --tokens 120 --top-k 40 =="
$ctron generate --ckpt runs/demo --prompt "And God said" --tokens 120 --temperature 0.8 --top-k 40 --seed 7
