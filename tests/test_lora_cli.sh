#!/usr/bin/env bash
# LoRA's command line (issue 27): bad input exits 2 naming the value (rank 0 or above a target's width, an
# unknown target or one of the other family, LoRA flags without a rank, a LoRA run resuming a full
# fine-tuning checkpoint, a resume whose LoRA options differ from the checkpoint's); a LoRA-FA run stopped and
# resumed without flags restores its LoRA options from state.json and ends bitwise where the uninterrupted
# run does; ctron memory --lora-rank prints full vs LoRA vs LoRA-FA with peft's parameter counts.
# usage: test_lora_cli.sh CTRON DATA
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
base=(--arch llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --seq 16 --batch 2 --eval-every 0 --threads 1
      --no-ledger --data "$data" --dropout 0.1)
# bad MESSAGE flags...: exit 2 and the message once
bad() {
  local msg=$1; shift
  "$ctron" "$@" > "$dir/out" 2>&1
  local rc=$?
  check "[ $rc -eq 2 ]" "$*: exit $rc, expected 2: $(tail -2 "$dir/out")"
  local n; n=$(grep -cF -- "$msg" "$dir/out")
  check "[ $n -eq 1 ]" "$*: expected the message once ($n): $msg: $(tail -2 "$dir/out")"
}
bad "--lora-rank: 0 is out of range" train "${base[@]}" --steps 2 --lora-rank 0
bad "--lora-rank 33 is above the width of target 'k' ([32, 64]: at most 32)" train "${base[@]}" --steps 2 --lora-rank 33
bad "unknown target 'qq'" train "${base[@]}" --steps 2 --lora-rank 4 --lora-targets q,qq
bad "'fc2' is a linear of --arch gpt2, not of --arch llama (its targets: q,k,v,o,gate,up,down, or all)" train "${base[@]}" --steps 2 --lora-rank 4 --lora-targets fc2
bad "'gate' is a linear of --arch llama, not of --arch gpt2" train --arch gpt2 --layers 2 --hidden 64 --heads 4 --steps 2 \
    --data "$data" --lora-rank 4 --lora-targets gate
bad "--lora-fa without --lora-rank" train "${base[@]}" --steps 2 --lora-fa
bad "--lora-targets without --lora-rank" memory --preset llama3-8b --lora-targets q
bad "--lora-rslora without --lora-rank" memory --preset llama3-8b --lora-rslora
bad "'qkv' is a linear of --arch gpt2 and --arch llama --fused-proj, not of --arch llama" memory --preset llama3-8b --lora-rank 16 --lora-targets qkv

# Mini-seq with adapters (the chunked MLP runs them): ledger == prediction, and ctron memory predicts the
# run's peak byte for byte (GPT-2 LoRA; llama LoRA-FA with adapter dropout).
mini() {   # NAME TRAIN-ONLY-FLAGS FLAGS...
  local name=$1 only=$2; shift 2
  # shellcheck disable=SC2086
  "$ctron" train --layers 2 --hidden 64 --heads 4 --seq 16 --batch 2 --steps 1 --threads 1 --eval-every 0 \
      --data "$data" --mini-seq 2 "$@" $only > "$dir/$name.out" 2>&1
  ec=$?; check '[ $ec -eq 0 ]' "$name: $(tail -2 "$dir/$name.out")"
  check '! grep -q MISMATCH "$dir/$name.out"' "$name: a ledger line differs from the prediction"
  local run; run=$(sed -n 's/.*peak of the step.*predicted \([0-9]*\) .*/\1/p' "$dir/$name.out")
  "$ctron" memory --layers 2 --hidden 64 --heads 4 --seq 16 --batch 2 --vocab 256 --act-dtype fp32 --mini-seq 2 \
      "$@" --json > "$dir/$name.json" 2>&1
  local mem; mem=$(tr -d ' \t\n' < "$dir/$name.json" | sed -n 's/.*"activation_peak_bytes":\([0-9]*\).*/\1/p')
  check '[ -n "$run" ] && [ "$run" = "$mem" ]' "$name: the run predicted a peak of '$run' B, ctron memory '$mem' B"
}
mini mini_gpt2 "" --arch gpt2 --dropout 0.1 --lora-rank 4
mini mini_llama "--lora-dropout 0.1" --arch llama --kv-heads 2 --dropout 0 --lora-rank 4 --lora-fa

# --sample after a LoRA run samples the fine-tuned model (the adapters merged into the plain KV-cache block):
# the same text as ctron generate from the run's checkpoint (which merges them too), with the same seed.
"$ctron" train "${base[@]}" --lora-rank 4 --lr 1e-2 --steps 6 --seed 5 --sample 30 --prompt "And God" \
    --ckpt-dir "$dir/sample" > "$dir/sample.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "LoRA --sample: $(tail -2 "$dir/sample.out")"
