#!/usr/bin/env bash
# Kernel times (CTRON_KERNEL_TIMES, src/backend/cuda/cuda_profile.c) on a CUDA build: the report counts
# every launch of a step exactly, GEMMs by shape with their FLOPs, copies in rows of their own, and its rows add
# up to its total.
# GPT-2 has six linear layers a block (q, k, v, proj, fc, fc2) and the output layer; each runs once
# forward and twice backward (dx, dW): 3·(6L + 1) GEMMs a step, and 2L + 1 LayerNorm forwards.
# usage: test_kernel_times.sh CTRON_WITH_CUDA DATA   (the emulated GPU's ctron-emu, or a GPU's ctron;
# exit 77, a skip, with the reason when no GPU is visible)
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
export OMP_NUM_THREADS=1
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
shape=(train --data "$data" --hidden 64 --heads 4 --seq 32 --batch 2 --seed 7 --threads 1 --device cuda
       --eval-every 0 --eval-batches 1 --peak-gflops 100 --no-ledger)

probe=$("$ctron" "${shape[@]}" --layers 1 --steps 1 --ckpt-dir "$dir/probe" 2>&1)
if [ $? -ne 0 ] && [[ "$probe" == *"no CUDA GPU is visible"* ]]; then
  echo "SKIP: $(grep -m1 'no CUDA GPU' <<< "$probe")"; exit 77
fi

# run LAYERS STEPS PRECISION NAME: the report's JSON in $dir/NAME.json, stderr in $dir/NAME.out
run() {
  CTRON_KERNEL_TIMES="$dir/$4.json" "$ctron" "${shape[@]}" --layers "$1" --steps "$2" --precision "$3" \
    --ckpt-dir "$dir/ck_$4" > "$dir/$4.out" 2>&1
}
# facts NAME L: the checks of one report, as key=value lines
facts() {
  python3 - "$dir/$1.json" "$2" <<'EOF'
import json, re, sys
d = json.load(open(sys.argv[1])); L = int(sys.argv[2])
rows = d["rows"]
gemm = [r for r in rows if r["what"].startswith("gemm ")]
print("scope=" + d["scope"].replace(" ", "_"))
print("gemms=%g" % sum(r["launches"] for r in gemm))
print("ln_fwd=%g" % sum(r["launches"] for r in rows if r["what"] == "cuda_layernorm_forward (layernorm.cu)"))
bad = 0
for r in gemm:   # flops a step = launches · 2·m·n·k, from the shape in the row's name
    m, n, k = (int(x) for x in re.search(r"m=(\d+) n=(\d+) k=(\d+)", r["what"]).groups())
    bad += abs(r["flops"] - r["launches"] * 2 * m * n * k) > 1e-9 * r["flops"]
print("flops_bad=%d" % bad)
launches = lambda what: sum(r["launches"] for r in rows if r["what"] == what)
print("h2d=%g" % launches("memcpy H2D (cuda_backend.c)"))
print("d2h=%g" % launches("memcpy D2H (optim.cu)"))
print("sum_ok=%d" % (abs(sum(r["device_ms"] for r in rows) - d["device_ms"]) <= 1e-6 * max(1.0, d["device_ms"])))
print("launch_sum_ok=%d" % (abs(sum(r["launches"] for r in rows) - d["launches"]) < 1e-9))
print("positive=%d" % all(r["device_ms"] >= 0 for r in rows))
print("busy=%d" % (d["device_ms"] > 0))
print("idle_row=%d" % any(r["what"] == "(device idle: host waits)" and r["launches"] == 0 for r in rows))
print("idle_work_row=%d" % any(r["what"] == "(device idle: host work after a wait)" and r["launches"] == 0
                               and r["device_ms"] >= 0 for r in rows))
EOF
}

