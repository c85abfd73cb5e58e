#!/usr/bin/env bash
# ctron train --memo, ctron memory --memo and ctron plan --memo (issue 29 part 1) from the command line:
#  - every line of train's first-step ledger and of its memo pool report is "ok" (measured == predicted),
#    GPT-2 and llama, flash and standard attention, host memory and a pool file (nothing left behind);
#  - ctron memory --memo predicts the step peak train measures;
#  - --mem-budget B --memo auto plans α and holds to B; ctron plan --memo at given speeds picks α as the
#    time model says (a slow link: α 0; a fast one: the largest α that fits);
#  - α per layer (--recompute-layers FIRST-LAST:memo@ALPHA): the ledger and the pool per layer "ok", memory
#    predicting the peak; plan picks a mix where one stage slot of the faster α fits and two do not, and
#    train --memo auto (at this machine's measured rates) holds the budget; a bad per-layer α exits 2
#    naming the value;
#  - --static-plan with memo layers: the ledger ok, the losses the default layout's;
#  - --resume refuses another per-layer α and continues with the checkpoint's;
#  - plan --memo --tp 2 --tp-link-gbps X prints the all-reduce each layer's recompute repeats (bytes and time by
#    hand) and the adapters' part of the recompute; --memo auto / plan --memo with --tp 2 and no --tp-link-gbps
#    exit 2 naming the flag;
#  - combinations it is not built for exit 2 naming the reason.
# usage: test_memo_cli.sh CTRON DATA
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
shape=(--layers 3 --hidden 64 --heads 4 --seq 128 --batch 2 --vocab 259)
common=("${shape[@]}" --steps 2 --eval-every 0 --threads 1 --data "$data" --ledger)

for spec in "gpt2 flash 0.5" "gpt2 standard 0.5" "llama flash 1" "llama standard 0.5"; do
  set -- $spec; arch=$1; att=$2; alpha=$3
  fam=(); [ $arch = llama ] && fam=(--arch llama --kv-heads 2 --ffn-hidden 176)
  "$ctron" train "${common[@]}" "${fam[@]}" --dropout 0.1 --attention $att --memo $alpha > "$dir/t.out" 2>&1
  rc=$?
  bad=$(grep -c MISMATCH "$dir/t.out")
  oks=$(sed -n '/^memo pool/,/in the pool/p' "$dir/t.out" | grep -c ' ok$')
  check '[ $rc = 0 ] && [ "$bad" = 0 ] && [ "$oks" -ge 12 ]' "$spec: rc $rc, $bad mismatches, $oks pool lines ok: $(grep -m3 'MISMATCH\|error' "$dir/t.out")"
  measured=$(sed -n 's/.*peak of the step (recomputation included): measured \([0-9]*\) .*  ok$/\1/p' "$dir/t.out")
  "$ctron" memory "${shape[@]}" "${fam[@]}" --dropout 0.1 --act-dtype fp32 --attention $att --memo $alpha --json > "$dir/m.json" 2>&1
  predicted=$(python3 -c "import json; d=json.load(open('$dir/m.json')); print(d['first_stage']['activation_peak_bytes'])")
  check '[ -n "$measured" ] && [ "$measured" = "$predicted" ]' "$spec: train measured '$measured', memory predicts '$predicted'"
done

# the pool in a file: the same ledger, nothing left in the directory
mkdir "$dir/pool"
"$ctron" train "${common[@]}" --dropout 0.1 --memo 0.5 --offload-dir "$dir/pool" > "$dir/f.out" 2>&1
rc=$?
check '[ $rc = 0 ] && grep -q "memo pool (file in $dir/pool" "$dir/f.out" && ! grep -q MISMATCH "$dir/f.out" && [ -z "$(ls -A "$dir/pool")" ]' \
  "a pool file: $(grep -m2 'memo pool\|error' "$dir/f.out")"

