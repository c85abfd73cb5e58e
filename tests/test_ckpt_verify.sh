#!/usr/bin/env bash
# Checkpoints that verify themselves (issue 17; runs under make sanitize too):
#  - checksums.txt lists every file (crc32, size); `ctron ckpt verify` checks each checkpoint;
#  - --resume DIR takes the newest checkpoint that verifies and names each one skipped and why
#    (corrupt, truncated, empty step_ directory); a step_ directory named explicitly must verify;
#  - the step in state.json, model.safetensors and optimizer.safetensors must agree;
#  - non-finite weights or moments, or a negative second moment, are refused naming the tensor;
#  - --resume with another --tokenizer is refused unless the vocabularies are identical;
#  - a failed resume exits cleanly (no leak under the sanitizers);
#  - a step_N directory holding another step, or a symlink named step_N, is a bad checkpoint: verify
#    fails it and --resume falls back naming the reason (issue 23 C);
#  - verify loads tokenizer.json as generate and resume do: a merge referring forward fails it, and
#    --resume falls back to the older checkpoint (issue 23 I); verify's note stays on one line;
#  - generate exits 1 (not 2) on a checkpoint that fails verification (docs/CLI.md);
#  - messages: data order by name, a state.json number out of range, merges missing, a bad vocab
#    blamed on state.json, an unreadable run directory.
# usage: test_ckpt_verify.sh CTRON DATA
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); chmod 755 "$dir"; trap 'chmod -R u+rwx "$dir"; rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
tiny=(--layers 1 --hidden 32 --heads 2 --seq 32 --batch 4 --threads 1 --no-ledger --data "$data" --eval-every 0)
poke() {   # poke FILE TENSOR ELEMENT VALUE: overwrite one float of a safetensors file
  /usr/bin/python3 - "$@" <<'PY'
import json, struct, sys
p, name, i, v = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
b = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", b[:8])[0]
off = 8 + n + json.loads(b[8:8 + n])[name]["data_offsets"][0] + 4 * i
b[off:off + 4] = struct.pack("<f", v); open(p, "wb").write(b)
PY
}
"$ctron" train "${tiny[@]}" --steps 6 --save-every 2 --keep 0 --ckpt-dir "$dir/run" > /dev/null 2>&1
check '[ "$(grep -c "^crc32 [0-9a-f]\{8\} [0-9]* " "$dir/run/step_00000006/checksums.txt")" -eq 3 ]' \
  "checksums.txt: $(cat "$dir/run/step_00000006/checksums.txt")"
"$ctron" ckpt verify "$dir/run" > "$dir/v.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "3 of 3 verify; --resume .* takes step 6" "$dir/v.out"' "ckpt verify, all good: $(cat "$dir/v.out")"

# A flipped byte in step 6, an empty step 8: resume falls back to step 4, naming both.
cp -r "$dir/run" "$dir/run.orig"
poke "$dir/run/step_00000006/model.safetensors" h.0.attn.c_attn.weight 3 0.5
mkdir "$dir/run/step_00000008"
"$ctron" ckpt verify "$dir/run" > "$dir/v.out" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "step_00000006: FAILED: .*model.safetensors'"'"' has crc32 [0-9a-f]*, checksums.txt lists" "$dir/v.out" &&
       grep -q "step_00000008: FAILED: .* holds no state.json" "$dir/v.out" && grep -q "2 of 4 verify; --resume .* takes step 4" "$dir/v.out"' \
  "ckpt verify with a corrupt and an empty checkpoint: exit $rc: $(cat "$dir/v.out")"
"$ctron" train --resume "$dir/run" --steps 8 --stop-after 5 > "$dir/r.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "resumed from .*step_00000004 at step 4" "$dir/r.out" &&
       grep -q "note: skipping .*step_00000008: .*holds no state.json" "$dir/r.out" &&
       grep -q "note: skipping .*step_00000006: .*crc32" "$dir/r.out"' "resume falls back to step 4: exit $rc: $(head -5 "$dir/r.out")"
"$ctron" train --resume "$dir/run/step_00000006" > "$dir/r2.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "model.safetensors'"'"' has crc32" "$dir/r2.out"' "a named corrupt step directory is refused: $(cat "$dir/r2.out")"

# The step recorded three times must agree (a model file of another save, checksums rewritten away).
rm -rf "$dir/mix"; cp -r "$dir/run.orig/step_00000004" "$dir/mix"; cp "$dir/run.orig/step_00000006/model.safetensors" "$dir/mix/"
rm "$dir/mix/checksums.txt"
"$ctron" train --resume "$dir/mix" > "$dir/m.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "model.safetensors'"'"' is the state of step 6 but state.json says step 4" "$dir/m.out"' \
  "mixed steps: $(cat "$dir/m.out")"

