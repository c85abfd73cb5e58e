#!/usr/bin/env bash
# One writer per run, a run directory checked before the work, nothing silent (issue 17):
#  - a second run on a --ckpt-dir or a --log in use is refused (exit 2) naming the holder's pid and host;
#  - a read-only --ckpt-dir is refused up front with Permission denied, a too-full one with the bytes;
#  - a failing --log write is reported at once (file, error), the run goes on and exits 1;
#  - a FIFO in place of --tokenizer, state.json or model.safetensors is refused, never waited on;
#  - SIGHUP saves a checkpoint like SIGTERM (exit 129) and the run resumes from it.
# usage: test_run_guard.sh CTRON DATA
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); chmod 755 "$dir"; trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
tiny=(--layers 1 --hidden 32 --heads 2 --seq 32 --batch 4 --threads 1 --no-ledger --data "$data" --eval-every 0)
started() { for _ in $(seq 100); do sleep 0.1; grep -q "^ctron train:" "$1" && return 0; done; return 1; }

# 1. Run A holds the directory and the log; run B is refused and changes nothing.
"$ctron" train "${tiny[@]}" --steps 1000000 --print-every 100000 --ckpt-dir "$dir/run" --log "$dir/a.jsonl" \
  > "$dir/a.out" 2>&1 &
a=$!
started "$dir/a.out"
timeout 20 "$ctron" train "${tiny[@]}" --steps 5 --seed 2 --ckpt-dir "$dir/run" > "$dir/b.out" 2>&1
rc=$?
check '[ $rc -eq 2 ]' "second run on one --ckpt-dir: exit $rc, expected 2"
check 'grep -qF "'"'$dir/run'"' is in use by another ctron run (pid $a host $(hostname)," "$dir/b.out"' \
  "the refusal must name pid $a and host $(hostname): $(cat "$dir/b.out")"
