#!/usr/bin/env bash
# Everything issue 30 asks of one device call, in stages that each fit what time is left:
#   0. the machine: GPU, driver, CUDA, torch;
#   1. unpack .gpu/bundle.tar.xz (made here by scripts/gpu_bundle.sh) and check every library resolves;
#   2. `ctest -L cuda`: every kernel against the CPU backend, on the GPU;
#   3. the whole model on the GPU against the CPU (tests/test_cuda_emu_model.sh with the real device in
#      place of the emulation): losses, weights and moments within tolerance, bitwise recompute across
#      policies, ledger == prediction, exact resume;
#   c. where a row of stage 3 differs (GPU_COND_ROWS): 1 step against 3, every step's loss, the worst tensors;
#   9. kernel times: CUDA events after every launch, the device time per launcher and GEMM shape of a
#      GPT-2 124M and 1.5B step (CTRON_KERNEL_TIMES; works where ncu's counters are refused;
#      GPU_KT_CONFIGS=llama-bench,lora-8b-2l ... for others: space- or comma-separated gpu_bench configs;
#      GPU_KT_SPLIT=1: each also with gemm.cu's opt-in split-K on, side by side; GPU_KT_COPIES=1: each also
#      with the kernels on the arena's bf16 copies off, CTRON_BF16_COPIES=0),
#      then torch.compile's kernels on GPT-2 124M (torch.profiler; GPU_KT_PEERS="compile eager", or "none")
#      and both by category (scripts/kernel_categories.py);
#   4. compute-sanitizer memcheck and racecheck on the attention and flash kernel tests;
#   6. the paper's Table 4: one layer of the 22B model as TP rank 0 of 8 (bench/table4.py, --tp-solo),
#      none / selective / full, standard and flash attention (run before 5, whose bench takes what is left);
#   8. ncu's time for every kernel of a GPT-2 124M step, summed by name
#      (scripts/gpu_profile.py; GPU_PROFILE_ARGS: other train flags);
#   7. (not in the default stages: a call of its own) bench/longest_seq.py, the longest sequence GPT-2 1.5B
#      trains on the GPU: ctron's budget planner against PyTorch with full checkpointing;
#   m. (not in the default stages: a call of its own) bench/memo_bench.py --device cuda: MEMO, full recompute,
#      --offload and selective + mini-seq at 4 GiB of activations, config S (issue 29);
#   5. bench/gpu_bench.py: ctron against PyTorch eager (SDPA), torch.compile and llm.c, GPT-2 124M and 1.5B
#      (GPU_BENCH_CONFIGS picks others: llama-bench, llama-8b-2l, lora-8b-2l for a second call);
# then one summary table. Everything lands in $OUT (the device tool brings it back).
# usage (device tool): command "bash scripts/gpu_check.sh", carry [".gpu", "data"], timeout_s 600.
#        GPU_CHECK_PY (default python3): the Python with numpy for stages 3 and c;
#        GPU_CHECK_LIMIT_S (default 540) bounds the whole run; GPU_CHECK_STAGES (default 012394685) picks stages;
#        a second call, e.g. GPU_CHECK_STAGES=015 GPU_BENCH_CONFIGS=llama-bench,llama-8b-2l,lora-8b-2l.
set -uo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
limit=${GPU_CHECK_LIMIT_S:-540}
stages=${GPU_CHECK_STAGES:-012394685}
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
# The device tool brings back at most 8 files: the logs travel as one archive, refreshed after each stage.
logs=$(mktemp -d)
save_logs() { tar -czf "$out/logs.tar.gz" -C "$logs" . 2>/dev/null; }
trap save_logs EXIT
summary="$out/summary.md"
: > "$summary"
left() { echo $(( limit - ($(date +%s) - t0) )); }
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$3" | tee -a "$summary"; }
want() { [[ $stages == *"$1"* ]]; }
export OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1
py=${GPU_CHECK_PY:-python3}   # the Python with numpy that compare_runs.py needs (stages 3 and c)

printf '| stage | result | detail |\n|---|---|---|\n' | tee -a "$summary"

