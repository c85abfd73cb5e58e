#!/usr/bin/env bash
# A run killed in the middle of a save (the CTRON_TEST_CRASH_IN_SAVE=N test hook raises SIGKILL
# while the N-th checkpoint's model.safetensors is half written) leaves the previous checkpoint
# intact: generation loads it, and resuming from it reproduces the uninterrupted run exactly.
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
args=(--layers 2 --hidden 32 --heads 2 --seq 32 --batch 4 --dropout 0.1 --steps 20 --eval-every 0 --threads 2
      --seed 5 --data "$data" --print-every 100)
losses() { grep -o '"step":[0-9]*,"loss":[^,]*,\("val_loss":[^,]*,\)\?' "$@"; }

"$ctron" train "${args[@]}" --log "$dir/a.jsonl" > /dev/null || bad "uninterrupted run failed"
CTRON_TEST_CRASH_IN_SAVE=2 "$ctron" train "${args[@]}" --ckpt-dir "$dir/run" --save-every 5 --log "$dir/b1.jsonl" > "$dir/b1.out" 2>&1
rc=$?
[ $rc -eq 137 ] && ok || bad "the run was not killed by SIGKILL (rc $rc): $(tail -3 "$dir/b1.out")"
[ -d "$dir/run/step_00000005" ] && ok || bad "the first checkpoint is gone: $(ls -a "$dir/run")"
[ ! -e "$dir/run/step_00000010" ] && ok || bad "step_00000010 exists although its save was killed"
partial=$(find "$dir/run/.tmp-step_00000010" -name 'model.safetensors*' -size +0 2>/dev/null | head -1)
full=$(stat -c %s "$dir/run/step_00000005/model.safetensors")
if [ -n "$partial" ] && [ "$(stat -c %s "$partial")" -lt "$full" ]; then ok
else bad "no partly written model.safetensors in .tmp-step_00000010 ($(ls -la "$dir/run/.tmp-step_00000010" 2>&1))"; fi

out=$("$ctron" generate --ckpt "$dir/run" --tokens 8 --json --threads 2 2>/dev/null)
grep -q '"step":5,' <<< "$out" && ok || bad "generate did not load step 5: $out"
"$ctron" train --resume "$dir/run" --threads 2 --log "$dir/b2.jsonl" > "$dir/b2.out" 2>&1 || bad "resume failed: $(cat "$dir/b2.out")"
grep -q "resumed from $dir/run/step_00000005 at step 5" "$dir/b2.out" && ok || bad "did not resume from step 5"
if diff <(losses "$dir/a.jsonl" | tail -15) <(losses "$dir/b2.jsonl") > /dev/null; then ok
else bad "losses after the crash and resume differ"; diff <(losses "$dir/a.jsonl" | tail -15) <(losses "$dir/b2.jsonl") | head; fi
[ -z "$(ls -A "$dir/run" | grep '^\.' | grep -vx '\.lock')" ] && ok || bad "leftovers after the resumed run: $(ls -A "$dir/run")"
[ -d "$dir/run/step_00000020" ] && ok || bad "the resumed run did not save step 20"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
