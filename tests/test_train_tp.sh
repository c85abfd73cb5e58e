#!/usr/bin/env bash
# Tensor, sequence and data parallelism (issue 5, DESIGN.md §4): every layout follows the
# single-process run within 1e-5 relative (10 per-step losses with dropout 0.1, final parameters
# and AdamW moments as relative L2 distances), a checkpoint written at one layout resumes at
# another, and the vocabulary (259) is padded to a multiple of t.
# usage: test_train_tp.sh CTRON DATA MPIEXEC [mpiexec flags...]
set -uo pipefail
ctron=$1; data=$2; shift 2; launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/layout_lib.sh"
common=(--layers 2 --hidden 32 --heads 4 --seq 32 --batch 4 --steps 10 --eval-every 5 --dropout 0.1 --vocab 259
        --threads 1 --no-ledger --data "$data")
"$ctron" train "${common[@]}" --log "$dir/ref1.jsonl" --ckpt-dir "$dir/ref1" > /dev/null
"$ctron" train "${common[@]}" --grad-accum 2 --log "$dir/ref2.jsonl" --ckpt-dir "$dir/ref2" > /dev/null

run() { local name=$1 np=$2 ref=$3; shift 3; train_at "$name" "$np" "$ref" 10 "$@"; }   # run NAME NP REF flags...
# accumulation 2 on one process = 2 data-parallel groups of the same batch
run tp2       2 ref1 --tp 2
run tp2sp     2 ref1 --tp 2 --sp
run tp4       4 ref1 --tp 4
run tp4sp     4 ref1 --tp 4 --sp --recompute selective --dropout-masks regen
run dp2tp2    4 ref2 --tp 2 --recompute full
run dp2tp2sp  4 ref2 --tp 2 --sp --dropout-masks bits
run zero      4 ref2 --tp 2 --sp --zero 1
run zero_dp   2 ref2 --zero 1
run tp2mini   2 ref1 --tp 2 --sp --mini-seq 3 --tempo layernorm,softmax
# offload and a static memory plan on every rank (both exact: the same arithmetic, other places)
run tp2off    2 ref1 --tp 2 --sp --offload all --static-plan
run dp2tp2off 4 ref2 --tp 2 --recompute full --offload ln1_in,fc1_in --offload-dir "$dir"

# A checkpoint of one layout resumes at another: dp 2 × tp 2 + SP stops after step 5, one process
# goes on to step 10 and must land where the uninterrupted one-process run did.
timeout 120 "${launch[@]}" -np 4 "$ctron" train "${common[@]}" --tp 2 --sp --zero 1 --stop-after 5 \
  --log "$dir/resumed.jsonl" --ckpt-dir "$dir/resumed" > "$dir/half.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "the first half at np 4 failed: $(tail -3 "$dir/half.out")"
"$ctron" train "${common[@]}" --grad-accum 2 --resume "$dir/resumed" --log "$dir/resumed.jsonl" > "$dir/resume.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "resuming on one process failed: $(tail -3 "$dir/resume.out")"
compare_to resumed ref2 10
ec=$?; check '[ $ec -eq 0 ]' "np 4 (tp 2, sp, zero 1) up to step 5 + one process to step 10 differs from one process"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
