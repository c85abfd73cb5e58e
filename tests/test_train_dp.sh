#!/usr/bin/env bash
# Data parallelism: 2 ranks × batch 4 follow one process with batch 4 × grad-accum 2 (same
# sequences, same dropout masks) within 1e-5 relative: losses per step, and the final parameters
# as a relative L2 distance; and
# a rank that cannot read its data makes every rank exit 2 promptly, with one message.
# usage: test_train_dp.sh CTRON DATA MPIEXEC [mpiexec flags...]
set -uo pipefail
ctron=$1; data=$2; shift 2; launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
common=(--layers 2 --hidden 32 --heads 2 --seq 32 --batch 4 --steps 10 --eval-every 5 --dropout 0.1
        --threads 1 --no-ledger --data "$data")
"$ctron" train "${common[@]}" --grad-accum 2 --log "$dir/one.jsonl" --ckpt-dir "$dir/one" > /dev/null
timeout 120 "${launch[@]}" -np 2 "$ctron" train "${common[@]}" --log "$dir/dp.jsonl" --ckpt-dir "$dir/dp" > "$dir/dp.out" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "mpirun -np 2 exited $rc: $(tail -3 "$dir/dp.out")"
check '[ "$(grep -c "\"loss\"" "$dir/dp.jsonl" 2>/dev/null)" = 10 ]' "rank 0 should write 10 log lines"
/usr/bin/python3 "$(dirname "$0")/compare_runs.py" "$dir/one.jsonl" "$dir/one/step_00000010" \
  "$dir/dp.jsonl" "$dir/dp/step_00000010" --files model --name "2 ranks vs 1 process"
ec=$?; check '[ $ec -eq 0 ]' "data-parallel run differs from the one-process run"
# Rank 1 cannot read its data: both ranks exit 2 within the timeout, the message names rank 1.
start=$(date +%s)
timeout 60 "${launch[@]}" -np 2 sh -c 'if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then d=/nonexistent/kjv.txt; else d="$1"; fi;
  shift; exec "$@" --data "$d"' sh "$data" "$ctron" train --layers 1 --hidden 16 --heads 2 --seq 16 --steps 2 \
  --threads 1 --no-ledger > "$dir/bad.out" 2>&1
rc=$?; took=$(( $(date +%s) - start ))
check '[ $rc -ne 0 ] && [ $rc -ne 124 ]' "a missing data file on rank 1: exit $rc (124 = hung)"
check '[ "$(grep -c "cannot read '"'"'/nonexistent/kjv.txt'"'"'" "$dir/bad.out")" -eq 1 ]' \
  "expected one message naming the missing file: $(cat "$dir/bad.out" | head -5)"
check '[ $took -lt 30 ]' "took $took s to fail"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
