#!/usr/bin/env bash
# The planning commands on llama shapes (issue 25, items 3 and 9): ctron memory's llama3-* presets hold
# docs/MEMORY.md's per-layer formula, computed here by hand, and Llama 3's published parameter counts;
# ctron plan plans a llama without GeLU's options and counts its untied weights; ctron plan --cluster
# picks the documented layouts for 70B and 405B on H100s; the family's bad flags exit 2 naming them; the
# qwen3-* presets have transformers' parameter counts, heads 128 wide and q/k norms (--qk-norm); the phi3 ones
# (phi-3-mini, phi-3-medium, phi-4) transformers' counts and fused projections (--fused-proj).
set -uo pipefail
ctron=$1
py=${2:-/usr/bin/python3}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
ok()  { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
expect() {  # expect "needle" command args...: exit 2 and the message
  local needle=$1; shift
  out=$("$ctron" "$@" 2>&1 > /dev/null); rc=$?
  if [ $rc -eq 2 ] && grep -qF -- "$needle" <<< "$out"; then ok
  else bad "ctron $* -> rc $rc, message: $out (wanted '$needle')"; fi
}

# Mini-seq chunks SwiGLU's MLP too: gate and up are not kept (448 MiB each per layer without it).
out=$("$ctron" memory --preset llama3-8b --mini-seq 4 2>&1); rc=$?
full=$("$ctron" memory --preset llama3-8b 2>&1)
if [ $rc -eq 0 ] && grep -qE "^  gate +0 B" <<< "$out" && grep -qE "^  up +0 B" <<< "$out" && \
   grep -qE "^  gate +448.00 MiB" <<< "$full"; then ok; else bad "memory --mini-seq 4 for llama: rc $rc, $(grep -E '^  (gate|up) ' <<< "$out")"; fi

# Bad input: the same checks and words as ctron train.
expect "--kv-heads is a llama option (--arch llama)"                  memory --kv-heads 4
expect "--ffn-hidden is a llama option (--arch llama)"                memory --preset 22B --ffn-hidden 100
expect "--arch 'bert': expected one of gpt2|llama"                    memory --arch bert
expect "--tp 16 does not divide --kv-heads 8 (each TP rank takes whole key/value heads" memory --preset llama3-8b --tp 16
expect "--tp 2 does not divide --ffn-hidden 14337"                    memory --preset llama3-8b --ffn-hidden 14337 --tp 2
expect "--kv-heads 5 does not divide --heads 12"                      memory --arch llama --kv-heads 5
expect "head dimension 15 is odd: RoPE rotates pairs"                 memory --arch llama --hidden 60 --heads 4
expect "--gelu-bits: --arch llama has no GeLU MLP"                    memory --preset llama3-8b --gelu-bits 2
expect "--tempo all (its gelu part): --arch llama has no GeLU MLP"    memory --preset llama3-8b --tempo all
expect "--tp 3 does not divide --kv-heads 4"                          plan --budget 1GiB --arch llama --layers 2 --hidden 96 --heads 12 --kv-heads 4 --tp 3
expect "--qkv-bias is a llama option (--arch llama)"                  plan --budget 1GiB --qkv-bias
expect "t=16 does not divide the key/value heads (8): each TP rank takes whole key/value heads" \
  plan --cluster --gpu h100-80g --gpus-per-node 16 --nodes 2 --preset llama3-405b --layout t=16,p=1,mb=1
expect "t=4 does not divide the FFN width (14338): each TP rank takes ffn/t columns of the MLP" \
  plan --cluster --gpu h100-80g --nodes 1 --preset llama3-8b --ffn-hidden 14338 --layout t=4,p=1,mb=1
expect "--tie-embeddings is a llama option (--arch llama)"            plan --cluster --gpu h100-80g --nodes 1 --preset 22B --tie-embeddings
# --qk-norm (Qwen3's per-head q/k RMSNorm): llama only, and not beside q/k/v biases, in all three commands
expect "--qk-norm is a llama option (--arch llama)"                   memory --qk-norm
expect "--qk-norm is a llama option (--arch llama)"                   memory --arch gpt2 --preset qwen3-8b --qk-norm
expect "--qk-norm is a llama option (--arch llama)"                   plan --budget 1GiB --qk-norm
expect "--qk-norm is a llama option (--arch llama)"                   plan --cluster --gpu h100-80g --nodes 1 --preset 22B --qk-norm
expect "--qkv-bias with --qk-norm: no Hugging Face family has q/k/v biases with q/k norms (Qwen3's attention_bias" \
  memory --arch llama --qk-norm --qkv-bias
expect "--qkv-bias with --qk-norm: no Hugging Face family has q/k/v biases with q/k norms" \
  plan --budget 1GiB --arch llama --qkv-bias --qk-norm
expect "--qkv-bias with the preset's q/k norms (Qwen3): no Hugging Face family has q/k/v biases with q/k norms" \
  memory --preset qwen3-8b --qkv-bias
expect "--qkv-bias with the preset's q/k norms (Qwen3)" plan --cluster --gpu h100-80g --nodes 1 --preset qwen3-8b --qkv-bias
# --fused-proj (Phi-3's qkv_proj, gate_up_proj): llama only, and beside neither q/k/v biases nor q/k norms
expect "--fused-proj is a llama option (--arch llama)"                memory --fused-proj
expect "--fused-proj is a llama option (--arch llama)"                memory --arch gpt2 --preset phi-4 --fused-proj
expect "--fused-proj is a llama option (--arch llama)"                plan --budget 1GiB --fused-proj
expect "--fused-proj is a llama option (--arch llama)"                plan --cluster --gpu h100-80g --nodes 1 --preset 22B --fused-proj
expect "--fused-proj with --qk-norm: no Hugging Face family has fused q|k|v and gate|up projections with q/k norms" \
  plan --budget 1GiB --arch llama --fused-proj --qk-norm
expect "--fused-proj with --qkv-bias: no Hugging Face family has fused q|k|v and gate|up projections with q/k/v biases" \
  memory --arch llama --fused-proj --qkv-bias
expect "--fused-proj with the preset's q/k norms (Qwen3): no Hugging Face family has fused q|k|v" \
  memory --preset qwen3-8b --fused-proj
expect "the preset's fused projections (Phi-3) with --qkv-bias: no Hugging Face family has fused q|k|v" \
  plan --cluster --gpu h100-80g --nodes 1 --preset phi-3-medium --qkv-bias
expect "--tp 4 does not divide --kv-heads 10 (each TP rank takes whole key/value heads" memory --preset phi-4 --tp 4

# ctron memory: per layer, recompute none and selective, t = 1 and t = 8 with SP, bf16, no dropout
# (llama's default): docs/MEMORY.md's formula against the JSON; the parameters at t = p = 1.
for preset in llama3-8b llama3-70b llama3-405b; do
  for lay in "--tp 1 --recompute none" "--tp 8 --sp --recompute selective" "--tp 8 --recompute none --dropout 0.1"; do
    # shellcheck disable=SC2086
    "$ctron" memory --preset $preset $lay --pp 1 --gpus 8 --batch 1 --json > "$dir/m.json" 2> "$dir/err" ||
      { bad "memory --preset $preset $lay: $(cat "$dir/err")"; continue; }
    if "$py" - "$dir/m.json" "$preset" "$lay" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); preset, lay = sys.argv[2], sys.argv[3]