"$ctron" generate --ckpt "$dir/sample" --tokens 30 --prompt "And God" --top-k 40 --seed 5 > "$dir/gen.out" 2>/dev/null
check '[ -s "$dir/gen.out" ] && [ "$(sed -n "/^sample (30 tokens.*LoRA adapters merged/{n;p}" "$dir/sample.out")" = "$(head -1 "$dir/gen.out")" ]' \
  "LoRA --sample differs from generate: $(sed -n '/^sample/{n;p}' "$dir/sample.out") vs $(head -1 "$dir/gen.out")"

# A LoRA-FA run of 4 steps, and the same stopped after 2 and resumed without any flag.
lora=(--lora-rank 4 --lora-alpha 8 --lora-targets q,v,down --lora-fa)
"$ctron" train "${base[@]}" "${lora[@]}" --steps 4 --ckpt-dir "$dir/whole" > "$dir/whole.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "the LoRA-FA run: $(tail -2 "$dir/whole.out")"
"$ctron" train "${base[@]}" "${lora[@]}" --steps 4 --stop-after 2 --ckpt-dir "$dir/half" > "$dir/half.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "the first half: $(tail -2 "$dir/half.out")"
"$ctron" train --resume "$dir/half" --data "$data" --threads 1 > "$dir/resumed.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "resuming without flags: $(tail -2 "$dir/resumed.out")"
for f in model.safetensors optimizer.safetensors; do
  check "cmp -s '$dir/whole/step_00000004/$f' '$dir/half/step_00000004/$f'" "resumed $f differs from the whole run's"
done
check 'grep -q "\"lora-targets\":.*\"q,v,down\"" "$dir/half/step_00000004/state.json"' "state.json lacks the targets"
check 'grep -q "LoRA-FA rank 4, alpha 8" "$dir/resumed.out"' "the resumed run is not LoRA-FA rank 4: $(head -5 "$dir/resumed.out")"
# the model file: the frozen base once under HF names, A (frozen) and B under peft's names; moments of B only
check 'grep -q "model.layers.1.mlp.down_proj.lora_A.weight" "$dir/whole/step_00000004/model.safetensors"' "no A in the model"
check '! grep -q "lora_A" "$dir/whole/step_00000004/optimizer.safetensors"' "LoRA-FA has AdamW state for A"
check '! grep -q "m.model.embed_tokens" "$dir/whole/step_00000004/optimizer.safetensors"' "the frozen base has AdamW state"
bad "--resume: --lora-rank 8 does not match the checkpoint's 4" train --resume "$dir/half" --data "$data" --steps 6 \
    --lora-rank 8
bad "--resume: --lora-targets q,v does not match the checkpoint's q,v,down" train --resume "$dir/half" --data "$data" \
    --steps 6 --lora-targets q,v
"$ctron" train "${base[@]}" --steps 2 --ckpt-dir "$dir/full" > "$dir/full.out" 2>&1
bad "is a full fine-tuning run (no LoRA adapters in its state.json)" train --resume "$dir/full" --data "$data" \
    --steps 4 --lora-rank 4
check '[ -s "$dir/full/step_00000002/state.json" ] && ! grep -q "\"lora-" "$dir/full/step_00000002/state.json"' \
  "a full fine-tune's state.json records LoRA options: $(grep lora "$dir/full/step_00000002/state.json")"

# --init-from a full fine-tune's checkpoint: it is the frozen base (byte for byte after two LoRA steps); the
# adapters start from the seed.
"$ctron" train --init-from "$dir/full/step_00000002" --steps 2 --ckpt-dir "$dir/init" --threads 1 --no-ledger \
  --eval-every 0 --data "$data" --lora-rank 4 --lora-fa --lora-targets q,down > "$dir/init.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "--init-from with --lora-rank: $(tail -2 "$dir/init.out")"
same_base=$(/usr/bin/python3 - "$dir/full/step_00000002/model.safetensors" "$dir/init/step_00000002/model.safetensors" <<'PY'
import json, struct, sys
def tensors(p):
    raw = open(p, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
    return {k: raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
base = [k for k in b if ".lora_" not in k]
print("yes" if set(base) == set(a) and all(a[k] == b[k] for k in base) and len(b) - len(base) == 8 else "no")
PY
)
check '[ "$same_base" = yes ]' "--init-from: the LoRA run's base is not the source's weights (or not 8 adapters)"

# ctron memory: Llama 3 8B at rank 16 on every linear trains 41,943,040 parameters (peft's count), LoRA-FA
# 22,020,096 (B only); the frozen base has no gradient or AdamW state.
"$ctron" memory --preset llama3-8b --lora-rank 16 > "$dir/mem.out" 2>&1
ec=$?; check '[ $ec -eq 0 ]' "ctron memory --lora-rank: $(tail -2 "$dir/mem.out")"
check 'grep -q "trainable parameters *8.03e+09 *4.194e+07 *2.202e+07" "$dir/mem.out"' \
  "trainable parameters: $(grep trainable "$dir/mem.out")"
check 'grep -q "gradients (fp32, 4 B) .* 160.00 MiB  *84.00 MiB" "$dir/mem.out"' "gradients: $(grep gradients "$dir/mem.out")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
