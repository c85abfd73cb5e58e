#!/usr/bin/env bash
# ctron train on BPE tokens: text + --tokenizer and the same data as a token file give the same
# losses; the checkpoint carries tokenizer.json; a resume without --tokenizer uses the checkpoint's
# and continues bitwise exactly; generate decodes with it; a vocabulary larger than --vocab is refused.
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
head -c 400000 "$data" > "$dir/text.txt"
"$ctron" tokenize train --vocab 512 --in "$dir/text.txt" --out "$dir/tok.json" > /dev/null
"$ctron" tokenize encode --tokenizer "$dir/tok.json" --in "$dir/text.txt" --out "$dir/tok.bin" --val-frac 0.1 > /dev/null
common=(--layers 2 --hidden 32 --heads 2 --seq 32 --batch 4 --vocab 512 --steps 12 --eval-every 6 --threads 2 --no-ledger)
losses() { grep -o '"loss":[^,]*' "$1"; }
"$ctron" train "${common[@]}" --data "$dir/text.txt" --tokenizer "$dir/tok.json" --log "$dir/a.jsonl" > /dev/null
ec=$?; check '[ $ec -eq 0 ] && [ "$(losses "$dir/a.jsonl" | wc -l)" -eq 12 ]' "training on text with --tokenizer"
"$ctron" train "${common[@]}" --data "$dir/tok.bin" --val-data "$dir/tok_val.bin" --log "$dir/b.jsonl" > /dev/null
check 'diff <(losses "$dir/a.jsonl") <(losses "$dir/b.jsonl") > /dev/null' "text+tokenizer and token files give different losses"
# 6 steps, checkpoint, resume without --tokenizer: the same 12 losses.
"$ctron" train "${common[@]}" --data "$dir/text.txt" --tokenizer "$dir/tok.json" --stop-after 6 \
  --ckpt-dir "$dir/run" --log "$dir/c1.jsonl" > /dev/null
check '[ -s "$dir/run/step_00000006/tokenizer.json" ] && cmp -s "$dir/run/step_00000006/tokenizer.json" "$dir/tok.json"' \
  "checkpoint lacks the vocabulary"
"$ctron" train --resume "$dir/run" --log "$dir/c2.jsonl" > "$dir/resume.out" 2>&1
check 'diff <(losses "$dir/a.jsonl") <(cat "$dir/c1.jsonl" "$dir/c2.jsonl" | grep -o "\"loss\":[^,]*") > /dev/null' \
  "resume without --tokenizer did not continue exactly: $(tail -3 "$dir/resume.out")"
out=$("$ctron" generate --ckpt "$dir/run" --prompt "And the LORD" --tokens 20 --seed 1 2>/dev/null)
check '[ -n "$out" ] && grep -q "^And the LORD" <<< "$out"' "generate from the BPE checkpoint: '$out'"
"$ctron" train "${common[@]}" --vocab 300 --data "$dir/text.txt" --tokenizer "$dir/tok.json" > "$dir/err.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "has 512 tokens but the model.s vocabulary is 300" "$dir/err.out"' "vocab smaller than the tokenizer: rc $rc"
"$ctron" train "${common[@]}" --data "$dir/text.txt" --tokenizer "$dir/missing.json" > "$dir/err2.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--tokenizer: cannot read" "$dir/err2.out"' "missing tokenizer: rc $rc"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
