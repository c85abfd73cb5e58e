#!/usr/bin/env bash
# --device (issue 14). On cpu-guarded every tensor lives in memory the host cannot read outside the
# backend's kernels and copies, and kernels refuse host pointers: the one-process trainer, under each
# policy and option, must run there and give the CPU's losses to the last digit (the same kernels),
# resume included. `--device cuda` without a visible GPU exits 2 naming what is missing.
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
base=(train --data "$data" --layers 2 --hidden 32 --heads 4 --seq 32 --batch 2 --steps 3 --eval-every 3 --seed 7)

# The losses and validation loss of a run (the step lines without their timings).
losses() { grep -o '^step [0-9]*/[0-9]* | loss [0-9.]*\|val [0-9.]*' "$1" | tr '\n' ' '; }
for opts in "" "--recompute selective" "--recompute full --dropout-masks bits" "--recompute full --dropout-masks regen" \
            "--attention flash" "--tempo all" "--gelu-bits 2" "--mini-seq 2" "--precision bf16" "--static-plan" \
            "--mem-budget 300KiB" "--grad-accum 2" "--recompute-layers 0:full,1:selective" "--zero 1"; do
  # shellcheck disable=SC2086
  "$ctron" "${base[@]}" $opts > "$dir/cpu.log" 2>&1; rc_cpu=$?
  # shellcheck disable=SC2086
  "$ctron" "${base[@]}" $opts --device cpu-guarded > "$dir/guard.log" 2>&1; rc_g=$?
  if [ $rc_cpu -ne 0 ] || [ $rc_g -ne 0 ]; then bad "'$opts': cpu rc $rc_cpu, cpu-guarded rc $rc_g: $(tail -2 "$dir/guard.log")"; continue; fi
  a=$(losses "$dir/cpu.log"); b=$(losses "$dir/guard.log")
  if [ -n "$a" ] && [ "$a" = "$b" ]; then ok; else bad "'$opts': cpu [$a] vs cpu-guarded [$b]"; fi
done

# Adjacent allocations: an allocation whose end is exactly the next one's base (here a page-sized one before
# the targets buffer, with LoRA and --static-plan) must not be taken for the one a copy starts in (the guard
# refused step 1's targets copy: "not inside a device allocation"; found by tests/compose_sweep.py).
adj=(train --data "$data" --arch gpt2 --layers 1 --hidden 32 --heads 2 --seq 24 --batch 2 --dropout 0.1 --steps 2
     --eval-every 2 --seed 7 --lora-rank 2 --static-plan --recompute full --act-dtype bf16)
"$ctron" "${adj[@]}" > "$dir/cpu.log" 2>&1; rc_cpu=$?
"$ctron" "${adj[@]}" --device cpu-guarded > "$dir/guard.log" 2>&1; rc_g=$?
a=$(losses "$dir/cpu.log"); b=$(losses "$dir/guard.log")
if [ $rc_cpu -eq 0 ] && [ $rc_g -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ]; then ok
else bad "adjacent allocations: cpu rc $rc_cpu [$a], cpu-guarded rc $rc_g [$b]: $(grep -m1 error "$dir/guard.log")"; fi

# Nothing hidden: on cpu-guarded the device's count is the sum of its live allocations, which must
# be exactly what the header says ctron holds there.
"$ctron" "${base[@]}" --steps 1 --device cpu-guarded > "$dir/hdr.log" 2>&1
held=$(grep -o 'ctron holds [^(]*([0-9]* B)' "$dir/hdr.log" | grep -o '([0-9]* B)')
counted=$(grep -o 'the device counts [^(]*([0-9]* B)' "$dir/hdr.log" | grep -o '([0-9]* B)')
if [ -n "$held" ] && [ "$held" = "$counted" ]; then ok
else bad "header: '$held' vs '$counted'"; fi

# Checkpoint, resume and sampling through the backend's copies only.
"$ctron" "${base[@]}" --steps 4 --device cpu-guarded > "$dir/full.log" 2>&1
"$ctron" "${base[@]}" --steps 4 --stop-after 2 --ckpt-dir "$dir/ck" --device cpu-guarded > /dev/null 2>&1
"$ctron" "${base[@]}" --steps 4 --resume "$dir/ck" --ckpt-dir "$dir/ck" --sample 8 --device cpu-guarded > "$dir/res.log" 2>&1
rc=$?
a=$(grep -o '^step 4/4 | loss [0-9.]*' "$dir/full.log"); b=$(grep -o '^step 4/4 | loss [0-9.]*' "$dir/res.log")
if [ $rc -eq 0 ] && [ -n "$a" ] && [ "$a" = "$b" ]; then ok; else bad "resume on cpu-guarded: rc $rc, [$a] vs [$b]"; fi
if grep -q "tokens/s)" "$dir/res.log"; then ok; else bad "no sample after the resumed run"; fi

# A GPU that is not there: exit 2, naming it. (Where a GPU is visible this check has nothing to say.)
if command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1; then
  echo "a GPU is visible: the missing-GPU check is skipped"
else
  out=$("$ctron" "${base[@]}" --device cuda 2>&1 > /dev/null); rc=$?
  if [ $rc -eq 2 ] && grep -q "device 'cuda'" <<< "$out" && grep -qi "no CUDA GPU is visible\|without the CUDA backend" <<< "$out"
  then ok; else bad "--device cuda without a GPU: rc $rc, '$out'"; fi
fi
out=$("$ctron" "${base[@]}" --device tpu 2>&1 > /dev/null); rc=$?
if [ $rc -eq 2 ] && grep -q "unknown device 'tpu'" <<< "$out"; then ok; else bad "--device tpu: rc $rc, '$out'"; fi
out=$("$ctron" "${base[@]}" --device cuda:x 2>&1 > /dev/null); rc=$?
if [ $rc -eq 2 ] && grep -q "cuda:x" <<< "$out"; then ok; else bad "--device cuda:x: rc $rc, '$out'"; fi

# What the device cannot do is refused with the reason, exit 2.
out=$("$ctron" "${base[@]}" --device cpu-guarded --offload fc1_in 2>&1 > /dev/null); rc=$?
if [ $rc -eq 2 ] && grep -q "cpu-guarded with --offload" <<< "$out"; then ok; else bad "cpu-guarded --offload: rc $rc, '$out'"; fi
# Several ranks are no longer refused (tests/test_device_mpi.sh runs them): --tp 2 on one process gets
# the layout's own error, as on the CPU.
out=$("$ctron" "${base[@]}" --device cpu-guarded --tp 2 2>&1 > /dev/null); rc=$?
if [ $rc -eq 2 ] && grep -q "does not divide the 1 rank" <<< "$out"; then ok; else bad "cpu-guarded --tp 2: rc $rc, '$out'"; fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
