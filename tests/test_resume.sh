#!/usr/bin/env bash
# Exact resume: 20 steps straight == 10 steps (--stop-after, checkpoint) + --resume + 10 steps.
# Per-step losses and validation losses are bitwise equal (the JSON log prints doubles with
# round-trip precision), and so are the final checkpoints' bytes. Dropout is on and gradients are
# accumulated, so masks, data order, AdamW state and the schedule all have to survive the resume.
# Then --resume's flag rules: flags that disagree with the checkpoint are usage errors (exit 2).
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
args=(--layers 2 --hidden 32 --heads 2 --seq 32 --batch 2 --grad-accum 2 --dropout 0.1 --steps 20 --lr 2e-3
      --eval-every 5 --eval-batches 2 --threads 2 --seed 11 --data "$data" --save-every 5 --print-every 100)
losses() { grep -o '"step":[0-9]*,"loss":[^,]*,\("val_loss":[^,]*,\)\?' "$@"; }

"$ctron" train "${args[@]}" --ckpt-dir "$dir/straight" --log "$dir/a.jsonl" > /dev/null || bad "straight run failed"
"$ctron" train "${args[@]}" --ckpt-dir "$dir/split" --stop-after 10 --log "$dir/b1.jsonl" > "$dir/b1.out" || bad "first half failed"
grep -q "stopped after step 10 of 20" "$dir/b1.out" && ok || bad "no 'stopped after' line: $(cat "$dir/b1.out")"
[ -d "$dir/split/step_00000010" ] && [ ! -d "$dir/split/step_00000015" ] && ok || bad "the first half did not end with step_00000010"
# Only --resume (and where to log): every other setting comes from the checkpoint.
"$ctron" train --resume "$dir/split" --threads 2 --log "$dir/b2.jsonl" > "$dir/b2.out" || bad "resume failed: $(cat "$dir/b2.out")"
grep -q "resumed from $dir/split/step_00000010 at step 10 of 20" "$dir/b2.out" && ok || bad "no 'resumed from' line"

[ "$(losses "$dir/a.jsonl" | wc -l)" -eq 20 ] && ok || bad "straight run logged $(losses "$dir/a.jsonl" | wc -l) steps"
[ "$(losses "$dir/b2.jsonl" | wc -l)" -eq 10 ] && ok || bad "resumed run logged $(losses "$dir/b2.jsonl" | wc -l) steps, expected 10"
if diff <(losses "$dir/a.jsonl") <(cat "$dir/b1.jsonl" "$dir/b2.jsonl" | losses) > /dev/null; then ok
else bad "losses differ after resume"; diff <(losses "$dir/a.jsonl") <(cat "$dir/b1.jsonl" "$dir/b2.jsonl" | losses) | head; fi
for f in model.safetensors optimizer.safetensors state.json; do
  cmp -s "$dir/straight/step_00000020/$f" "$dir/split/step_00000020/$f" && ok || bad "step_00000020/$f differs between the straight and the resumed run"
done
# --keep 3 (default) holds after the resumed run's saves.
[ "$(ls "$dir/split" | tr '\n' ' ')" = "step_00000010 step_00000015 step_00000020 " ] && ok || bad "split run holds: $(ls -a "$dir/split")"

# Resuming from one step directory with every flag given (and agreeing) is the same run again.
"$ctron" train "${args[@]}" --resume "$dir/straight/step_00000010" --ckpt-dir "$dir/again" --log "$dir/c2.jsonl" > /dev/null \
  || bad "resume with agreeing flags failed"
diff <(losses "$dir/b2.jsonl") <(losses "$dir/c2.jsonl") > /dev/null && ok || bad "resume from a step directory differs"

expect() {  # expect "needle" args...
  local needle=$1; shift
  out=$("$ctron" train "$@" 2>&1 > /dev/null); rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$needle" <<< "$out"; then ok
  else bad "ctron train $* -> rc $rc, message: $out (wanted '$needle')"; fi
}
expect "--layers 3 does not match the checkpoint's 2" --resume "$dir/split/step_00000010" --layers 3 --threads 2
expect "--dropout 0.2 does not match the checkpoint's 0.1" --resume "$dir/split" --dropout 0.2
expect "--seed 12 does not match the checkpoint's 11" --resume "$dir/split" --seed 12
expect "--lr 0.001 does not match the checkpoint's 0.002" --resume "$dir/split" --lr 1e-3
expect "nothing is left to train" --resume "$dir/split"
expect "checkpoint '$dir/nope' does not exist" --resume "$dir/nope"
expect "no checkpoint in '$dir'" --resume "$dir"
expect "--save-every needs --ckpt-dir" --save-every 5 --data "$data"
expect "--stop-after 30 is beyond --steps 20" --stop-after 30 --steps 20 --data "$data"
expect "--keep: -1 is out of range" --keep -1 --data "$data"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
