#!/usr/bin/env bash
# ctron train --mem-budget (issue 7; LoRA: issue 27): on three budgets the planner's choice runs with a measured
# activation peak at or below the budget (and the ledger equal to the prediction); a budget no
# plan fits is refused before training, with the least memory any plan needs.
# usage: test_mem_budget.sh CTRON DATA
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
shape=(--layers 4 --hidden 64 --heads 4 --seq 64 --batch 8 --dropout 0.1)
for budget in 6MiB 3MiB 2400KiB; do
  "$ctron" plan --budget $budget "${shape[@]}" > "$dir/plan.out" 2>&1
  rc=$?
  check '[ $rc -eq 0 ]' "ctron plan --budget $budget: $(cat "$dir/plan.out")"
  "$ctron" train "${shape[@]}" --steps 3 --threads 1 --data "$data" --mem-budget $budget --log "$dir/b.jsonl" \
    > "$dir/train.out" 2>&1
  rc=$?
  check '[ $rc -eq 0 ]' "train --mem-budget $budget: exit $rc: $(tail -3 "$dir/train.out")"
  peak=$(tail -1 "$dir/b.jsonl" | grep -o '"act_bytes":[0-9]*' | cut -d: -f2)
  limit=$(/usr/bin/python3 -c "import sys; v=sys.argv[1]; print(int(float(v[:-3]) * {'MiB': 2**20, 'KiB': 2**10}[v[-3:]]))" $budget)
  echo "budget $budget = $limit bytes: measured peak $peak; $(head -1 "$dir/plan.out")"
  check '[ -n "$peak" ] && [ "$peak" -le "$limit" ]' "--mem-budget $budget: measured peak $peak exceeds $limit"
  check '! grep -q MISMATCH "$dir/train.out"' "--mem-budget $budget: ledger differs from the prediction"
  flags=$(grep -o "ctron train flags: .*" "$dir/plan.out" | sed 's/ctron train flags: //')
  check 'grep -q "recompute" <<< "$flags"' "ctron plan should print the train flags: $(cat "$dir/plan.out")"
done
# With a pool to offload to, the planner keeps tensors there before it recomputes: no more FLOPs
# than without, the device peak within the budget, the pool within its own.
"$ctron" plan --budget 3MiB "${shape[@]}" --threads 1 > "$dir/plan0.out" 2>&1
"$ctron" plan --budget 3MiB "${shape[@]}" --threads 1 --offload-budget 16MiB > "$dir/plan1.out" 2>&1
gf() { grep -o "recompute [0-9.e+-]* GFLOP" "$1" | cut -d' ' -f2; }
check 'grep -q -- "--offload " "$dir/plan1.out"' "--offload-budget: the plan should offload: $(cat "$dir/plan1.out")"
check "/usr/bin/python3 -c 'import sys; sys.exit(not float(sys.argv[1]) < float(sys.argv[2]))' $(gf "$dir/plan1.out") $(gf "$dir/plan0.out")" \
  "offloading should cut the recompute FLOPs: $(gf "$dir/plan1.out") vs $(gf "$dir/plan0.out") GFLOP"
mkdir -p "$dir/pool"
"$ctron" train "${shape[@]}" --steps 3 --threads 1 --data "$data" --mem-budget 3MiB --offload-budget 16MiB \
  --offload-dir "$dir/pool" --log "$dir/o.jsonl" > "$dir/o.out" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "train --mem-budget 3MiB --offload-budget 16MiB: exit $rc: $(tail -3 "$dir/o.out")"
peak=$(tail -1 "$dir/o.jsonl" | grep -o '"act_bytes":[0-9]*' | cut -d: -f2)
check '[ -n "$peak" ] && [ "$peak" -le 3145728 ]' "--mem-budget 3MiB with offload: measured peak $peak"
check '! grep -q MISMATCH "$dir/o.out" && grep -q "offload pool (file in" "$dir/o.out"' \
  "--mem-budget with offload: the ledger or the pool differs from the prediction: $(grep -A8 'offload pool' "$dir/o.out")"
pool=$(grep -o "in the pool at the end of forward: measured [0-9]*" "$dir/o.out" | grep -o "[0-9]*$")
check '[ -n "$pool" ] && [ "$pool" -le 16777216 ]' "the pool holds $pool bytes, over its 16 MiB budget"
echo "budget 3MiB + offload budget 16MiB: measured peak $peak, pool $pool; $(head -1 "$dir/plan1.out")"
"$ctron" train "${shape[@]}" --steps 1 --threads 1 --data "$data" --mem-budget 100KiB > "$dir/none.out" 2>&1
rc=$?
check '[ $rc -eq 2 ]' "an impossible budget: exit $rc, expected 2"
check 'grep -q "no plan fits; the least any needs is" "$dir/none.out" && ! grep -q "^step" "$dir/none.out"' \
  "an impossible budget must be refused before training: $(head -3 "$dir/none.out")"