shapes = {"llama3-8b": (32, 4096, 32, 8, 14336, 8030261248), "llama3-70b": (80, 8192, 64, 8, 28672, 70553706496),
          "llama3-405b": (126, 16384, 128, 8, 53248, 405853388800)}
L, h, a, kv, f, params = shapes[preset]
s, b, e, v = 8192, 1, 2, 128256
t = 8 if "--tp 8" in lay else 1
sp, sel, k = "--sp" in lay, "selective" in lay, (1 if "--dropout 0.1" in lay else 0)
sbh, sb, as2b, sbf = s*b*h, s*b, a*s*s*b, s*b*f
# per layer: replicated (split by SP) ln1_in, qkv_in, ln2_in, fc1_in, two masks, two RMSNorm statistics;
# split by t: q, proj_in, k and v, the attention core (none under selective), gate and up
core = 0 if sel else (as2b*(2*e + k) if k else as2b*e)
want = (sbh*(4*e + 2*k) + 8*sb) // (t if sp else 1) + (sbh*(2*e) + sbh*2*e*kv//a + core + 2*e*sbf) // t
assert d["shape"]["arch"] == "llama" and d["shape"]["kv_heads"] == kv and d["shape"]["ffn"] == f and d["shape"]["tied"] is False
cls = d["layer_classes"][0]
assert cls["total"] == want, (cls["total"], want)
assert "gate" in cls["bytes"] and "up" in cls["bytes"] and "gelu_in" not in cls["bytes"] and "fc2_in" not in cls["bytes"]
assert cls["bytes"]["gate"] == e*sbf//t and cls["bytes"]["k"] == e*sbh*kv//a//t, cls["bytes"]
if t == 1:
    assert d["first_stage"]["parameters"] == params, d["first_stage"]["parameters"]
