#!/usr/bin/env bash
# ctron train --reversible and ctron memory --reversible (issue 29 part 2) from the command line:
#  - ctron memory predicts the step's peak that ctron train's ledger measures (GPT-2 fp32, llama bf16
#    storage), and its per-layer bytes are 0 with the two fp32 streams among the extras;
#  - the peak does not grow with depth (L 2 and 8: the same bytes);
#  - a run stopped after step 2 and resumed with a plain --resume (state.json model.reversible)
#    ends with the uninterrupted run's model.safetensors, byte for byte;
#  - bad combinations exit 2 naming the reason; a standard checkpoint resumed with --reversible, and
#    generate on a reversible checkpoint, are refused.
# usage: test_reversible_cli.sh CTRON DATA
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
shape=(--hidden 64 --heads 4 --seq 32 --batch 4 --vocab 259)
common=("${shape[@]}" --steps 4 --eval-every 0 --threads 1 --data "$data" --reversible)

# predicted == measured, and independent of depth
for spec in "gpt2 fp32" "llama bf16"; do
  set -- $spec; arch=$1; dt=$2
  fam=(); [ $arch = llama ] && fam=(--arch llama --kv-heads 2 --ffn-hidden 176)
  peaks=()
  for L in 2 8; do
    "$ctron" train "${common[@]}" "${fam[@]}" --layers $L --act-dtype $dt --steps 1 --ledger > "$dir/t.out" 2>&1
    measured=$(sed -n 's/.*peak of the step (recomputation included): measured \([0-9]*\) .*  ok$/\1/p' "$dir/t.out")
    "$ctron" memory "${shape[@]}" "${fam[@]}" --layers $L --act-dtype $dt --dropout $([ $arch = llama ] && echo 0 || echo 0.1) \
      --reversible --json > "$dir/m.json" 2>&1
    predicted=$(python3 -c "import json; d=json.load(open('$dir/m.json')); print(d['first_stage']['activation_peak_bytes'])")
    layers=$(python3 -c "import json; d=json.load(open('$dir/m.json')); print(d['first_stage']['layers_bytes'], d['extras']['rev_x1'], d['shape']['reversible'])")
    check '[ -n "$measured" ] && [ "$measured" = "$predicted" ]' "$arch $dt L$L: train measured '$measured', memory predicts '$predicted': $(grep -m2 'peak\|error' "$dir/t.out")"
    check '[ "$layers" = "0 32768 True" ]' "$arch L$L: memory's layer bytes, rev_x1, shape.reversible: $layers"
    peaks+=("$measured")
  done
  check '[ "${peaks[0]}" = "${peaks[1]}" ]' "$arch: the peak grows with depth: ${peaks[*]}"
done

# resume restores the architecture from state.json
"$ctron" train "${common[@]}" --layers 2 --dropout 0.1 --ckpt-dir "$dir/u" > "$dir/u.out" 2>&1
"$ctron" train "${common[@]}" --layers 2 --dropout 0.1 --stop-after 2 --ckpt-dir "$dir/i" > "$dir/i.out" 2>&1
"$ctron" train --resume "$dir/i" --threads 1 > "$dir/r.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "reversible blocks" "$dir/r.out" && cmp -s "$dir/u/step_00000004/model.safetensors" "$dir/i/step_00000004/model.safetensors"' \
  "plain --resume of a reversible run: $(tail -2 "$dir/r.out")"
check 'grep -q "\"reversible\":.*true" "$dir/i/step_00000002/state.json"' "state.json has no model.reversible"

# refusals
bad() {
  local msg=$1; shift
  "$ctron" "$@" > "$dir/b.out" 2>&1
  local rc=$?
  check "[ $rc -eq 2 ] && grep -qF -- '$msg' '$dir/b.out'" "$* : exit $rc, expected 2 and '$msg': $(head -3 "$dir/b.out")"
}
bad "--reversible with --recompute selective" train "${common[@]}" --layers 2 --recompute selective
bad "--reversible with --recompute-layers" train "${common[@]}" --layers 2 --recompute-layers 0-1:none
bad "--reversible with --offload" train "${common[@]}" --layers 2 --offload all
bad "--reversible with --mem-budget" train "${common[@]}" --layers 2 --mem-budget 64MiB
bad "--reversible with --static-plan" train "${common[@]}" --layers 2 --static-plan
bad "--reversible with --sample 8" train "${common[@]}" --layers 2 --sample 8
bad "--reversible with --pp > 1" memory "${shape[@]}" --layers 4 --pp 2 --reversible
"$ctron" train "${shape[@]}" --layers 2 --steps 2 --eval-every 0 --threads 1 --data "$data" --ckpt-dir "$dir/s" > /dev/null 2>&1
bad "--resume: --reversible (reversible blocks) does not match the checkpoint" \
  train --resume "$dir/s" --reversible --threads 1
"$ctron" generate --ckpt "$dir/u" --prompt "In the" > "$dir/g.out" 2>&1
rc=$?
check '[ $rc -ne 0 ] && grep -q "is a reversible-block model" "$dir/g.out"' "generate on a reversible checkpoint: $(head -2 "$dir/g.out")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
