#!/usr/bin/env bash
# Every class of bad flag exits with code 2 and a message that names the flag or value.
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
: > "$dir/empty.txt"
printf 'tiny data file' > "$dir/small.txt"
pass=0; fail=0
expect() {  # expect "needle" args...
  local needle=$1; shift
  out=$("$ctron" "$@" 2>&1 > /dev/null); rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$needle" <<< "$out"; then pass=$((pass+1))
  else fail=$((fail+1)); echo "FAIL: ctron $* -> rc $rc, message: $out (wanted '$needle')"; fi
}
expect "not divisible by --heads"  train --hidden 100 --heads 3 --data "$data"
expect "--layers: 0 is out of range" train --layers 0 --data "$data"
# the model family (issue 25): its values, and flags the other family has no use for
expect "--arch 'gpt3': expected one of gpt2|llama" train --arch gpt3 --data "$data"
expect "--kv-heads 3 does not divide --heads 4" train --arch llama --heads 4 --kv-heads 3 --data "$data"
expect "head dimension 9 is odd: RoPE rotates pairs" train --arch llama --hidden 36 --heads 4 --data "$data"
expect "--kv-heads is a llama option (--arch llama)" train --kv-heads 2 --data "$data"
expect "--tie-embeddings is a llama option" train --tie-embeddings --data "$data"
expect "--qk-norm is a llama option (--arch llama)" train --qk-norm --data "$data"
expect "--qk-norm is a llama option (--arch llama)" train --arch gpt2 --qk-norm --data "$data"
expect "--qk-norm with --qkv-bias: no Hugging Face family has q/k/v biases with q/k norms (Qwen3's attention_bias also puts a bias on o_proj" \
  train --arch llama --qk-norm --qkv-bias --data "$data"
expect "--qk-norm is a llama option (--arch llama)" memory --qk-norm
# --fused-proj (Phi-3's qkv_proj, gate_up_proj): llama only; not beside q/k norms, q/k/v biases or a scaled RoPE
expect "--fused-proj is a llama option (--arch llama)" train --fused-proj --data "$data"
expect "--fused-proj is a llama option (--arch llama)" train --arch gpt2 --fused-proj --data "$data"
expect "--fused-proj with --qk-norm: no Hugging Face family has fused q|k|v and gate|up projections with q/k norms" \
  train --arch llama --fused-proj --qk-norm --data "$data"
expect "--fused-proj with --qkv-bias: no Hugging Face family has fused q|k|v and gate|up projections with q/k/v biases" \
  train --arch llama --fused-proj --qkv-bias --data "$data"
expect "--rope-scaling linear:2 with --fused-proj: Phi3Config (model_type phi3) takes no linear, llama3, yarn or dynamic RoPE scaling, only longrope" \
  train --arch llama --fused-proj --rope-scaling linear:2 --data "$data"
expect "--rope-scaling yarn:4:16:1.1386294361119891:32:1:1 with --fused-proj: Phi3Config (model_type phi3) takes no linear, llama3, yarn" \
  train --arch llama --fused-proj --rope-scaling yarn:4:16 --data "$data"
expect "--rope-scaling longrope (2 factors, original 16 positions, attention 1.2): longrope is Phi-3's (--fused-proj" \
  train --arch llama --rope-scaling longrope:16:1.2:1,2:3,4 --data "$data"
expect "--rope-scaling longrope (2 factors, original 16 positions, attention 1.2): heads of 16 need 8 factors" \
  train --arch llama --fused-proj --rope-scaling longrope:16:1.2:1,2:3,4 --data "$data"
expect "--rope-scaling 'longrope:16:1.2:1,2:3': expected longrope:ORIGINAL_POSITIONS:ATTENTION_FACTOR" \
  train --arch llama --fused-proj --rope-scaling longrope:16:1.2:1,2:3 --data "$data"
expect "--fused-proj is a llama option (--arch llama)" memory --fused-proj
# --sliding-window W (transformers' sliding_window): an integer >= 1, llama only (GPT-2 has no window)
expect "--sliding-window: 0 is out of range, expected 1..1073741824" train --arch llama --sliding-window 0 --data "$data"
expect "--sliding-window: -3 is out of range, expected 1..1073741824" train --arch llama --sliding-window -3 --data "$data"
expect "--sliding-window: expected an integer, got '8.5'" train --arch llama --sliding-window 8.5 --data "$data"
expect "--sliding-window: expected an integer, got 'wide'" train --arch llama --sliding-window wide --data "$data"
expect "--sliding-window: missing value" train --arch llama --data "$data" --sliding-window
expect "--sliding-window 8 is a llama option (--arch llama): GPT-2 attends to its whole causal prefix (transformers' GPT-2 has no sliding window)" \
  train --sliding-window 8 --data "$data"
