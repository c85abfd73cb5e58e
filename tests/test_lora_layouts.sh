#!/usr/bin/env bash
# LoRA and LoRA-FA under the parallel layouts (issue 27 item 5): column-parallel sites (q, k, v, gate, up;
# GPT-2's c_attn and c_fc; Phi-3's qkv_proj and gate_up_proj) with a replicated A (its gradient all-reduced over TP) and a row-split B,
# row-parallel sites (o, down; c_proj) with a column-split A whose partial x·Aᵀ is summed over TP and a
# replicated B; SP, pipelines, DP with ZeRO-1. Each follows the one-process run within 1e-5 relative (per-step
# losses, the model file, the adapters' AdamW moments), and every rank's ledger equals its prediction.
# usage: test_lora_layouts.sh CTRON DATA MPIEXEC [mpiexec flags...]
set -uo pipefail
ctron=$1; data=$2; shift 2; launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/layout_lib.sh"

run() {
  local name=$1 np=$2 ref=$3; shift 3
  train_at "$name" "$np" "$ref" 8 "$@"
  check '! grep -q MISMATCH "$dir/$name.out" && grep -q "peak of the step.*ok\|^  [0-9] .*  ok$" "$dir/$name.out"' \
    "$name: a ledger mismatch or no ledger: $(grep -m3 "MISMATCH\|peak of the step" "$dir/$name.out")"
}
reference() {   # reference NAME flags...: the one-process run
  "$ctron" train "${common[@]}" "${@:2}" --log "$dir/$1.jsonl" --ckpt-dir "$dir/$1" > "$dir/$1.out" 2>&1
  ec=$?; check '[ $ec -eq 0 ]' "the one-process run $1: $(tail -3 "$dir/$1.out")"
}

# llama, LoRA on every site (q, k, v, o, gate, up, down), lr high enough that A moves.
common=(--arch llama --layers 4 --hidden 64 --heads 4 --kv-heads 2 --ffn-hidden 176 --seq 32 --batch 4 --steps 8
        --eval-every 4 --dropout 0.1 --vocab 259 --threads 1 --data "$data" --lora-rank 4 --lora-alpha 8 --lr 5e-3)
reference lref1
reference lref2 --grad-accum 2
run l_tp2       2 lref1 --tp 2
run l_tp2sp     2 lref1 --tp 2 --sp --recompute selective --dropout-masks regen
run l_tp2full   2 lref1 --tp 2 --sp --recompute full --tempo layernorm
run l_pp2       2 lref2 --pp 2 --grad-accum 2
run l_dp2zero   2 lref2 --zero 1
run l_tp2pp2    4 lref2 --tp 2 --sp --pp 2 --grad-accum 2

# GPT-2, LoRA-FA on c_attn (three row blocks of B under TP) and the MLP's c_proj.
common=(--arch gpt2 --layers 4 --hidden 64 --heads 4 --seq 32 --batch 4 --steps 8 --eval-every 4 --dropout 0.1
        --vocab 259 --threads 1 --data "$data" --lora-rank 4 --lora-targets qkv,fc2 --lora-fa --lr 5e-3)
reference gref2 --grad-accum 2
reference gref1
run g_tp2sp     2 gref1 --tp 2 --sp --attention flash
run g_pp2inter  2 gref2 --pp 2 --pp-schedule interleaved --virtual-stages 2 --grad-accum 2 --recompute selective
run g_tp2pp2    4 gref2 --tp 2 --pp 2 --grad-accum 2 --recompute full

# Phi-3's fused sites (--fused-proj): qkv's B in three row blocks of unequal widths under GQA (q 64, k and v 32:
# 32, 16 and 16 rows a rank), gate_up's in two, each split over TP on its own; the base's qkv_proj and
# gate_up_proj tensors likewise in the model file.
common=(--arch llama --fused-proj --layers 4 --hidden 64 --heads 4 --kv-heads 2 --ffn-hidden 176 --seq 32 --batch 4
        --steps 8 --eval-every 4 --dropout 0.1 --vocab 259 --threads 1 --data "$data" --lora-rank 4 --lora-alpha 8
        --lora-dropout 0.1 --lr 5e-3)
reference fref1
reference fref2 --grad-accum 2 --lora-fa
run f_tp2       2 fref1 --tp 2
run f_tp2spmini 2 fref1 --tp 2 --sp --mini-seq 2 --recompute selective
run f_tp2pp2    4 fref2 --tp 2 --pp 2 --grad-accum 2 --lora-fa
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