# 0. The machine.
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
nvcc_v=$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)
torch_v=$(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null)
row "machine" "${gpu:-no GPU visible}" "nvcc ${nvcc_v:-none}; torch ${torch_v:-none}; $(nproc) CPUs"
# GPU_CHECK_DRY=1 goes on without a GPU: a rehearsal of the bundle and the stages' plumbing on the
# machine that made the bundle (the cuda tests then skip, the device runs exit 2).
if [ -z "$gpu" ] && [ "${GPU_CHECK_DRY:-0}" != 1 ]; then
  echo "gpu_check: no GPU visible (nvidia-smi): nothing to check" >&2; exit 1
fi

# Unpacks .gpu/bundle.tar.xz, points its CTest files here and checks every library resolves (exit 1 if not).
unpack_bundle() {
python3 - <<'EOF' || { row "bundle" "FAIL" "could not unpack .gpu/bundle.tar.xz"; exit 1; }
import tarfile
with tarfile.open(".gpu/bundle.tar.xz") as t:
    t.extractall(".", filter="tar") if hasattr(tarfile, "data_filter") else t.extractall(".")
EOF
src_root=$(cat .gpu/source_root)
# CTest files name the machine where they were made: point them here.
find build-gpu -name CTestTestfile.cmake -exec sed -i "s#${src_root}#${PWD}#g" {} +
cuda_libs=$(python3 - <<'EOF' 2>/dev/null
import glob, os, site
dirs = set()
for base in site.getsitepackages():
    for lib in glob.glob(os.path.join(base, "nvidia", "*", "lib")):
        dirs.add(lib)
print(":".join(sorted(dirs)))
EOF
)
export LD_LIBRARY_PATH="$PWD/.gpu/lib:/usr/local/cuda/lib64:${cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
missing=$(for b in build-gpu/ctron build-gpu/tests/test_cuda_*; do ldd "$b" | grep 'not found'; done | sort -u)
if [ -n "$missing" ]; then row "bundle" "FAIL" "unresolved: $(echo "$missing" | tr '\n' ' ')"; exit 1; fi
row "bundle" "ok" "commit $(cut -c1-10 .gpu/commit); $(ls .gpu/lib | wc -l) carried libraries"
}

# 1. The bundle. GPU_CHECK_CTRON=BINARY skips it and runs that ctron (tests/test_gpu_check_emu.sh: the
#    emulated GPU's ctron-emu, with GPU_CHECK_DRY=1, rehearses the stages that need no bundle).
if [ -n "${GPU_CHECK_CTRON:-}" ]; then
  ctron=$GPU_CHECK_CTRON
  row "bundle" "skipped" "GPU_CHECK_CTRON=$ctron"
elif [ ! -f .gpu/bundle.tar.xz ]; then
  row "bundle" "MISSING" "run scripts/gpu_bundle.sh here and carry .gpu"; exit 1
else
  unpack_bundle
  ctron=$PWD/build-gpu/ctron
fi
"$ctron" train --device cuda --layers 1 --hidden 64 --heads 4 --seq 32 --batch 2 --steps 1 --peak-gflops 100 \
  --data data/kjv.txt > "$logs/smoke.log" 2>&1
rc=$?
row "smoke: 1 step on cuda" "$([ $rc -eq 0 ] && echo ok || echo "FAIL (exit $rc)")" "$(grep -m1 -o 'the device counts[^)]*)' "$logs/smoke.log" || tail -1 "$logs/smoke.log")"

