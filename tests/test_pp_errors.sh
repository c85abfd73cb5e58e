#!/usr/bin/env bash
# Bad pipeline layouts exit 2 on every rank, promptly, with one message naming the rule (issue 15): P not
# dividing the ranks, L not divisible by P·V, too few micro-batches for interleaving, --virtual-stages
# without interleaved, and what a pipeline does not combine with. A rank killed mid-step ends the job in
# seconds, and the last checkpoint stays loadable (a one-process run resumes from it).
# usage: test_pp_errors.sh CTRON DATA MPIEXEC [mpiexec flags...]
set -uo pipefail
ctron=$1; data=$2; shift 2; launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/layout_lib.sh"
base=(--layers 4 --hidden 32 --heads 4 --seq 32 --batch 2 --steps 2 --threads 1 --no-ledger --data "$data")
bad 2 "--pp 3 x --tp 1 = 3 does not divide the 2 ranks" --pp 3
bad 4 "--pp 2 x --tp 4 = 8 does not divide the 4 ranks" --pp 2 --tp 4
bad 2 "L = 3 layers is not divisible by P = 2" --pp 2 --layers 3
bad 2 "L = 4 layers is not divisible by P·V = 6" --pp 2 --pp-schedule interleaved --virtual-stages 3 --grad-accum 2
bad 2 "--pp-schedule interleaved needs the micro-batches (--grad-accum 3) to be a multiple of --pp 2" \
  --pp 2 --pp-schedule interleaved --virtual-stages 2 --grad-accum 3
bad 2 "--virtual-stages 2 needs --pp-schedule interleaved (got 1f1b)" --pp 2 --virtual-stages 2
bad 2 "--pp-schedule interleaved needs --virtual-stages V >= 2" --pp 2 --pp-schedule interleaved --grad-accum 2
bad 1 "--pp-schedule: unknown schedule" --pp-schedule zigzag
bad 2 "--static-plan does not work with a pipeline schedule" --pp 2 --static-plan
bad 1 "--recompute-microbatches 1 needs a pipeline" --recompute-microbatches 1

# A rank killed mid-step (SIGKILL while stage 1 waits for stage 0's activations, after a checkpoint at
# step 2): mpirun ends the job within seconds, and the checkpoint of step 2 resumes on one process.
export CKPT="$dir/ck"
start=$(date +%s)
timeout 60 "${launch[@]}" -np 2 sh -c 'if [ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ]; then "$@" & p=$!;
  while [ ! -e "$CKPT/step_00000002/model.safetensors" ]; do sleep 0.05; done; sleep 0.3; kill -9 $p; wait $p; exit 137;
  else exec "$@"; fi' sh "$ctron" train "${base[@]}" --steps 1000000 --print-every 100000 --save-every 2 --keep 0 \
  --warmup 1 --eval-every 0 --pp 2 --grad-accum 4 --ckpt-dir "$dir/ck" > "$dir/out" 2>&1
rc=$?; took=$(( $(date +%s) - start ))
check '[ $rc -ne 0 ] && [ $rc -ne 124 ]' "a killed pipeline rank: exit $rc (124 = hung)"
check '[ $took -lt 40 ]' "a killed pipeline rank: the job took $took s to end"
check '[ -f "$dir/ck/step_00000002/model.safetensors" ]' "no checkpoint of step 2 before the kill: $(ls "$dir/ck" 2>&1)"
"$ctron" train "${base[@]}" --steps 3 --warmup 1 --grad-accum 4 --resume "$dir/ck/step_00000002" > "$dir/resume.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "step 3/3" "$dir/resume.out"' "resuming the killed run's step 2 on one process: exit $rc: $(tail -3 "$dir/resume.out")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