check '[ "$(cat "$dir/run/.lock")" = "pid $a host $(hostname)" ]' "the lock file: $(cat "$dir/run/.lock")"
timeout 20 "$ctron" train "${tiny[@]}" --steps 5 --log "$dir/a.jsonl" > "$dir/c.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -qF "'"'$dir/a.jsonl'"' is in use by another ctron run (pid $a host" "$dir/c.out"' \
  "second run on one --log: exit $rc: $(cat "$dir/c.out")"
check '[ -s "$dir/a.jsonl" ]' "the refused run must not truncate the holder's log"
kill -TERM $a; wait $a
rc=$?
check '[ $rc -eq 143 ]' "run A after SIGTERM"
"$ctron" train "${tiny[@]}" --steps 3 --ckpt-dir "$dir/run2" --log "$dir/a.jsonl" > "$dir/d.out" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "once A is gone (its lock released by the kernel) the directory and log are free: $(tail -2 "$dir/d.out")"
# a holder killed with SIGKILL leaves no stale lock
"$ctron" train "${tiny[@]}" --steps 1000000 --print-every 100000 --ckpt-dir "$dir/run3" > "$dir/k.out" 2>&1 &
k=$!; started "$dir/k.out"; kill -KILL $k; wait $k 2>/dev/null
"$ctron" train "${tiny[@]}" --steps 2 --ckpt-dir "$dir/run3" > "$dir/k2.out" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "after SIGKILL of the holder: $(tail -2 "$dir/k2.out")"

# 3. A read-only run directory: refused before any step (as an unprivileged user: root writes anyway).
mkdir "$dir/ro"; chmod 555 "$dir/ro"
asuser=(); [ "$(id -u)" -eq 0 ] && asuser=(setpriv --reuid=65534 --regid=65534 --clear-groups)
timeout 20 "${asuser[@]}" "$ctron" train "${tiny[@]}" --steps 200 --ckpt-dir "$dir/ro" > "$dir/ro.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -qF "cannot create the lock file '"'$dir/ro/.lock'"': Permission denied" "$dir/ro.out"' \
  "read-only --ckpt-dir: exit $rc: $(cat "$dir/ro.out")"
check '! grep -q "^step " "$dir/ro.out"' "no step may run before the refusal"
# Too little space for the first checkpoint (CTRON_TEST_FREE_BYTES stands in for statvfs).
CTRON_TEST_FREE_BYTES=100000 timeout 20 "$ctron" train "${tiny[@]}" --steps 5 --ckpt-dir "$dir/full" > "$dir/full.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "97.66 KiB free, but one checkpoint of this model needs 3[0-9.]* KiB" "$dir/full.out"' \
  "a full disk: exit $rc: $(cat "$dir/full.out")"
CTRON_TEST_FREE_BYTES=700000 "$ctron" train "${tiny[@]}" --steps 2 --keep 3 --ckpt-dir "$dir/tight" > "$dir/tight.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "warning: --ckpt-dir .* room for 2 checkpoints of .*--keep K needs K + 1" "$dir/tight.out"' \
  "room for fewer than keep + 1: a warning: exit $rc: $(grep -i warn "$dir/tight.out")"

# 5. --log on a full device: said at once with the file and the error; the run goes on; exit 1.
"$ctron" train "${tiny[@]}" --steps 5 --log /dev/full > "$dir/lf.out" 2> "$dir/lf.err"
rc=$?
check '[ $rc -eq 1 ]' "--log /dev/full: exit $rc, expected 1"
check 'grep -q "^ctron: error: cannot write --log '"'/dev/full'"' at step 1: No space left on device" "$dir/lf.err"' \
  "the first failing write must be reported: $(cat "$dir/lf.err")"
check 'grep -q "^done: 5 steps" "$dir/lf.out"' "the run goes on to its end"

# 7. FIFOs are refused, not waited on.
mkfifo "$dir/fifo.json"
timeout 10 "$ctron" train "${tiny[@]}" --steps 2 --tokenizer "$dir/fifo.json" > "$dir/f1.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -qF "is a FIFO, expected a regular file" "$dir/f1.out"' "--tokenizer FIFO: exit $rc (124: hung): $(cat "$dir/f1.out")"
"$ctron" train "${tiny[@]}" --steps 2 --ckpt-dir "$dir/fr" > /dev/null 2>&1
for f in state.json model.safetensors; do
  rm -rf "$dir/ff"; cp -r "$dir/fr/step_00000002" "$dir/ff"; rm "$dir/ff/$f"; mkfifo "$dir/ff/$f"
  timeout 10 "$ctron" train --resume "$dir/ff" > "$dir/f2.out" 2>&1
  rc=$?
  check '[ $rc -eq 2 ] && grep -qF "'"$f'"' is a FIFO, expected a regular file" "$dir/f2.out"' "$f FIFO (resume): exit $rc: $(cat "$dir/f2.out")"
  timeout 10 "$ctron" generate --ckpt "$dir/ff" --tokens 2 > "$dir/f3.out" 2>&1
  rc=$?
  check '[ $rc -eq 1 ] && grep -qF "is a FIFO" "$dir/f3.out"' "$f FIFO (generate): exit $rc: $(cat "$dir/f3.out")"
done

# 10. SIGHUP: finish the step, save, exit 129, resume.
"$ctron" train "${tiny[@]}" --steps 1000000 --ckpt-dir "$dir/hup" --print-every 100000 > "$dir/hup.out" 2>&1 &
h=$!; started "$dir/hup.out"; sleep 0.3
kill -HUP $h; wait $h
rc=$?
check '[ $rc -eq 129 ] && grep -q "interrupted (SIGHUP) after step" "$dir/hup.out"' "SIGHUP: exit $rc: $(tail -3 "$dir/hup.out")"
step=$(ls "$dir/hup" | grep "^step_" | tail -1 | sed 's/step_0*//')
"$ctron" train --resume "$dir/hup" --stop-after $((step + 1)) > "$dir/hup2.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "resumed from .* at step '"$step"' " "$dir/hup2.out"' "resume after SIGHUP: $(tail -2 "$dir/hup2.out")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
