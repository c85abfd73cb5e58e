#!/usr/bin/env bash
# The Llama block under every parallel layout (issue 25 item 5): TP (q/k/v and gate/up column-parallel,
# o and down row-parallel, the vocabulary-parallel untied head), SP, DP with ZeRO-1 and the pipeline
# schedules follow the single-process run within 1e-5 relative (10 per-step losses, final parameters and
# AdamW moments), every rank's activation ledger equals its prediction, and a checkpoint of one layout
# resumes on one process. Also with head_dim, Qwen3's q/k norms, Phi-3's fused tensors, a sliding window and a
# tied output layer.
# usage: test_llama_layouts.sh CTRON DATA MPIEXEC [mpiexec flags...]
set -uo pipefail
ctron=$1; data=$2; shift 2; launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/layout_lib.sh"
# h 64 (d = 16): at h 32 with GQA and dropout, 1 vs 2 OpenMP threads on ONE process already drift 1.8e-4
# in layer 0's v_proj after 4 AdamW steps (near-zero gradients flip signs in the first update), so no
# layout comparison could hold 1e-5 there; at h 64 one process's threads agree to 2e-7.
kv=${LLAMA_KV:-2}
common=(--arch llama --layers 4 --hidden 64 --heads 4 --kv-heads "$kv" --ffn-hidden 176 --seq 32 --batch 4 --steps 10
        --eval-every 5 --dropout 0.1 --vocab 259 --rope-theta 500000 --threads 1 --data "$data")
"$ctron" train "${common[@]}" --log "$dir/ref1.jsonl" --ckpt-dir "$dir/ref1" > "$dir/ref1.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "the one-process run: $(tail -3 "$dir/ref1.out")"
"$ctron" train "${common[@]}" --grad-accum 2 --log "$dir/ref2.jsonl" --ckpt-dir "$dir/ref2" > "$dir/ref2.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "the one-process run with accumulation 2: $(tail -3 "$dir/ref2.out")"

