#!/usr/bin/env bash
# ctron tokenize: train/encode/decode round trips (cmp), tokenizer.json written and ctron's older
# vocabulary still read, a SentencePiece-style file's round trip, special tokens, JSONL input (documents, --doc-sep, bad lines named by
# number), uint32 token files, the train/validation split, and bad flags or files exiting with
# code 2 and a message naming the flag, value, file or field.
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
python3 - "$dir/tok.json" <<'PY' && ok || bad "tok.json is not a 1024-token Hugging Face BPE tokenizer.json"
import json, sys
t = json.load(open(sys.argv[1]))
m = t["model"]
assert m["type"] == "BPE" and len(m["vocab"]) == 1024 and len(m["merges"]) == 768, (len(m["vocab"]), len(m["merges"]))
assert sorted(m["vocab"].values()) == list(range(1024)) and t["pre_tokenizer"]["type"] == "ByteLevel"
assert t["decoder"]["type"] == "ByteLevel" and t["added_tokens"] == [] and t["normalizer"] is None
assert all(isinstance(x, str) and x.count(" ") == 1 for x in m["merges"])
PY
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

T="$dir/tok.json"
# ctron's older vocabulary file (what checkpoints made before tokenizer.json carry) still encodes
# and decodes, with the ids it always gave: "In the" -> [73, 110, 258] under that vocabulary.
legacy="$(dirname "$0")/fuzz/corpus/bpe_json/vocab300.json"
printf 'In the' > "$dir/in.txt"
run "$ctron" tokenize encode --tokenizer "$legacy" --in "$dir/in.txt" --out "$dir/in.bin"
ids=$(python3 -c 'import sys, struct; d = open(sys.argv[1], "rb").read()[1024:]; print(list(struct.unpack("<%dH" % (len(d) // 2), d)))' "$dir/in.bin")
[ "$ids" = "[73, 110, 258]" ] && ok || bad "the older vocabulary encodes 'In the' as $ids, want [73, 110, 258]"
run "$ctron" tokenize encode --tokenizer "$legacy" --in "$data" --out "$dir/kjv_legacy.bin"
run "$ctron" tokenize decode --tokenizer "$legacy" --in "$dir/kjv_legacy.bin" --out "$dir/kjv_legacy.txt"
same "$data" "$dir/kjv_legacy.txt"