# the planner: α of least predicted time that fits
"$ctron" plan --memo --budget 4MiB "${shape[@]}" --threads 1 --host-gbps 0.001 --gemm-gflops 100 > "$dir/p1.out" 2>&1
check 'grep -q "α 0 (0 of 128 positions" "$dir/p1.out"' "a slow link gives α 0: $(grep α "$dir/p1.out")"
"$ctron" plan --memo --budget 4MiB "${shape[@]}" --threads 1 --host-gbps 1000 --gemm-gflops 100 > "$dir/p2.out" 2>&1
check 'grep -q "α 1 (128 of 128 positions" "$dir/p2.out"' "a fast link and room for it gives α 1: $(grep α "$dir/p2.out")"
"$ctron" plan --memo --budget 1MiB "${shape[@]}" --threads 1 --host-gbps 1000 --gemm-gflops 100 > "$dir/p3.out" 2>&1
rc=$?
check '[ $rc = 2 ] && grep -q "nothing fits" "$dir/p3.out"' "a budget too small: exit 2: $(head -1 "$dir/p3.out")"
"$ctron" train "${common[@]}" --dropout 0.1 --attention flash --mem-budget 3MiB --memo auto > "$dir/a.out" 2>&1
rc=$?
peak=$(sed -n 's/.*peak of the step (recomputation included): measured \([0-9]*\) .*  ok$/\1/p' "$dir/a.out")
check '[ $rc = 0 ] && grep -q "^memo plan: α" "$dir/a.out" && [ -n "$peak" ] && [ "$peak" -le 3145728 ]' \
  "--mem-budget 3MiB --memo auto: rc $rc, peak '$peak': $(grep -m2 'memo plan\|error' "$dir/a.out")"

# α per layer: each layer's pool bytes measured == predicted, memory predicts train's peak
mix=0:memo@1,1:memo@0.5,2:memo@0.25
"$ctron" train "${common[@]}" --dropout 0.1 --attention flash --recompute-layers $mix > "$dir/x.out" 2>&1
rc=$?
layers=$(grep -c '^  layer [0-9].*positions.* ok$' "$dir/x.out")
measured=$(sed -n 's/.*peak of the step (recomputation included): measured \([0-9]*\) .*  ok$/\1/p' "$dir/x.out")
"$ctron" memory "${shape[@]}" --dropout 0.1 --act-dtype fp32 --attention flash --recompute-layers $mix --json > "$dir/m.json" 2>&1
predicted=$(python3 -c "import json; d=json.load(open('$dir/m.json')); print(d['first_stage']['activation_peak_bytes'])")
check '[ $rc = 0 ] && ! grep -q MISMATCH "$dir/x.out" && [ "$layers" = 3 ] && grep -q "layer 1   α 0.5  *64 positions  *495616  *495616  ok" "$dir/x.out"' \
  "mixed α $mix: rc $rc, $layers layer lines ok: $(grep -m3 'MISMATCH\|error\|layer 1 ' "$dir/x.out")"
check '[ -n "$measured" ] && [ "$measured" = "$predicted" ]' "mixed α: train measured '$measured', memory predicts '$predicted'"
# the planner's mix: 2800KiB holds a stage slot at 128 positions and one at 64, not two at 128
"$ctron" plan --memo --budget 2800KiB "${shape[@]}" --threads 1 --host-gbps 1000 --gemm-gflops 100 > "$dir/p4.out" 2>&1
check 'grep -q "α per layer 0:memo@1,1:memo@0.5,2:memo@1 (128 of 128 positions swapped in 2 layers, 64 in the other 1)" "$dir/p4.out" && grep -q "flags: --recompute-layers 0:memo@1,1:memo@0.5,2:memo@1 --attention flash" "$dir/p4.out"' \
  "2800KiB at fast rates gives the mix: $(grep 'α\|flags' "$dir/p4.out")"
"$ctron" plan --memo --budget 2400KiB "${shape[@]}" --threads 1 --host-gbps 1000 --gemm-gflops 100 > "$dir/p5.out" 2>&1
check 'grep -q "α 0.5 (64 of 128 positions swapped)" "$dir/p5.out" && grep -q "flags: --memo 0.5 " "$dir/p5.out"' \
  "2400KiB: one slot at 128 does not fit, uniform 0.5: $(grep 'α\|flags' "$dir/p5.out")"
