#!/usr/bin/env bash
# MPI ranks given different configurations (issue 17, defect 2): before any collective every rank
# compares the whole effective configuration; one message from rank 0 names the first option that
# differs, each rank's value and the ranks that differ, and every rank exits 2 within seconds.
# Before: a different --lr ran to exit 0 with wrong weights, --steps hung, --hidden aborted in MPI.
# usage: test_config_agree.sh CTRON DATA MPIEXEC [mpiexec flags...]
set -uo pipefail
ctron=$1; data=$2; shift 2; launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
base=(--layers 1 --hidden 32 --heads 4 --seq 32 --batch 2 --steps 4 --threads 1 --no-ledger --data "$data")
differ() {   # differ NP RANKS 'expected message' flags-for-those-ranks... -- common flags...
  local np=$1 ranks=$2 msg=$3; shift 3
  local extra=() common=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do extra+=("$1"); shift; done
  shift; common=("$@")
  local start=$(date +%s)
  timeout 60 "${launch[@]}" -np "$np" sh -c 'r=$1; n=$2; shift 2; e=""; i=0;
    while [ $i -lt "$n" ]; do e="$e $1"; shift; i=$((i+1)); done
    case ",$r," in *",${OMPI_COMM_WORLD_RANK:-0},"*) exec "$@" $e;; esac; exec "$@"' \
    sh "$ranks" "${#extra[@]}" "${extra[@]}" "$ctron" train "${base[@]}" "${common[@]}" > "$dir/out" 2>&1
  local rc=$? took=$(( $(date +%s) - start ))
  check "[ $rc -eq 2 ]" "np $np ranks $ranks ${extra[*]}: exit $rc, expected 2 (124 = hung): $(head -3 "$dir/out")"
  check "[ \"\$(grep -cF -- \"$msg\" '$dir/out')\" -eq 1 ]" "np $np ${extra[*]}: expected once: $msg; got: $(grep -v '^--\|^ *$' "$dir/out" | head -4)"
  check "[ $took -lt 30 ]" "np $np ${extra[*]}: took $took s"
}
# silently wrong weights before
differ 2 1 "--lr is '0.001' on rank 0, '0.0003' on rank 1 (the first option" --lr 3e-4 --
differ 2 1 "--seed is '1337' on rank 0, '7' on rank 1" --seed 7 --
differ 3 1,2 "--dropout is '0.1' on rank 0, '0.2' on rank 1, '0.2' on rank 2" --dropout 0.2 --
differ 4 3 "--weight-decay is '0.1' on rank 0, '0' on rank 3 (" --weight-decay 0 --
differ 2 1 "--clip is '1' on rank 0, '0.5' on rank 1" --clip 0.5 --
# hangs before
differ 2 1 "--steps is '4' on rank 0, '3' on rank 1" --steps 3 --
differ 2 1 "--layers is '1' on rank 0, '2' on rank 1" --layers 2 -- --tp 2
differ 2 1 "--eval-every is '100' on rank 0, '1' on rank 1" --eval-every 1 --
differ 2 1 "--sp is '0' on rank 0, '1' on rank 1" --sp -- --tp 2
differ 4 1,3 "--zero is '0' on rank 0, '1' on rank 1, '1' on rank 3" --zero 1 --
# MPI_ERR_TRUNCATE before
differ 2 1 "--hidden is '32' on rank 0, '64' on rank 1" --hidden 64 --
differ 2 1 "--batch is '2' on rank 0, '4' on rank 1" --batch 4 -- --tp 2
differ 2 1 "--recompute is 'none' on rank 0, 'selective' on rank 1" --recompute selective -- --tp 2
# paths may differ per host: --log on rank 1 only is not a configuration difference
timeout 60 "${launch[@]}" -np 2 sh -c '[ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ] && exec "$@" --print-every 2; exec "$@"' \
  sh "$ctron" train "${base[@]}" --tp 2 > "$dir/same.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "^done: 4 steps" "$dir/same.out"' "a local difference (--print-every) must not refuse: $(tail -3 "$dir/same.out")"
# Ranks agree on a stop signal too: SIGINT to rank 1 only, and rank 0 names SIGINT (it said SIGTERM).
timeout 60 "${launch[@]}" -np 2 sh -c 'echo $$ > "$0.${OMPI_COMM_WORLD_RANK:-0}"; exec "$@"' "$dir/pid" \
  "$ctron" train "${base[@]}" --steps 1000000 --print-every 100000 --tp 2 --ckpt-dir "$dir/sig" > "$dir/sig.out" 2>&1 &
job=$!
for _ in $(seq 200); do sleep 0.1; grep -q "^ctron train:" "$dir/sig.out" && [ -s "$dir/pid.1" ] && break; done
sleep 0.5
kill -INT "$(cat "$dir/pid.1")"
wait $job
rc=$?
check '[ $rc -eq 130 ] && grep -q "interrupted (SIGINT) after step" "$dir/sig.out" && ls "$dir/sig" | grep -q "^step_"' \
  "SIGINT to rank 1: exit $rc, expected 130, rank 0 naming SIGINT and a checkpoint: $(grep -v '^--\|^ *$' "$dir/sig.out" | tail -4)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