if preset == "llama3-8b" and t == 1:   # by hand: 13·sbh + e·as²b + 2e·sbf + 8sb
    assert want == 436207616 + 4294967296 + 469762048 + 65536 == 5201002496
PY
    then ok; else bad "memory --preset $preset $lay: per-layer bytes or parameters"; fi
  done
done
out=$("$ctron" memory --preset llama3-8b)
if grep -q "^  block   llama: kv=8 ffn=14336 · RMSNorm, SwiGLU MLP, RoPE · output layer untied (lm_head)$" <<< "$out" &&
   grep -q "c = 4 + 4kv/a + 4f/h = 19 where GPT-2 has 24" <<< "$out" &&
   grep -qE "^  TP \+ SP \+ selective +29sbh/t " <<< "$out" && grep -qE "^  parameters +8\.03e\+09$" <<< "$out"
then ok; else bad "memory --preset llama3-8b text: $out"; fi
if "$ctron" memory --preset llama3 --json | "$py" -c 'import json,sys; d=json.load(sys.stdin); assert [m["model"] for m in d["models"]] == ["llama3-8b","llama3-70b","llama3-405b"]'
then ok; else bad "memory --preset llama3"; fi
# --tie-embeddings drops the lm_head: 8B tied has 128256·4096 fewer parameters
if "$ctron" memory --preset llama3-8b --tie-embeddings --json | "$py" -c 'import json,sys; d=json.load(sys.stdin); assert d["first_stage"]["parameters"] == 8030261248 - 128256*4096 and d["shape"]["tied"]'
then ok; else bad "memory --preset llama3-8b --tie-embeddings"; fi
# Llama 3.2's small models: tied, the parameter counts Meta's model cards give (1,235,814,400 and 3,212,749,824)
if "$ctron" memory --preset llama3.2 --json | "$py" -c '
import json,sys; d=json.load(sys.stdin); m = {x["model"]: x for x in d["models"]}
assert list(m) == ["llama3.2-1b", "llama3.2-3b"], list(m)
assert m["llama3.2-1b"]["first_stage"]["parameters"] == 1235814400 and m["llama3.2-1b"]["shape"]["tied"]
assert m["llama3.2-3b"]["first_stage"]["parameters"] == 3212749824 and m["llama3.2-3b"]["shape"]["tied"]'
then ok; else bad "memory --preset llama3.2: $("$ctron" memory --preset llama3.2 --json | head -c 600)"; fi
# Qwen3's dense models (`qwen3` = all six): the parameter counts transformers gives, computed once with
# transformers 5.24 on the meta device (peer venv):
#   with torch.device("meta"): m = Qwen3ForCausalLM(Qwen3Config(vocab_size=151936, hidden_size=h,
#       num_hidden_layers=L, num_attention_heads=a, num_key_value_heads=8, intermediate_size=f, head_dim=128,
#       tie_word_embeddings=tied)); sum(p.numel() for p in m.parameters())   (a tied embedding counted once)
# = v·h·(1 or 2) + L·(2h + 2·128 [q_norm, k_norm] + h·a·128·2 + h·8·128·2 + 3·h·f) + h. At t = p = 1 the first stage
# holds them all. (Without the model's q_norm/k_norm rows, ctron counts 2·128·L fewer.)
if "$ctron" memory --preset qwen3 --tp 1 --pp 1 --gpus 1 --json | "$py" -c '
import json,sys; d=json.load(sys.stdin); m = {x["model"]: x for x in d["models"]}
want = {"qwen3-0.6b": (596049920, 28, 1024, 16, 3072, True), "qwen3-1.7b": (1720574976, 28, 2048, 16, 6144, True),
        "qwen3-4b": (4022468096, 36, 2560, 32, 9728, True), "qwen3-8b": (8190735360, 36, 4096, 32, 12288, False),
        "qwen3-14b": (14768307200, 40, 5120, 40, 17408, False), "qwen3-32b": (32762123264, 64, 5120, 64, 25600, False)}
