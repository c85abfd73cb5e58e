#!/usr/bin/env bash
# Two runs with the same seed and thread count print bitwise identical per-step losses
# (the JSON log writes doubles with round-trip precision); another seed does not.
set -euo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
run() { "$ctron" train --layers 2 --hidden 32 --heads 2 --seq 32 --batch 4 --steps 25 --threads 2 \
          --eval-every 10 --seed "$1" --data "$data" --log "$dir/$2" > /dev/null; }
run 7 a; run 7 b; run 8 c
losses() { grep -o '"loss":[^,]*,\("val_loss":[^,]*,\)\?' "$1"; }
pass=0; fail=0
if [ "$(losses "$dir/a" | wc -l)" -eq 25 ] && diff <(losses "$dir/a") <(losses "$dir/b") > /dev/null; then
  pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: same seed, different losses"; diff <(losses "$dir/a") <(losses "$dir/b") | head; fi
if ! diff <(losses "$dir/a") <(losses "$dir/c") > /dev/null; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: seed 8 equals seed 7"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
