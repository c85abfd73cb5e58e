# Helpers of the layout tests under mpirun (sourced by test_train_tp.sh, test_train_pp.sh,
# test_tp_errors.sh, test_pp_errors.sh). The caller sets: ctron, launch (the launcher and its flags),
# dir (a scratch folder), and for `bad` the array base (the flags every run takes).
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }

# bad NP 'expected message' flags...: every rank exits 2 within 30 s, and the message appears exactly once.
bad() {
  local np=$1 msg=$2; shift 2
  local start=$(date +%s)
  timeout 60 "${launch[@]}" -np "$np" "$ctron" train "${base[@]}" "$@" > "$dir/out" 2>&1
  local rc=$? took=$(( $(date +%s) - start ))
  check "[ $rc -eq 2 ]" "np $np $*: exit $rc, expected 2 (124 = hung): $(head -3 "$dir/out")"
  check "[ \"\$(grep -cF -- '$msg' '$dir/out')\" -eq 1 ]" "np $np $*: expected one '$msg': $(head -5 "$dir/out")"
  check "[ $took -lt 30 ]" "np $np $*: took $took s"
}

# compare_to NAME REF STEPS: run NAME's losses, parameters and AdamW state against REF's (1e-5 relative, or
# the caller's layout_tol where it sets one).
compare_to() {
  local step; step=$(printf 'step_%08d' "$3")
  /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/compare_runs.py" "$dir/$2.jsonl" "$dir/$2/$step" \
    "$dir/$1.jsonl" "$dir/$1/$step" --steps "$3" --name "$1 vs $2" ${layout_tol:+--tol "$layout_tol"}
}

# train_at NAME NP REF STEPS flags...: train at a layout (log and checkpoints under $dir/NAME), then compare.
# The run's flags beyond these are the caller's array `common`.
train_at() {
  local name=$1 np=$2 ref=$3 steps=$4; shift 4
  timeout 120 "${launch[@]}" -np "$np" "$ctron" train "${common[@]}" "$@" --log "$dir/$name.jsonl" \
    --ckpt-dir "$dir/$name" > "$dir/$name.out" 2>&1
  local rc=$?
  check "[ $rc -eq 0 ]" "$name (np $np $*) exited $rc: $(tail -3 "$dir/$name.out")"
  compare_to "$name" "$ref" "$steps"
  check "[ $? -eq 0 ]" "$name (np $np $*) differs from the single-process run"
}
