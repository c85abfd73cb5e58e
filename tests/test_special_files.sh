#!/usr/bin/env bash
# Outputs and inputs that are not regular files (issue 23 E, F and minors); everything lives in the
# test's own temporary directory (a device node made there with mknod, never the machine's /dev):
#  - an output that is a character device or a FIFO is written in place, never renamed over (it stays
#    a device node / FIFO), by every writer: tokenize train/encode/decode --out, peak --cache,
#    memory --plot, plan --cluster --svg, train --log; a FIFO nobody reads is refused, never waited
#    on; a full "disk" (a c 1 7 node, /dev/full's numbers) is an error, exit 1; a directory or a
#    socket as --out is refused, exit 2;
#  - every reader refuses a FIFO at once: tokenize --tokenizer/--in, train --data, plan --check;
#  - a FIFO in place of a run directory's .lock is named; --resume of a directory another run holds
#    names the holder instead of "no checkpoint";
#  - stdout on a full device: the progress is lost, so the exit is 1 with the system's error.
# usage: test_special_files.sh CTRON DATA
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
kind() { stat -c %F "$1"; }
head -c 30000 "$data" > "$dir/small.txt"
"$ctron" tokenize train --vocab 280 --in "$dir/small.txt" --out "$dir/v.json" > /dev/null 2>&1
"$ctron" tokenize encode --tokenizer "$dir/v.json" --in "$dir/small.txt" --out "$dir/t.bin" > /dev/null 2>&1
tiny=(--layers 1 --hidden 32 --heads 2 --seq 32 --batch 2 --threads 1 --no-ledger --data "$data" --eval-every 0
      --peak-gflops 1000)

# E. Device nodes as outputs: written in place, still device nodes afterwards.
if [ "$(id -u)" -eq 0 ]; then
  mknod -m 666 "$dir/null" c 1 3
  mknod -m 666 "$dir/full" c 1 7
  for w in "tokenize train --vocab 280 --in $dir/small.txt --out" "tokenize encode --tokenizer $dir/v.json --in $dir/small.txt --val-frac 0 --out" \
           "tokenize decode --tokenizer $dir/v.json --in $dir/t.bin --out" "memory --layers 2 --hidden 64 --heads 4 --seq 64 --batch 2 --plot" \
           "plan --cluster --gpu a100-80g --nodes 1 --preset gpt2 --global-batch 8 --svg" \
           "peak --threads 1 --sizes 64 --repeats 1 --cache"; do
    timeout 20 "$ctron" $w "$dir/null" > "$dir/w.out" 2>&1
    rc=$?
    check '[ $rc -eq 0 ] && [ "$(kind "$dir/null")" = "character special file" ] && [ ! -e "$dir/null.tmp" ]' \
      "ctron $w NULLDEV: exit $rc, now a $(kind "$dir/null"): $(tail -2 "$dir/w.out")"
    timeout 20 "$ctron" $w "$dir/full" > "$dir/w.out" 2>&1
    rc=$?
    check '[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "No space left on device" "$dir/w.out" && [ "$(kind "$dir/full")" = "character special file" ]' \
      "ctron $w FULLDEV: exit $rc, now a $(kind "$dir/full"): $(tail -2 "$dir/w.out")"
  done
  timeout 30 "$ctron" train "${tiny[@]}" --steps 2 --log "$dir/null" > "$dir/w.out" 2>&1
  rc=$?
  check '[ $rc -eq 0 ] && [ "$(kind "$dir/null")" = "character special file" ]' "train --log NULLDEV: exit $rc: $(tail -2 "$dir/w.out")"
else
  echo "note: not root: the device-node cases (mknod) are skipped"
fi

# E. A FIFO as the output: with a reader it receives the bytes in place; without one, refused at once.
mkfifo "$dir/fifo"
timeout 30 cat "$dir/fifo" > "$dir/got.json" &   # bounded: a replaced FIFO has no writer
reader=$!
timeout 20 "$ctron" tokenize train --vocab 280 --in "$dir/small.txt" --out "$dir/fifo" > "$dir/w.out" 2>&1
rc=$?
wait $reader
check '[ $rc -eq 0 ] && [ "$(kind "$dir/fifo")" = "fifo" ] && cmp -s "$dir/got.json" "$dir/v.json"' \
  "tokenize train --out FIFO with a reader: exit $rc, the reader got $(wc -c < "$dir/got.json") bytes: $(cat "$dir/w.out")"