expect "--sliding-window 2047 is a llama option (--arch llama)" train --arch gpt2 --sliding-window 2047 --data "$data"
# --rotary-dim R (transformers' partial_rotary_factor R/d): even, 2..the head dim, llama only (GPT-2 has no RoPE);
# a longrope scaling then has R/2 factors
expect "--rotary-dim: 0 is out of range, expected 2..65536" train --arch llama --rotary-dim 0 --data "$data"
expect "--rotary-dim: expected an integer, got '0.75'" train --arch llama --rotary-dim 0.75 --data "$data"
expect "--rotary-dim: missing value" train --arch llama --data "$data" --rotary-dim
expect "--rotary-dim 7: expected an even number of dims from 2 to the head dim 16 (RoPE rotates pairs j, j + R/2 of each head's first R dims)" \
  train --arch llama --hidden 64 --heads 4 --rotary-dim 7 --data "$data"
expect "--rotary-dim 18: expected an even number of dims from 2 to the head dim 16" \
  train --arch llama --hidden 64 --heads 4 --rotary-dim 18 --data "$data"
expect "--rotary-dim 130: expected an even number of dims from 2 to the head dim 128" \
  train --arch llama --hidden 64 --heads 4 --head-dim 128 --rotary-dim 130 --data "$data"
expect "--rotary-dim 8 is a llama option (--arch llama): GPT-2 has learned positions, no RoPE" train --rotary-dim 8 --data "$data"
expect "--rotary-dim 8 is a llama option (--arch llama)" train --arch gpt2 --rotary-dim 8 --data "$data"
expect "--rope-scaling longrope (8 factors, original 16 positions, attention 1.2): --rotary-dim 12 needs 6 factors (one per rotated frequency, R/2)" \
  train --arch llama --fused-proj --hidden 64 --heads 4 --rotary-dim 12 \
  --rope-scaling longrope:16:1.2:1,1,1,1,1,1,1,1:2,2,2,2,2,2,2,2 --data "$data"
expect "--gelu-bits: --arch llama has no GeLU" train --arch llama --gelu-bits 2 --data "$data"
expect "--tempo gelu: --arch llama has no GeLU" train --arch llama --tempo gelu --data "$data"
expect "--rope-theta: 0 is out of range" train --arch llama --rope-theta 0 --data "$data"
expect "--rope-scaling 'yarn:2': expected yarn:FACTOR:ORIGINAL_POSITIONS or yarn:FACTOR:ORIGINAL_POSITIONS:ATTENTION_FACTOR:BETA_FAST:BETA_SLOW:TRUNCATE" \
  train --arch llama --rope-scaling yarn:2 --data "$data"
expect "--rope-scaling 'ntk:2': expected none, linear:FACTOR, llama3:FACTOR:LOW:HIGH:ORIGINAL_POSITIONS, longrope:" \
  train --arch llama --rope-scaling ntk:2 --data "$data"
expect "--rope-scaling 'dynamic:2': expected dynamic:FACTOR:MAX_POSITIONS (two numbers)" \
  train --arch llama --rope-scaling dynamic:2 --data "$data"
expect "--rope-scaling dynamic:2:16: dynamic NTK scaling needs more than 2 rotated dims (its exponent is D/(D-2)); heads of 2 rotate 2" \
  train --arch llama --hidden 64 --heads 32 --head-dim 2 --rope-scaling dynamic:2:16 --data "$data"
expect "--rope-scaling 'llama3:8:4:1:8192': RoPE high_freq_factor 1: expected above low_freq_factor 4" \
  train --arch llama --rope-scaling llama3:8:4:1:8192 --data "$data"