assert list(m) == list(want), list(m)
bad = []
for name, (params, L, h, a, f, tied) in want.items():
    sh = m[name]["shape"]
    assert (sh["arch"], sh["layers"], sh["hidden"], sh["heads"], sh["kv_heads"], sh["ffn"], sh["tied"], sh["vocab"], sh["seq"]) == \
        ("llama", L, h, a, 8, f, tied, 151936, 4096), (name, sh)
    got = m[name]["first_stage"]["parameters"]
    if got != params: bad.append("%s: %d parameters, transformers %d (short by %d; 2·128·L = %d)" % (name, got, params, params - got, 256 * L))
assert not bad, "; ".join(bad)'
then ok; else bad "memory --preset qwen3: the parameter counts"; fi
# heads 128 wide where hidden/heads is 64 (0.6B): q_norm_in (kept in place of q, which backward makes again
# from it) and the attention output are s·b·2048·2 bytes per layer
out=$("$ctron" memory --preset qwen3-0.6b)
if grep -q "^  block   llama: kv=8 d=128 ffn=3072 · RMSNorm, SwiGLU MLP, RoPE · output layer tied" <<< "$out" &&
   grep -qE "^  layout  t=1 p=1 m=1 · 1 GPUs? \(dp 1\) · global batch 2048" <<< "$out" &&
   grep -qE "^  q +0 B$" <<< "$out" && grep -qE "^  q_norm_in +32\.00 MiB$" <<< "$out" &&
   grep -qE "^  q_norm_stats +0 B$" <<< "$out" && grep -qE "^  proj_in +32\.00 MiB$" <<< "$out"
then ok; else bad "memory --preset qwen3-0.6b: $out"; fi
# plan --cluster with heads of 128 where hidden/heads is 64 (0.6B): the block line names the width
out=$("$ctron" plan --cluster --gpu h100-80g --nodes 1 --preset qwen3-0.6b --top 1)
if grep -q "^block llama: kv=8 d=128 ffn=3072, output layer tied, q/k norms$" <<< "$out" &&
   grep -qE '^   1 ' <<< "$out"; then ok; else bad "plan --cluster --preset qwen3-0.6b: $out"; fi
out=$("$ctron" plan --cluster --gpu h100-80g --nodes 1 --preset qwen3-8b --top 1)
if grep -q "^model L=36 h=4096 a=32 v=151936 s=4096, global batch 2048; 1×8 h100-80g" <<< "$out" &&
   grep -q "^block llama: kv=8 ffn=12288, output layer untied, q/k norms$" <<< "$out" &&
   grep -qE '^   1   2   1  1     4   4 off plan ' <<< "$out"; then ok; else bad "plan --cluster --preset qwen3-8b: $out"; fi

# Phi-3 / Phi-4 (`phi3` = all four): the llama block with fused qkv_proj and gate_up_proj, untied but Phi-4-mini;
# the parameter counts transformers gives, computed once with transformers 5.24 on the meta device (peer venv):
#   with torch.device("meta"): m = Phi3ForCausalLM(Phi3Config(vocab_size=v, hidden_size=h, num_hidden_layers=L,
#       num_attention_heads=a, num_key_value_heads=kv, intermediate_size=f, tie_word_embeddings=tied))
#   sum(p.numel() for p in m.parameters())
# = (2 or 1 tied)·v·h + L·(2h + h·(a + 2kv)·h/a [qkv_proj] + h² [o_proj] + 2f·h [gate_up_proj] + f·h [down_proj]) + h:
# fusing changes no count, nor does Phi-4-mini's partial_rotary_factor 0.75 (with it and its 48 LongRoPE factors:
# 3,836,021,760 too). At t = p = 1 the first stage holds them all.
if "$ctron" memory --preset phi3 --tp 1 --pp 1 --gpus 1 --json | "$py" -c '
import json,sys; d=json.load(sys.stdin); m = {x["model"]: x for x in d["models"]}
want = {"phi-3-mini": (3821079552, 32, 3072, 32, 32, 8192, 32064, 4096, False),
        "phi-3-medium": (13960238080, 40, 5120, 40, 10, 17920, 32064, 4096, False),
        "phi-4": (14659507200, 40, 5120, 40, 10, 17920, 100352, 16384, False),
        "phi-4-mini": (3836021760, 32, 3072, 24, 8, 8192, 200064, 4096, True)}
