#!/usr/bin/env bash
# The CPU backend's ops on the arena's bf16 copies (docs/BACKENDS.md, "Ops on the kept bf16 copies"): at
# --precision bf16 its kernels read and write the kept copies as they are (SwiGLU, the norms' backwards, the
# GEMMs' dy written in bf16 by SwiGLU's backward, the norms' and attention's outputs kept as their copies only),
# as the CUDA backend's do. CTRON_BF16_COPIES=0 gives them the fp32 values unpacked from the copies instead.
#   1. Both give the same bits: losses, and the final weights and AdamW moments byte for byte, for both
#      families, full fine-tuning, LoRA (dropout too) and LoRA-FA, under no, selective and full recompute,
#      mini-seq and the static plan.
#   2. The copies path is the one that ran: SwiGLU writes the down projection's input and the gate and up
#      GEMMs' dy in bf16 itself, so the training step's GEMM scratch holds no [s·b, ffn] operand (the run
#      header's "backend scratch", after step 1: 38.00 KiB, the output layer's dy [64, 256] (32 KiB) and
#      attention's per-thread operands (6 KiB: a 32×32 block, and q, k, v and dctx 32×16), instead of 70.00 KiB
#      with [64, 512] for ffn 512; the evaluation forward, which
#      keeps no copies, still packs SwiGLU's output there).
#   3. The guarded CPU backend (--device cpu-guarded: every tensor reached only through the backend, as on a
#      GPU) runs the copies path with the same bits.
#   4. Any other value of CTRON_BF16_COPIES is refused (exit 2, naming it), and the comparison can fail.
# usage: test_bf16_copies_cpu.sh CTRON DATA
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
export OMP_NUM_THREADS=1
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
base=(train --data "$data" --layers 2 --hidden 64 --heads 4 --seq 32 --batch 2 --steps 3 --seed 7 --threads 1
      --eval-every 3 --eval-batches 1 --peak-gflops 100 --precision bf16)
step3=step_00000003

run() {   # run NAME flags...: $dir/NAME.out, $dir/NAME.jsonl, checkpoints in $dir/NAME/; 0 when it ran
  local name=$1; shift
  "$ctron" "${base[@]}" "$@" --ckpt-dir "$dir/$name" --log "$dir/$name.jsonl" > "$dir/$name.out" 2>&1
  local rc=$?
  if [ $rc -ne 0 ] || [ ! -f "$dir/$name/$step3/model.safetensors" ]; then
    bad "$name ($*): exit $rc: $(tail -3 "$dir/$name.out")"; return 1
  fi
}
losses() { grep -o '"loss":[^,]*\|"val_loss":[^,]*' "$1" | tr '\n' ' '; }
same_bits() {   # same_bits REF NAME: losses and final checkpoint bytes equal to REF's
  local ref=$1 name=$2
  if [ -n "$(losses "$dir/$ref.jsonl")" ] && [ "$(losses "$dir/$name.jsonl")" = "$(losses "$dir/$ref.jsonl")" ]; then ok
  else bad "$name: losses [$(losses "$dir/$name.jsonl")] differ from $ref's [$(losses "$dir/$ref.jsonl")]"; fi
  for f in model.safetensors optimizer.safetensors; do
    cmp -s "$dir/$ref/$step3/$f" "$dir/$name/$step3/$f" && ok || bad "$name: $f differs from $ref's"
  done
}
scratch() { grep -o 'backend scratch (bf16 GEMM operands) [0-9.]* [KMG]*i*B' "$dir/$1.out" | grep -o '[0-9.]* [KMG]*i*B$'; }

llama="--arch llama --kv-heads 2 --ffn-hidden 512"
lora_fa="$llama --lora-rank 4 --lora-fa --lr 5e-3"
gpt2="--dropout 0.1"
while IFS='|' read -r name flags; do
  # shellcheck disable=SC2086
  run "$name" $flags || continue
  # shellcheck disable=SC2086
  CTRON_BF16_COPIES=0 run "${name}_f32ops" $flags && same_bits "$name" "${name}_f32ops"
done <<EOF
lora_fa|$lora_fa
lora_selective|$llama --lora-rank 4 --recompute selective --lr 5e-3
lora_dropout_full|$llama --lora-rank 4 --lora-dropout 0.1 --recompute full --lr 5e-3
llama_full_regen|$llama --dropout 0.1 --recompute full --dropout-masks regen
llama_mini|$llama --mini-seq 2 --recompute selective
llama_static|$lora_fa --static-plan
gpt2|$gpt2
gpt2_lora_fa|--lora-rank 4 --lora-fa --recompute selective --lr 5e-3
EOF

# 2. the copies path ran: no [s·b, ffn] GEMM operand in the backend's scratch
s1=$(scratch lora_fa); s0=$(scratch lora_fa_f32ops)
if [ "$s1" = "38.00 KiB" ] && [ "$s0" = "70.00 KiB" ]; then ok
else bad "backend scratch with the copies '$s1' (expected 38.00 KiB), without '$s0' (expected 70.00 KiB)"; fi

# 3. the guarded backend on the copies path
# shellcheck disable=SC2086
run lora_fa_guarded $lora_fa --device cpu-guarded && same_bits lora_fa lora_fa_guarded
# shellcheck disable=SC2086
run gpt2_guarded $gpt2 --device cpu-guarded && same_bits gpt2 gpt2_guarded

# 4. a bad value is refused; another seed differs (the comparisons above can fail)
CTRON_BF16_COPIES=2 "$ctron" "${base[@]}" --ckpt-dir "$dir/bad" > "$dir/bad.out" 2>&1
rc=$?
if [ $rc -eq 2 ] && grep -q "CTRON_BF16_COPIES='2': expected 1" "$dir/bad.out" && [ ! -e "$dir/bad" ]; then ok
else bad "CTRON_BF16_COPIES=2: exit $rc, $(tail -2 "$dir/bad.out")"; fi
# shellcheck disable=SC2086
run seed8 $lora_fa --seed 8
if ! cmp -s "$dir/lora_fa/$step3/model.safetensors" "$dir/seed8/$step3/model.safetensors" \
   && [ "$(losses "$dir/seed8.jsonl")" != "$(losses "$dir/lora_fa.jsonl")" ]; then ok
else bad "--seed 8 gave seed 7's bits: the comparisons above cannot fail"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
