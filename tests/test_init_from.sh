#!/usr/bin/env bash
# ctron train --init-from (issue 26): a run starts from an HF model directory or a ctron checkpoint with
# that model's weights — its first step's loss is the one `ctron eval` gives the same windows, to the
# last digit — for GPT-2 and llama, with the directory's tokenizer.json for text; a checkpoint and its
# HF export start the same run; bad input exits 2 and leaves no --ckpt-dir or --log behind.
# With MPIEXEC: the same start under --tp 2 and --pp 2 follows the one-process run.
# usage: test_init_from.sh CTRON DATA [MPIEXEC [mpiexec flags...]]
set -uo pipefail
ctron=$1; data=$2; shift 2; launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
head -c 400000 "$data" > "$dir/text.txt"
step() { sed -n "s/^{\"step\":$2,\"loss\":\([^,]*\),.*/\1/p" "$1"; }   # step N's loss in a --log file
run=(--seq 32 --batch 2 --eval-every 0 --data-order sequential --no-ledger --threads 1 --data "$dir/text.txt")
evloss() { "$ctron" eval --model "$1" --data "$dir/text.txt" --seq 32 --batch 2 --max-windows 2 --threads 1 --json \
             2>/dev/null | sed 's/.*"loss":\([^,]*\),.*/\1/'; }

# Sources: a few steps of each family from scratch, exported.
"$ctron" train --arch llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn-hidden 96 --steps 3 "${run[@]}" \
  --ckpt-dir "$dir/l" > "$dir/l.out" 2>&1 || { echo "FAIL: llama source: $(tail -3 "$dir/l.out")"; exit 1; }
"$ctron" train --layers 2 --hidden 64 --heads 4 --steps 3 "${run[@]}" --ckpt-dir "$dir/g" > "$dir/g.out" 2>&1 \
  || { echo "FAIL: gpt2 source: $(tail -3 "$dir/g.out")"; exit 1; }
"$ctron" export --hf "$dir/lhf" --ckpt "$dir/l" > /dev/null 2>&1 && "$ctron" export --hf "$dir/ghf" --ckpt "$dir/g" > /dev/null 2>&1
check "[ $? -eq 0 ]" "the exports failed"

# The first step's loss is the model's loss on the first two windows: the weights are the source's
# (dropout 0: GPT-2's default 0.1 would make the training loss another number).
for src in lhf l ghf g; do
  "$ctron" train --init-from "$dir/$src" --steps 3 --dropout 0 "${run[@]}" --log "$dir/$src.jsonl" > "$dir/$src.init.out" 2>&1
  check "[ $? -eq 0 ] && grep -q '^  weights from $dir/$src' '$dir/$src.init.out'" "--init-from $src: $(tail -3 "$dir/$src.init.out")"
  e=$(evloss "$dir/$src"); t=$(step "$dir/$src.jsonl" 1)
  check "[ -n '$e' ] && [ '$e' = '$t' ]" "--init-from $src: step 1's loss $t, eval's $e"
done
check "cmp -s <(cut -d, -f1-2 '$dir/lhf.jsonl') <(cut -d, -f1-2 '$dir/l.jsonl') && cmp -s <(cut -d, -f1-2 '$dir/ghf.jsonl') <(cut -d, -f1-2 '$dir/g.jsonl')" \
  "a checkpoint and its HF export start different runs"
"$ctron" train --arch llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn-hidden 96 --steps 3 "${run[@]}" \
  --log "$dir/fresh.jsonl" > /dev/null 2>&1
check "[ '$(step "$dir/fresh.jsonl" 1)' != '$(step "$dir/lhf.jsonl" 1)' ]" "the seed's model has the source's loss: nothing was loaded"
"$ctron" train --init-from "$dir/lhf" --steps 2 "${run[@]}" --ckpt-dir "$dir/rec" > /dev/null 2>&1
check "grep -q '\"init-from\":[[:space:]]*\"$dir/lhf\"' '$dir/rec/step_00000002/state.json'" "state.json does not record --init-from"

# A Mistral model's sliding window (every layer's, here shorter than --seq) is the run's model: named in the
# run header and recorded in state.json; --sliding-window beside it must agree (below).
cp -r "$dir/lhf" "$dir/mhf"
/usr/bin/python3 - "$dir/mhf/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c.update(model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=8)
json.dump(c, open(sys.argv[1], "w"))
EOF
"$ctron" train --init-from "$dir/mhf" --sliding-window 8 --steps 1 "${run[@]}" --ckpt-dir "$dir/mw" > "$dir/mw.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'untied output layer, sliding window 8$' '$dir/mw.out' &&
       grep -q '\"sliding_window\":[[:space:]]*8,' '$dir/mw/step_00000001/state.json'" \
  "--init-from a mistral model with window 8: $(head -3 "$dir/mw.out")"

# A Phi-3 model whose RoPE rotates 12 of each head's 16 dims (exported as Phi3ForCausalLM with partial_rotary_factor
# 0.75): the run's model, named in the run header and recorded in state.json; --rotary-dim beside it must agree
# (below), and the head dim itself agrees with a model that rotates every dim.
"$ctron" train --arch llama --fused-proj --layers 1 --hidden 64 --heads 4 --kv-heads 2 --rotary-dim 12 --steps 1 "${run[@]}" \
  --ckpt-dir "$dir/p" > /dev/null 2>&1 && "$ctron" export --hf "$dir/phf" --ckpt "$dir/p" > /dev/null 2>&1
