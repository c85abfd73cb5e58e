#!/usr/bin/env bash
# make fuzz: builds the libFuzzer targets with clang (ASan + UBSan) in build-fuzz/ and runs each
# for FUZZ_SECONDS (default 60) on its seed corpus (tests/fuzz/corpus/<target>, read only; new
# inputs go to build-fuzz/corpus/<target>). Prints executions per target; a crash stops with the
# input saved under build-fuzz/crashes/ — add it to tests/fuzz/regress/<target>/ with the fix.
# FUZZ_SEED (default 1) makes CI's short runs repeat the same exploration; FUZZ_SEED=0 draws one.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-60}
targets=${FUZZ_TARGETS:-"tokenfile bpe_json hf_tokenizer safetensors ckpt_state ckpt_manifest recompute_layers train_cli hf_config hf_index"}
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DCTRON_FUZZ=ON > /dev/null
cmake --build build-fuzz -j "$(nproc)" > /dev/null
mkdir -p build-fuzz/crashes
status=0
for t in $targets; do
  work=$PWD/build-fuzz/corpus/$t   # absolute: a target may chdir (train_cli runs in a scratch directory)
  mkdir -p "$work"
  log=build-fuzz/fuzz_$t.log
  if ASAN_OPTIONS=detect_leaks=1 build-fuzz/tests/fuzz/fuzz_$t -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
       -seed="${FUZZ_SEED:-1}" \
       -max_len=65536 -print_final_stats=1 -close_fd_mask=3 -artifact_prefix="$PWD/build-fuzz/crashes/$t-" "$work" "$PWD/tests/fuzz/corpus/$t" \
       > "$log" 2>&1; then
    runs=$(grep -o "stat::number_of_executed_units: *[0-9]*" "$log" | grep -o "[0-9]*$" || echo "?")
    cov=$(grep -o "cov: [0-9]*" "$log" | tail -1 | grep -o "[0-9]*" || echo "?")
    printf "fuzz %-17s %8s runs in %ss, coverage %s edges, corpus %s inputs: no crash\n" "$t" "$runs" "$secs" "$cov" \
      "$(ls "$work" | wc -l)"
  else
    echo "fuzz $t: CRASH, see $log; inputs: $(ls build-fuzz/crashes/ | grep "^$t-" | tr '\n' ' ')"
    tail -30 "$log"
    status=1
  fi
done
exit $status