assert list(m) == list(want), list(m)
for name, (params, L, h, a, kv, f, v, s, tied) in want.items():
    sh = m[name]["shape"]
    assert (sh["arch"], sh["layers"], sh["hidden"], sh["heads"], sh["kv_heads"], sh["ffn"], sh["tied"], sh["vocab"],
            sh["seq"], sh.get("fused_proj"), sh.get("qk_norm"), sh["qkv_bias"]) == \
        ("llama", L, h, a, kv, f, tied, v, s, True, None, False), (name, sh)
    assert m[name]["first_stage"]["parameters"] == params, (name, m[name]["first_stage"]["parameters"], params)'
then ok; else bad "memory --preset phi3: the shapes or parameter counts"; fi
# the presets' layouts: mini on one GPU (as qwen3-4b), medium and Phi-4 on one 8-GPU node at what plan --cluster
# ranks first (t = 2, the most that divides 10 key/value heads within a node, p = 4, v = 5)
out=$("$ctron" memory --preset phi-3-mini)
if grep -q "^  block   llama: kv=32 ffn=8192 · RMSNorm, SwiGLU MLP, RoPE · output layer untied (lm_head) · fused qkv_proj, gate_up_proj$" <<< "$out" &&
   grep -qE "^  layout  t=1 p=1 m=1 · 1 GPUs? \(dp 1\) · global batch 2048" <<< "$out" &&
   grep -q "^  shape   L=32 h=3072 a=32 s=4096 b=2 v=32064$" <<< "$out"
then ok; else bad "memory --preset phi-3-mini: $out"; fi
out=$("$ctron" memory --preset phi-4)
if grep -q "^  shape   L=40 h=5120 a=40 s=16384 b=1 v=100352$" <<< "$out" &&
   grep -qE "^  layout  t=2 p=4 m=5 · 8 GPUs \(dp 1\) · global batch 2048" <<< "$out"
then ok; else bad "memory --preset phi-4: $out"; fi
# Phi-4-mini: tied, heads of 3072 / 24 = 128 (96 of them rotated, which no byte of memory sees), one GPU
out=$("$ctron" memory --preset phi-4-mini)
if grep -q "^  block   llama: kv=8 ffn=8192 · RMSNorm, SwiGLU MLP, RoPE · output layer tied to the embedding · fused qkv_proj, gate_up_proj$" <<< "$out" &&
   grep -qE "^  layout  t=1 p=1 m=1 · 1 GPUs? \(dp 1\) · global batch 2048" <<< "$out" &&
   grep -q "^  shape   L=32 h=3072 a=24 s=4096 b=2 v=200064$" <<< "$out"
then ok; else bad "memory --preset phi-4-mini: $out"; fi
out=$("$ctron" plan --cluster --gpu h100-80g --nodes 1 --preset phi-3-medium --top 1)
if grep -q "^model L=40 h=5120 a=40 v=32064 s=4096, global batch 2048; 1×8 h100-80g" <<< "$out" &&
   grep -q "^block llama: kv=10 ffn=17920, output layer untied, fused qkv_proj, gate_up_proj$" <<< "$out" &&
   grep -qE '^   1   2   4  5     1   4  on plan ' <<< "$out"; then ok; else bad "plan --cluster --preset phi-3-medium: $out"; fi
out=$("$ctron" plan --cluster --gpu h100-80g --nodes 1 --preset phi-4 --top 1)
if grep -q "^model L=40 h=5120 a=40 v=100352 s=16384, global batch 2048; 1×8 h100-80g" <<< "$out" &&
   grep -qE '^   1   2   4  5     1   1  on plan ' <<< "$out"; then ok; else bad "plan --cluster --preset phi-4: $out"; fi
# --fused-proj on a custom llama: the model is "custom", fused, with the same parameters as without it
if "$ctron" memory --arch llama --layers 2 --hidden 256 --heads 8 --kv-heads 2 --seq 128 --vocab 4096 --fused-proj --json |
   "$py" -c 'import json,sys; d=json.load(sys.stdin); assert d["model"] == "custom" and d["shape"]["fused_proj"] is True, d["shape"]
assert d["first_stage"]["parameters"] == 2*4096*256 + 2*(2*256 + 256*(8+4)*32 + 256*256 + 3*256*704) + 256, d["first_stage"]["parameters"]' &&
   "$ctron" memory --preset llama3-8b --json | "$py" -c 'import json,sys; assert "fused_proj" not in json.load(sys.stdin)["shape"]'
