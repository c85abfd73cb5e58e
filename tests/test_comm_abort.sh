#!/usr/bin/env bash
# comm_abort ends every rank: the job exits non-zero (not by the timeout) and the message is printed
# once. Usage: test_comm_abort.sh BIN [LAUNCHER NPFLAG [LAUNCHER FLAGS...]]; without a launcher only
# the single-process backend is tested.
set -u
bin=$1; shift
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# expect NAME WANT_TEXT COMMAND...: exit status neither 0 nor 124 (timeout), WANT_TEXT once.
expect() {
  local name=$1 want=$2; shift 2
  local out rc n
  out=$(timeout 20 "$@" 2>&1); rc=$?
  n=$(grep -c "ctron: error: rank" <<<"$out")
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then bad "$name: exit status $rc"; echo "$out" >&2; else ok; fi
  if [ "$n" -eq 1 ] && grep -q "$want" <<<"$out"; then ok; else bad "$name: '$want' printed $n times"; echo "$out" >&2; fi
}

expect "single abort" "rank 0 of 1: deliberate abort from rank 0" "$bin" abort
expect "single badroot" "root 4 is out of range" "$bin" badroot
if [ $# -ge 2 ]; then
  launcher=$1 npflag=$2; shift 2
  for np in 2 4; do
    last=$((np - 1))
    expect "np $np abort" "rank $last of $np: deliberate abort from rank $last" "$launcher" "$npflag" "$np" "$@" "$bin" abort
    expect "np $np badroot" "root $((np + 3)) is out of range" "$launcher" "$npflag" "$np" "$@" "$bin" badroot
    expect "np $np mpierror" "MPI_Bcast on group world (rank $last of $np) failed: " "$launcher" "$npflag" "$np" "$@" "$bin" mpierror
  done
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