"$ctron" train --init-from "$dir/phf" --rotary-dim 12 --steps 1 "${run[@]}" --ckpt-dir "$dir/pr" > "$dir/pr.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'RoPE theta 10000, rotary 12 of 16 dims, RMSNorm' '$dir/pr.out' &&
       grep -q '\"rotary_dim\":[[:space:]]*12,' '$dir/pr/step_00000001/state.json'" \
  "--init-from a phi3 model rotating 12 of 16 dims: $(head -3 "$dir/pr.out")"
"$ctron" train --init-from "$dir/lhf" --rotary-dim 16 --steps 1 "${run[@]}" > "$dir/pr.out" 2>&1
check "[ $? -eq 0 ] && ! grep -q ', rotary ' '$dir/pr.out'" "--rotary-dim 16 (the head dim) beside a llama model: $(head -3 "$dir/pr.out")"

# A BPE model: the export's tokenizer.json encodes the text (as eval encodes it).
"$ctron" tokenize train --vocab 300 --in "$dir/text.txt" --out "$dir/tok.json" > /dev/null 2>&1
"$ctron" train --layers 1 --hidden 32 --heads 2 --vocab 300 --steps 2 "${run[@]}" --tokenizer "$dir/tok.json" \
  --ckpt-dir "$dir/b" > /dev/null 2>&1 && "$ctron" export --hf "$dir/bhf" --ckpt "$dir/b" > /dev/null 2>&1
"$ctron" train --init-from "$dir/bhf" --steps 2 --dropout 0 "${run[@]}" --log "$dir/bhf.jsonl" > "$dir/bhf.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'weights from $dir/bhf, tokenizer $dir/bhf/tokenizer.json' '$dir/bhf.out'" \
  "the BPE export's tokenizer is not used: $(grep -m1 weights "$dir/bhf.out")"
e=$(evloss "$dir/bhf"); t=$(step "$dir/bhf.jsonl" 1)
check "[ -n '$e' ] && [ '$e' = '$t' ]" "BPE --init-from: step 1's loss $t, eval's $e"

# Bad input: exit 2 with the reason; nothing the launch created is left behind.
expect() {   # expect NEEDLE ARGS...
  local needle=$1; shift
  rm -rf "$dir/out" "$dir/out.log"
  "$ctron" train "$@" --steps 2 --threads 1 --data "$dir/text.txt" --ckpt-dir "$dir/out" --log "$dir/out.log" > "$dir/bad.out" 2>&1
  local rc=$?
  check "[ $rc -eq 2 ] && grep -q -- \"$needle\" '$dir/bad.out' && [ ! -e '$dir/out' ] && [ ! -e '$dir/out.log' ]" \
    "$*: exit $rc, expected 2 with '$needle' and no output left: $(head -2 "$dir/bad.out"; ls -a "$dir/out" 2>&1 | tr '\n' ' ')"
}
expect "--hidden 32 disagrees with the model --init-from names ('$dir/lhf': 64)" --init-from "$dir/lhf" --hidden 32
expect "--arch gpt2 disagrees" --init-from "$dir/lhf" --arch gpt2
expect "--tie-embeddings tied disagrees" --init-from "$dir/lhf" --tie-embeddings
expect "--sliding-window 8 disagrees with the model --init-from names ('$dir/lhf': no sliding window)" --init-from "$dir/lhf" --sliding-window 8
expect "--sliding-window 4 disagrees with the model --init-from names ('$dir/mhf': 8)" --init-from "$dir/mhf" --sliding-window 4
expect "--rotary-dim 8 disagrees with the model --init-from names ('$dir/lhf': all 16 dims)" --init-from "$dir/lhf" --rotary-dim 8
expect "--rotary-dim 16 disagrees with the model --init-from names ('$dir/phf': 12)" --init-from "$dir/phf" --rotary-dim 16
expect "--init-from and --resume" --init-from "$dir/lhf" --resume "$dir/l"
expect "nor is it a Hugging Face model directory" --init-from "$dir/missing"
expect "no position embedding for a sequence of 64 (use --seq 32 or less)" --init-from "$dir/ghf" --seq 64
cp -r "$dir/lhf" "$dir/nan"   # a NaN weight: found when the weights are read, after the run claimed its outputs
/usr/bin/python3 - "$dir/nan/model.safetensors" <<'EOF'
import json, struct, sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", b[:8])[0]
o = json.loads(b[8:8 + n])["model.norm.weight"]["data_offsets"][0] + 8 + n
b[o:o + 4] = struct.pack("<f", float("nan")); open(p, "wb").write(b)
EOF
expect "'model.norm.weight' element 0 is nan" --init-from "$dir/nan"
mkdir -p "$dir/mine"; touch "$dir/mine.log"   # what existed before the launch stays
"$ctron" train --init-from "$dir/nan" --steps 2 --threads 1 --data "$dir/text.txt" --ckpt-dir "$dir/mine" --log "$dir/mine.log" > /dev/null 2>&1
check "[ -d '$dir/mine' ] && [ -e '$dir/mine.log' ]" "a failed run removed a directory or log that existed before it"

# Layouts: TP 2 and PP 2 start from the same weights and follow the one-process run.
if [ ${#launch[@]} -gt 0 ]; then
  for lay in "--tp 2" "--pp 2"; do
    name=${lay// /}; name=${name//-/}
    timeout 120 "${launch[@]}" -np 2 "$ctron" train --init-from "$dir/lhf" --steps 3 "${run[@]}" $lay \
      --log "$dir/$name.jsonl" > "$dir/$name.out" 2>&1
    check "[ $? -eq 0 ]" "$lay: $(tail -3 "$dir/$name.out")"
    for s in 1 2 3; do
      a=$(step "$dir/lhf.jsonl" $s); b=$(step "$dir/$name.jsonl" $s)
      check "/usr/bin/python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-6 * abs(a))' '$a' '$b'" \
        "$lay step $s: $b, one process $a"
    done
  done
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
