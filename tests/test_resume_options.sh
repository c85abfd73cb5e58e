#!/usr/bin/env bash
# A plain --resume continues bitwise under every option that changes the numbers (issue 23 B).
# The cases come from `ctron train --list-options` (train_config.c's one list): every option whose
# class is state, keep, note or layout must have a value below, or the test fails naming it, so a new
# flag cannot go untested. For each: a run of 4 steps with the option against the same run stopped
# after step 2 (--stop-after) and resumed with a plain `--resume DIR`: model.safetensors must be
# identical (cmp). Layout options run under mpiexec -np 2 when the test is given one.
# Then: another value of a "keep" option on resume is refused (exit 2) naming the option, the
# checkpoint's value and the new one; a "note" option changes with a note.
# usage: test_resume_options.sh CTRON DATA [MPIEXEC mpirun-flags...]
set -uo pipefail
ctron=$1; data=$2; shift 2
mpi=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0; skipped=()
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
head -c 200000 "$data" > "$dir/text.txt"
"$ctron" tokenize train --vocab 300 --in "$dir/text.txt" --out "$dir/vocab.json" > /dev/null 2>&1
head -c 100000 "$data" | tail -c 50000 > "$dir/val.txt"
base=(--layers 2 --hidden 64 --heads 4 --seq 32 --batch 2 --threads 1 --no-ledger --eval-every 0 --peak-gflops 1000
      --data "$data")
free=(--threads 1 --peak-gflops 1000)   # free options (no numbers change): given to every run

declare -A value=(
  [layers]="--layers 3" [hidden]="--hidden 96" [heads]="--heads 2" [seq]="--seq 16" [batch]="--batch 3"
  [vocab]="--vocab 300" [dropout]="--dropout 0.3" [steps]="--steps 4" [grad-accum]="--grad-accum 2"
  [warmup]="--warmup 3" [eval-every]="--eval-every 2" [eval-batches]="--eval-every 2 --eval-batches 2"
  [lr]="--lr 3e-3" [min-lr]="--min-lr 1e-5" [weight-decay]="--weight-decay 0.01" [clip]="--clip 0.05"
  [val-frac]="--val-frac 0.25" [seed]="--seed 7" [data-order]="--data-order sequential"
  [recompute]="--recompute full" [recompute-method]="--recompute full --recompute-method block"
  [recompute-num-layers]="--recompute full --recompute-num-layers 2" [recompute-layers]="--recompute-layers 0:full,1:selective"
  [dropout-masks]="--dropout-masks regen" [act-dtype]="--act-dtype bf16" [tempo]="--tempo all" [gelu-bits]="--gelu-bits 2"
  [attention]="--attention flash" [mini-seq]="--mini-seq 2" [offload]="--offload fc1_in,gelu_in" [memo]="--memo 0.5 --seq 128" [static-plan]="--static-plan"
  [offload-budget]="--mem-budget 2MiB --offload-budget 1MiB" [mem-budget]="--mem-budget 1MiB"
  [pp-schedule]="--pp-schedule layered --grad-accum 2" [virtual-stages]="np2:--layers 4 --pp 2 --pp-schedule interleaved --virtual-stages 2 --grad-accum 2"
  [recompute-microbatches]="--pp-schedule gpipe --grad-accum 2 --recompute full --recompute-microbatches 1"
  [max-bad-steps]="--max-bad-steps 2" [save-every]="--save-every 1" [keep]="--save-every 1 --keep 1"
  [tokenizer]="--data $dir/text.txt --tokenizer $dir/vocab.json --vocab 300" [val-data]="--val-data $dir/val.txt"
  [ckpt-dir]="" [data]="--data $dir/text.txt" [precision]="--precision bf16" [device]="--device cpu-guarded"
  [tp]="np2:--tp 2" [sp]="np2:--tp 2 --sp" [pp]="np2:--pp 2 --grad-accum 2" [zero]="np2:--zero 1"
  [arch]="--arch llama" [kv-heads]="--arch llama --kv-heads 2" [ffn-hidden]="--arch llama --ffn-hidden 80"
  [head-dim]="--arch llama --head-dim 24"
  [rope-theta]="--arch llama --rope-theta 500000" [norm-eps]="--arch llama --norm-eps 1e-6"
  [rope-scaling]="--arch llama --rope-scaling llama3:8:1:4:16"
  [tie-embeddings]="--arch llama --tie-embeddings" [qkv-bias]="--arch llama --qkv-bias --dropout 0.1"
  [qk-norm]="--arch llama --qk-norm --kv-heads 2 --head-dim 24"
  [fused-proj]="--arch llama --fused-proj --kv-heads 2"
  [sliding-window]="--arch llama --sliding-window 8"
  [rotary-dim]="--arch llama --rotary-dim 8"
  [reversible]="--reversible"
  [act-budget-layer]="--recompute search --act-budget-layer 200KiB --search-rates 100,10"
  [search-rates]="--recompute search --act-budget-layer 150KiB --search-rates 100,10"
  [tp-link-gbps]="np2:--tp 2 --seq 128 --mem-budget 1MiB --memo auto --tp-link-gbps 100"
  [lora-rank]="--lora-rank 4 --lr 5e-3" [lora-alpha]="--lora-rank 4 --lora-alpha 32 --lr 5e-3"
  [lora-targets]="--arch llama --lora-rank 4 --lora-targets q,down --lr 5e-3"
  [lora-fa]="--lora-rank 4 --lora-fa --lr 5e-3 --recompute selective"
  [lora-rslora]="--lora-rank 4 --lora-rslora --lr 5e-3"
  [base-dtype]="--lora-rank 4 --base-dtype bf16 --lr 5e-3"
  [lora-dropout]="--lora-rank 4 --lora-dropout 0.2 --lr 5e-3"
)
# No command-line flag: AdamW's betas are fixed (state.json optimizer.beta1/beta2 restores them).
declare -A noflag=([adam-beta1]=1 [adam-beta2]=1)

