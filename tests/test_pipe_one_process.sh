#!/usr/bin/env bash
# The pipeline executor on one process (issue 15, DESIGN.md §9): GPipe (all forwards, then all backwards,
# every micro-batch in its own activation context) is bitwise the plain gradient-accumulation loop, with
# and without --recompute-microbatches; layered gradient accumulation (every micro-batch through a layer,
# layer after layer, chunk outputs waiting in the mailbox) follows it within 1e-5; the measured activation
# peak equals the schedule's prediction. Runs without MPI, so `make sanitize` covers the executor.
# usage: test_pipe_one_process.sh CTRON DATA
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
common=(--layers 4 --hidden 32 --heads 4 --seq 32 --batch 2 --steps 4 --eval-every 2 --dropout 0.1 --vocab 259
        --threads 1 --grad-accum 4 --data "$data")
"$ctron" train "${common[@]}" --no-ledger --log "$dir/ref.jsonl" --ckpt-dir "$dir/ref" > /dev/null

run() {   # run NAME TOL flags...
  local name=$1 tol=$2; shift 2
  "$ctron" train "${common[@]}" "$@" --log "$dir/$name.jsonl" --ckpt-dir "$dir/$name" > "$dir/$name.out" 2>&1
  local rc=$?
  check "[ $rc -eq 0 ]" "$name ($*) exited $rc: $(tail -3 "$dir/$name.out")"
  /usr/bin/python3 "$(dirname "$0")/compare_runs.py" "$dir/ref.jsonl" "$dir/ref/step_00000004" "$dir/$name.jsonl" \
    "$dir/$name/step_00000004" --steps 4 --tol "$tol" --name "$name vs the accumulation loop"
  check "[ $? -eq 0 ]" "$name ($*) differs from the accumulation loop by more than $tol"
  check "grep -q '  ok$' '$dir/$name.out' && ! grep -q MISMATCH '$dir/$name.out'" \
    "$name: measured peak != prediction: $(grep -A3 'measured vs predicted' "$dir/$name.out")"
}
# tol 1e-300: every figure must be 0 (bitwise)
run gpipe      1e-300 --pp-schedule gpipe
run gpipe_rmb  1e-300 --pp-schedule gpipe --recompute full --recompute-microbatches 2
run layered    1e-5   --pp-schedule layered --recompute selective
run layered_f  1e-5   --pp-schedule layered --recompute full --dropout-masks bits
# GPipe keeps all four micro-batches in flight: four contexts, and without recompute (the backward holds
# nothing beyond what the forward kept) exactly four times the accumulation loop's peak.
act() { /usr/bin/python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['act_bytes'])" "$1"; }
check "grep -qE '^  0 +0 +4 ' '$dir/gpipe.out'" "gpipe: expected 4 contexts on rank 0: $(grep -A3 contexts "$dir/gpipe.out")"
check '[ "$(act "$dir/gpipe.jsonl")" -eq $((4 * $(act "$dir/ref.jsonl"))) ]' \
  "gpipe peak $(act "$dir/gpipe.jsonl") != 4 x the loop's $(act "$dir/ref.jsonl")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