expect "--rope-scaling is a llama option" train --rope-scaling linear:2 --data "$data"
expect "--ffn-hidden: 0 is out of range" train --arch llama --ffn-hidden 0 --data "$data"
expect "--seq: -5 is out of range" train --seq -5 --data "$data"
expect "--batch: expected an integer, got 'four'" train --batch four --data "$data"
expect "--hidden: expected an integer, got '12x'" train --hidden 12x --data "$data"
expect "--dropout: 1 is out of range"  train --dropout 1 --data "$data"
expect "--lr: expected a number, got 'fast'" train --lr fast --data "$data"
expect "--steps: 0 is out of range" train --steps 0 --data "$data"
expect "--grad-accum: 0 is out of range" train --grad-accum 0 --data "$data"
expect "--threads: 0 is out of range" train --threads 0 --data "$data"
expect "--vocab 100 is too small" train --vocab 100 --data "$data"
expect "--data: cannot read '$dir/missing.txt'" train --data "$dir/missing.txt"
expect "--data: '$dir/empty.txt' is empty" train --data "$dir/empty.txt"
expect "--data: '$dir' is not a regular file" train --data "$dir"
expect "--seq 64 is longer than the data" train --seq 64 --data "$dir/small.txt"
expect "--log: cannot write '$dir/no/such/dir/log'" train --log "$dir/no/such/dir/log" --data "$data"
expect "unknown option '--bogus'" train --bogus 3
expect "--steps: missing value" train --data "$data" --steps
expect "unexpected argument 'extra'" train --data "$data" extra
expect "--min-lr 0.1 is above --lr" train --lr 0.01 --min-lr 0.1 --data "$data"
expect "unknown command 'trian'" trian
expect "--precision: expected fp32 or bf16, got 'fp16'" peak --precision fp16
expect "--precision: missing value" peak --precision
# Mixed precision: a bad name and fp32 storage asked with it are refused before training, naming why.
expect "--precision: unknown precision 'fp16' (expected fp32 or bf16)" train --precision fp16 --data "$data"
expect "--act-dtype fp32 with --precision bf16" train --bf16 --act-dtype fp32 --data "$data"
# Below AVX-512 (held there by ONEDNN_MAX_CPU_ISA) oneDNN has no bf16 matmul: it runs widened to fp32
# sgemm, says why, and computes what the oneDNN path computes (losses within bf16 GEMM rounding).
bf16_run() { "$ctron" train --bf16 --layers 1 --hidden 32 --heads 2 --seq 16 --batch 2 --steps 2 --threads 1 \
             --no-ledger --eval-batches 1 --peak-gflops 100 --data "$data" --log "$1" 2>&1; }
tmpd=$(mktemp -d); trap 'rm -rf "$tmpd"' EXIT
out=$(ONEDNN_MAX_CPU_ISA=AVX2 bf16_run "$tmpd/widened.jsonl"); rc=$?
if [ $rc -eq 0 ] && grep -q "the bf16 GEMMs run widened to fp32 sgemm" <<< "$out"; then pass=$((pass+1))
else fail=$((fail+1)); echo "FAIL: widened bf16 -> rc $rc, output: $out"; fi
if bf16_run "$tmpd/default.jsonl" > /dev/null && /usr/bin/python3 - "$tmpd/widened.jsonl" "$tmpd/default.jsonl" <<'PY'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:3])
sys.exit(0 if len(a) == len(b) == 2 and all(abs(x - y) <= 1e-3 * abs(y) for x, y in zip(a, b)) else 1)
PY
then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: widened bf16 losses differ from the default path's"; fi
# Held to AVX-512 without BF16 (where the CPU has AVX-512): it runs, emulated by oneDNN, and says so.
if grep -qw avx512f /proc/cpuinfo; then
  out=$(ONEDNN_MAX_CPU_ISA=AVX512_CORE "$ctron" train --bf16 --layers 1 --hidden 32 --heads 2 --seq 16 --batch 2 \
        --steps 1 --threads 1 --no-ledger --eval-batches 1 --peak-gflops 100 --data "$data" 2>&1); rc=$?
  if [ $rc -eq 0 ] && grep -q "the bf16 GEMMs run emulated" <<< "$out"; then pass=$((pass+1))
  else fail=$((fail+1)); echo "FAIL: emulated bf16 -> rc $rc, output: $out"; fi
else
  echo "note: this CPU has no AVX-512: oneDNN's emulated bf16 path cannot be checked here"
fi
expect "--recompute: unknown policy 'partial'" train --recompute partial --data "$data"
expect "--recompute-method: unknown method 'random'" train --recompute full --recompute-method random --data "$data"
expect "--recompute-num-layers 3 must be between 1 and the layer count 2" train --layers 2 --recompute full --recompute-num-layers 3 --data "$data"
expect "--recompute-layers: layer 3 is not covered" train --layers 4 --recompute-layers 0-2:full --data "$data"
expect "--recompute-layers: layer 1 is listed twice" train --layers 4 --recompute-layers 0-1:full,1-3:none --data "$data"
expect "--recompute-layers: range 2-7 is outside layers 0-3" train --layers 4 --recompute-layers 0-1:full,2-7:none --data "$data"
expect "--recompute-layers: cannot parse '0-1:most'" train --layers 4 --recompute-layers 0-1:most,2-3:none --data "$data"
expect "--dropout-masks: unknown mode 'nibbles'" train --dropout-masks nibbles --data "$data"
expect "--act-dtype: unknown type 'fp8'" train --act-dtype fp8 --data "$data"
expect "--data-order: unknown order 'backwards'" train --data-order backwards --data "$data"
# --help is not an error
help=$("$ctron" train --help); if grep -q -- "--grad-accum" <<< "$help"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: train --help"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