"$ctron" train "${common[@]}" --dropout 0.1 --attention flash --mem-budget 2800KiB --memo auto > "$dir/a2.out" 2>&1
rc=$?
peak=$(sed -n 's/.*peak of the step (recomputation included): measured \([0-9]*\) .*  ok$/\1/p' "$dir/a2.out")
# (the rates are measured here, so which α is load-dependent: a mix, when chosen, has its per-layer lines)
mixed_ok() { ! grep -q "^memo plan: α per layer" "$1" || [ "$(grep -c '^  layer [0-9].*positions.* ok$' "$1")" = 3 ]; }
check '[ $rc = 0 ] && grep -q "^memo plan: α" "$dir/a2.out" && mixed_ok "$dir/a2.out" && ! grep -q MISMATCH "$dir/a2.out" && [ -n "$peak" ] && [ "$peak" -le 2867200 ]' \
  "--mem-budget 2800KiB --memo auto: rc $rc, peak '$peak': $(grep -m2 'memo plan\|error' "$dir/a2.out")"

# --static-plan: the memo run placed by the recorded plan, its ledger ok, its losses the default layout's
"$ctron" train "${common[@]}" --dropout 0.1 --attention flash --recompute-layers $mix --static-plan > "$dir/s.out" 2>&1
rc=$?
check '[ $rc = 0 ] && grep -q "^  static memory plan" "$dir/s.out" && ! grep -q MISMATCH "$dir/s.out" && [ "$(grep -o "loss [0-9.]*" "$dir/s.out")" = "$(grep -o "loss [0-9.]*" "$dir/x.out")" ]' \
  "--static-plan with memo layers: rc $rc: $(grep -m2 'static memory plan\|error\|MISMATCH' "$dir/s.out")"

# --resume keeps a memo layer's α as it keeps --memo's: another one exits 2, none continues with the checkpoint's
"$ctron" train "${common[@]}" --recompute-layers $mix --stop-after 1 --ckpt-dir "$dir/ck" > "$dir/c1.out" 2>&1
"$ctron" train --resume "$dir/ck" --threads 1 --recompute-layers 0:memo@1,1:memo@0.25,2:memo@0.25 > "$dir/c2.out" 2>&1
rc=$?
"$ctron" train --resume "$dir/ck" --threads 1 > "$dir/c3.out" 2>&1
rc3=$?
check '[ $rc = 2 ] && grep -q "does not match the checkpoint.s $mix" "$dir/c2.out" && [ $rc3 = 0 ] && grep -q "^resumed from" "$dir/c3.out"' \
  "--resume with another per-layer α: rc $rc ($(head -1 "$dir/c2.out")); without: rc $rc3"

# LoRA and LoRA-FA in memo layers (the adapters run in both token ranges, their x·Aᵀ kept whole): every
# ledger line ok (lora_* among them), and ctron memory predicts the step's peak byte for byte
lora_memo() {   # NAME TRAIN-ONLY-FLAGS FLAGS...
  local name=$1 only=$2; shift 2
  # shellcheck disable=SC2086
  "$ctron" train "${common[@]}" "$@" $only > "$dir/$name.out" 2>&1
  local rc=$? loras; loras=$(grep -c '^  lora_[a-z0-9]* .* ok$' "$dir/$name.out")
  check '[ $rc = 0 ] && ! grep -q MISMATCH "$dir/$name.out" && [ "$loras" -ge 2 ]' \
    "$name: rc $rc, $loras lora_* lines ok: $(grep -m3 'MISMATCH\|error' "$dir/$name.out")"
  local run; run=$(sed -n 's/.*peak of the step (recomputation included): measured \([0-9]*\) .*  ok$/\1/p' "$dir/$name.out")
  "$ctron" memory "${shape[@]}" --act-dtype fp32 "$@" --json > "$dir/$name.json" 2>&1
  local mem; mem=$(python3 -c "import json; d=json.load(open('$dir/$name.json')); print(d['first_stage']['activation_peak_bytes'])")
  check '[ -n "$run" ] && [ "$run" = "$mem" ]' "$name: train measured '$run', memory predicts '$mem'"
}
lora_memo memo_lora_gpt2 "" --dropout 0.1 --attention flash --memo 0.5 --lora-rank 4
lora_memo memo_lorafa_llama "--lora-dropout 0.1" --arch llama --kv-heads 2 --ffn-hidden 176 --attention flash \
  --recompute-layers 0-1:memo@0.25,2:memo@1 --lora-rank 4 --lora-fa
