#!/usr/bin/env bash
# ctron tokenize: train/encode/decode round trips (cmp), the train/validation split, and bad
# flags exiting with code 2 and a message naming the flag or value.
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
run() {  # run cmd...: must exit 0
  if "$@" > "$dir/out.log" 2>&1; then ok; else bad "$* -> rc $?: $(cat "$dir/out.log")"; fi
}
same() { if cmp -s "$1" "$2"; then ok; else bad "$1 and $2 differ"; fi; }

head -c 300000 "$data" > "$dir/corpus.txt"
run "$ctron" tokenize train --vocab 1024 --in "$dir/corpus.txt" --out "$dir/tok.json"
grep -q '"type":"ctron-bpe"' "$dir/tok.json" && grep -q '"vocab_size":1024' "$dir/tok.json" && ok || bad "tok.json header"
run "$ctron" tokenize encode --tokenizer "$dir/tok.json" --in "$data" --out "$dir/kjv.bin"
run "$ctron" tokenize decode --tokenizer "$dir/tok.json" --in "$dir/kjv.bin" --out "$dir/kjv.txt"
same "$data" "$dir/kjv.txt"

# Arbitrary bytes: all 256 values, invalid UTF-8, NULs; and an empty file.
python3 -c 'import sys, random; r = random.Random(7); sys.stdout.buffer.write(bytes(range(256)) + bytes(r.randrange(256) for _ in range(50000)) + b"\0\0 x\0")' > "$dir/rand.bin"
run "$ctron" tokenize encode --tokenizer "$dir/tok.json" --in "$dir/rand.bin" --out "$dir/rand.tok"
run "$ctron" tokenize decode --tokenizer "$dir/tok.json" --in "$dir/rand.tok" --out "$dir/rand.out"
same "$dir/rand.bin" "$dir/rand.out"
: > "$dir/empty.txt"
run "$ctron" tokenize encode --tokenizer "$dir/tok.json" --in "$dir/empty.txt" --out "$dir/empty.tok"
[ "$(stat -c %s "$dir/empty.tok")" -eq 1024 ] && ok || bad "empty input gives a header-only token file"
run "$ctron" tokenize decode --tokenizer "$dir/tok.json" --in "$dir/empty.tok" --out "$dir/empty.out"
same "$dir/empty.txt" "$dir/empty.out"

# Train/validation split: default name (_val before the extension) and an explicit one.
run "$ctron" tokenize encode --tokenizer "$dir/tok.json" --in "$dir/corpus.txt" --out "$dir/c.bin" --val-frac 0.1
[ -f "$dir/c_val.bin" ] && ok || bad "--val-frac writes c_val.bin"
run "$ctron" tokenize decode --tokenizer "$dir/tok.json" --in "$dir/c.bin" --out "$dir/c.txt"
run "$ctron" tokenize decode --tokenizer "$dir/tok.json" --in "$dir/c_val.bin" --out "$dir/c_val.txt"
cat "$dir/c.txt" "$dir/c_val.txt" > "$dir/c_all.txt"
same "$dir/corpus.txt" "$dir/c_all.txt"
n_all=$(( ($(stat -c %s "$dir/c.bin") + $(stat -c %s "$dir/c_val.bin") - 2048) / 2 ))
n_val=$(( ($(stat -c %s "$dir/c_val.bin") - 1024) / 2 ))
[ "$n_val" -eq $(( n_all / 10 )) ] && ok || bad "validation file holds 10% of $n_all tokens, got $n_val"
run "$ctron" tokenize encode --tokenizer "$dir/tok.json" --in "$dir/corpus.txt" --out "$dir/d" --val-frac 0.2 --out-val "$dir/held.bin"
[ -f "$dir/held.bin" ] && [ ! -f "$dir/d_val" ] && ok || bad "--out-val names the validation file"