for w in "tokenize encode --tokenizer $dir/v.json --in $dir/small.txt --val-frac 0 --out" "peak --threads 1 --sizes 64 --repeats 1 --cache" \
         "memory --layers 2 --hidden 64 --heads 4 --seq 64 --batch 2 --plot"; do
  timeout 20 "$ctron" $w "$dir/fifo" > "$dir/w.out" 2>&1
  rc=$?
  check '[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "is a FIFO that nobody reads" "$dir/w.out" && [ "$(kind "$dir/fifo")" = "fifo" ]' \
    "ctron $w FIFO without a reader: exit $rc (124: hung), now a $(kind "$dir/fifo"): $(cat "$dir/w.out")"
done
timeout 20 "$ctron" train "${tiny[@]}" --steps 2 --log "$dir/fifo" > "$dir/w.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "is a FIFO that nobody reads" "$dir/w.out"' "train --log FIFO without a reader: exit $rc: $(cat "$dir/w.out")"
# A directory or a socket is no output: refused (exit 2) before any work.
mkdir "$dir/adir"
/usr/bin/python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$dir/sock"
"$ctron" tokenize train --vocab 280 --in "$dir/small.txt" --out "$dir/sock" > "$dir/w.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "is a socket: an output must be a regular file, a FIFO or a character device" "$dir/w.out"' \
  "--out SOCKET: exit $rc: $(cat "$dir/w.out")"

# F. Readers refuse a FIFO at once.
for r in "tokenize encode --tokenizer $dir/fifo --in $dir/small.txt --out $dir/o.bin" \
         "tokenize decode --tokenizer $dir/fifo --in $dir/t.bin --out $dir/o.txt" \
         "tokenize encode --tokenizer $dir/v.json --in $dir/fifo --out $dir/o.bin" \
         "tokenize train --vocab 280 --in $dir/fifo --out $dir/o.json" \
         "plan --cluster --gpu a100-80g --nodes 1 --preset gpt2 --global-batch 8 --check $dir/fifo" \
         "train ${tiny[*]} --steps 1 --data $dir/fifo"; do
  timeout 10 "$ctron" $r > "$dir/r.out" 2>&1
  rc=$?
  check '[ $rc -eq 2 ] && grep -q "is a FIFO\|not a regular file" "$dir/r.out"' "ctron $r: exit $rc (124: hung): $(cat "$dir/r.out")"
done

# A FIFO where the run directory's .lock goes: named, not "Invalid argument".
mkdir "$dir/run"; mkfifo "$dir/run/.lock"
timeout 10 "$ctron" train "${tiny[@]}" --steps 1 --ckpt-dir "$dir/run" > "$dir/l.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -qF "the lock file '"'$dir/run/.lock'"' is a FIFO, not a regular file" "$dir/l.out"' \
  "FIFO .lock: exit $rc: $(cat "$dir/l.out")"

# --resume of a directory a running job holds (no checkpoint yet): the holder is named.
"$ctron" train "${tiny[@]}" --steps 1000000 --print-every 100000 --ckpt-dir "$dir/held" > "$dir/a.out" 2>&1 &
a=$!
for _ in $(seq 100); do sleep 0.1; grep -q "^ctron train:" "$dir/a.out" && break; done
timeout 10 "$ctron" train --resume "$dir/held" --threads 1 > "$dir/h.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -qF "'"'$dir/held'"' is in use by another ctron run (pid $a host" "$dir/h.out"' \
  "--resume of a held directory: exit $rc: $(cat "$dir/h.out")"
kill -TERM $a; wait $a

# stdout on a full device: the progress is lost, so the run says so and exits 1 (it still trains).
if [ "$(id -u)" -eq 0 ]; then
  "$ctron" train "${tiny[@]}" --steps 3 --ckpt-dir "$dir/fullout" > "$dir/full" 2> "$dir/s.err"
  rc=$?
  check '[ $rc -eq 1 ] && grep -q "cannot write the progress to standard output at step 1: No space left on device" "$dir/s.err" &&
         [ -d "$dir/fullout/step_00000003" ]' "stdout on a full device: exit $rc: $(cat "$dir/s.err")"
  "$ctron" memory --layers 2 --hidden 64 --heads 4 --seq 64 --batch 2 > "$dir/full" 2> "$dir/s.err"
  rc=$?
  check '[ $rc -eq 1 ] && grep -q "writing to standard output failed: No space left on device" "$dir/s.err"' \
    "memory with stdout on a full device: exit $rc: $(cat "$dir/s.err")"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