lora_memo memo_lorafa_gpt2_std "" --dropout 0.1 --attention standard --memo 1 --lora-rank 8 --lora-targets qkv,fc --lora-fa
# the frozen base in bf16 (its norm vectors widened per pass, its matrices read as bf16 only): α 1 is the
# plain run's calls, so its losses are the plain base16 run's
lora_memo memo_lora_base16 "" --dropout 0.1 --attention flash --memo 1 --lora-rank 4 --precision bf16 --base-dtype bf16
"$ctron" train "${common[@]}" --dropout 0.1 --attention flash --lora-rank 4 --precision bf16 --base-dtype bf16 --log "$dir/b16.jsonl" > /dev/null 2>&1
"$ctron" train "${common[@]}" --dropout 0.1 --attention flash --lora-rank 4 --precision bf16 --base-dtype bf16 --memo 1 --log "$dir/b16m.jsonl" > /dev/null 2>&1
check '[ -s "$dir/b16.jsonl" ] && [ "$(grep -o "\"loss\":[^,]*" "$dir/b16.jsonl")" = "$(grep -o "\"loss\":[^,]*" "$dir/b16m.jsonl")" ]' \
  "base16 memo 1 vs plain: losses $(grep -o '"loss":[^,]*' "$dir/b16m.jsonl" | tr '\n' ' ') vs $(grep -o '"loss":[^,]*' "$dir/b16.jsonl" | tr '\n' ' ')"

# refusals (exit 2, the reason named)
refuse() {   # expected-substring, flags...
  local want=$1; shift
  "$ctron" train "${shape[@]}" --steps 1 --data "$data" "$@" > "$dir/r.out" 2>&1
  local rc=$?
  check '[ $rc = 2 ] && grep -q -- "$want" "$dir/r.out"' "train $*: rc $rc, wanted '$want': $(head -2 "$dir/r.out")"
}
refuse "--memo" --memo 1.5
refuse "with --offload" --memo 0.5 --offload all
refuse "with --tempo" --memo 0.5 --tempo layernorm
refuse "with --mini-seq" --memo 0.5 --mini-seq 4
refuse "with --reversible" --memo 0.5 --reversible
refuse "with --recompute full" --memo 0.5 --recompute full
refuse "this CPU's" --memo auto --mem-budget 3MiB --device cuda
refuse "cpu-guarded" --memo 0.5 --device cpu-guarded
refuse "a pipeline" --memo 0.5 --pp-schedule gpipe --grad-accum 2
refuse "needs --memo ALPHA" --recompute-layers 0:memo,1-2:none
refuse "--memo auto" --memo auto
refuse "memo α 1.5 is not in \[0, 1\]" --recompute-layers 0:memo@1.5,1-2:none
refuse "memo α -0.5 is not in \[0, 1\]" --recompute-layers 0-2:memo@-0.5
refuse "cannot parse '0:memo@0.5x'" --recompute-layers 0:memo@0.5x,1-2:none
refuse "cannot parse '1:full@0.5'" --recompute-layers 0:memo@0.5,1:full@0.5,2:none
refuse "needs --memo ALPHA or its own memo@ALPHA" --recompute-layers 0:memo@0.5,1:memo,2:none
refuse "cpu-guarded" --recompute-layers 0-2:memo@0.5 --device cpu-guarded
refuse "chooses --memo's fraction" --memo 0.5 --mem-budget 64MiB
"$ctron" plan --memo --budget 1GiB "${shape[@]}" --tp 2 --sp > "$dir/r.out" 2>&1
rc=$?
check '[ $rc = 2 ] && grep -q "TP without SP" "$dir/r.out"' "plan --memo --tp 2 --sp: $(head -1 "$dir/r.out")"
"$ctron" plan --budget 1GiB "${shape[@]}" --host-gbps 5 > "$dir/r.out" 2>&1
rc=$?
check '[ $rc = 2 ] && grep -q "give --memo" "$dir/r.out"' "plan --host-gbps without --memo: $(head -1 "$dir/r.out")"
# --tp > 1: the TP link's rate is given (one process cannot measure it), and each layer's line prints the
# all-reduce its recompute repeats: at α 0 all 128 positions, Proj's [256, 64] fp32 = 65536 bytes, 2(t − 1)/t of it
# = 65536 on the ring, 6.55 µs at 10 GB/s; with --lora-rank 4 the adapters' v·Bᵀ (qkv 96, proj 64, fc 128 rows of B
# on the rank, not fc2): 2·256·4·288 = 589824 FLOPs, 5.9 µs at 100 GFLOP/s
"$ctron" plan --memo --budget 4MiB "${shape[@]}" --threads 1 --host-gbps 0.001 --gemm-gflops 100 --tp 2 --tp-link-gbps 10 \
  --lora-rank 4 > "$dir/pt.out" 2>&1