for spec in "2 5 fp32" "3 5 bf16" "2 2 fp32"; do
  read -r L S P <<< "$spec"
  name="L${L}_s${S}_$P"
  run "$L" "$S" "$P" "$name"
  ec=$?
  check '[ $ec -eq 0 ]' "$name: exit $ec: $(tail -3 "$dir/$name.out")"
  check '[ -f "$dir/$name.json" ] && [ ! -e "$dir/$name.json.tmp" ]' "$name: the JSON was not written whole"
  # One table: the run's, not one for a backend opened only to ask the device's memory.
  check '[ "$(grep -c "^kernel times (CTRON_KERNEL_TIMES)" "$dir/$name.out")" = 1 ] && grep -q "^| what | launches" "$dir/$name.out"' \
    "$name: $(grep -c '^kernel times' "$dir/$name.out") tables on stderr, expected 1"
  f=$(facts "$name" "$L")
  get() { grep "^$1=" <<< "$f" | cut -d= -f2; }
  if [ "$S" -ge 3 ]; then
    want_scope="steps_2..$((S - 1))_($((S - 2))_averaged)"
    check '[ "$(get scope)" = "$want_scope" ]' "$name: scope '$(get scope)', expected '$want_scope'"
    check '[ "$(get gemms)" = "$((3 * (6 * L + 1)))" ]' "$name: $(get gemms) GEMMs a step, expected 3·(6L+1) = $((3 * (6 * L + 1)))"
    check '[ "$(get ln_fwd)" = "$((2 * L + 1))" ]' "$name: $(get ln_fwd) LayerNorm forwards a step, expected $((2 * L + 1))"
    check '[ "$(get idle_row)" = 1 ]' "$name: no '(device idle: host waits)' row (the step's end waits once)"
    # Copies have rows of their own: the micro-batch's tokens and targets go up, the step's loss and Σg² come back.
    check '[ "$(get h2d)" = 2 ] && [ "$(get d2h)" = 2 ]' \
      "$name: $(get h2d) H2D and $(get d2h) D2H copies a step in their own rows, expected 2 and 2"
    check '[ "$(get idle_work_row)" = 1 ]' \
      "$name: no '(device idle: host work after a wait)' row (the next step's first launch follows the host's work)"
  else   # two steps: no whole step after the warm-up one; every launch is reported
    check '[ "$(get scope)" = "every_launch_(no_whole_step_after_the_first)" ]' "$name: scope '$(get scope)'"
  fi
  check '[ "$(get flops_bad)" = 0 ]' "$name: $(get flops_bad) GEMM rows whose FLOPs are not launches·2mnk"
  check '[ "$(get sum_ok)" = 1 ] && [ "$(get launch_sum_ok)" = 1 ]' "$name: the rows do not add up to the total"
  check '[ "$(get positive)" = 1 ] && [ "$(get busy)" = 1 ]' "$name: a negative or zero device time"
done

# Off: no table. A bad value: exit 2 naming it, nothing written.
"$ctron" "${shape[@]}" --layers 1 --steps 3 --ckpt-dir "$dir/off" > "$dir/off.out" 2>&1
ec=$?
check '[ $ec -eq 0 ] && ! grep -q "kernel times" "$dir/off.out"' "unset: exit $ec or a table printed"
CTRON_KERNEL_TIMES=yes "$ctron" "${shape[@]}" --layers 1 --steps 1 --ckpt-dir "$dir/bad" > "$dir/bad.out" 2>&1
ec=$?
check '[ $ec -eq 2 ] && grep -q "CTRON_KERNEL_TIMES='"'"'yes'"'"': expected 1" "$dir/bad.out" && [ ! -e "$dir/bad" ]' \
  "CTRON_KERNEL_TIMES=yes: exit $ec (expected 2, naming the value, nothing written): $(tail -1 "$dir/bad.out")"

# gemm.cu's split-K switch (CTRON_GEMM_SPLIT_K, read when the device opens): 0 or 1, nothing else.
CTRON_GEMM_SPLIT_K=2 "$ctron" "${shape[@]}" --layers 1 --steps 1 --ckpt-dir "$dir/badsplit" > "$dir/badsplit.out" 2>&1
ec=$?
check '[ $ec -eq 2 ] && grep -q "CTRON_GEMM_SPLIT_K='"'"'2'"'"': expected 1" "$dir/badsplit.out" && [ ! -e "$dir/badsplit" ]' \
  "CTRON_GEMM_SPLIT_K=2: exit $ec (expected 2, naming the value, nothing written): $(tail -1 "$dir/badsplit.out")"
CTRON_GEMM_SPLIT_K=0 "$ctron" "${shape[@]}" --layers 1 --steps 1 --ckpt-dir "$dir/nosplit" > "$dir/nosplit.out" 2>&1
ec=$?
check '[ $ec -eq 0 ]' "CTRON_GEMM_SPLIT_K=0: exit $ec: $(tail -1 "$dir/nosplit.out")"
CTRON_GEMM_SPLIT_K=1 "$ctron" "${shape[@]}" --layers 1 --steps 1 --ckpt-dir "$dir/split" > "$dir/split.out" 2>&1
ec=$?
check '[ $ec -eq 0 ]' "CTRON_GEMM_SPLIT_K=1: exit $ec: $(tail -1 "$dir/split.out")"

# A FILE.json that cannot be written is refused before the run, not found out after it.
CTRON_KERNEL_TIMES="$dir/no/such/dir/kt.json" "$ctron" "${shape[@]}" --layers 1 --steps 1 --ckpt-dir "$dir/nodir" \
  > "$dir/nodir.out" 2>&1
ec=$?
check '[ $ec -eq 2 ] && grep -q "cannot write in the directory '"'"'$dir/no/such/dir/'"'"'" "$dir/nodir.out" && [ ! -e "$dir/nodir" ]' \
  "an unwritable FILE.json: exit $ec (expected 2, naming the directory, nothing written): $(tail -1 "$dir/nodir.out")"

echo "test_kernel_times: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
