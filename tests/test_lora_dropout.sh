#!/usr/bin/env bash
# --lora-dropout P (issue 27; peft's lora_dropout on the adapters' input, docs/LORA.md). test_parity_lora.c holds
# the numbers to peft's with the same masks; here:
#  - P = 0 is bitwise the run without the flag; P > 0 changes the run;
#  - the mask is drawn again where read, so the ledger keeps nothing for it: every policy's peak equals the
#    run without dropout's and the prediction (LoRA and LoRA-FA), and recompute stays bitwise (none, selective,
#    full: the same model and optimizer files);
#  - layout-invariant: TP 2, TP 2 + SP, PP 2 and DP 2 + ZeRO-1 follow the one-process run (1e-5; given MPIEXEC);
#  - --lora-out records lora_dropout; --lora-from adopts it (a given flag wins); eval --adapter accepts it
#    (training only: the same loss as without); a resume with another P, P outside [0, 1), or P without a
#    rank exit 2.
# usage: test_lora_dropout.sh CTRON DATA [MPIEXEC flags...]
set -uo pipefail
ctron=$1; data=$2; shift 2; launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
source "$(dirname "$0")/layout_lib.sh"
expect2() {   # expect2 MESSAGE flags...: exit 2 and the message once
  local msg=$1; shift
  "$ctron" "$@" > "$dir/out" 2>&1
  local rc=$?
  check "[ $rc -eq 2 ] && [ \$(grep -cF -- \"\$msg\" '$dir/out') -eq 1 ]" "$*: exit $rc, expected 2 and '$msg': $(tail -2 "$dir/out")"
}
same() {   # same A B: the step-4 model and optimizer files of two runs byte-identical
  cmp -s "$dir/$1/step_00000004/model.safetensors" "$dir/$2/step_00000004/model.safetensors" &&
    cmp -s "$dir/$1/step_00000004/optimizer.safetensors" "$dir/$2/step_00000004/optimizer.safetensors"
}
peak() { grep -o "peak of the step (recomputation included): measured [0-9]*" "$dir/$1.out" | grep -o "[0-9]*$"; }
common=(--arch llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn-hidden 176 --seq 16 --batch 2 --steps 4
        --eval-every 0 --threads 1 --data "$data" --dropout 0.1 --lr 5e-3 --lora-rank 4)
run1() {   # run1 NAME flags...: one process, checkpoints and log under $dir/NAME
  local name=$1; shift
  "$ctron" train "${common[@]}" "$@" --ckpt-dir "$dir/$name" --log "$dir/$name.jsonl" > "$dir/$name.out" 2>&1
  ec=$?; check '[ $ec -eq 0 ]' "$name ($*): $(tail -2 "$dir/$name.out")"
}

# ---- bad input
expect2 "--lora-dropout without --lora-rank" train "${common[@]:0:28}" --lora-dropout 0.1
expect2 "--lora-dropout" train "${common[@]}" --lora-dropout 1
expect2 "--lora-dropout" train "${common[@]}" --lora-dropout -0.1

# ---- P = 0 is the run without the flag; P > 0 is not
run1 plain
run1 zero --lora-dropout 0
check 'same plain zero' "--lora-dropout 0 differs from the run without it"
run1 drop --lora-dropout 0.2
check '! same plain drop' "--lora-dropout 0.2 gives the run without dropout"

# ---- nothing kept for the mask; recompute bitwise
for fa in "" "--lora-fa"; do
  tag=${fa:+fa}
  for rc in none selective full; do
    run1 "n$tag-$rc" $fa --recompute $rc
    run1 "d$tag-$rc" $fa --recompute $rc --lora-dropout 0.2
    check '[ -n "$(peak d$tag-$rc)" ] && [ "$(peak d$tag-$rc)" = "$(peak n$tag-$rc)" ] && grep -q "peak of the step.*  ok" "$dir/d$tag-$rc.out"' \
      "$tag $rc: the dropout run's peak $(peak d$tag-$rc) is not the plain run's $(peak n$tag-$rc) or not the prediction"
  done
  check "same d$tag-none d$tag-selective && same d$tag-none d$tag-full" "$tag: recompute is not bitwise with --lora-dropout"
done