# Special tokens: learned around, encoded as one id, kept or skipped by decode.
run "$ctron" tokenize train --vocab 600 --special '<|endoftext|>' --special '<pad>' --in "$dir/corpus.txt" --out "$dir/sp.json"
printf 'And God said<|endoftext|>Let there be light' > "$dir/sp.txt"
run "$ctron" tokenize encode --tokenizer "$dir/sp.json" --in "$dir/sp.txt" --out "$dir/sp.bin"
python3 - "$dir/sp.bin" <<'PY' && ok || bad "<|endoftext|> is one id (598) inside the text"
import struct, sys
d = open(sys.argv[1], "rb").read()[1024:]
ids = struct.unpack("<%dH" % (len(d) // 2), d)
assert ids.count(598) == 1 and 599 not in ids, ids
PY
run "$ctron" tokenize decode --tokenizer "$dir/sp.json" --in "$dir/sp.bin" --out "$dir/sp.out"
same "$dir/sp.txt" "$dir/sp.out"
run "$ctron" tokenize decode --skip-special --tokenizer "$dir/sp.json" --in "$dir/sp.bin" --out "$dir/sp2.out"
[ "$(cat "$dir/sp2.out")" = "And God saidLet there be light" ] && ok || bad "--skip-special: $(cat "$dir/sp2.out")"

# JSONL: one document per line's "text" (or --field), blank lines skipped, --doc-sep before each.
printf '{"text": "In the beginning", "id": 1}\n\n{"id": 2, "text": "God created"}\n' > "$dir/d.jsonl"
run "$ctron" tokenize encode --tokenizer "$dir/sp.json" --doc-sep '<|endoftext|>' --in "$dir/d.jsonl" --out "$dir/d.bin"
grep -q "(2 documents)" "$dir/out.log" && ok || bad "JSONL: 2 documents: $(cat "$dir/out.log")"
run "$ctron" tokenize decode --tokenizer "$dir/sp.json" --in "$dir/d.bin" --out "$dir/d.out"
[ "$(cat "$dir/d.out")" = "<|endoftext|>In the beginning<|endoftext|>God created" ] && ok || bad "JSONL documents: $(cat "$dir/d.out")"
printf '{"body": "x"}\n' > "$dir/f.data"
run "$ctron" tokenize encode --tokenizer "$T" --jsonl --field body --in "$dir/f.data" --out "$dir/f.bin"
printf '{"text": "ok"}\n{"text": "ok"}\n{"text": 3}\n' > "$dir/bad1.jsonl"
printf '{"text": "ok"}\n[1, 2]\n' > "$dir/bad2.jsonl"
printf '{"text": "ok"}\n{"txt": "ok"}\n' > "$dir/bad3.jsonl"
printf '{"text": "ok"}\n\n{"text": "ok"\n' > "$dir/bad4.jsonl"
printf '{"text": "a\\u0000b"}\n' > "$dir/bad5.jsonl"

# A large input (>= 32 MB) reports its progress on stderr: the last line says 100% with the counts.
python3 - "$data" "$dir/big.jsonl" <<'PY'
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
with open(sys.argv[2], "w", encoding="utf-8") as f:
    for _ in range(7):   # 36 MB
        for l in lines:
            f.write(json.dumps({"text": l}) + "\n")
PY
"$ctron" tokenize encode --tokenizer "$T" --in "$dir/big.jsonl" --out "$dir/big.bin" > "$dir/big.out" 2> "$dir/big.err"
n_docs=$(grep -c . "$dir/big.jsonl")
tail -1 "$dir/big.err" | grep -q "ctron tokenize encode: 100.0% (.* MB), $n_docs documents, .* M tokens" && ok \
  || bad "progress line for a large JSONL: $(tail -2 "$dir/big.err")"
rm -f "$dir/big.jsonl" "$dir/big.bin"

# A vocabulary above 65,536 writes uint32 token files (magic 20240801, version 7).
python3 - "$dir/big.json" <<'PY' || bad "cannot write the large test vocabulary"
import json, sys
def b2u():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}
m = b2u()
vocab = {m[b]: b for b in range(256)}
vocab[m[ord("a")] + m[ord("b")]] = 70000          # a hole from 256 to 69999, then "ab"
tok = {"model": {"type": "BPE", "vocab": vocab, "merges": [["a", "b"]]}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False},
       "added_tokens": [{"id": 70001, "content": "<eot>", "special": True}], "decoder": {"type": "ByteLevel"}}
