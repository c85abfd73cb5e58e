#!/usr/bin/env bash
# ctron export --hf and ctron eval / generate --model from the command line, without transformers
# (issue 26): an export evaluates and generates exactly as its checkpoint; bf16 and sharded exports;
# an export that fails half way leaves nothing; bad model directories exit 2 naming the file and the
# field; usage errors exit 2.
# usage: test_hf_cli.sh CTRON DATA
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }

"$ctron" train --layers 2 --hidden 64 --heads 4 --seq 32 --batch 2 --steps 3 --eval-every 0 --threads 2 \
  --data "$data" --ckpt-dir "$dir/run" > "$dir/train.out" 2>&1 || { echo "FAIL: training: $(tail -3 "$dir/train.out")"; exit 1; }
"$ctron" train --arch llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn-hidden 96 --seq 32 --batch 2 --steps 3 \
  --eval-every 0 --threads 2 --data "$data" --ckpt-dir "$dir/lrun" > "$dir/ltrain.out" 2>&1 \
  || { echo "FAIL: llama training: $(tail -3 "$dir/ltrain.out")"; exit 1; }

# --- export, then the export evaluates and generates as its checkpoint
"$ctron" export --hf "$dir/hf" --ckpt "$dir/run" > "$dir/exp.out" 2>&1
check "[ $? -eq 0 ] && [ -s '$dir/hf/config.json' ] && [ -s '$dir/hf/generation_config.json' ] && [ -s '$dir/hf/model.safetensors' ] && [ ! -e '$dir/hf/model.safetensors.index.json' ]" \
  "export: $(cat "$dir/exp.out")"
check "grep -q '\"model_type\":[[:space:]]*\"gpt2\"' '$dir/hf/config.json' && grep -q '\"n_positions\":[[:space:]]*32' '$dir/hf/config.json'" \
  "config.json: model_type gpt2, n_positions 32"
ev() { "$ctron" eval --model "$1" --data "$data" --max-windows 8 --batch 3 --threads 2 --json 2> "$dir/ev.err" | sed 's/,"seconds".*//; s/"model":"[^"]*",//'; }
a=$(ev "$dir/run"); b=$(ev "$dir/hf")
check "[ -n '$a' ] && [ '$a' = '$b' ]" "eval: the export's loss differs from the checkpoint's: '$a' vs '$b' ($(cat "$dir/ev.err"))"
g1=$("$ctron" generate --ckpt "$dir/run" --tokens 12 --temperature 0 --json --threads 1 2>/dev/null | sed 's/.*"tokens":\(\[[^]]*\]\).*/\1/')
g2=$("$ctron" generate --model "$dir/hf" --tokens 12 --temperature 0 --json --threads 1 2>/dev/null | sed 's/.*"tokens":\(\[[^]]*\]\).*/\1/')
check "[ -n '$g1' ] && [ '$g1' = '$g2' ]" "generate --model on the export: '$g2', the checkpoint's '$g1'"

# llama: bf16 and sharded; the fp32 export evaluates bitwise as the checkpoint, bf16 close to it
"$ctron" export --hf "$dir/lhf" --ckpt "$dir/lrun" --max-shard-size 20KiB > "$dir/lexp.out" 2>&1
n=$(ls "$dir/lhf"/model-*-of-*.safetensors 2>/dev/null | wc -l)
check "[ $n -gt 2 ] && [ -s '$dir/lhf/model.safetensors.index.json' ] && [ ! -e '$dir/lhf/model.safetensors' ]" \
  "sharded export: $n shards ($(cat "$dir/lexp.out"))"
check "grep -q '\"model_type\":[[:space:]]*\"llama\"' '$dir/lhf/config.json' && grep -q '\"num_key_value_heads\":[[:space:]]*2' '$dir/lhf/config.json' && grep -q '\"intermediate_size\":[[:space:]]*96' '$dir/lhf/config.json'" \
  "llama config.json: model_type, kv heads, intermediate_size"
a=$(ev "$dir/lrun"); b=$(ev "$dir/lhf")
check "[ -n '$a' ] && [ '$a' = '$b' ]" "eval: the sharded llama export's loss differs: '$a' vs '$b'"
"$ctron" export --hf "$dir/lbf" --ckpt "$dir/lrun" --dtype bf16 > /dev/null 2>&1
check "grep -q '\"dtype\":[[:space:]]*\"bfloat16\"' '$dir/lbf/config.json' && [ \$(stat -c %s '$dir/lbf/model.safetensors') -lt \$(( \$(du -cb '$dir'/lhf/model-*.safetensors | tail -1 | cut -f1) * 6 / 10 )) ]" \
  "bf16 export: dtype bfloat16 and about half the bytes"
