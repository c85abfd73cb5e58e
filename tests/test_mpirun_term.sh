#!/usr/bin/env bash
# SIGTERM to the launcher of an MPI run loses nothing (issue 23 A). Open MPI's mpirun answers SIGTERM
# with SIGTERM to the ranks and SIGKILL one second later (odls_base_sigkill_timeout), so a step longer
# than that was lost with the whole run. scripts/ctron-mpirun turns the SIGTERM into SIGUSR1, which
# mpirun forwards at once and ctron saves on. Here every step is 1.5 s (CTRON_TEST_STEP_SLEEP_MS: longer
# than the kill timeout) on a 2-stage pipeline; the wrapper gets SIGTERM during step 2:
#  - it exits 143; the ranks finish step 2, save it (verified), and say SIGUSR1;
#  - --resume under plain mpirun continues to the end.
# usage: test_mpirun_term.sh CTRON DATA MPIEXEC [mpirun flags...]
set -uo pipefail
ctron=$1; data=$2; mpiexec=$3; shift 3
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
run=(--layers 2 --hidden 32 --heads 2 --seq 32 --batch 2 --grad-accum 2 --pp 2 --steps 4 --threads 1 --no-ledger
     --eval-every 0 --peak-gflops 1000 --data "$data" --ckpt-dir "$dir/run")

CTRON_TEST_STEP_SLEEP_MS=1500 MPIRUN=$mpiexec "$root/scripts/ctron-mpirun" -np 2 "$@" "$ctron" train "${run[@]}" \
  > "$dir/a.out" 2>&1 &
w=$!
for _ in $(seq 300); do sleep 0.05; grep -q "^step 1/4" "$dir/a.out" && break; done
sleep 0.3   # inside step 2's sleep
kill -TERM $w
wait $w
rc=$?
check '[ $rc -eq 143 ]' "the wrapper after SIGTERM: exit $rc, expected 143: $(tail -5 "$dir/a.out")"
check 'grep -q "^interrupted (SIGUSR1) after step 2 of 4" "$dir/a.out" && [ -d "$dir/run/step_00000002" ]' \
  "step 2 finished and saved: $(ls "$dir/run"; tail -4 "$dir/a.out")"
"$ctron" ckpt verify "$dir/run" > "$dir/v.out" 2>&1
ec=$?; check '[ $ec -eq 0 ] && grep -q "takes step 2" "$dir/v.out"' "the checkpoint verifies: $(cat "$dir/v.out")"
"$mpiexec" -np 2 "$@" "$ctron" train --resume "$dir/run" --pp 2 --threads 1 > "$dir/r.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "resumed from .*step_00000002 at step 2 of 4" "$dir/r.out" && [ -d "$dir/run/step_00000004" ]' \
  "resume to the end: exit $rc: $(tail -3 "$dir/r.out")"
# Launched without the wrapper, rank 0 says how a preemption would be lost.
check 'grep -q "note: a SIGTERM to mpirun reaches the ranks with a SIGKILL one second behind it" "$dir/r.out"' \
  "the note without the wrapper: $(head -3 "$dir/r.out")"
check '! grep -q "note: a SIGTERM to mpirun" "$dir/a.out"' "no note under the wrapper"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
