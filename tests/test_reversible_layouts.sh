#!/usr/bin/env bash
# Reversible blocks (issue 29 part 2) under tensor and sequence parallelism: the inversion is local
# (each rank rebuilds its own rows of the streams from its own rows of the outputs; the halves' TP
# collectives run as in the forward), so tp 2, tp 2 + SP and dp 2 + ZeRO-1 follow the one-process run
# within 1e-5 relative (per-step losses, final parameters and AdamW moments), GPT-2 with dropout and
# llama with GQA, also with LoRA adapters (tp 2 + SP), and every rank's ledger equals its prediction.
# usage: test_reversible_layouts.sh CTRON DATA MPIEXEC [mpiexec flags...]
set -uo pipefail
ctron=$1; data=$2; shift 2; launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/layout_lib.sh"

run() {
  local name=$1 np=$2 ref=$3; shift 3
  train_at "$name" "$np" "$ref" 6 "$@"
  check '! grep -q MISMATCH "$dir/$name.out" && grep -q "peak of the step.*ok" "$dir/$name.out" &&
         grep -q "rev_x1 .* ok" "$dir/$name.out"' \
    "$name: a ledger mismatch or no ledger: $(grep -m3 "MISMATCH\|peak of the step" "$dir/$name.out")"
}
for arch in gpt2 llama; do
  common=(--layers 4 --hidden 64 --heads 4 --seq 32 --batch 4 --steps 6 --eval-every 3 --vocab 259 --threads 1
          --reversible --ledger --data "$data")
  [ $arch = llama ] && common+=(--arch llama --kv-heads 2 --ffn-hidden 176 --dropout 0.1) || common+=(--dropout 0.1)
  "$ctron" train "${common[@]}" --log "$dir/ref_$arch.jsonl" --ckpt-dir "$dir/ref_$arch" > "$dir/ref_$arch.out" 2>&1
  ec=$?; check '[ $ec -eq 0 ]' "$arch: the one-process run: $(tail -3 "$dir/ref_$arch.out")"
  "$ctron" train "${common[@]}" --grad-accum 2 --log "$dir/ref2_$arch.jsonl" --ckpt-dir "$dir/ref2_$arch" \
    > "$dir/ref2_$arch.out" 2>&1
  ec=$?; check '[ $ec -eq 0 ]' "$arch: the one-process run with accumulation 2: $(tail -3 "$dir/ref2_$arch.out")"
  run "${arch}_tp2"    2 "ref_$arch" --tp 2
  run "${arch}_tp2sp"  2 "ref_$arch" --tp 2 --sp --dropout-masks regen
  run "${arch}_dp2"    2 "ref2_$arch" --zero 1
  # Adapters in the reversible blocks (GPT-2 LoRA with adapter dropout, llama LoRA-FA): tp 2 + SP as one process
  lora=(--lora-rank 4 --lora-dropout 0.1)
  [ $arch = llama ] && lora=(--lora-rank 4 --lora-fa)
  "$ctron" train "${common[@]}" "${lora[@]}" --log "$dir/lref_$arch.jsonl" --ckpt-dir "$dir/lref_$arch" \
    > "$dir/lref_$arch.out" 2>&1
  ec=$?; check '[ $ec -eq 0 ]' "$arch LoRA: the one-process run: $(tail -3 "$dir/lref_$arch.out")"
  run "${arch}_lora_tp2sp" 2 "lref_$arch" --tp 2 --sp "${lora[@]}"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
