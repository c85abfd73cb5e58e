#!/usr/bin/env bash
# A GPU run that cannot fit is refused before anything is allocated or written (exit 2), with what it
# needs: the model states and the policy's exact activation peak (the ledger's prediction) against the
# device's memory; a policy that fits the same device runs. On the emulated GPU (ctron-emu), whose
# memory CT_EMU_MEMORY sets. usage: test_device_capacity.sh CTRON CTRON_EMU DATA
set -uo pipefail
ctron=$1; emu=$2; data=$3
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
export OMP_NUM_THREADS=1
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
shape=(--data "$data" --layers 4 --hidden 256 --heads 4 --seq 256 --batch 8 --steps 1 --eval-every 0
       --eval-batches 1 --peak-gflops 100)

# The CPU's ledger: the predicted peak of each policy, the figure the refusal must name.
peak() {   # peak POLICY -> bytes
  "$ctron" train "${shape[@]}" --recompute "$1" --ckpt-dir "$dir/cpu_$1" > "$dir/cpu_$1.out" 2>&1
  grep -o 'peak of the step (recomputation included): measured [0-9]* ([^)]*), predicted [0-9]*' "$dir/cpu_$1.out" \
    | grep -o '[0-9]*$'
}
fmt() { python3 -c "import sys; v=float(sys.argv[1]); print(f'{v/2**20:.2f} MiB')" "$1"; }
none_peak=$(peak none); full_peak=$(peak full)
check '[ -n "$none_peak" ] && [ -n "$full_peak" ] && [ "$full_peak" -lt "$none_peak" ]' \
  "the CPU's predicted peaks: none '$none_peak', full '$full_peak'"

# 64 MiB: refused under none, naming the activation peak and the device's memory; nothing written.
CT_EMU_MEMORY=64M "$emu" train "${shape[@]}" --device cuda --recompute none --ckpt-dir "$dir/none" > "$dir/none.out" 2>&1
ec=$?
check '[ $ec -eq 2 ]' "none on 64 MiB: exit $ec, expected 2: $(tail -2 "$dir/none.out")"
msg=$(grep 'needs at least' "$dir/none.out")
check '[[ "$msg" == *"$(fmt "$none_peak") of activations at the step'"'"'s peak"* ]]' \
  "none: the refusal names the ledger's peak $(fmt "$none_peak"): $msg"
check '[[ "$msg" == *"more than the device'"'"'s 64.00 MiB"* ]]' "none: the refusal names the device's memory: $msg"
check '[ ! -e "$dir/none" ]' "none: the refused run left $dir/none behind"
# LoRA: the least it holds is the frozen base's weights (GPT-2 L4 h256 v256: 3,290,624 parameters × 4 B =
# 13,162,496 B, a quarter of full fine-tuning's 16 B a parameter; the adapters left out).
CT_EMU_MEMORY=64M "$emu" train "${shape[@]}" --device cuda --lora-rank 4 --ckpt-dir "$dir/lora" > "$dir/lora.out" 2>&1
ec=$?
check '[ $ec -eq 2 ] && grep -q "needs at least .* (12.55 MiB of the frozen base'"'"'s weights, " "$dir/lora.out"' \
  "LoRA on 64 MiB: exit $ec (expected 2) naming the base's 12.55 MiB: $(grep 'needs at least' "$dir/lora.out")"
# Full recompute keeps less: still over 64 MiB (the states alone are 50 MiB), under 256 MiB it runs.
CT_EMU_MEMORY=64M "$emu" train "${shape[@]}" --device cuda --recompute full --ckpt-dir "$dir/full64" > "$dir/full64.out" 2>&1
ec=$?
check '[ $ec -eq 2 ] && grep -q "$(fmt "$full_peak") of activations" "$dir/full64.out"' \
  "full on 64 MiB: exit $ec (expected 2) naming $(fmt "$full_peak"): $(grep 'needs at least' "$dir/full64.out")"
CT_EMU_MEMORY=256M "$emu" train "${shape[@]}" --device cuda --recompute full --ckpt-dir "$dir/full256" > "$dir/full256.out" 2>&1
ec=$?
check '[ $ec -eq 0 ]' "full on 256 MiB: exit $ec, expected 0: $(tail -2 "$dir/full256.out")"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
