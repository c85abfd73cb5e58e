#!/usr/bin/env bash
# A bad layout (and a rank that dies) ends every rank promptly with one clear message from rank 0 and exit 2 (issue 5):
# t not dividing the ranks or the heads, SP with s not divisible by t or without TP, and a data
# file missing on one rank of a TP group. The timeout catches a hang.
# usage: test_tp_errors.sh CTRON DATA MPIEXEC [mpiexec flags...]
set -uo pipefail
ctron=$1; data=$2; shift 2; launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/layout_lib.sh"
base=(--layers 1 --hidden 32 --heads 4 --seq 32 --batch 2 --steps 2 --threads 1 --no-ledger --data "$data")
bad 2 "--tp 3 does not divide the 2 ranks" --tp 3
bad 4 "--tp 4 does not divide --heads 6" --tp 4 --heads 6 --hidden 48
bad 2 "--sp needs --seq 31 divisible by --tp 2" --tp 2 --sp --seq 31
bad 1 "--sp splits the sequence over the TP group: it needs --tp 2 or more" --sp
bad 2 "--zero: 2 is out of range" --tp 2 --zero 2
bad 4 "--tp 4 does not divide --kv-heads 2" --tp 4 --arch llama --kv-heads 2
bad 2 "--tp 2 does not divide --ffn-hidden 175" --tp 2 --arch llama --ffn-hidden 175
# rank 1 of a TP group cannot read the data: both exit 2, the message names the file once
start=$(date +%s)
timeout 60 "${launch[@]}" -np 2 sh -c 'if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then d=/nonexistent/kjv.txt; else d="$1"; fi;
  shift; exec "$@" --data "$d"' sh "$data" "$ctron" train "${base[@]:0:15}" --tp 2 --sp > "$dir/out" 2>&1
rc=$?; took=$(( $(date +%s) - start ))
check '[ $rc -eq 2 ]' "missing data on rank 1 of a TP group: exit $rc: $(head -3 "$dir/out")"
check '[ "$(grep -c "/nonexistent/kjv.txt" "$dir/out")" -eq 1 ]' "expected one message naming the file: $(head -5 "$dir/out")"
check '[ $took -lt 30 ]' "took $took s"
# A rank killed mid-run (SIGKILL two seconds in, during TP collectives): the others do not wait
# forever; mpirun ends the job with a non-zero status and names the process, within seconds.
start=$(date +%s)
timeout 60 "${launch[@]}" -np 2 sh -c 'if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then "$@" & p=$!; sleep 2; kill -9 $p;
  wait $p; exit 137; else exec "$@"; fi' sh "$ctron" train "${base[@]}" --steps 1000000 --print-every 100000 --tp 2 \
  > "$dir/out" 2>&1
rc=$?; took=$(( $(date +%s) - start ))
check '[ $rc -ne 0 ] && [ $rc -ne 124 ]' "a killed rank: exit $rc (124 = hung)"
check 'grep -q "exited with non-zero status\|exited on signal" "$dir/out"' "expected mpirun to report the dead rank: $(tail -5 "$dir/out")"
check '[ $took -lt 30 ]' "a killed rank: the job took $took s to end"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