# Non-finite weights, a negative second moment: refused naming the tensor.
rm -rf "$dir/nan"; cp -r "$dir/run.orig/step_00000006" "$dir/nan"; rm "$dir/nan/checksums.txt"
poke "$dir/nan/optimizer.safetensors" v.h.0.mlp.c_fc.bias 7 -0.25
"$ctron" train --resume "$dir/nan" > "$dir/n.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "tensor '"'v.h.0.mlp.c_fc.bias'"' holds -0.25 at element 7; AdamW second moments" "$dir/n.out"' \
  "negative v: $(cat "$dir/n.out")"
poke "$dir/nan/optimizer.safetensors" v.h.0.mlp.c_fc.bias 7 0.25
poke "$dir/nan/model.safetensors" wte.weight 9 inf
"$ctron" ckpt verify "$dir/nan" > "$dir/n.out" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "tensor '"'wte.weight'"' holds inf at element 9; weights and optimizer moments must be finite" "$dir/n.out"' \
  "inf weight: $(cat "$dir/n.out")"

# A truncated checkpoint, no checksums, the only one: refused cleanly (exit 2, no leak); one whose
# state.json does not fit its tensors fails inside the run (exit 1, no leak: the bad_counts fix).
rm -rf "$dir/tr"; mkdir "$dir/tr"; cp -r "$dir/run.orig/step_00000002" "$dir/tr/"; rm "$dir/tr/step_00000002/checksums.txt"
truncate -s 5000 "$dir/tr/step_00000002/optimizer.safetensors"
"$ctron" train --resume "$dir/tr" > "$dir/t.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "no checkpoint in .* verifies (1 step_ directory; the newest: .*optimizer.safetensors" "$dir/t.out"' \
  "truncated: $(cat "$dir/t.out")"
cp "$dir/run.orig/step_00000002/optimizer.safetensors" "$dir/tr/step_00000002/"
sed -i 's/"layers":[[:space:]]*1/"layers": 2/' "$dir/tr/step_00000002/state.json"
"$ctron" train --resume "$dir/tr" > "$dir/t2.out" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "cannot resume: .*lacks tensor '"'h.1.ln_1.weight'"'" "$dir/t2.out"' "state.json vs tensors: $(cat "$dir/t2.out")"

# --tokenizer on resume: the same vocabulary passes, another is refused naming both files.
head -c 100000 "$data" > "$dir/c.txt"
"$ctron" tokenize train --vocab 280 --in "$dir/c.txt" --out "$dir/t1.json" > /dev/null 2>&1
"$ctron" tokenize train --vocab 290 --in "$dir/c.txt" --out "$dir/t2.json" > /dev/null 2>&1
/usr/bin/python3 -c "import json,sys; d=json.load(open('$dir/t1.json')); print(json.dumps(d, indent=1))" > "$dir/t1b.json"
"$ctron" train "${tiny[@]}" --data "$dir/c.txt" --tokenizer "$dir/t1.json" --vocab 300 --steps 2 --ckpt-dir "$dir/bpe" > /dev/null 2>&1
"$ctron" train --resume "$dir/bpe" --steps 3 --tokenizer "$dir/t2.json" > "$dir/k.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -qF -- "--tokenizer '"'$dir/t2.json'"' is not the vocabulary the checkpoint was trained with ('"'$dir/bpe/step_00000002/tokenizer.json'"': 290 tokens against 280)" "$dir/k.out"' \
  "another vocabulary: $(cat "$dir/k.out")"
"$ctron" train --resume "$dir/bpe" --steps 3 --tokenizer "$dir/t1b.json" > "$dir/k.out" 2>&1
rc=$?
check '[ $rc -eq 0 ]' "the same vocabulary, other bytes, must resume: $(tail -2 "$dir/k.out")"
"$ctron" train --resume "$dir/run.orig" --steps 8 --tokenizer "$dir/t1.json" > "$dir/k.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "was trained on bytes (no tokenizer.json); --tokenizer" "$dir/k.out"' "bytes checkpoint + --tokenizer: $(cat "$dir/k.out")"

# Messages.
"$ctron" train --resume "$dir/run.orig" --steps 8 --data-order sequential > "$dir/o.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q -- "--data-order sequential does not match the checkpoint'"'"'s random" "$dir/o.out"' "data order: $(cat "$dir/o.out")"
rm -rf "$dir/lr"; cp -r "$dir/run.orig/step_00000002" "$dir/lr"; rm "$dir/lr/checksums.txt"
sed -i 's/"lr":[[:space:]]*[0-9.e-]*/"lr": 1e999/' "$dir/lr/state.json"
"$ctron" train --resume "$dir/lr" > "$dir/l.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "schedule.lr must be a number in 0..1e+09 (it is inf, out of double range)" "$dir/l.out"' "lr 1e999: $(cat "$dir/l.out")"
sed -i 's/"vocab":[[:space:]]*256/"vocab": 200/; s/"lr": 1e999/"lr": 0.001/' "$dir/lr/state.json"
"$ctron" train --resume "$dir/lr" > "$dir/l.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "the checkpoint'"'"'s model.vocab 200 (.*/state.json) is too small" "$dir/l.out"' "vocab from state.json: $(cat "$dir/l.out")"
/usr/bin/python3 -c "import json; d=json.load(open('$dir/t1.json')); del d['model']['merges']; json.dump(d, open('$dir/nomerge.json','w'))"
"$ctron" train "${tiny[@]}" --data "$dir/c.txt" --tokenizer "$dir/nomerge.json" --vocab 300 --steps 2 > "$dir/nm.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "nomerge.json.: model.merges is missing, expected an array" "$dir/nm.out"' "no merges: $(cat "$dir/nm.out")"
if [ "$(id -u)" -eq 0 ]; then asuser=(setpriv --reuid=65534 --regid=65534 --clear-groups); else asuser=(); fi
cp -r "$dir/run.orig" "$dir/locked"; chmod 000 "$dir/locked"
"${asuser[@]}" "$ctron" train --resume "$dir/locked" > "$dir/p.out" 2>&1
rc=$?
check '[ $rc -eq 2 ] && grep -q "cannot read .*locked/state.json.*: Permission denied" "$dir/p.out"' "chmod 000: $(cat "$dir/p.out")"

# C. A forged step directory (a copy of step 4 named step 9) and a symlink step_7 -> step_4: verify
# fails both naming the reason, and --resume takes the real newest, step 6.
rm -rf "$dir/forge"; cp -r "$dir/run.orig" "$dir/forge"
cp -r "$dir/forge/step_00000004" "$dir/forge/step_00000009"
ln -s step_00000004 "$dir/forge/step_00000007"
"$ctron" ckpt verify "$dir/forge" > "$dir/fg.out" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "step_00000009: FAILED: .* is named for step 9 but its state.json says step 4" "$dir/fg.out" &&
       grep -q "step_00000007: FAILED: .* is a symbolic link (to '"'step_00000004'"')" "$dir/fg.out" &&
       grep -q "3 of 5 verify; --resume .* takes step 6" "$dir/fg.out"' "forged step names: $(cat "$dir/fg.out")"
"$ctron" train --resume "$dir/forge" --steps 7 > "$dir/fr.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "resumed from .*step_00000006 at step 6" "$dir/fr.out" &&
       grep -q "note: skipping .*step_00000009: .*named for step 9 but its state.json says step 4" "$dir/fr.out"' \
  "resume past a forged step_9: exit $rc: $(head -6 "$dir/fr.out")"
"$ctron" generate --ckpt "$dir/forge/step_00000009" --tokens 2 > "$dir/fg2.out" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "error: --ckpt: .*named for step 9" "$dir/fg2.out"' \
  "generate on a failed step directory exits 1 (docs/CLI.md): exit $rc: $(cat "$dir/fg2.out")"

# I. A tokenizer.json whose first merge makes a string its vocabulary lacks: generate refuses it,
# so verify must too, and --resume falls back to the older checkpoint that has a good one.
"$ctron" train "${tiny[@]}" --data "$dir/c.txt" --tokenizer "$dir/t1.json" --vocab 300 --steps 4 --save-every 2 \
  --keep 0 --ckpt-dir "$dir/fwd" > /dev/null 2>&1
/usr/bin/python3 - "$dir/fwd/step_00000004" <<'PY'
import json, os, sys, zlib
d = sys.argv[1]; p = os.path.join(d, "tokenizer.json")
t = json.load(open(p)); t["model"]["merges"][0] = "Q zzz"
b = (json.dumps(t) + "\n").encode(); open(p, "wb").write(b)
# checksums.txt rewritten to match, as a hand-edited checkpoint would be
lines = open(os.path.join(d, "checksums.txt")).read().splitlines()
out = [f"crc32 {zlib.crc32(b):08x} {len(b)} tokenizer.json" if l.endswith(" tokenizer.json") else l for l in lines]
open(os.path.join(d, "checksums.txt"), "w").write("\n".join(out) + "\n")
PY
"$ctron" ckpt verify "$dir/fwd" > "$dir/fw.out" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "step_00000004: FAILED: tokenizer.json: " "$dir/fw.out" && grep -q "takes step 2" "$dir/fw.out"' \
  "verify a forward merge: exit $rc: $(cat "$dir/fw.out")"
"$ctron" train --resume "$dir/fwd" --steps 5 > "$dir/fw2.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "resumed from .*step_00000002 at step 2" "$dir/fw2.out" &&
       grep -q "note: skipping .*step_00000004: tokenizer.json" "$dir/fw2.out"' "resume falls back past it: exit $rc: $(head -4 "$dir/fw2.out")"

# Verify's note (a checkpoint without checksums.txt) is one line, its parenthesis closed on it.
rm -rf "$dir/nosum"; cp -r "$dir/run.orig/step_00000002" "$dir/nosum"; rm "$dir/nosum/checksums.txt"
"$ctron" ckpt verify "$dir/nosum" > "$dir/ns.out" 2>&1
check '[ "$(wc -l < "$dir/ns.out")" -eq 1 ] && grep -q ": ok (note: .*no checksums.txt.*checksummed)$" "$dir/ns.out"' \
  "the note on one line: $(cat "$dir/ns.out")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