expect() {  # expect "needle" args...: exit code 2 and the needle in stderr
  local needle=$1; shift
  out=$("$ctron" "$@" 2>&1 > /dev/null); rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$needle" <<< "$out"; then ok
  else bad "ctron $* -> rc $rc, message: $out (wanted '$needle')"; fi
}
printf 'not json' > "$dir/bad.json"
printf 'some text' > "$dir/text.txt"
T="$dir/tok.json"
expect "missing subcommand" tokenize
expect "unknown subcommand 'tran'" tokenize tran
expect "missing --vocab" tokenize train --in "$dir/corpus.txt" --out "$dir/x.json"
expect "--vocab: 255 is out of range, expected 256..65536" tokenize train --vocab 255 --in "$dir/corpus.txt" --out "$dir/x.json"
expect "--vocab: 65537 is out of range" tokenize train --vocab 65537 --in "$dir/corpus.txt" --out "$dir/x.json"
expect "--vocab: expected an integer, got 'big'" tokenize train --vocab big --in "$dir/corpus.txt" --out "$dir/x.json"
expect "missing --in" tokenize train --vocab 300 --out "$dir/x.json"
expect "missing --out" tokenize train --vocab 300 --in "$dir/corpus.txt"
expect "--in: cannot read '$dir/nope.txt'" tokenize train --vocab 300 --in "$dir/nope.txt" --out "$dir/x.json"
expect "--in: '$dir' is not a regular file" tokenize train --vocab 300 --in "$dir" --out "$dir/x.json"
expect "is empty" tokenize train --vocab 300 --in "$dir/empty.txt" --out "$dir/x.json"
expect "folder '$dir/no/such' does not exist" tokenize train --vocab 300 --in "$dir/corpus.txt" --out "$dir/no/such/x.json"
expect "--tokenizer is not for 'tokenize train'" tokenize train --vocab 300 --tokenizer "$T" --in "$dir/corpus.txt" --out "$dir/x.json"
expect "missing --tokenizer" tokenize encode --in "$dir/corpus.txt" --out "$dir/x.bin"
expect "--vocab is only for 'tokenize train'" tokenize encode --vocab 300 --tokenizer "$T" --in "$dir/corpus.txt" --out "$dir/x.bin"
expect "--tokenizer: cannot read '$dir/none.json'" tokenize encode --tokenizer "$dir/none.json" --in "$dir/corpus.txt" --out "$dir/x.bin"
expect "not a JSON object" tokenize encode --tokenizer "$dir/bad.json" --in "$dir/corpus.txt" --out "$dir/x.bin"
expect "--val-frac: 1 is out of range" tokenize encode --tokenizer "$T" --in "$dir/corpus.txt" --out "$dir/x.bin" --val-frac 1
expect "--val-frac: expected a number, got 'half'" tokenize encode --tokenizer "$T" --in "$dir/corpus.txt" --out "$dir/x.bin" --val-frac half
expect "--out-val needs --val-frac" tokenize encode --tokenizer "$T" --in "$dir/corpus.txt" --out "$dir/x.bin" --out-val "$dir/y.bin"
expect "is the same file as --out" tokenize encode --tokenizer "$T" --in "$dir/corpus.txt" --out "$dir/x.bin" --val-frac 0.1 --out-val "$dir/x.bin"
expect "leaves the validation file empty" tokenize encode --tokenizer "$T" --in "$dir/text.txt" --out "$dir/x.bin" --val-frac 0.01
expect "--val-frac is only for 'tokenize encode'" tokenize decode --tokenizer "$T" --in "$dir/kjv.bin" --out "$dir/x.txt" --val-frac 0.1
expect "is not a token file: magic number" tokenize decode --tokenizer "$T" --in "$dir/text.txt" --out "$dir/x.txt"
expect "unknown option '--bogus'" tokenize encode --bogus
expect "--in: missing value" tokenize encode --tokenizer "$T" --in
expect "unexpected argument 'extra'" tokenize decode --tokenizer "$T" --in "$dir/kjv.bin" --out "$dir/x.txt" extra
# A token outside the tokenizer's vocabulary: kjv.bin (vocab 1024) decoded with a 300-token vocabulary.
run "$ctron" tokenize train --vocab 300 --in "$dir/corpus.txt" --out "$dir/small.json"
expect "outside the vocabulary 0..299" tokenize decode --tokenizer "$dir/small.json" --in "$dir/kjv.bin" --out "$dir/x.txt"
[ ! -e "$dir/x.txt" ] && [ ! -e "$dir/x.bin" ] && [ ! -e "$dir/x.json" ] && ok || bad "a failed command writes no output"
if "$ctron" tokenize --help | grep -q -- "--val-frac"; then ok; else bad "tokenize --help"; fi
if "$ctron" tokenize encode --help | grep -q -- "--out-val"; then ok; else bad "tokenize encode --help"; fi
if "$ctron" help | grep -q "tokenize"; then ok; else bad "ctron help lists tokenize"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