rc=$?
check '[ $rc = 0 ] && grep -q "TP link 10.00 GB/s (given)" "$dir/pt.out" && grep -q "α 0 (0 of 128" "$dir/pt.out" &&
       grep -q "^  per layer: .* (adapters 0.0059 ms), TP all-reduce again 0.00655 ms (65536 B), " "$dir/pt.out"' \
  "plan --memo --tp 2 --tp-link-gbps 10: rc $rc: $(cat "$dir/pt.out")"
"$ctron" plan --memo --budget 4MiB "${shape[@]}" --threads 1 --host-gbps 0.001 --gemm-gflops 100 > "$dir/pt1.out" 2>&1
check '! grep -q "TP all-reduce\|TP link\|adapters" "$dir/pt1.out"' "plan --memo at t 1 prints no TP term: $(grep 'per layer' "$dir/pt1.out")"
"$ctron" plan --memo --budget 4MiB "${shape[@]}" --tp 2 --host-gbps 1 --gemm-gflops 100 > "$dir/r.out" 2>&1
rc=$?
check '[ $rc = 2 ] && grep -q -- "--memo with --tp 2 needs the TP link.s rate: --tp-link-gbps" "$dir/r.out"' \
  "plan --memo --tp 2 without --tp-link-gbps: rc $rc: $(head -1 "$dir/r.out")"
"$ctron" plan --budget 1GiB "${shape[@]}" --tp-link-gbps 5 > "$dir/r.out" 2>&1
rc=$?
check '[ $rc = 2 ] && grep -q -- "--tp-link-gbps is for --memo" "$dir/r.out"' "plan --tp-link-gbps without --memo: $(head -1 "$dir/r.out")"
refuse "--memo auto with --tp 2 needs the TP link's rate: --tp-link-gbps" --memo auto --mem-budget 3MiB --tp 2 --tp-solo
refuse "--tp-link-gbps is for --memo auto" --memo 0.5 --tp-link-gbps 10
refuse "--tp-link-gbps: expected a number" --memo auto --mem-budget 3MiB --tp-link-gbps fast
"$ctron" memory "${shape[@]}" --memo 0.5 --tp 2 --sp > "$dir/r.out" 2>&1
rc=$?
check '[ $rc = 2 ] && grep -q "TP without --sp" "$dir/r.out"' "memory --memo --tp 2 --sp: $(head -1 "$dir/r.out")"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
