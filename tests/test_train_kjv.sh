#!/usr/bin/env bash
# 300 steps of the tiny config (L2 h64 a4 s64 b8) on the KJV bytes must reach a validation loss
# below 2.7 nats (uniform over 256 bytes is ln 256 = 5.55; this machine reaches about 2.51).
set -euo pipefail
ctron=$1; data=$2
log=$(mktemp); trap 'rm -f "$log"' EXIT
"$ctron" train --layers 2 --hidden 64 --heads 4 --seq 64 --batch 8 --steps 300 --eval-every 100 \
  --threads 2 --data "$data" --log "$log" --print-every 100
lines=$(wc -l < "$log")
val=$(grep -o '"val_loss":[0-9.e+-]*' "$log" | tail -1 | cut -d: -f2)
echo "log lines: $lines, final val_loss: $val"
pass=0; fail=0
if [ "$lines" -eq 300 ]; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: expected 300 log lines, got $lines"; fi
for key in '"step":300' '"lr":' '"ms":' '"tokens_per_s":' '"act_bytes":7524352'; do
  if tail -1 "$log" | grep -q "$key"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: last log line lacks $key"; fi
done
if awk -v v="$val" 'BEGIN{exit !(v != "" && v < 2.7)}'; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: val_loss $val not below 2.7"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