json.dump(tok, open(sys.argv[1], "w"))
PY
printf 'ab<eot>ba' > "$dir/ab.txt"
run "$ctron" tokenize encode --tokenizer "$dir/big.json" --in "$dir/ab.txt" --out "$dir/ab.bin"
python3 - "$dir/ab.bin" <<'PY' && ok || bad "vocabulary 70002: a uint32 token file with [70000, 70001, 98, 97]"
import struct, sys
d = open(sys.argv[1], "rb").read()
assert struct.unpack("<3i", d[:12]) == (20240801, 7, 4) and len(d) == 1024 + 16, struct.unpack("<3i", d[:12])
assert struct.unpack("<4I", d[1024:]) == (70000, 70001, 98, 97)
PY
run "$ctron" tokenize decode --tokenizer "$dir/big.json" --in "$dir/ab.bin" --out "$dir/ab.out"
same "$dir/ab.txt" "$dir/ab.out"

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
expect "--vocab: 255 is out of range, expected 256..4194304" tokenize train --vocab 255 --in "$dir/corpus.txt" --out "$dir/x.json"
expect "--vocab: 4194305 is out of range" tokenize train --vocab 4194305 --in "$dir/corpus.txt" --out "$dir/x.json"
expect "--vocab 257 leaves no room for 256 bytes and 2 special tokens" tokenize train --vocab 257 --special a --special b --in "$dir/corpus.txt" --out "$dir/x.json"
expect "special token '<s>' is given twice" tokenize train --vocab 300 --special '<s>' --special '<s>' --in "$dir/corpus.txt" --out "$dir/x.json"
expect "--special is only for 'tokenize train'" tokenize encode --special x --tokenizer "$T" --in "$dir/corpus.txt" --out "$dir/x.bin"
expect "--jsonl is only for 'tokenize encode'" tokenize decode --jsonl --tokenizer "$T" --in "$dir/kjv.bin" --out "$dir/x.txt"
expect "--skip-special is only for 'tokenize decode'" tokenize encode --skip-special --tokenizer "$T" --in "$dir/corpus.txt" --out "$dir/x.bin"
expect "--field names the text field of JSONL input" tokenize encode --field body --tokenizer "$T" --in "$dir/corpus.txt" --out "$dir/x.bin"
expect "--doc-sep: '<eot>' is not an added token of the tokenizer (it has 0 added tokens" tokenize encode --doc-sep '<eot>' --tokenizer "$T" --in "$dir/corpus.txt" --out "$dir/x.bin"
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
# A tokenizer.json that is not BPE: exit 2 naming the file and the field.
printf '{"model":{"type":"WordPiece","vocab":{"a":0}},"pre_tokenizer":null}' > "$dir/wp.json"
expect "'$dir/wp.json': model.type is \"WordPiece\", expected \"BPE\"" tokenize encode --tokenizer "$dir/wp.json" --in "$dir/corpus.txt" --out "$dir/x.bin"
printf '{"model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":["a c"]},"pre_tokenizer":{"type":"ByteLevel"}}' > "$dir/m.json"
expect "'$dir/m.json': model.merges\[0\] makes \"ac\" from \"a\" and \"c\", but \"c\" is not in model.vocab" tokenize encode --tokenizer "$dir/m.json" --in "$dir/corpus.txt" --out "$dir/x.bin"
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
expect "bad1.jsonl' line 3: \"text\" is not a string" tokenize encode --tokenizer "$T" --in "$dir/bad1.jsonl" --out "$dir/x.bin"
expect "bad2.jsonl' line 2: not a JSON object" tokenize encode --tokenizer "$T" --in "$dir/bad2.jsonl" --out "$dir/x.bin"
expect "bad3.jsonl' line 2: no \"text\" field" tokenize encode --tokenizer "$T" --in "$dir/bad3.jsonl" --out "$dir/x.bin"
expect "bad4.jsonl' line 3: not JSON" tokenize encode --tokenizer "$T" --in "$dir/bad4.jsonl" --out "$dir/x.bin"
expect "bad5.jsonl' line 1: the text holds \\\\u0000" tokenize encode --tokenizer "$T" --in "$dir/bad5.jsonl" --out "$dir/x.bin"
# SentencePiece-style (the fuzz corpus's Llama 2 legacy file): the KJV round-trips through its
# decoder chain (one leading space stripped, which its normalizer put there); a normalizer ctron
# does not run is refused naming the field.
sp="$(dirname "$0")/fuzz/corpus/hf_tokenizer/llama2_legacy_tiny.json"
run "$ctron" tokenize encode --tokenizer "$sp" --in "$data" --out "$dir/kjv_sp.bin"
run "$ctron" tokenize decode --tokenizer "$sp" --in "$dir/kjv_sp.bin" --out "$dir/kjv_sp.txt" --skip-special
same "$data" "$dir/kjv_sp.txt"
python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); t["normalizer"]={"type":"Lowercase"}; json.dump(t,open(sys.argv[2],"w"))' \
    "$sp" "$dir/lower.json"
expect "'$dir/lower.json': normalizer.type is \"Lowercase\": ctron reads the Prepend, Replace, NFC" tokenize encode --tokenizer "$dir/lower.json" --in "$dir/corpus.txt" --out "$dir/x.bin"
# A token outside the tokenizer's vocabulary: kjv.bin (vocab 1024) decoded with a 300-token vocabulary.
run "$ctron" tokenize train --vocab 300 --in "$dir/corpus.txt" --out "$dir/small.json"
expect "outside the vocabulary 0..299" tokenize decode --tokenizer "$dir/small.json" --in "$dir/kjv.bin" --out "$dir/x.txt"
[ ! -e "$dir/x.txt" ] && [ ! -e "$dir/x.bin" ] && [ ! -e "$dir/x.json" ] && ok || bad "a failed command writes no output"
if "$ctron" tokenize --help | grep -- "--val-frac" > /dev/null; then ok; else bad "tokenize --help"; fi
if "$ctron" tokenize encode --help | grep -- "--out-val" > /dev/null; then ok; else bad "tokenize encode --help"; fi
if "$ctron" help | grep "tokenize" > /dev/null; then ok; else bad "ctron help lists tokenize"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
