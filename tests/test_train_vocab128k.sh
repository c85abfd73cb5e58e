#!/usr/bin/env bash
# Llama 3's vocabulary size end to end (issue 26): a tokenizer.json whose ids reach 128,255 (the
# Llama 3-style file tokenizers made in tests/fuzz/corpus/hf_tokenizer/, every id moved up) writes
# uint32 token files; `ctron train --vocab 128256` trains on them (first loss ~ ln 128256) and on the
# same text with --tokenizer, with the same losses; the checkpoint carries tokenizer.json and
# generate decodes with it; a vocabulary one short is refused naming the token.
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
python3 - "$(dirname "$0")/fuzz/corpus/hf_tokenizer/llama3_tiny.json" "$dir/tok.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
top = max(max(t["model"]["vocab"].values()), max(a["id"] for a in t["added_tokens"]))
shift = 128255 - top
t["model"]["vocab"] = {s: i + shift for s, i in t["model"]["vocab"].items()}
for a in t["added_tokens"]:
    a["id"] += shift
for v in t["post_processor"]["special_tokens"].values():
    v["ids"] = [i + shift for i in v["ids"]]
json.dump(t, open(sys.argv[2], "w"))
PY
head -c 200000 "$data" > "$dir/text.txt"
printf ' beginningsx' >> "$dir/text.txt"   # one whole token (ignore_merges): the largest id, 128255
"$ctron" tokenize encode --tokenizer "$dir/tok.json" --in "$dir/text.txt" --out "$dir/tok.bin" --val-frac 0.1 > /dev/null
check '[ "$(od -An -tu4 -N12 "$dir/tok.bin" | tr -s " ")" = " 20240801 7 $(( ($(stat -c %s "$dir/tok.bin") - 1024) / 4 ))" ]' \
  "the token file is not uint32 (magic 20240801, version 7): $(od -An -tu4 -N12 "$dir/tok.bin")"
common=(--layers 1 --hidden 16 --heads 2 --seq 16 --batch 2 --vocab 128256 --steps 2 --eval-every 2 --threads 2 --no-ledger)
losses() { grep -o '"loss":[^,]*' "$1"; }
"$ctron" train "${common[@]}" --data "$dir/tok.bin" --val-data "$dir/tok_val.bin" --log "$dir/a.jsonl" > "$dir/a.out" 2>&1
ec=$?; check '[ $ec -eq 0 ] && [ "$(losses "$dir/a.jsonl" | wc -l)" -eq 2 ]' "training on uint32 token files: $(tail -3 "$dir/a.out")"
first=$(losses "$dir/a.jsonl" | head -1 | cut -d: -f2)
check 'python3 -c "import math, sys; sys.exit(abs($first - math.log(128256)) > 0.05)"' "first loss $first, want ln 128256 = 11.76"
"$ctron" train "${common[@]}" --data "$dir/text.txt" --tokenizer "$dir/tok.json" --ckpt-dir "$dir/run" --log "$dir/b.jsonl" \
  > "$dir/b.out" 2>&1
check 'diff <(losses "$dir/a.jsonl") <(losses "$dir/b.jsonl") > /dev/null' \
  "text + tokenizer.json and uint32 token files give different losses: $(tail -3 "$dir/b.out")"
step=$(ls -d "$dir"/run/step_* 2>/dev/null | tail -1)
check '[ -n "$step" ] && cmp -s "$step/tokenizer.json" "$dir/tok.json"' "the checkpoint lacks tokenizer.json"
out=$("$ctron" generate --ckpt "$dir/run" --prompt "And the LORD" --tokens 5 --seed 1 2>/dev/null)
check 'grep -q "^And the LORD" <<< "$out"' "generate with the 128256-token checkpoint: '$out'"
"$ctron" train "${common[@]}" --vocab 128255 --data "$dir/tok_val.bin" --val-data "$dir/tok_val.bin" > "$dir/c.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "token 128255 at position [0-9]* is outside the vocabulary 0..128254" "$dir/c.out"' \
  "--vocab 128255 on ids up to 128255: rc $rc, $(tail -2 "$dir/c.out")"
"$ctron" train "${common[@]}" --vocab 128255 --data "$dir/text.txt" --tokenizer "$dir/tok.json" > "$dir/d.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "has 128256 tokens but the model.s vocabulary is 128255" "$dir/d.out"' \
  "--vocab 128255 with the 128256-token tokenizer: rc $rc, $(tail -2 "$dir/d.out")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
