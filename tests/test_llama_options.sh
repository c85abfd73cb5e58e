#!/usr/bin/env bash
# The Llama block under ctron's memory techniques on one process (issue 25 item 3): offload, the static
# memory plan and the budget planner keep every ledger line equal to its prediction, and the exact ones
# (offload, static plan, full and selective recompute) give bitwise the weights of the plain run.
# usage: test_llama_options.sh CTRON DATA
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
base=(--arch llama --layers 4 --hidden 64 --heads 4 --kv-heads 2 --ffn-hidden 176 --seq 32 --batch 2 --steps 3
      --eval-every 3 --dropout 0.1 --threads 2 --data "$data")
# run NAME flags...: exit 0 and a ledger with every line ok (the trainer prints MISMATCH otherwise)
run() {
  local name=$1; shift
  "$ctron" train "${base[@]}" "$@" --ckpt-dir "$dir/$name" > "$dir/$name.out" 2>&1
  local rc=$?
  check "[ $rc -eq 0 ] && ! grep -q MISMATCH '$dir/$name.out' && grep -q 'peak of the step.*ok' '$dir/$name.out'" \
    "$name ($*): exit $rc, $(grep -m2 'MISMATCH\|error' "$dir/$name.out")"
}
same() { check "cmp -s '$dir/plain/step_00000003/model.safetensors' '$dir/$1/step_00000003/model.safetensors'" \
  "$1: the weights differ from the plain run's"; }
run plain
run selective --recompute selective;                     same selective
run full --recompute full --recompute-num-layers 2;      same full
run offload --offload all;                               same offload
run offload_some --offload gate,up,qkv_in --recompute selective; same offload_some
run static --static-plan --recompute-layers 0:full,1-2:selective,3:none; same static
run regen --dropout-masks regen --recompute selective;   same regen
run bits --dropout-masks bits;                           same bits
run guarded --device cpu-guarded;                        same guarded   # no host code touches tensor memory
run budget --mem-budget 700KiB
check "grep -q 'recompute' '$dir/budget.out' && ! grep -q 'gelu' '$dir/budget.out'" \
  "the budget planner chose a GeLU technique for SwiGLU: $(grep -m1 'compute,' "$dir/budget.out")"
run budget_off --mem-budget 600KiB --offload-budget 256KiB
run rms_from_output --tempo layernorm,softmax --dropout-masks bits
run flash --attention flash --act-dtype bf16 --precision bf16
# Heads of another width than h/a (--head-dim 24: q and the attention output 96 wide): the planner, the
# offload pool and the static plan predict them; state.json records the width and --resume keeps it.
run hd --head-dim 24
run hd_plan --head-dim 24 --mem-budget 740KiB --precision bf16   # a technique chosen: none needs 726 KiB
run hd_offload --head-dim 24 --offload all --static-plan --recompute-layers 0:full,1-3:selective
run hd_lora --head-dim 24 --lora-rank 4 --lora-fa --lora-targets q,o,down --recompute selective   # x·Aᵀ at a·d
check "grep -q '\"head_dim\":.*24' '$dir/hd/step_00000003/state.json'" "state.json lacks model.head_dim 24"
check "! grep -q '\"head_dim\"' '$dir/plain/step_00000003/state.json'" "state.json writes head_dim where it is hidden/heads"
"$ctron" train "${base[@]}" --steps 4 --resume "$dir/hd" > "$dir/hd_resume.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'd=24' '$dir/hd_resume.out'" "resuming the --head-dim 24 run: $(tail -2 "$dir/hd_resume.out")"
"$ctron" train "${base[@]}" --steps 5 --resume "$dir/hd" --head-dim 16 > "$dir/hd_bad.out" 2>&1
check "[ $? -eq 2 ] && grep -q 'head-dim' '$dir/hd_bad.out'" "--resume with another --head-dim: $(tail -2 "$dir/hd_bad.out")"
"$ctron" train --layers 2 --hidden 64 --heads 4 --head-dim 24 --steps 1 --data "$data" > "$dir/gpt2_hd.out" 2>&1
check "[ $? -eq 2 ] && grep -q -- '--head-dim is a llama option' '$dir/gpt2_hd.out'" "--head-dim with GPT-2: $(tail -1 "$dir/gpt2_hd.out")"
"$ctron" train "${base[@]}" --head-dim 9 > "$dir/odd_hd.out" 2>&1
check "[ $? -eq 2 ] && grep -q -- '--head-dim 9 is odd' '$dir/odd_hd.out'" "an odd --head-dim: $(tail -1 "$dir/odd_hd.out")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