c=$(ev "$dir/lbf")
loss() { sed 's/.*"loss":\([^,]*\),.*/\1/' <<< "$1"; }
check "/usr/bin/python3 -c 'import sys; a, c = float(sys.argv[1]), float(sys.argv[2]); sys.exit(not (a != c and abs(a - c) < 2e-2))' '$(loss "$a")' '$(loss "$c")'" \
  "bf16 export's loss: '$c' against fp32 '$a' (expected close, not equal)"

# a BPE checkpoint: its tokenizer.json (Hugging Face's format, as ctron tokenize writes it) travels with
# the export byte for byte, with the tokenizer_config.json AutoTokenizer needs; eval/generate --model on
# the export encode with it as on the checkpoint
head -c 100000 "$data" > "$dir/text.txt"
"$ctron" tokenize train --vocab 300 --in "$dir/text.txt" --out "$dir/tok.json" > /dev/null 2>&1
"$ctron" train --layers 1 --hidden 32 --heads 2 --seq 32 --batch 2 --vocab 300 --steps 2 --eval-every 0 --threads 2 \
  --data "$dir/text.txt" --tokenizer "$dir/tok.json" --ckpt-dir "$dir/bpe" > /dev/null 2>&1
"$ctron" export --hf "$dir/bpehf" --ckpt "$dir/bpe" > "$dir/bexp.out" 2>&1
check "cmp -s '$dir/tok.json' '$dir/bpehf/tokenizer.json' && grep -q PreTrainedTokenizerFast '$dir/bpehf/tokenizer_config.json' && grep -q 'tokenizer.json' '$dir/bexp.out'" \
  "the BPE checkpoint's tokenizer.json is not in the export: $(cat "$dir/bexp.out")"
evt() { "$ctron" eval --model "$1" --data "$dir/text.txt" --max-windows 4 --threads 2 --json 2>&1 | sed 's/,"seconds".*//; s/"model":"[^"]*",//'; }
a=$(evt "$dir/bpe"); b=$(evt "$dir/bpehf")
check "grep -q '\"tokens\":128' <<< '$a' && [ '$a' = '$b' ]" "eval on BPE text: the export '$b', the checkpoint '$a'"
g1=$("$ctron" generate --ckpt "$dir/bpe" --prompt "And the LORD" --tokens 8 --temperature 0 --threads 1 2>/dev/null)
g2=$("$ctron" generate --model "$dir/bpehf" --prompt "And the LORD" --tokens 8 --temperature 0 --threads 1 2>/dev/null)
check "[ -n \"\$g1\" ] && [ \"\$g1\" = \"\$g2\" ]" "generate with the export's tokenizer: '$g2' vs '$g1'"

# --- usage errors and refusals of export
expect() {   # expect RC NEEDLE CMD...: exit code and a message
  local want=$1 needle=$2; shift 2
  local out rc
  out=$("$@" 2>&1 > /dev/null); rc=$?
  check "[ $rc -eq $want ] && grep -qF -- \"\$needle\" <<< \"\$out\"" "$* -> rc $rc, '$out' (wanted rc $want, '$needle')"
}
expect 2 "'$dir/hf' exists" "$ctron" export --hf "$dir/hf" --ckpt "$dir/run"
expect 2 "--dtype: unknown dtype 'fp16'" "$ctron" export --hf "$dir/x" --ckpt "$dir/run" --dtype fp16
expect 2 "--ckpt is required" "$ctron" export --hf "$dir/x"
expect 2 "--max-shard-size: '12' is out of range" "$ctron" export --hf "$dir/x" --ckpt "$dir/run" --max-shard-size 12
# a write that fails half way (the file size limit: EFBIG once SIGXFSZ is ignored) leaves nothing behind
(trap '' XFSZ; ulimit -f 64; exec "$ctron" export --hf "$dir/cut" --ckpt "$dir/run") > "$dir/cut.out" 2>&1
rc=$?
check "[ $rc -eq 1 ] && [ ! -e '$dir/cut' ] && [ -z \"\$(ls -d '$dir'/cut.tmp-* 2>/dev/null)\" ]" \
  "a failed export: rc $rc, left $(ls -d "$dir"/cut* 2>/dev/null | tr '\n' ' '): $(cat "$dir/cut.out")"