"$ctron" train "${shape[@]}" --steps 1 --data "$data" --mem-budget 3MiB --recompute full > "$dir/both.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--mem-budget plans --recompute itself" "$dir/both.out"' \
  "--mem-budget with --recompute should be refused: $(head -2 "$dir/both.out")"
# LoRA and LoRA-FA (docs/LORA.md): the planner keeps what the adapters need. A tiny llama whose LoRA-FA
# step fits 4 MiB with nothing recomputed, its LoRA step not: LoRA keeps each layer's qkv_in, proj_in and
# fc1_in besides (3·e·s·b·h = 3·4·64·4·64 = 196608 bytes a layer, 786432 over 4 layers), so its plan takes a
# technique (at 4 MiB Tempo's norm); both run with the ledger equal to the prediction and within the budget.
# Layer 0 keeps no ln1_in (e·s·b·h = 65536 bytes) nor ln1_stats (4·s·b = 1024): nothing reads its input
# gradient under LoRA (docs/LORA.md), so none keeps 3712000 − 66560 = 3645440 bytes under LoRA-FA.
lshape=(--arch llama --kv-heads 2 --ffn-hidden 128 --layers 4 --hidden 64 --heads 4 --seq 64 --batch 4 --vocab 256)
lpeak() { tail -1 "$1" | grep -o '"act_bytes":[0-9]*' | cut -d: -f2; }
for mode in lora fa; do
  extra=(); [ $mode = fa ] && extra=(--lora-fa)
  for budget in 64MiB 4MiB; do
    "$ctron" train "${lshape[@]}" --lora-rank 8 "${extra[@]}" --steps 2 --threads 1 --data "$data" \
      --mem-budget $budget --log "$dir/$mode-$budget.jsonl" > "$dir/$mode-$budget.out" 2>&1
    rc=$?
    check '[ $rc -eq 0 ]' "LoRA ($mode) --mem-budget $budget: exit $rc: $(tail -3 "$dir/$mode-$budget.out")"
    check 'grep -q "peak of the step.*ok$" "$dir/$mode-$budget.out" && ! grep -q MISMATCH "$dir/$mode-$budget.out"' \
      "LoRA ($mode) --mem-budget $budget: the ledger differs from the prediction: $(grep -A2 'activation ledger' "$dir/$mode-$budget.out")"
  done
done
# ctron plan --lora-rank predicts the same plans and peaks
for mode in lora fa; do
  extra=(); [ $mode = fa ] && extra=(--lora-fa)
  "$ctron" plan --budget 4MiB "${lshape[@]}" --threads 1 --lora-rank 8 "${extra[@]}" > "$dir/$mode-plan.out" 2>&1
  want=$(grep -o "peak of the step (recomputation included): measured [0-9]*" "$dir/$mode-4MiB.out" | grep -o "[0-9]*$")
  check 'grep -q "predicted activation peak .*($want bytes" "$dir/$mode-plan.out"' \
    "ctron plan --lora-rank 8 ($mode) predicts what train measured ($want): $(cat "$dir/$mode-plan.out")"
done
lora64=$(lpeak "$dir/lora-64MiB.jsonl"); fa64=$(lpeak "$dir/fa-64MiB.jsonl")
lora4=$(lpeak "$dir/lora-4MiB.jsonl"); fa4=$(lpeak "$dir/fa-4MiB.jsonl")
echo "LoRA / LoRA-FA --mem-budget 64MiB: $lora64 / $fa64 bytes; 4MiB: $lora4 / $fa4 bytes"
check '[ "$fa64" = 3645440 ] && [ "$lora64" = 4431872 ]' \
  "no recompute: LoRA-FA's peak $fa64 (expected 3645440), LoRA's $lora64 (expected 4431872 = + 786432)"
check 'grep -q "recompute none, fp32 activations, bytes dropout masks, tempo none;" "$dir/fa-4MiB.out" && [ "$fa4" = 3645440 ]' \
  "LoRA-FA fits 4 MiB as it is: $(grep -m1 'fp32 compute' "$dir/fa-4MiB.out"), peak $fa4"
check '! grep -q "recompute none, fp32 activations, bytes dropout masks, tempo none;" "$dir/lora-4MiB.out" && [ -n "$lora4" ] && [ "$lora4" -le 4194304 ]' \
  "LoRA does not fit 4 MiB as it is: the plan must take a technique: $(grep -m1 'fp32 compute' "$dir/lora-4MiB.out"), peak $lora4"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
