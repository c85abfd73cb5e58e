#!/usr/bin/env bash
# scripts/gpu_check.sh rehearsed on the emulated GPU (GPU_CHECK_DRY=1, GPU_CHECK_CTRON=ctron-emu): the
# smoke step, stage c (a row after 1 and 3 steps on both devices), stage 9 (kernel times in gpu_bench's
# setting, bench/gpu_bench.py --print-cmd; GPU_KT_SPLIT=1: also with the opt-in split-K on; GPU_KT_COPIES=1:
# also with the kernels on the bf16 copies off) and stage m
# (bench/memo_bench.py --device cuda, a small model) land in the summary and in $OUT as a GPU call would
# bring them back. GPU time is rare: a stage that breaks
# should break here. usage: test_gpu_check_emu.sh CTRON_EMU [PYTHON]   (run from anywhere; data/kjv.txt needed)
set -uo pipefail
emu=$1
py=${2:-python3}   # with numpy (compare_runs.py, stage c)
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }

OUT="$dir/out" GPU_CHECK_DRY=1 GPU_CHECK_CTRON="$emu" GPU_CHECK_PY="$py" GPU_CHECK_STAGES=0c9m GPU_KT_CONFIGS=gpt2-tiny,llama-tiny GPU_KT_SPLIT=1 GPU_KT_COPIES=1 \
  GPU_COND_ROWS="hd8|--arch llama --kv-heads 1 --head-dim 8 --recompute selective --dropout 0.1" \
  GPU_MEMO_ARGS="--model 2,64,4,256 --budget 1536KiB --host-gbps 50 --gemm-gflops 700000 --gpu-seqs 4096" \
  GPU_CHECK_LIMIT_S=280 OMP_NUM_THREADS=1 bash "$root/scripts/gpu_check.sh" > "$dir/check.out" 2>&1
ec=$?
sum="$dir/out/summary.md"
check '[ $ec -eq 0 ]' "gpu_check exit $ec: $(tail -5 "$dir/check.out")"
check 'grep -q "^| bundle | skipped | GPU_CHECK_CTRON=" "$sum"' "no 'bundle skipped' row: $(cat "$sum")"
check 'grep -q "^| smoke: 1 step on cuda | ok |" "$sum"' "the smoke step: $(grep smoke "$sum")"
for cfg in gpt2-tiny llama-tiny; do
  check 'grep -q "^| kernel times $cfg | ok | kernel times (CTRON_KERNEL_TIMES), steps 2..5 (4 averaged)" "$sum"' \
    "$cfg: no ok row with steps 2..5: $(grep "kernel times $cfg" "$sum")"
  check '[ -f "$dir/out/kernel_times_$cfg.json" ]' "$cfg: kernel_times_$cfg.json not in \$OUT"
done
# GPU_KT_SPLIT=1: each config again with CTRON_GEMM_SPLIT_K=1, both by category.
for cfg in gpt2-tiny llama-tiny; do
  check 'grep -q "^| kernel times $cfg, split-K on | ok | kernel times (CTRON_KERNEL_TIMES)" "$sum" && [ -f "$dir/out/kernel_times_${cfg}_split.json" ]' \
    "$cfg: no split-K-on row or JSON: $(grep "kernel times $cfg, split" "$sum")"
done
check 'grep -q "^| category | no-split ms/step | share | split ms/step" "$sum"' "no no-split / split category table"
# GPU_KT_COPIES=1: each config again with CTRON_BF16_COPIES=0, both by category.
for cfg in gpt2-tiny llama-tiny; do
  check 'grep -q "^| kernel times $cfg, bf16 copies off | ok | kernel times (CTRON_KERNEL_TIMES)" "$sum" && [ -f "$dir/out/kernel_times_${cfg}_nocopies.json" ]' \
    "$cfg: no copies-off row or JSON: $(grep "kernel times $cfg, bf16" "$sum")"
done
check 'grep -q "^| category | copies ms/step | share | copies-off ms/step" "$sum"' "no copies / copies-off category table"
# Stage c (GPU_COND_ROWS): the row on the CPU and the device after 1 and 3 steps, and the device twice.
check 'grep -q "^| cond hd8, 1 step(s) | GPU vs CPU | loss rel [0-9.e+-]* over 1 steps, model rel L2 " "$sum" && grep -q "^| cond hd8, 3 step(s) | GPU vs CPU | loss rel [0-9.e+-]* over 3 steps" "$sum"' \
  "stage c: $(grep "cond hd8" "$sum")"
check 'grep -q "^| cond hd8, GPU twice | ok | model same optimizer same |" "$sum"' "stage c: the device twice: $(grep "GPU twice" "$sum")"
# grep without -q reads the whole listing: under pipefail, grep -q quitting early kills tar with SIGPIPE
# (exit 141), which failed this check in CI although the log was there.
check 'tar -tzf "$dir/out/logs.tar.gz" | grep "cond.log" > /dev/null' "the logs archive lacks stage c's log"
# GPT-2 tiny (L2): 3·(6L + 1) = 39 GEMMs a step; llama tiny (L2: q, k, v, o, gate, up, down and the head):
# 3·(7L + 1) = 45.
gemms() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('%g' % sum(r['launches'] for r in d['rows'] if r['what'].startswith('gemm ')))" "$1"; }
g=$(gemms "$dir/out/kernel_times_gpt2-tiny.json"); check '[ "$g" = 39 ]' "gpt2-tiny: $g GEMMs a step, expected 39"
g=$(gemms "$dir/out/kernel_times_llama-tiny.json"); check '[ "$g" = 45 ]' "llama-tiny: $g GEMMs a step, expected 45"
check 'tar -tzf "$dir/out/logs.tar.gz" | grep "kernel_times_gpt2-tiny.log" > /dev/null' "the logs archive lacks the stage's log"
# Stage m (bench/memo_bench.py --device cuda) on a 2-layer model in 1.5 MiB: every technique's longest
# sequence, full recompute's the longest (640: its peak grows slowest), MEMO = full recompute there, the
# equal-memory table at --offload all's longest (256), and the planner's prediction (α 0.015625 at 4096).
md="$dir/out/memo_gpu.md"
check 'grep -q "^| MEMO at 4 GiB (S, bf16) | ok |" "$sum"' "stage m: $(grep MEMO "$sum")"
check 'grep -q "^| full recompute | 640 | " "$md" && grep -q "^| memo | 640 | = full recompute | 0 |" "$md"' \
  "stage m: the longest sequences: $(grep -E '^\| (full|memo) ' "$md" | head -2)"
check 'grep -q "^At s = 256, the same budget" "$md" && [ "$(grep -c " | – | [-+][0-9.]* % |$" "$md")" = 4 ]' \
  "stage m: no equal-memory table of four wall-time rows at s = 256"
check 'grep -q "^| 4096 | 0.015625 | 64 | " "$md"' "stage m: the prediction at 4096: $(grep '^| 4096' "$md")"

echo "test_gpu_check_emu: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