# --- bad model directories: exit 2, the file and the field named
bad() { rm -rf "$dir/bad"; cp -r "$dir/$1" "$dir/bad"; }
py() { /usr/bin/python3 - "$dir/bad" "$@"; }
evbad() { expect 2 "$1" "$ctron" eval --model "$dir/bad" --data "$data" --max-windows 1; }
bad hf; printf '{"model_type": "gpt2", "n_embd": 64,' > "$dir/bad/config.json"
evbad "'$dir/bad/config.json' is not valid JSON"
bad hf; py <<'EOF'
import json, sys; p = sys.argv[1] + "/config.json"; c = json.load(open(p)); c["model_type"] = "falcon"; json.dump(c, open(p, "w"))
EOF
evbad "'$dir/bad/config.json': field 'model_type' is \"falcon\""
bad hf; py <<'EOF'
import json, sys; p = sys.argv[1] + "/config.json"; c = json.load(open(p)); c["n_inner"] = 128; json.dump(c, open(p, "w"))
EOF
evbad "'$dir/bad/config.json': field 'n_inner' is 128"
bad hf; py <<'EOF'
import json, sys; p = sys.argv[1] + "/config.json"; c = json.load(open(p)); c["vocab_size"] = 300; json.dump(c, open(p, "w"))
EOF
evbad "'$dir/bad/model.safetensors': tensor 'transformer.wte.weight' has shape [256, 64], but '$dir/bad/config.json' gives [300, 64]"
bad lhf; rm "$dir/bad/model-00002-of-"*.safetensors
evbad "listed in '$dir/bad/model.safetensors.index.json'"
# safetensors surgery: header length, a tensor's dtype, a NaN in the data
cat > "$dir/st.py" <<'EOF'
import json, struct, sys
path, what = sys.argv[1], sys.argv[2]
b = bytearray(open(path, "rb").read()); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
if what == "length":
    b[:8] = struct.pack("<Q", len(b))
elif what == "dtype":
    h["transformer.ln_f.weight"]["dtype"] = "F64"
    t = json.dumps(h, separators=(",", ":")).encode(); t += b" " * (-len(t) % 8)
    b = bytearray(struct.pack("<Q", len(t)) + t + bytes(b[8 + n:]))
elif what == "nan":
    o = h["transformer.h.1.mlp.c_fc.weight"]["data_offsets"][0]
    b[8 + n + o + 4 * 7:8 + n + o + 4 * 8] = struct.pack("<I", 0x7fc00000)
open(path, "wb").write(b)
EOF
bad hf; /usr/bin/python3 "$dir/st.py" "$dir/bad/model.safetensors" length
evbad "'$dir/bad/model.safetensors': header size"
bad hf; /usr/bin/python3 "$dir/st.py" "$dir/bad/model.safetensors" dtype
evbad "'$dir/bad/model.safetensors': tensor 'transformer.ln_f.weight' has dtype 'F64'"
bad hf; /usr/bin/python3 "$dir/st.py" "$dir/bad/model.safetensors" nan
evbad "'$dir/bad/model.safetensors': tensor 'transformer.h.1.mlp.c_fc.weight' element 7 is nan"
rm -f "$dir/bad/model.safetensors"; rm -f "$dir/bad/model.safetensors.index.json"
evbad "'$dir/bad' holds neither model.safetensors nor model.safetensors.index.json"

# --- eval's own usage errors
expect 2 "--model is required" "$ctron" eval --data "$data"
expect 2 "give either --data FILE, or --ids FILE with --dump FILE" "$ctron" eval --model "$dir/hf"
expect 2 "--ids needs --dump" "$ctron" eval --model "$dir/hf" --ids "$dir/x"
expect 2 "--grads belongs to the dump" "$ctron" eval --model "$dir/hf" --data "$data" --grads
expect 2 "--seq: '$dir/hf/config.json': field 'n_positions' is 32" "$ctron" eval --model "$dir/hf" --data "$data" --seq 33
expect 2 "nor is it a Hugging Face model directory" "$ctron" eval --model "$dir/none" --data "$data"
expect 2 "--ckpt: '$dir/hf' is a Hugging Face model directory: use --model" "$ctron" generate --ckpt "$dir/hf"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