# ---- layouts (1e-5 of the one-process run)
if [ ${#launch[@]} -gt 0 ]; then
  run1 ref --lora-dropout 0.2
  train_at tp2 2 ref 4 --lora-dropout 0.2 --tp 2
  train_at tp2sp 2 ref 4 --lora-dropout 0.2 --tp 2 --sp
  run1 ref2 --lora-dropout 0.2 --grad-accum 2
  train_at pp2 2 ref2 4 --lora-dropout 0.2 --pp 2 --grad-accum 2
  train_at dp2 2 ref2 4 --lora-dropout 0.2 --grad-accum 1 --zero 1
  run1 reffa --lora-dropout 0.2 --lora-fa
  train_at tp2fa 2 reffa 4 --lora-dropout 0.2 --lora-fa --tp 2
fi

# ---- the peft directory, --lora-from, eval --adapter, resume
"$ctron" train "${common[@]}" --lora-dropout 0.05 --ckpt-dir "$dir/lo" --lora-out "$dir/peft" > "$dir/o.out" 2>&1
ec=$?; check '[ $ec -eq 0 ] && grep -q "\"lora_dropout\":[[:space:]]*0.05,$" "$dir/peft/adapter_config.json"' \
  "adapter_config.json lora_dropout: $(grep lora_dropout "$dir/peft/adapter_config.json" 2>&1)"
"$ctron" train "${common[@]:0:28}" --init-from "$dir/lo" --lora-from "$dir/peft" --ckpt-dir "$dir/from" > "$dir/f.out" 2>&1
ec=$?; check '[ $ec -eq 0 ] && grep -q "\"lora-dropout\":[[:space:]]*\"0.05\"" "$dir/from/step_00000004/state.json"' \
  "--lora-from did not adopt lora_dropout 0.05: $(grep lora-dropout "$dir/from/step_00000004/state.json" 2>&1) $(tail -2 "$dir/f.out")"
"$ctron" train "${common[@]:0:28}" --init-from "$dir/lo" --lora-from "$dir/peft" --lora-dropout 0.3 --ckpt-dir "$dir/from2" > "$dir/f2.out" 2>&1
ec=$?; check '[ $ec -eq 0 ] && grep -q "\"lora-dropout\":[[:space:]]*\"0.3\"" "$dir/from2/step_00000004/state.json"' \
  "--lora-dropout 0.3 beside --lora-from: $(grep lora-dropout "$dir/from2/step_00000004/state.json" 2>&1) $(tail -2 "$dir/f2.out")"
"$ctron" export --hf "$dir/hf" --ckpt "$dir/plain" --merge > /dev/null 2>&1   # any llama of these shapes
cp -r "$dir/peft" "$dir/peft0"
sed -i 's/"lora_dropout":[[:space:]]*0.05/"lora_dropout": 0/' "$dir/peft0/adapter_config.json"
"$ctron" eval --model "$dir/hf" --adapter "$dir/peft" --data "$data" --threads 1 --max-windows 8 --json > "$dir/e1.out" 2>&1
r1=$?
"$ctron" eval --model "$dir/hf" --adapter "$dir/peft0" --data "$data" --threads 1 --max-windows 8 --json > "$dir/e0.out" 2>&1
l1=$(grep -o '"loss":[0-9.e+-]*' "$dir/e1.out"); l0=$(grep -o '"loss":[0-9.e+-]*' "$dir/e0.out")
check '[ $r1 -eq 0 ] && [ -n "$l1" ] && [ "$l1" = "$l0" ]' \
  "eval --adapter with lora_dropout 0.05 is not the adapter with 0: $(tail -2 "$dir/e1.out") / $(tail -2 "$dir/e0.out")"
"$ctron" train "${common[@]}" --lora-dropout 0.2 --stop-after 2 --ckpt-dir "$dir/half" > /dev/null 2>&1
expect2 "--resume: --lora-dropout 0.3 does not match the checkpoint's 0.2" train --resume "$dir/half" --data "$data" \
  --lora-dropout 0.3
"$ctron" train --resume "$dir/half" --data "$data" --threads 1 > "$dir/r.out" 2>&1
ec=$?; check '[ $ec -eq 0 ] && same half d-none' "the resumed dropout run is not the whole run: $(tail -2 "$dir/r.out")"

echo "test_lora_dropout: $pass passed, $fail failed"
[ $fail -eq 0 ]