then ok; else bad "memory --arch llama --fused-proj: $("$ctron" memory --arch llama --layers 2 --hidden 256 --heads 8 --kv-heads 2 --seq 128 --vocab 4096 --fused-proj --json 2>&1 | head -c 600)"; fi

# Mistral Nemo 12B's shape (head_dim 128 of hidden 5120 and 32 heads: q and the attention output 4096
# wide): 12,247,782,400 parameters, as its model card's 12.2B; q and proj_in are s·b·4096·2 bytes per layer.
nemo=(--arch llama --layers 40 --hidden 5120 --heads 32 --kv-heads 8 --head-dim 128 --ffn-hidden 14336 --seq 4096
      --batch 1 --vocab 131072)
out=$("$ctron" memory "${nemo[@]}")
if grep -q "^  block   llama: kv=8 d=128 ffn=14336 · RMSNorm, SwiGLU MLP, RoPE" <<< "$out" &&
   grep -q "c = 4ad/h + 4kv·d/h + 4f/h = 15.2 where GPT-2 has 24" <<< "$out" &&
   grep -qE "^  q +32\.00 MiB$" <<< "$out" && grep -qE "^  proj_in +32\.00 MiB$" <<< "$out"
then ok; else bad "memory, Mistral Nemo's shape: $out"; fi
if "$ctron" memory "${nemo[@]}" --json | "$py" -c 'import json,sys; d=json.load(sys.stdin); assert d["first_stage"]["parameters"] == 12247782400, d["first_stage"]["parameters"]'
then ok; else bad "memory, Mistral Nemo's parameters"; fi
# plan --cluster takes the width too: q_proj, o_proj and the attention core at a·d = 4096 (test_cluster_terms
# checks the terms)
out=$("$ctron" plan --cluster --gpu h100-80g --nodes 1 --arch llama --layers 40 --hidden 5120 --heads 32 --kv-heads 8 \
  --head-dim 128 --ffn-hidden 14336 --seq 4096 --vocab 131072 --global-batch 1024 --top 1 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q "^block llama: kv=8 d=128 ffn=14336, output layer untied$" <<< "$out" && grep -qE '^   1 ' <<< "$out"
then ok; else bad "plan --cluster --head-dim: rc $rc: $out"; fi

# ctron plan, llama with GQA and an FFN of 704: the untied weights copied to bf16 are 2 bytes of
# 2·4096·256 (embedding, lm_head) + 4·(256·(256 + 2·64) + 256² + 3·256·704 + 2·256) + 256 = 4917504 parameters.
out=$("$ctron" plan --budget 300MiB --threads 2 --arch llama --layers 4 --hidden 256 --heads 8 --kv-heads 2 --ffn-hidden 704 \
      --seq 1024 --batch 4 --vocab 4096 --precision bf16); rc=$?
if [ $rc -eq 0 ] && grep -q "bf16 weight copy 9.38 MiB (9835008 bytes: 2 per parameter" <<< "$out" &&
   ! grep -qE -- "--tempo [a-z,]*gelu|--mini-seq" <<< "$out"; then ok; else bad "plan --arch llama: rc $rc, $out"; fi
out=$("$ctron" plan --threads 2 --arch llama --layers 4 --hidden 256 --heads 8 --kv-heads 2 --ffn-hidden 704 \
      --seq 1024 --batch 4 --vocab 4096 --pp 2 --grad-accum 2 --budget 300MiB); rc=$?
if [ $rc -eq 0 ] && grep -q -- "ctron train flags: --pp 2 --pp-schedule 1f1b --grad-accum 2 --recompute-layers" <<< "$out" &&
   ! grep -qE -- "--tempo [a-z,]*gelu|--mini-seq" <<< "$out"; then ok; else bad "plan --pp 2 --arch llama: rc $rc, $out"; fi

# ctron plan --cluster on H100s: 70B on 64 GPUs and 405B on 1152 (docs/PLANNER.md); tests/test_memory_llama.c
# holds the step times.
out=$("$ctron" plan --cluster --gpu h100-80g --gpus-per-node 8 --nodes 8 --preset llama3-70b --top 3)
if grep -q "^block llama: kv=8 ffn=28672, output layer untied$" <<< "$out" &&
   grep -qE '^   1   4   4  5     4   1  on plan         1      77\.3 ' <<< "$out"; then ok; else bad "70B on 64 H100s: $out"; fi
"$ctron" plan --cluster --gpu h100-80g --gpus-per-node 8 --nodes 144 --preset llama3-405b --json --top 3 > "$dir/c.json"
"$py" - "$dir/c.json" <<'PY' && ok || bad "405B on 1152 H100s: $(head -c 400 "$dir/c.json")"
import json, sys
L = json.load(open(sys.argv[1]))["layouts"]
x = L[0]
assert (x["t"], x["p"], x["v"], x["d"], x["mb"], x["sp"], x["recompute"], x["zero"]) == (4, 18, 1, 16, 1, True, "plan", 1), x
assert all(y["fits"] and y["t"] <= 8 and y["mem_bytes_max"] <= 81559 * 2**20 for y in L)
assert x["parts"]["pp_comm"] > 0 and 90 < x["step_s"] < 100, x
PY

# Sliding windows (--sliding-window W: Mistral, Phi-3): each query's core runs over W keys, so the model FLOPs
# lose 12·B·s·(s − W)·q·L a step (the core's 4·s·keys·q forward, three passes) and flash attention's time
# scales by W/s; no saved tensor changes, and W >= s is no window at all.
"$ctron" memory --preset phi-3-mini --json > "$dir/nowin.json" 2>&1
"$ctron" memory --preset phi-3-mini --sliding-window 2047 --json > "$dir/win.json" 2>&1; rc=$?
"$ctron" memory --preset phi-3-mini --sliding-window 4096 --json > "$dir/winfull.json" 2>&1
C=(plan --cluster --gpu h100-80g --gpus-per-node 1 --nodes 1 --attention flash --arch llama --layers 2 --hidden 4096
   --heads 32 --kv-heads 8 --ffn-hidden 14336 --vocab 32000 --seq 16384 --global-batch 1
   --layout t=1,p=1,v=1,d=1,mb=1,sp=off,recompute=none,zero=0 --json)
"$ctron" "${C[@]}" > "$dir/cnowin.json" 2>&1
"$ctron" "${C[@]}" --sliding-window 4096 > "$dir/cwin.json" 2>&1
"$ctron" "${C[@]}" --sliding-window 16384 > "$dir/cwinfull.json" 2>&1
if [ $rc -eq 0 ] && out=$("$py" - "$dir" <<'PY' 2>&1
import json, sys
d = sys.argv[1]
j = lambda n: json.load(open(f"{d}/{n}.json"))
a, w, wf = j("nowin"), j("win"), j("winfull")
assert w["shape"]["sliding_window"] == 2047 and "sliding_window" not in a["shape"], w["shape"]
assert w["layer_classes"] == a["layer_classes"] and w["first_stage"] == a["first_stage"], "bytes changed"
B, s, W, q, L = 2048, 4096, 2047, 3072, 32
want = a["flops"]["model_per_iteration"] - 12.0 * B * s * (s - W) * q * L
got = w["flops"]["model_per_iteration"]
assert abs(got - want) <= 1e-12 * want, (got, want)
assert wf["flops"] == a["flops"], (wf["flops"], a["flops"])
c, cw, cf = j("cnowin")["layouts"][0], j("cwin")["layouts"][0], j("cwinfull")["layouts"][0]
ratio = cw["parts"]["attention"] / c["parts"]["attention"]
assert abs(ratio - 0.25) < 1e-9, ratio
assert cw["step_s"] < c["step_s"] and cw["mfu"] < c["mfu"] and cw["mem_bytes_max"] == c["mem_bytes_max"], (cw, c)
assert cf["step_s"] == c["step_s"] and cf["mfu"] == c["mfu"], (cf, c)
print("ok")
PY
); then ok; else bad "--sliding-window in ctron memory / plan --cluster: rc $rc: $out"; fi
expect "--sliding-window is a llama option (--arch llama)"             memory --preset gpt2 --sliding-window 64
expect "--sliding-window is a llama option (--arch llama)"             plan --budget 1GiB --sliding-window 64
expect "--sliding-window: 0 is out of range"                           memory --preset llama3-8b --sliding-window 0
expect "--sliding-window is a llama option (--arch llama)"             plan --cluster --gpu h100-80g --gpus-per-node 8 --nodes 1 --preset gpt2 --sliding-window 64

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