"$ctron" train --list-options > "$dir/list" || { echo "FAIL: ctron train --list-options"; exit 1; }
check '[ "$(grep -c . "$dir/list")" -ge 60 ]' "the option list: $(cat "$dir/list")"
while read -r flag cls; do
  case $cls in state|keep|note|layout) ;; *) continue ;; esac
  [ -n "${noflag[$flag]:-}" ] && continue
  if [ -z "${value[$flag]+set}" ]; then
    fail=$((fail+1)); echo "FAIL: --$flag ($cls) has no test value in tests/test_resume_options.sh: add one"; continue
  fi
  v=${value[$flag]}; launch=()
  if [[ $v == np2:* ]]; then
    v=${v#np2:}
    if [ ${#mpi[@]} -eq 0 ]; then skipped+=("--$flag (needs mpiexec)"); continue; fi
    launch=("${mpi[0]}" -np 2 "${mpi[@]:1}")
  fi
  rm -rf "$dir/u" "$dir/i"
  # shellcheck disable=SC2086
  "${launch[@]}" "$ctron" train "${base[@]}" $v --steps 4 --ckpt-dir "$dir/u" > "$dir/u.out" 2>&1 < /dev/null
  rc=$?
  if [ $flag = precision ] && [ $rc -eq 2 ] && grep -q "cannot run bf16 GEMMs" "$dir/u.out"; then
    skipped+=("--precision bf16 (no bf16 GEMM on this CPU; test_resume_bf16.sh)"); continue
  fi
  # shellcheck disable=SC2086
  "${launch[@]}" "$ctron" train "${base[@]}" $v --steps 4 --stop-after 2 --ckpt-dir "$dir/i" > "$dir/i.out" 2>&1 < /dev/null
  "${launch[@]}" "$ctron" train --resume "$dir/i" "${free[@]}" > "$dir/r.out" 2>&1 < /dev/null
  rr=$?
  check '[ $rc -eq 0 ] && [ $rr -eq 0 ] && cmp -s "$dir/u/step_00000004/model.safetensors" "$dir/i/step_00000004/model.safetensors"' \
    "--$flag ($cls, $v): uninterrupted exit $rc, resumed exit $rr, model.safetensors $(cmp "$dir/u/step_00000004/model.safetensors" "$dir/i/step_00000004/model.safetensors" 2>&1 | head -1): $(tail -2 "$dir/u.out") / $(tail -3 "$dir/r.out")"
done < "$dir/list"
[ ${#skipped[@]} -gt 0 ] && printf 'skipped: %s\n' "${skipped[@]}"

# Another value of a number-changing option on resume: refused, naming it and both values.
rm -rf "$dir/i"
"$ctron" train "${base[@]}" --act-dtype bf16 --steps 4 --stop-after 2 --ckpt-dir "$dir/i" > /dev/null 2>&1
"$ctron" train --resume "$dir/i" "${free[@]}" --act-dtype fp32 > "$dir/k.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--resume: --act-dtype fp32 does not match the checkpoint'"'"'s bf16 (.*step_00000002/state.json)" "$dir/k.out"' \
  "--act-dtype changed on resume: exit $rc: $(cat "$dir/k.out")"
"$ctron" train --resume "$dir/i" "${free[@]}" --recompute full > "$dir/n.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "note: --recompute full differs from the checkpoint'"'"'s none; allowed" "$dir/n.out" &&
       grep -q "bf16 activations" "$dir/n.out"' "--recompute changed on resume: exit $rc: $(head -4 "$dir/n.out")"
# The model's RoPE scaling is the checkpoint's: another one on resume is refused, naming both.
rm -rf "$dir/i"
"$ctron" train "${base[@]}" --arch llama --rope-scaling llama3:8:1:4:16 --steps 4 --stop-after 2 --ckpt-dir "$dir/i" > /dev/null 2>&1
"$ctron" train --resume "$dir/i" "${free[@]}" --rope-scaling linear:2 > "$dir/s.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--resume: --rope-scaling linear:2 does not match the checkpoint'"'"'s llama3:8:1:4:16" "$dir/s.out"' \
  "--rope-scaling changed on resume: exit $rc: $(cat "$dir/s.out")"
# Qwen3's q/k norms are the checkpoint's: state.json records model.qk_norm true (absent without them, so
# older checkpoints read the same), a plain --resume keeps them, --qk-norm on a checkpoint without them is
# refused naming both, and a state.json whose qk_norm is no boolean is refused naming the field.
qk_state() {  # qk_state FILE: the model section's qk_norm as Python prints it ("absent" when not written)
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"].get("qk_norm", "absent"))' "$1"
}
rm -rf "$dir/i" "$dir/j" "$dir/bad"
"$ctron" train "${base[@]}" --arch llama --qk-norm --steps 4 --stop-after 2 --ckpt-dir "$dir/i" > /dev/null 2>&1
check '[ "$(qk_state "$dir/i/step_00000002/state.json")" = True ]' \
  "--qk-norm: state.json model.qk_norm is $(qk_state "$dir/i/step_00000002/state.json"), not true"
"$ctron" train --resume "$dir/i" "${free[@]}" > "$dir/q.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "untied output layer, q/k norms$" "$dir/q.out" &&
       [ "$(qk_state "$dir/i/step_00000004/state.json")" = True ]' \
  "a plain --resume of a --qk-norm run: exit $rc, $(head -2 "$dir/q.out"), step 4's qk_norm $(qk_state "$dir/i/step_00000004/state.json" 2>&1)"
"$ctron" train "${base[@]}" --arch llama --steps 4 --stop-after 2 --ckpt-dir "$dir/j" > /dev/null 2>&1
check '[ "$(qk_state "$dir/j/step_00000002/state.json")" = absent ]' \
  "without --qk-norm state.json writes model.qk_norm: $(qk_state "$dir/j/step_00000002/state.json")"
"$ctron" train --resume "$dir/j" "${free[@]}" --qk-norm > "$dir/q.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--resume: --qk-norm (q/k norms) does not match the checkpoint'"'"'s no q/k norms (.*step_00000002/state.json)" "$dir/q.out"' \
  "--qk-norm on resuming a checkpoint without q/k norms: exit $rc: $(cat "$dir/q.out")"
cp -r "$dir/i/step_00000002" "$dir/bad" && rm -f "$dir/bad/checksums.txt"
sed -i 's/"qk_norm":[[:space:]]*true/"qk_norm": 3/' "$dir/bad/state.json"
"$ctron" train --resume "$dir/bad" "${free[@]}" > "$dir/q.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "bad/state.json.: model.qk_norm must be true or false" "$dir/q.out"' \
  "state.json model.qk_norm 3: exit $rc: $(cat "$dir/q.out")"
# Phi-3's fused projections are the checkpoint's, as the q/k norms above: model.fused_proj true (absent
# without them), restored by a plain --resume, --fused-proj on a checkpoint without them refused naming both,
# and a state.json whose fused_proj is no boolean, or is true beside qk_norm true, refused naming the field.
fused_state() {  # fused_state FILE: the model section's fused_proj as Python prints it ("absent" when not written)
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"].get("fused_proj", "absent"))' "$1"
}
rm -rf "$dir/i" "$dir/bad"
"$ctron" train "${base[@]}" --arch llama --fused-proj --steps 4 --stop-after 2 --ckpt-dir "$dir/i" > /dev/null 2>&1
check '[ "$(fused_state "$dir/i/step_00000002/state.json")" = True ]' \
  "--fused-proj: state.json model.fused_proj is $(fused_state "$dir/i/step_00000002/state.json"), not true"
"$ctron" train --resume "$dir/i" "${free[@]}" > "$dir/q.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "untied output layer, fused qkv_proj, gate_up_proj$" "$dir/q.out" &&
       [ "$(fused_state "$dir/i/step_00000004/state.json")" = True ]' \
  "a plain --resume of a --fused-proj run: exit $rc, $(head -2 "$dir/q.out"), step 4's fused_proj $(fused_state "$dir/i/step_00000004/state.json" 2>&1)"
check '[ "$(fused_state "$dir/j/step_00000002/state.json")" = absent ]' \
  "without --fused-proj state.json writes model.fused_proj: $(fused_state "$dir/j/step_00000002/state.json")"
"$ctron" train --resume "$dir/j" "${free[@]}" --fused-proj > "$dir/q.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--resume: --fused-proj (fused qkv_proj, gate_up_proj) does not match the checkpoint'"'"'s no fused projections (.*step_00000002/state.json)" "$dir/q.out"' \
  "--fused-proj on resuming a checkpoint without fused projections: exit $rc: $(cat "$dir/q.out")"
cp -r "$dir/i/step_00000002" "$dir/bad" && rm -f "$dir/bad/checksums.txt"
sed -i 's/"fused_proj":[[:space:]]*true/"fused_proj": "yes"/' "$dir/bad/state.json"
"$ctron" train --resume "$dir/bad" "${free[@]}" > "$dir/q.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "bad/state.json.: model.fused_proj must be true or false" "$dir/q.out"' \
  "state.json model.fused_proj \"yes\": exit $rc: $(cat "$dir/q.out")"
sed -i 's/"fused_proj": "yes"/"fused_proj": true, "qk_norm": true/' "$dir/bad/state.json"
"$ctron" train --resume "$dir/bad" "${free[@]}" > "$dir/q.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "bad/state.json.: model.fused_proj must be false with model.qk_norm true (no family has both)" "$dir/q.out"' \
  "state.json model.fused_proj beside qk_norm: exit $rc: $(cat "$dir/q.out")"
# The sliding window is the checkpoint's, as the fused projections above: model.sliding_window 8 (absent without
# one), restored by a plain --resume, another window or one on a checkpoint without one refused naming both,
# and a state.json whose window is not an integer >= 1 refused naming the field.
window_state() {  # window_state FILE: the model section's sliding_window ("absent" when not written)
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"].get("sliding_window", "absent"))' "$1"
}
rm -rf "$dir/i" "$dir/bad"
"$ctron" train "${base[@]}" --arch llama --sliding-window 8 --steps 4 --stop-after 2 --ckpt-dir "$dir/i" > /dev/null 2>&1
check '[ "$(window_state "$dir/i/step_00000002/state.json")" = 8 ]' \
  "--sliding-window 8: state.json model.sliding_window is $(window_state "$dir/i/step_00000002/state.json"), not 8"
"$ctron" train --resume "$dir/i" "${free[@]}" > "$dir/w.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "untied output layer, sliding window 8$" "$dir/w.out" &&
       [ "$(window_state "$dir/i/step_00000004/state.json")" = 8 ]' \
  "a plain --resume of a --sliding-window run: exit $rc, $(head -2 "$dir/w.out"), step 4's window $(window_state "$dir/i/step_00000004/state.json" 2>&1)"
check '[ "$(window_state "$dir/j/step_00000002/state.json")" = absent ]' \
  "without --sliding-window state.json writes model.sliding_window: $(window_state "$dir/j/step_00000002/state.json")"
"$ctron" train --resume "$dir/i" "${free[@]}" --sliding-window 4 > "$dir/w.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--resume: --sliding-window 4 does not match the checkpoint'"'"'s 8 (.*step_00000004/state.json); leave --sliding-window out" "$dir/w.out"' \
  "another --sliding-window on resume: exit $rc: $(cat "$dir/w.out")"
"$ctron" train --resume "$dir/j" "${free[@]}" --sliding-window 8 > "$dir/w.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--resume: --sliding-window 8 does not match the checkpoint'"'"'s no sliding window (.*step_00000002/state.json)" "$dir/w.out"' \
  "--sliding-window on resuming a checkpoint without a window: exit $rc: $(cat "$dir/w.out")"
cp -r "$dir/i/step_00000002" "$dir/bad" && rm -f "$dir/bad/checksums.txt"
sed -i 's/"sliding_window":[[:space:]]*8/"sliding_window": 0/' "$dir/bad/state.json"
"$ctron" train --resume "$dir/bad" "${free[@]}" > "$dir/w.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "bad/state.json.: model.sliding_window must be an integer in 1\.\.1073741824 (it is 0)" "$dir/w.out"' \
  "state.json model.sliding_window 0: exit $rc: $(cat "$dir/w.out")"
# RoPE's width is the checkpoint's, as the window: model.rotary_dim 8 (absent without the flag, and with
# --rotary-dim 16, the whole head: that checkpoint is the flagless one byte for byte), restored by a plain
# --resume, another width or one on a checkpoint without one refused naming both (the head dim itself agrees
# with none), and a state.json whose rotary_dim is odd refused naming the field.
rotary_state() {  # rotary_state FILE: the model section's rotary_dim ("absent" when not written)
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"].get("rotary_dim", "absent"))' "$1"
}
rm -rf "$dir/i" "$dir/bad" "$dir/h"
"$ctron" train "${base[@]}" --arch llama --rotary-dim 8 --steps 4 --stop-after 2 --ckpt-dir "$dir/i" > /dev/null 2>&1
check '[ "$(rotary_state "$dir/i/step_00000002/state.json")" = 8 ]' \
  "--rotary-dim 8: state.json model.rotary_dim is $(rotary_state "$dir/i/step_00000002/state.json"), not 8"
"$ctron" train --resume "$dir/i" "${free[@]}" > "$dir/w.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "RoPE theta 10000, rotary 8 of 16 dims, RMSNorm" "$dir/w.out" &&
       [ "$(rotary_state "$dir/i/step_00000004/state.json")" = 8 ]' \
  "a plain --resume of a --rotary-dim run: exit $rc, $(head -2 "$dir/w.out"), step 4's rotary_dim $(rotary_state "$dir/i/step_00000004/state.json" 2>&1)"
"$ctron" train "${base[@]}" --arch llama --rotary-dim 16 --steps 4 --stop-after 2 --ckpt-dir "$dir/h" > "$dir/w.out" 2>&1
check 'cmp -s "$dir/h/step_00000002/state.json" "$dir/j/step_00000002/state.json" &&
       cmp -s "$dir/h/step_00000002/model.safetensors" "$dir/j/step_00000002/model.safetensors" &&
       ! grep -q ", rotary " "$dir/w.out"' \
  "--rotary-dim 16 (the head dim) is not the flagless checkpoint: $(diff "$dir/h/step_00000002/state.json" "$dir/j/step_00000002/state.json" | head -4)"
"$ctron" train --resume "$dir/i" "${free[@]}" --rotary-dim 4 > "$dir/w.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--resume: --rotary-dim 4 does not match the checkpoint'"'"'s 8 (.*step_00000004/state.json); leave --rotary-dim out" "$dir/w.out"' \
  "another --rotary-dim on resume: exit $rc: $(cat "$dir/w.out")"
"$ctron" train --resume "$dir/j" "${free[@]}" --rotary-dim 8 > "$dir/w.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--resume: --rotary-dim 8 does not match the checkpoint'"'"'s all 16 dims (.*step_00000002/state.json)" "$dir/w.out"' \
  "--rotary-dim on resuming a checkpoint without one: exit $rc: $(cat "$dir/w.out")"
cp -r "$dir/i/step_00000002" "$dir/bad" && rm -f "$dir/bad/checksums.txt"
sed -i 's/"rotary_dim":[[:space:]]*8/"rotary_dim": 7/' "$dir/bad/state.json"
"$ctron" train --resume "$dir/bad" "${free[@]}" > "$dir/w.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "bad/state.json.: model.rotary_dim must be even (RoPE rotates pairs j, j + R/2; it is 7)" "$dir/w.out"' \
  "state.json model.rotary_dim 7: exit $rc: $(cat "$dir/w.out")"
# Phi-3's LongRoPE: state.json keeps its factors (a text longer than any option record), a plain --resume
# restores them bit for bit, and another factor list on resume is refused naming both.
lr="longrope:16:1.25:1,1.1,1.2,1.3,1.4,1.5,1.6,1.7:2,2.5,3,3.5,4,4.5,5,5.5"
rm -rf "$dir/i"
"$ctron" train "${base[@]}" --arch llama --fused-proj --kv-heads 2 --rope-scaling "$lr" --steps 4 --stop-after 2 \
  --ckpt-dir "$dir/i" > /dev/null 2>&1
"$ctron" train --resume "$dir/i" "${free[@]}" > "$dir/l.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "scaled longrope (8 factors, original 16 positions, attention 1.25)" "$dir/l.out" &&
       grep -q "\"rope_scaling\":[[:space:]]*\"longrope:16:1.25:1,1.10000002,1.20000005,1.29999995,1.39999998,1.5,1.60000002,1.70000005:2,2.5,3,3.5,4,4.5,5,5.5\"" "$dir/i/step_00000004/state.json"' \
  "a plain --resume of a longrope run: exit $rc, $(head -2 "$dir/l.out")"
"$ctron" train --resume "$dir/i" "${free[@]}" --rope-scaling "${lr%5.5}6" > "$dir/l.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--resume: --rope-scaling longrope:16:1.25:8 factors #[0-9a-f]* does not match the checkpoint.s longrope:16:1.25:8 factors #[0-9a-f]*" "$dir/l.out"' \
  "another longrope factor list on resume: exit $rc: $(cat "$dir/l.out")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
