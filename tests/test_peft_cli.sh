#!/usr/bin/env bash
# LoRA's shared formats from the command line (issue 27 item 4), without peft: --lora-out and
# export --peft write the same adapter tensors; a LoRA checkpoint, its --merge export and the base
# with --adapter evaluate to the same loss, and generate the same tokens; LoRA-FA too; bad input exits
# 2 naming the value; --lora-from starts a run from a peft directory's adapters (tests/test_hf_interop.py
# checks the files against peft itself).
# usage: test_peft_cli.sh CTRON DATA
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
head -c 300000 "$data" > "$dir/text.txt"
run=(--seq 32 --batch 2 --eval-every 0 --no-ledger --threads 2 --data "$dir/text.txt")
ev() { "$ctron" eval --data "$dir/text.txt" --seq 32 --max-windows 4 --threads 2 --json "$@" 2>&1 | sed 's/.*"loss":\([^,]*\),.*/\1/'; }
gen() { "$ctron" generate --prompt "And God" --tokens 12 --temperature 0 --threads 1 --json "$@" 2>/dev/null | grep -o '"tokens":\[[^]]*\]'; }

for fam in llama gpt2; do
  if [ $fam = llama ]; then arch=(--arch llama --kv-heads 2 --ffn-hidden 96); tg=q,v,down; else arch=(); tg=qkv,fc2; fi
  "$ctron" train "${arch[@]}" --layers 2 --hidden 64 --heads 4 --steps 2 "${run[@]}" --dropout 0 --ckpt-dir "$dir/$fam" > /dev/null 2>&1 &&
    "$ctron" export --hf "$dir/$fam.hf" --ckpt "$dir/$fam" > /dev/null 2>&1
  check "[ $? -eq 0 ]" "$fam: the base model"
  for fa in "" --lora-fa; do
    name=$fam${fa:+-fa}
    "$ctron" train --init-from "$dir/$fam.hf" --lora-rank 4 --lora-alpha 16 --lora-targets $tg $fa --lr 1e-2 --steps 4 \
      "${run[@]}" --ckpt-dir "$dir/$name.run" --lora-out "$dir/$name.out" > "$dir/$name.log" 2>&1
    check "[ $? -eq 0 ] && [ -s '$dir/$name.out/adapter_config.json' ] && [ -s '$dir/$name.out/adapter_model.safetensors' ] && grep -q 'wrote the adapters' '$dir/$name.log'" \
      "$name: --lora-out: $(tail -2 "$dir/$name.log")"
    check "grep -q '\"r\":[[:space:]]*4' '$dir/$name.out/adapter_config.json' && grep -q '\"lora_alpha\":[[:space:]]*16' '$dir/$name.out/adapter_config.json' && grep -q '\"base_model_name_or_path\":[[:space:]]*\"$dir/$fam.hf\"' '$dir/$name.out/adapter_config.json'" \
      "$name: adapter_config.json: $(head -c 400 "$dir/$name.out/adapter_config.json")"
    "$ctron" export --peft "$dir/$name.peft" --ckpt "$dir/$name.run" > /dev/null 2>&1 &&
      "$ctron" export --hf "$dir/$name.merged" --ckpt "$dir/$name.run" --merge > /dev/null 2>&1
    check "[ $? -eq 0 ] && cmp -s '$dir/$name.out/adapter_model.safetensors' '$dir/$name.peft/adapter_model.safetensors'" \
      "$name: export --peft and --lora-out differ"
    a=$(ev --model "$dir/$name.run"); b=$(ev --model "$dir/$name.merged"); c=$(ev --model "$dir/$fam.hf" --adapter "$dir/$name.out")
    base=$(ev --model "$dir/$fam.hf")
    check "[ -n '$a' ] && [ '$a' = '$b' ] && [ '$a' = '$c' ] && [ '$a' != '$base' ]" \
      "$name: eval: checkpoint $a, merged export $b, base + adapter $c (the base alone $base)"
    g1=$(gen --ckpt "$dir/$name.run"); g2=$(gen --model "$dir/$fam.hf" --adapter "$dir/$name.out")
    check "[ -n '$g1' ] && [ '$g1' = '$g2' ]" "$name: generate: checkpoint $g1, base + adapter $g2"
  done