# 2. Every kernel test on the GPU.
if want 2 && [ "$(left)" -gt 60 ]; then
  budget=$(( $(left) > 200 ? 180 : $(left) - 20 ))
  # -V: every test's output in the log, so the timed cases (test_cuda_flash's TFLOP/s) come back too
  (cd build-gpu && timeout "$budget" ctest -L '^cuda$' -j 4 --timeout 120 -V) > "$logs/ctest_cuda.log" 2>&1
  rc=$?
  res=$(grep -o '[0-9]*% tests passed, [0-9]* tests failed out of [0-9]*' "$logs/ctest_cuda.log")
  skipped=$(grep -c '\*\*\*Skipped' "$logs/ctest_cuda.log")
  row "ctest -L cuda" "$([ $rc -eq 0 ] && echo ok || echo "FAIL (exit $rc)")" "${res:-no result}; $skipped skipped"
  grep -E '^[0-9]+/[0-9]+ Test.*(Failed|\*\*\*|Timeout)|FAIL' "$logs/ctest_cuda.log" | head -20
  grep -o 'timing [^:]*: forward .*' "$logs/ctest_cuda.log" | while IFS= read -r t; do
    row "flash ${t%%:*}" "timed" "${t#*: }"
  done
  save_logs
fi

# 3. The whole model on the GPU against the CPU.
if want 3 && [ "$(left)" -gt 90 ]; then
  budget=$(( $(left) > 240 ? 200 : $(left) - 40 ))
  CT_DEVICE_GRANULE=2097152 CT_DEVICE_LABEL=GPU timeout "$budget" bash tests/test_cuda_emu_model.sh "$ctron" "$ctron" data/kjv.txt "$py" > "$logs/model_vs_cpu.log" 2>&1
  rc=$?
  res=$(tail -1 "$logs/model_vs_cpu.log")
  row "model: GPU vs CPU" "$([ $rc -eq 0 ] && echo ok || echo "FAIL (exit $rc)")" "$res"
  grep '^FAIL' "$logs/model_vs_cpu.log" | head -20
  save_logs
fi

