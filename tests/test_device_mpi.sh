#!/usr/bin/env bash
# Several ranks on a device the host cannot read (issue 24). On --device cpu-guarded every tensor is
# PROT_NONE outside the backend's kernels and copies, so a collective or transfer that read device
# memory on the host would crash the rank; comm_device.h stages them through host memory instead.
# Each layout (DP, ZeRO-1, TP with vocabulary-parallel cross-entropy, TP+SP, PP under 1f1b,
# interleaved and layered, and their mixes on 4 ranks) must give, on cpu-guarded, bitwise what the
# plain CPU gives at the same layout: every logged figure but the timings (losses, validation loss,
# gradient norm, ledger bytes, communication bytes by collective) and the final checkpoint's weights
# and AdamW state byte for byte. Bitwise, not a tolerance: the kernels are the CPU's, and staging
# only moves bytes: the MPI calls see the same sizes in the same order (no staged collective of
# these shapes is cut into pieces). A ZeRO-1 run stopped and resumed on cpu-guarded ends where the
# CPU's uninterrupted run does. A rank killed mid-run on cpu-guarded takes the job down with it.
# usage: test_device_mpi.sh CTRON DATA MPIEXEC [mpiexec flags...]
set -uo pipefail
ctron=$1; data=$2; shift 2; launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/layout_lib.sh"
common=(--layers 4 --hidden 32 --heads 4 --seq 32 --batch 2 --steps 3 --eval-every 3 --dropout 0.1 --vocab 259
        --threads 1 --data "$data")

# The log without its timings (the pipeline entry holds only wait and busy times): what must not
# depend on where the tensors live.
figures() {
  /usr/bin/python3 -c '
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    print({k: v for k, v in d.items() if not (k.endswith("ms") or k in ("tokens_per_s", "pipeline"))})' "$1"
}

# same NAME NP flags...: the layout on cpu and on cpu-guarded, compared.
same() {
  local name=$1 np=$2; shift 2
  for dev in cpu cpu-guarded; do
    timeout 120 "${launch[@]}" -np "$np" "$ctron" train "${common[@]}" "$@" --device "$dev" \
      --log "$dir/$name.$dev.jsonl" --ckpt-dir "$dir/$name.$dev" > "$dir/$name.$dev.out" 2>&1
    local rc=$?
    check "[ $rc -eq 0 ]" "$name on $dev (np $np $*) exited $rc: $(tail -3 "$dir/$name.$dev.out")"
  done
  local a b; a=$(figures "$dir/$name.cpu.jsonl"); b=$(figures "$dir/$name.cpu-guarded.jsonl")
  check "[ -n \"\$a\" ] && [ \"\$a\" = \"\$b\" ]" "$name: the logs differ: cpu [$a] vs cpu-guarded [$b]"
  for f in model.safetensors optimizer.safetensors; do
    check "cmp -s '$dir/$name.cpu/step_00000003/$f' '$dir/$name.cpu-guarded/step_00000003/$f'" \
      "$name: $f differs between cpu and cpu-guarded"
  done
}

same dp2          2 --recompute selective
same dp2_zero     2 --zero 1
same tp2          2 --tp 2                              # vocabulary-parallel embedding and cross-entropy
same tp2_sp       2 --tp 2 --sp --recompute full --dropout-masks bits
same pp2          2 --pp 2 --grad-accum 2
same pp2_inter    2 --pp 2 --grad-accum 2 --pp-schedule interleaved --virtual-stages 2
same dp2tp2_zero  4 --tp 2 --sp --zero 1
same dp2pp2_layer 4 --pp 2 --grad-accum 2 --pp-schedule layered
same pp2tp2_sp    4 --pp 2 --tp 2 --sp --grad-accum 2 --recompute selective

# The header counts the staging: one host buffer for the collectives, named with its path.
check "grep -q 'collectives on device memory: host-staged, .* of host staging' '$dir/dp2.cpu-guarded.out'" \
  "dp2 on cpu-guarded: no staging line in the header: $(head -8 "$dir/dp2.cpu-guarded.out")"
check "! grep -q 'collectives on device memory' '$dir/dp2.cpu.out'" "dp2 on cpu: a staging line where nothing is staged"

# ZeRO-1 + TP stopped after step 2 and resumed on cpu-guarded (moments unsharded to host memory,
# resharded onto the device): the uninterrupted CPU run's checkpoint, byte for byte.
timeout 120 "${launch[@]}" -np 4 "$ctron" train "${common[@]}" --tp 2 --zero 1 --device cpu-guarded --stop-after 2 \
  --ckpt-dir "$dir/res" > "$dir/res1.out" 2>&1
rc1=$?
timeout 120 "${launch[@]}" -np 4 "$ctron" train "${common[@]}" --tp 2 --zero 1 --device cpu-guarded --resume "$dir/res" \
  --ckpt-dir "$dir/res" > "$dir/res2.out" 2>&1
rc2=$?
timeout 120 "${launch[@]}" -np 4 "$ctron" train "${common[@]}" --tp 2 --zero 1 --device cpu \
  --ckpt-dir "$dir/resref" > "$dir/resref.out" 2>&1
check "[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $? -eq 0 ]" "ZeRO resume on cpu-guarded: rc $rc1, $rc2: $(tail -3 "$dir/res2.out")"
for f in model.safetensors optimizer.safetensors; do
  check "cmp -s '$dir/resref/step_00000003/$f' '$dir/res/step_00000003/$f'" "ZeRO resume on cpu-guarded: $f differs"
done

# A rank that dies ends the job (the existing rule, kept on the staged path): rank 0 of a pipeline on
# cpu-guarded is killed after its checkpoint of step 2 while rank 1 waits in a staged transfer or
# collective; mpirun must end the job within seconds, not hang.
export CKPT="$dir/kill"
start=$(date +%s)
timeout 60 "${launch[@]}" -np 2 sh -c 'if [ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ]; then "$@" & p=$!;
  while [ ! -e "$CKPT/step_00000002/model.safetensors" ]; do sleep 0.05; done; sleep 0.3; kill -9 $p; wait $p; exit 137;
  else exec "$@"; fi' sh "$ctron" train "${common[@]}" --steps 1000000 --print-every 100000 --save-every 2 --keep 0 \
  --warmup 1 --eval-every 0 --pp 2 --grad-accum 2 --device cpu-guarded --ckpt-dir "$dir/kill" > "$dir/kill.out" 2>&1
rc=$?; took=$(( $(date +%s) - start ))
check '[ $rc -ne 0 ] && [ $rc -ne 124 ]' "a killed cpu-guarded pipeline rank: exit $rc (124 = hung)"
check '[ $took -lt 40 ]' "a killed cpu-guarded pipeline rank: the job took $took s to end"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
