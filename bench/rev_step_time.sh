#!/bin/bash
# Reversible blocks against full recompute (issue 29 part 2; docs/PERFORMANCE.md): usage bench/rev_step_time.sh
# CPU seconds per step (user + sys, 1 thread): (time of 6 steps − time of 2 steps) / 4, so start-up and
# the final evaluation cancel; CPU time, not wall time, because the 2-core machine is shared (load 5–9).
cd "$(dirname "$0")/.."
C=./build/ctron
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
common="--data data/kjv.txt --layers 12 --hidden 256 --heads 4 --seq 256 --batch 4 --vocab 256 --eval-every 0 --threads 1 --dropout 0.1"
for round in 1 2; do
for opt in "--recompute none" "--recompute full" "--reversible" "--recompute full --attention flash" "--reversible --attention flash"; do
  t=()
  for steps in 2 6; do
    OMP_WAIT_POLICY=PASSIVE /usr/bin/time -o "$tmp/cpu.time" -f "%U %S" $C train $common $opt --steps $steps > "$tmp/cpu.out" 2>&1; s=$(tail -1 "$tmp/cpu.time")
    t+=("$(echo $s | awk '{print $1+$2}')")
  done
  peak=$(grep -o "activation peak [0-9.]* MiB" "$tmp/cpu.out")
  echo "round $round | $opt | 2 steps ${t[0]} s, 6 steps ${t[1]} s | $(echo "${t[0]} ${t[1]}" | awk '{printf "%.3f", ($2-$1)/4}') CPU s/step | $peak"
done
done
echo finished