# c. Where a GPU-vs-CPU row's difference comes from (GPU_COND_ROWS: name|flags lines, stage 3's tiny model;
#    default: llama_hd8, the row the second H100 failed at 4.3e-5 in the moments, and its variants): each on
#    the CPU and the GPU for 1 and for 3 steps, every step's loss and the tensors furthest apart
#    (compare_runs.py --worst), and the GPU's 3 steps twice (the GPU must repeat itself bit for bit). After one
#    step the moments are the gradient (m = 0.1·g, v = 0.001·g²): a kernel that computes the wrong thing
#    differs there already, while rounding that AdamW amplifies grows only with the steps.
if want c && [ "$(left)" -gt 60 ]; then
  cond=$(mktemp -d)
  cond_base=(train --data data/kjv.txt --layers 2 --hidden 64 --heads 4 --seq 32 --batch 2 --seed 7 --threads 1
             --eval-batches 1 --peak-gflops 100)
  cond_rows=${GPU_COND_ROWS:-"hd8|--arch llama --kv-heads 1 --head-dim 8 --recompute selective --dropout 0.1
hd8_nodrop|--arch llama --kv-heads 1 --head-dim 8 --recompute selective --dropout 0
hd8_none|--arch llama --kv-heads 1 --head-dim 8 --dropout 0.1
hd8_kv4|--arch llama --kv-heads 4 --head-dim 8 --recompute selective --dropout 0.1
hd8_flash|--arch llama --kv-heads 1 --head-dim 8 --attention flash --dropout 0.1
hd16|--arch llama --kv-heads 1 --recompute selective --dropout 0.1"}
  while IFS='|' read -r name flags; do
    [ "$(left)" -gt 40 ] || break
    for steps in 1 3; do
      for run in cpu cuda cuda_again; do
        [ "$run" = cuda_again ] && [ "$steps" = 1 ] && continue
        # shellcheck disable=SC2086
        OMP_NUM_THREADS=1 "$ctron" "${cond_base[@]}" $flags --steps "$steps" --eval-every "$steps" \
          --device "${run%_again}" --ckpt-dir "$cond/${name}_${steps}_$run" --log "$cond/${name}_${steps}_$run.jsonl" \
          > "$cond/${name}_${steps}_$run.out" 2>&1 || echo "cond: $name $run $steps steps: exit $?" >> "$logs/cond.log"
      done
      last=$(printf 'step_%08d' "$steps")
      "$py" tests/compare_runs.py "$cond/${name}_${steps}_cpu.jsonl" "$cond/${name}_${steps}_cpu/$last" \
        "$cond/${name}_${steps}_cuda.jsonl" "$cond/${name}_${steps}_cuda/$last" --steps "$steps" --worst 4 \
        --name "$name, $steps step(s)" >> "$logs/cond.log" 2>&1
      row "cond $name, $steps step(s)" "GPU vs CPU" "$(tail -1 "$logs/cond.log" | sed 's/^[^:]*: //')"
    done
    same=$(for f in model optimizer; do cmp -s "$cond/${name}_3_cuda/step_00000003/$f.safetensors" \
             "$cond/${name}_3_cuda_again/step_00000003/$f.safetensors" && echo "$f same" || echo "$f DIFFERS"; done)
    row "cond $name, GPU twice" "$(echo "$same" | grep -q DIFFERS && echo FAIL || echo ok)" "$(echo $same)"
    save_logs
  done <<< "$cond_rows"
  rm -rf "$cond"
fi

# 9. Kernel times (CTRON_KERNEL_TIMES, src/backend/cuda/cuda_profile.c): CUDA events after every launch,
#    the device's time per launcher and GEMM shape averaged over steps 2..5, in gpu_bench's setting (bf16,
#    flash, no recompute) for GPU_KT_CONFIGS (default gpt2-124m,gpt2-1.5b; any gpu_bench config, e.g.
#    llama-bench,lora-8b-2l). Needs no hardware counters (ncu may be refused).
# kt_variant CFG SUFFIX WHAT LABEL_DEFAULT LABEL_VARIANT VAR=VALUE: kt_cmd again with VAR=VALUE in its environment,
# its kernel times beside the default run's by category.
kt_variant() {
  local cfg=$1 suffix=$2 what=$3 base_label=$4 label=$5 setting=$6 rc
  [ "$(left)" -gt 45 ] || return 0
  env "$setting" CTRON_KERNEL_TIMES="$out/kernel_times_${cfg}_$suffix.json" timeout $(( $(left) - 30 )) \
    "${kt_cmd[@]}" --no-ledger > "$logs/kernel_times_${cfg}_$suffix.log" 2>&1
  rc=$?
  row "kernel times $cfg, $what" "$([ $rc -eq 0 ] && echo ok || echo "FAIL (exit $rc)")" \
    "$(grep -m1 '^kernel times' "$logs/kernel_times_${cfg}_$suffix.log")"
  [ $rc -eq 0 ] && python3 scripts/kernel_categories.py "$base_label=$out/kernel_times_$cfg.json" \
    "$label=$out/kernel_times_${cfg}_$suffix.json" | tee -a "$summary"
  return 0
}

if want 9 && [ "$(left)" -gt 60 ]; then
  GPU_KT_CONFIGS=${GPU_KT_CONFIGS:-gpt2-124m,gpt2-1.5b}
  for cfg in ${GPU_KT_CONFIGS//,/ }; do
    [ "$(left)" -gt 45 ] || break
    mapfile -t kt_cmd < <(python3 bench/gpu_bench.py --ctron "$ctron" --data data/kjv.txt --steps 6 --print-cmd "$cfg")
    CTRON_KERNEL_TIMES="$out/kernel_times_$cfg.json" timeout $(( $(left) - 30 )) "${kt_cmd[@]}" --no-ledger \
      > "$logs/kernel_times_$cfg.log" 2>&1
    rc=$?
    row "kernel times $cfg" "$([ $rc -eq 0 ] && echo ok || echo "FAIL (exit $rc)")" \
      "$(grep -m1 '^kernel times' "$logs/kernel_times_$cfg.log")"
    sed -n '/^| what/,$p' "$logs/kernel_times_$cfg.log" | grep -v '^done' | head -32 | tee -a "$summary"
    # GPU_KT_SPLIT=1: the same run with gemm.cu's opt-in split-K on (CTRON_GEMM_SPLIT_K=1); GPU_KT_COPIES=1: with
    # the kernels on the arena's bf16 copies off (CTRON_BF16_COPIES=0, fp32 values unpacked and rounded again,
    # the same bits). Each beside the default run, by category.
    [ "${GPU_KT_SPLIT:-0}" = 1 ] && kt_variant "$cfg" split "split-K on" no-split split CTRON_GEMM_SPLIT_K=1
    [ "${GPU_KT_COPIES:-0}" = 1 ] && kt_variant "$cfg" nocopies "bf16 copies off" copies copies-off CTRON_BF16_COPIES=0
    save_logs
  done
  # The peer's kernels over the same steps (torch.profiler), and both by category: where the gap is.
  for peer in ${GPU_KT_PEERS:-compile}; do
    cfg=gpt2-124m
    [ "$peer" != none ] && [ "$(left)" -gt 90 ] && [ -f "$out/kernel_times_$cfg.json" ] || break
    timeout $(( $(left) - 30 )) python3 bench/gpu_bench.py --peer "$peer" --config "$cfg" --steps 6 \
      --kernel-times "$out/kernel_times_${cfg}_torch-$peer.json" > "$logs/kernel_times_${cfg}_torch-$peer.log" 2>&1
    rc=$?
    row "kernel times $cfg torch-$peer" "$([ $rc -eq 0 ] && echo ok || echo "FAIL (exit $rc)")" "by category below"
    [ $rc -eq 0 ] && python3 scripts/kernel_categories.py "ctron=$out/kernel_times_$cfg.json" \
      "torch-$peer=$out/kernel_times_${cfg}_torch-$peer.json" | tee -a "$summary"
    save_logs
  done
fi

# 4. compute-sanitizer on the attention and flash kernels.
if want 4 && command -v compute-sanitizer > /dev/null 2>&1; then
  for t in test_cuda_attention test_cuda_flash; do
    for tool in memcheck racecheck; do
      # racecheck needs longer: on the second H100 it reached 271 of test_cuda_flash's 378 checks in 90 s.
      tool_s=$([ "$tool" = racecheck ] && echo "${GPU_RACECHECK_S:-150}" || echo 90)
      [ "$(left)" -gt $((tool_s + 60)) ] || { row "sanitizer $tool $t" "skipped" "time"; continue; }
      # The tools run the kernels 10-100x slower: the cases up to s = 256 (every tile shape and path), no
      # timed cases (on the first H100 memcheck took 95 s for test_cuda_flash's full list, racecheck
      # did not finish it in 90 s).
      timeout "$tool_s" env CT_CUDA_TEST_SMALL=1 compute-sanitizer --tool "$tool" --error-exitcode 9 "build-gpu/tests/$t" \
        > "$logs/san_${tool}_$t.log" 2>&1
      rc=$?
      row "sanitizer $tool $t" "$([ $rc -eq 0 ] && echo ok || echo "FAIL (exit $rc)")" \
        "$(grep -m1 -o 'ERROR SUMMARY: [0-9]* error[s]*\|RACECHECK SUMMARY: [0-9]* hazard[s]*[^\n]*' "$logs/san_${tool}_$t.log")"
    done
  done
fi

# 6. Table 4 (before the peers' bench, which takes whatever time is left).
if want 6 && [ "$(left)" -gt ${GPU_TABLE4_S:-240} ]; then
  timeout ${GPU_TABLE4_S:-$(( $(left) > 400 ? 150 : 90 ))} python3 bench/table4.py --ctron "$ctron" --device cuda \
    --precision bf16 --steps ${GPU_TABLE4_STEPS:-6} --out "$out/table4.json" > "$logs/table4.log" 2>&1
  rc=$?
  row "table 4" "$([ $rc -eq 0 ] && echo ok || echo "FAIL (exit $rc)")" "one 22B layer, TP rank 0 of 8; $out/table4.json"
  sed -n '/^| attention/,$p' "$logs/table4.log" | tee -a "$summary"
  save_logs
fi

# m. MEMO against full recompute, --offload and selective + mini-seq at the issue's own 4 GiB of bf16
#    activations on config S (issue 29; bench/memo_bench.py --device cuda: each technique's longest
#    sequence timed, then all at equal memory, α from the planner with this GPU's measured host link and
#    GEMM rate). A call of its own: GPU_CHECK_STAGES=01m. GPU_MEMO_ARGS: more memo_bench flags (the
#    emulated rehearsal's small model and budget).
if want m && [ "$(left)" -gt 120 ]; then
  # shellcheck disable=SC2086
  timeout $(( $(left) - 20 )) python3 bench/memo_bench.py --device cuda --ctron "$ctron" --threads 1 --steps 3 \
    --out "$out/memo_gpu" ${GPU_MEMO_ARGS:-} > "$logs/memo_gpu.log" 2>&1
  rc=$?
  row "MEMO at 4 GiB (S, bf16)" "$([ $rc -eq 0 ] && echo ok || echo "FAIL (exit $rc)")" "$out/memo_gpu.md"
  sed -n '/^| technique | longest/,/^$/p' "$logs/memo_gpu.log" | tee -a "$summary"
  save_logs
fi

# 7. The longest sequence (GPU_CHECK_STAGES=017, a call of its own).
if want 7 && [ "$(left)" -gt 120 ]; then
  timeout $(( $(left) - 20 )) python3 bench/longest_seq.py --ctron "$ctron" --out "$out/longest.json" \
    > "$logs/longest.log" 2>&1
  rc=$?
  row "longest sequence" "$([ $rc -eq 0 ] && echo ok || echo "FAIL (exit $rc)")" "GPT-2 1.5B, b 1; $out/longest.json"
  sed -n '/^| implementation/,$p' "$logs/longest.log" | tee -a "$summary"
  save_logs
fi

# 8. Where the step's time goes (GPU_CHECK_STAGES=8..., a call of its own or after 2): every kernel of a
#    GPT-2 124M run of 2 steps timed alone by Nsight Compute, summed by name (scripts/gpu_profile.py).
if want 8 && command -v ncu > /dev/null 2>&1 && [ "$(left)" -gt 90 ]; then
  prof=(train --device cuda --precision bf16 --attention flash --dropout 0 --data data/kjv.txt --layers 12
        --hidden 768 --heads 12 --seq 1024 --batch 16 --vocab 50304 --steps 2 --eval-every 0 --eval-batches 1
        --peak-gflops 100 --no-ledger)
  # shellcheck disable=SC2206
  [ -n "${GPU_PROFILE_ARGS:-}" ] && prof=(train --device cuda --data data/kjv.txt --steps 2 --eval-every 0 \
    --eval-batches 1 --peak-gflops 100 --no-ledger $GPU_PROFILE_ARGS)
  timeout $(( $(left) - 30 )) ncu --clock-control none --metrics gpu__time_duration.sum --print-units base --csv \
    --log-file "$logs/ncu.csv" "$ctron" "${prof[@]}" > "$logs/profiled_run.log" 2>&1
  rc=$?
  python3 scripts/gpu_profile.py "$logs/ncu.csv" --steps 2 --json "$out/profile.json" > "$logs/profile.md" 2>&1
  prc=$?
  row "kernel profile (ncu)" "$([ $rc -eq 0 ] && [ $prc -eq 0 ] && echo ok || echo "FAIL (ncu exit $rc, table $prc)")" \
    "$(head -1 "$logs/profile.md")"
  sed -n '/^| kernel/,$p' "$logs/profile.md" | head -27 | tee -a "$summary"
  save_logs
fi

# 5. Speed against the peers.
if want 5 && [ "$(left)" -gt 60 ]; then
  python3 bench/gpu_bench.py --ctron "$ctron" --data data/kjv.txt --budget-s $(( $(left) - 15 )) \
    --configs "${GPU_BENCH_CONFIGS:-gpt2-124m,gpt2-1.5b}" --out "$out/gpu_bench.json" > "$logs/gpu_bench.log" 2>&1
  rc=$?
  row "bench" "$([ $rc -eq 0 ] && echo ok || echo "FAIL (exit $rc)")" "table below; $out/gpu_bench.json"
  sed -n '/^| config/,$p' "$logs/gpu_bench.log" | tee -a "$summary"
  tail -5 "$logs/gpu_bench.log"
fi
echo "gpu_check: $(( $(date +%s) - t0 )) s"
