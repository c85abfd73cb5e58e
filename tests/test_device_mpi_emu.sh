#!/usr/bin/env bash
# Several ranks with --device cuda, on the CUDA emulation (issue 24): ctron-emu runs the CUDA backend's
# kernels on the host, and its ranks exchange device tensors through comm_device.h's host-staged path
# (the emulated backend has no NCCL). DP + ZeRO-1, TP + SP (vocabulary-parallel cross-entropy) and PP
# on 2 ranks must follow the plain CPU run of the same layout: losses and final weights and AdamW
# moments within 1e-6 relative (compare_runs.py; the emulated kernels sum in other orders than the
# CPU's, e.g. the gradient norm's two-pass tree, so not bitwise; measured: losses ≤ 6.1e-9, weights
# ≤ 8.7e-8, moments ≤ 1.3e-7), and the communication bytes of every step exactly (the same
# collectives, counted once each). The emulated runtime's streams are deferred queues: a staging
# copy that did not wait for the kernels before it would move stale bytes here. (A host read of
# device memory is not visible under emulation, whose device memory is host memory:
# test_device_mpi.sh's cpu-guarded runs catch that.)
# usage: test_device_mpi_emu.sh CTRON CTRON_EMU DATA MPIEXEC [mpiexec flags...]
set -uo pipefail
ctron=$1; emu=$2; data=$3; shift 3; launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/layout_lib.sh"
common=(--layers 2 --hidden 32 --heads 4 --seq 32 --batch 2 --steps 2 --eval-every 2 --vocab 259 --threads 1
        --data "$data")

# close NAME flags...: the layout on 2 ranks of ctron --device cpu and of ctron-emu --device cuda.
close() {
  local name=$1; shift
  timeout 120 "${launch[@]}" -np 2 "$ctron" train "${common[@]}" "$@" --device cpu --log "$dir/$name.cpu.jsonl" \
    --ckpt-dir "$dir/$name.cpu" > "$dir/$name.cpu.out" 2>&1
  local rc=$?
  check "[ $rc -eq 0 ]" "$name on cpu exited $rc: $(tail -3 "$dir/$name.cpu.out")"
  timeout 300 "${launch[@]}" -np 2 "$emu" train "${common[@]}" "$@" --device cuda --log "$dir/$name.emu.jsonl" \
    --ckpt-dir "$dir/$name.emu" > "$dir/$name.emu.out" 2>&1
  rc=$?
  check "[ $rc -eq 0 ]" "$name on the emulated cuda exited $rc: $(tail -3 "$dir/$name.emu.out")"
  check "grep -q 'collectives on device memory: host-staged' '$dir/$name.emu.out'" "$name: the emulated cuda did not stage"
  /usr/bin/python3 "$(dirname "$0")/compare_runs.py" "$dir/$name.cpu.jsonl" "$dir/$name.cpu/step_00000002" \
    "$dir/$name.emu.jsonl" "$dir/$name.emu/step_00000002" --steps 2 --tol 1e-6 --name "$name emu vs cpu"
  check "[ $? -eq 0 ]" "$name: the emulated cuda differs from the cpu beyond 1e-6"
  local a b
  a=$(/usr/bin/python3 -c 'import json,sys; print([json.loads(l)["comm_bytes"] for l in open(sys.argv[1])])' "$dir/$name.cpu.jsonl")
  b=$(/usr/bin/python3 -c 'import json,sys; print([json.loads(l)["comm_bytes"] for l in open(sys.argv[1])])' "$dir/$name.emu.jsonl")
  check "[ -n \"\$a\" ] && [ \"\$a\" = \"\$b\" ]" "$name: communication bytes cpu $a vs emulated cuda $b"
}

close dp2_zero --zero 1
close tp2_sp   --tp 2 --sp
close pp2      --pp 2 --grad-accum 2

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