# run NAME NP REF flags...: the layout against REF, and every rank's ledger against its prediction.
run() {
  local name=$1 np=$2 ref=$3; shift 3
  train_at "$name" "$np" "$ref" 10 "$@"
  # one process per stage: the step's peak; a pipeline: each rank's peak against its schedule's prediction
  check '! grep -q MISMATCH "$dir/$name.out" && grep -q "peak of the step.*ok\|^  [0-9] .*  ok$" "$dir/$name.out"' \
    "$name: a ledger mismatch or no ledger: $(grep -m3 "MISMATCH\|peak of the step" "$dir/$name.out")"
}
run tp2        2 ref1 --tp 2
run tp2sp      2 ref1 --tp 2 --sp --recompute selective --dropout-masks regen
run tp2full    2 ref1 --tp 2 --sp --recompute full --tempo layernorm --attention flash
run tp2mini    2 ref1 --tp 2 --sp --mini-seq 3 --recompute selective
run pp2        2 ref2 --pp 2 --grad-accum 2
run pp2inter   2 ref2 --pp 2 --pp-schedule interleaved --virtual-stages 2 --grad-accum 2 --recompute selective
run pp2gpipe   2 ref2 --pp 2 --pp-schedule gpipe --grad-accum 2 --recompute full
run dp2zero    2 ref2 --zero 1 --dropout-masks bits
run dp2layered 2 ref2 --pp-schedule layered   # each layer's DP sum once (llama's tensors are not named "h.N.")
run tp2pp2     4 ref2 --tp 2 --sp --pp 2 --grad-accum 2
# Heads of another width than h/a (--head-dim 24 with h 64 and 4 heads: q and the attention output 96
# wide, o's input split by TP in 48-column halves).
untied=("${common[@]}")
common+=(--head-dim 24)
"$ctron" train "${common[@]}" --grad-accum 2 --log "$dir/hd.jsonl" --ckpt-dir "$dir/hd" > "$dir/hd.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "the one-process --head-dim 24 run: $(tail -3 "$dir/hd.out")"
run hd_tp2sp   2 hd --tp 2 --sp --recompute selective --grad-accum 2
run hd_tp2pp2  4 hd --tp 2 --pp 2 --grad-accum 2 --attention flash
# Qwen3's per-head q/k norms: their weights' gradients are summed over each rank's heads, so TP all-reduces
# them with SP and without (standard attention: the reference's; flash against it drifts to 1e-5 at d 24).
common=("${untied[@]}")
common+=(--qk-norm --head-dim 24)
"$ctron" train "${common[@]}" --grad-accum 2 --log "$dir/qk.jsonl" --ckpt-dir "$dir/qk" > "$dir/qk.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "the one-process --qk-norm run: $(tail -3 "$dir/qk.out")"
# After one step every tensor agrees to 5e-7 (the kernels compute the same things); over 10 steps the q and k
# projections' moments drift to 2e-4 (optimizer rel L2 1.7e-5 in all, measured on an AVX-512 EPYC, session 24;
# under 1e-5 on the machines before): their gradients come out of the softmax's cancellation and AdamW's
# first updates turn rounding into weight differences, as docs/PERFORMANCE.md shows for llama_hd8 on the GPU.
# So the 10-step rows are held to 1e-4 (6x the worst measured; a wrong kernel is 1e-3 or more), and a
# 1-step row to 1e-5.
"$ctron" train "${common[@]}" --grad-accum 2 --steps 1 --log "$dir/qk1.jsonl" --ckpt-dir "$dir/qk1" > "$dir/qk1.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "the one-process --qk-norm run of 1 step: $(tail -3 "$dir/qk1.out")"
train_at qk_tp2_step1 2 qk1 1 --tp 2 --grad-accum 2 --steps 1
layout_tol=1e-4
run qk_tp2      2 qk --tp 2 --grad-accum 2
run qk_tp2sppp2 4 qk --tp 2 --sp --pp 2 --grad-accum 2 --recompute selective
unset layout_tol
# Phi-3's fused qkv_proj and gate_up_proj (one tensor each): their row blocks q|k|v (64, 32, 32 rows under
# GQA) and gate|up split over TP block by block, gathered back into the model file's tensors.
common=("${untied[@]}")
common+=(--fused-proj)
"$ctron" train "${common[@]}" --grad-accum 2 --log "$dir/fused.jsonl" --ckpt-dir "$dir/fused" > "$dir/fused.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "the one-process --fused-proj run: $(tail -3 "$dir/fused.out")"
run fused_tp2sppp2 4 fused --tp 2 --sp --pp 2 --grad-accum 2 --recompute selective
# A sliding window of 9 of the 32 positions (Mistral's kind): RoPE and the window on SP's gathered global
# positions, every rank's local heads through the window, flash's tiles and the standard path.
common=("${untied[@]}")
common+=(--sliding-window 9)
"$ctron" train "${common[@]}" --grad-accum 2 --log "$dir/win.jsonl" --ckpt-dir "$dir/win" > "$dir/win.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "the one-process --sliding-window run: $(tail -3 "$dir/win.out")"
run win_tp2sp   2 win --tp 2 --sp --recompute selective --grad-accum 2
run win_tp2pp2  4 win --tp 2 --sp --pp 2 --grad-accum 2 --attention flash --recompute full
common=("${untied[@]}")
common+=(--tie-embeddings)   # the tied output layer: the first and last stages' copies of the embedding
"$ctron" train "${common[@]}" --grad-accum 2 --log "$dir/tied.jsonl" --ckpt-dir "$dir/tied" > "$dir/tied.out" 2>&1
run tied_tp2pp2 4 tied --tp 2 --pp 2 --grad-accum 2

# A checkpoint of tp 2 × pp 2 stops after step 5; one process goes on to step 10 and lands where the
# uninterrupted one-process run did.
timeout 120 "${launch[@]}" -np 4 "$ctron" train "${common[@]}" --tp 2 --pp 2 --grad-accum 2 --stop-after 5 \
  --log "$dir/resumed.jsonl" --ckpt-dir "$dir/resumed" > "$dir/half.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "the first half at np 4 failed: $(tail -3 "$dir/half.out")"
"$ctron" train "${common[@]}" --grad-accum 2 --resume "$dir/resumed" --log "$dir/resumed.jsonl" > "$dir/resume.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "resuming on one process failed: $(tail -3 "$dir/resume.out")"
compare_to resumed tied 10
ec=$?; check '[ $ec -eq 0 ]' "np 4 (tp 2, pp 2) up to step 5 + one process to step 10 differs from one process"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