done

# --lora-from: a run starts from a peft directory's adapters — its first step's loss is the one eval
# gives the base with that adapter (unmerged vs merged: a few ulps), and LoRA's options come from it.
"$ctron" train --init-from "$dir/llama.hf" --lora-from "$dir/llama.out" --steps 1 --data-order sequential "${run[@]}" \
  --log "$dir/from.jsonl" > "$dir/from.out" 2>&1
t=$(sed -n 's/^{"step":1,"loss":\([^,]*\),.*/\1/p' "$dir/from.jsonl")
e=$("$ctron" eval --model "$dir/llama.hf" --adapter "$dir/llama.out" --data "$dir/text.txt" --seq 32 --batch 2 --max-windows 2 \
      --threads 2 --json 2>&1 | sed 's/.*"loss":\([^,]*\),.*/\1/')
check "grep -q 'LoRA rank 4, alpha 16' '$dir/from.out' && /usr/bin/python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-6 * abs(b))' '$t' '$e'" \
  "--lora-from: step 1's loss $t, eval with --adapter $e: $(grep -m1 'LoRA rank' "$dir/from.out")"

expect() {   # expect NEEDLE CMD...: exit 2 and the message
  local needle=$1; shift
  "$ctron" "$@" > "$dir/bad.out" 2>&1
  local rc=$?
  check "[ $rc -eq 2 ] && grep -qF -- \"$needle\" '$dir/bad.out'" "$*: exit $rc, expected 2 and '$needle': $(head -2 "$dir/bad.out")"
}
expect "is a LoRA checkpoint (rank 4): --merge" export --hf "$dir/x" --ckpt "$dir/llama.run"
expect "has no LoRA adapters" export --peft "$dir/x" --ckpt "$dir/llama"
expect "--lora-out without --lora-rank" train "${run[@]}" --steps 1 --ckpt-dir "$dir/y" --lora-out "$dir/x"
expect "give --ckpt-dir too" train "${run[@]}" --steps 1 --lora-rank 2 --lora-out "$dir/x"
expect "exists; the adapters go to a new directory" train "${run[@]}" --steps 1 --lora-rank 2 --ckpt-dir "$dir/y" --lora-out "$dir/llama.out"
expect "--lora-rank 8 disagrees with --lora-from" train --init-from "$dir/llama.hf" --lora-from "$dir/llama.out" --lora-rank 8 "${run[@]}"
expect "--lora-from and --resume" train --resume "$dir/llama.run" --lora-from "$dir/llama.out" --steps 9
bad_cfg() {   # bad_cfg NEEDLE SED: the llama adapter's config edited
  rm -rf "$dir/bad"; cp -r "$dir/llama.out" "$dir/bad"; sed -i "$2" "$dir/bad/adapter_config.json"
  expect "$1" eval --model "$dir/llama.hf" --adapter "$dir/bad" --data "$dir/text.txt"
}
bad_cfg "field 'use_rslora' is not true or false" 's/"use_rslora":\tfalse/"use_rslora":\t1/'
bad_cfg "field 'use_dora' is set" 's/"use_dora":\tfalse/"use_dora":\ttrue/'
expect "--lora-rslora disagrees with --lora-from" train --init-from "$dir/llama.hf" --lora-from "$dir/llama.out" --lora-rslora "${run[@]}"
expect "--lora-rslora without --lora-rank" train "${run[@]}" --steps 1 --lora-rslora
bad_cfg "field 'peft_type' is" 's/"LORA"/"IA3"/'
bad_cfg "names 'c_fc', which is no linear of a llama block" 's/"self_attn.q_proj"/"c_fc"/'
bad_cfg "is the regular expression" 's/"target_modules":\t\[/"target_modules": ".*q_proj", "x": [/'
bad_cfg "has no tensor 'base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight'" 's/"self_attn.q_proj"/"self_attn.q_proj", "self_attn.k_proj"/'
expect "names 'attn.c_attn', which is no linear of a llama block" eval --model "$dir/llama.hf" --adapter "$dir/gpt2.out" --data "$dir/text.txt"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
