#!/usr/bin/env bash
# Checkpoints of a --base-dtype bf16 LoRA run (issue 27, docs/CHECKPOINTS.md, docs/LORA.md):
#  - model.safetensors holds the frozen base as BF16 and the adapters (LoRA-FA's frozen A too) as F32; its data
#    section is 2 B per base element + 4 B per adapter element, computed here by hand (llama LoRA, GPT-2 LoRA-FA),
#    and optimizer.safetensors 8 B per trained element;
#  - the room check before the first save counts those bytes (not 12 B per base element);
#  - a resume from step 2 ends bitwise where the uninterrupted run does (llama: steps 3-4 losses; llama and GPT-2
#    LoRA-FA, whose Conv1D base is transposed: step 4's model and optimizer files), and so does a resume from the
#    same checkpoint rewritten as an older ctron wrote it (the base widened to F32 by ckpt_st.py widen: byte for
#    byte the file the writer before BF16 bases wrote, checked by hand once);
#  - eval, export --hf --merge, export --peft and --init-from (into a bf16-base and an fp32-base run) give the
#    same numbers and bytes from the BF16 checkpoint as from its F32 rewrite;
#  - bad input: a BF16 adapter (resume exits 1, --init-from and eval 2, naming the tensor and F32), a BF16 base
#    in an fp32-base checkpoint and a BF16 moment (ckpt verify fails naming it), a truncated BF16 file; no file
#    of the refused run directory changes (its .lock aside).
# Given MPIEXEC (test_ckpt_base16_mpi), only the layouts instead: the gathered save of TP 2, PP 2 and DP 2 +
# ZeRO-1 writes the same BF16 base bytes as one process, and a TP 2 run resumes the one-process checkpoint and
# --init-from's it from BF16 as from F32.
# usage: test_ckpt_base16.sh CTRON DATA [MPIEXEC flags...]
set -uo pipefail
ctron=$1; data=$2; shift 2; launch=("$@")
here=$(cd "$(dirname "$0")" && pwd)
py=(/usr/bin/python3 "$here/ckpt_st.py")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
# losses A B [FIRST]: the training losses of two --log files equal from step FIRST on (every step of B)
losses() {
  /usr/bin/python3 - "$1" "$2" "${3:-1}" <<'EOF'
import json, sys
a = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[1]))}
b = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[2]))}
steps = [s for s in sorted(b) if s >= int(sys.argv[3])]
bad = [(s, a.get(s), b[s]) for s in steps if a.get(s) != b[s]]
if not steps or bad:
    print("steps", steps, "differing (step, a, b):", bad[:3]); sys.exit(1)
EOF
}
llama=(--arch llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn-hidden 176 --seq 16 --batch 2 --vocab 259
       --eval-every 0 --threads 1 --data "$data" --dropout 0.1 --lr 5e-3)
gpt2=(--arch gpt2 --layers 2 --hidden 64 --heads 4 --seq 16 --batch 2 --vocab 259 --eval-every 0 --threads 1
      --data "$data" --dropout 0.1 --lr 5e-3)
# ok_run OUT command...: output in OUT, exit 0 checked (the status is taken before the message's $(...) runs: a
# command substitution in check's arguments would reset $? to its own 0)
ok_run() {
  local out=$1; shift
  "$@" > "$out" 2>&1
  local rc=$?
  check "[ $rc -eq 0 ]" "$*: exit $rc: $(tail -2 "$out")"
}
run() { local name=$1; shift; ok_run "$dir/$name.out" "$ctron" train "$@"; }   # run NAME train-args...

# ---- the sizes, by hand
# llama: L 2, h 64, kv 2·16, f 176, v 259 untied; base per layer q,k,v 64·(64+2·32), o 64·64, gate, up, down 3·176·64,
# two RMSNorms 2·64; the final norm 64, the embedding and the output layer 2·259·64. Adapters r 4 on all seven:
# A r·in (q k v o gate up: 64, down: 176), B out·r (q 64, k v 32, o 64, gate up 176, down 64).
base=$(( 2 * (64 * (64 + 2 * 32) + 64 * 64 + 3 * 176 * 64 + 2 * 64) + 64 + 2 * 259 * 64 ))
a=$(( 2 * 4 * (6 * 64 + 176) )); b=$(( 2 * 4 * (64 + 2 * 32 + 64 + 2 * 176 + 64) ))
run llama "${llama[@]}" --lora-rank 4 --base-dtype bf16 --steps 4 --save-every 2 --keep 0 --ckpt-dir "$dir/llama" \
  --log "$dir/llama.jsonl"
s2=$dir/llama/step_00000002
mkdir -p "$dir/r16" "$dir/r32"
cp -r "$s2" "$dir/r16/"; cp -r "$s2" "$dir/r32/"
"${py[@]}" widen "$dir/r32/step_00000002"

if [ ${#launch[@]} -eq 0 ]; then   # ---- one process (ASan-clean); given MPIEXEC, the layouts below instead
  "${py[@]}" dtypes "$s2/model.safetensors" > "$dir/d"
  echo "llama: $(tail -1 "$dir/d"), by hand: base $base elements, adapters $((a + b))"
  check "[ \$(grep -c ' BF16 ' '$dir/d') -eq 21 ] && ! grep ' BF16 ' '$dir/d' | grep -q lora_ && ! grep ' F32 ' '$dir/d' | grep -vq lora_" \
    "llama: not 21 BF16 base tensors and F32 adapters: $(grep -c ' BF16 ' "$dir/d") BF16"
  check "tail -1 '$dir/d' | grep -qx 'header [0-9]* data $((2 * base + 4 * (a + b))) total [0-9]*'" \
    "llama: the model file's data is not 2·$base + 4·$((a + b)) = $((2 * base + 4 * (a + b))) bytes: $(tail -1 "$dir/d")"
  check "tail -1 '$dir/d' | awk '{exit !(\$6 == 8 + \$2 + \$4)}'" "llama: the file is not 8 + header + data: $(tail -1 "$dir/d")"
  "${py[@]}" dtypes "$s2/optimizer.safetensors" > "$dir/o"
  check "tail -1 '$dir/o' | grep -q ' data $((8 * (a + b))) ' && ! grep -q ' BF16 ' '$dir/o'" \
    "llama: the optimizer file is not 8·$((a + b)) bytes of F32: $(tail -1 "$dir/o")"
  check "grep -q 'saved $s2 ([0-9.]* KiB' '$dir/llama.out' && grep -q \"$(awk -v x=$((2 * base + 12 * (a + b))) 'BEGIN{printf "%.2f KiB", x / 1024}')\" '$dir/llama.out'" \
    "llama: the save line's size: $(grep -m1 saved "$dir/llama.out")"

  # GPT-2 LoRA-FA: base per layer 12h² + 13h, wte 259·64, wpe 16·64, ln_f 2·64; A (frozen, F32) r·in over
  # c_attn c_proj c_fc (64) and mlp.c_proj (256), B out·r (192, 64, 256, 64), only B trains.
  gbase=$(( 2 * (12 * 64 * 64 + 13 * 64) + 259 * 64 + 16 * 64 + 2 * 64 ))
  ga=$(( 2 * 4 * (3 * 64 + 256) )); gb=$(( 2 * 4 * (192 + 64 + 256 + 64) ))
  run gpt2 "${gpt2[@]}" --lora-rank 4 --lora-fa --base-dtype bf16 --steps 4 --save-every 2 --keep 0 --ckpt-dir "$dir/gpt2"
  "${py[@]}" dtypes "$dir/gpt2/step_00000002/model.safetensors" > "$dir/d"
  check "tail -1 '$dir/d' | grep -q ' data $((2 * gbase + 4 * (ga + gb))) ' && grep -q '^h.0.attn.c_attn.weight BF16 ' '$dir/d' && grep -q 'lora_A.weight F32 ' '$dir/d'" \
    "gpt2 LoRA-FA: not BF16 base + F32 A and B = $((2 * gbase + 4 * (ga + gb))) bytes: $(tail -1 "$dir/d")"
  "${py[@]}" dtypes "$dir/gpt2/step_00000002/optimizer.safetensors" > "$dir/o"
  check "tail -1 '$dir/o' | grep -q ' data $((8 * gb)) '" "gpt2 LoRA-FA: the optimizer file is not 8·$gb bytes: $(tail -1 "$dir/o")"
  # the room a first save needs: 2 B per base element, 12 per trained adapter element, 64 KiB + 256 B per layer + 4
  need=$(awk -v x=$((2 * base + 12 * (a + b) + 65536 + 256 * 6)) 'BEGIN{printf "%.2f KiB", x / 1024}')
  CTRON_TEST_FREE_BYTES=400000 "$ctron" train "${llama[@]}" --lora-rank 4 --base-dtype bf16 --steps 1 --ckpt-dir "$dir/room" \
    > "$dir/room.out" 2>&1; rc=$?
  check "[ $rc -eq 2 ] && grep -q 'needs $need;' '$dir/room.out'" "the room check (expected $need): exit $rc: $(cat "$dir/room.out")"
  # GPT-2's Conv1D base weights are transposed in BF16 too: a resume from step 2 writes the whole run's step 4
  mkdir -p "$dir/g16"; cp -r "$dir/gpt2/step_00000002" "$dir/g16/"
  run gpt2-resume --resume "$dir/g16" --data "$data" --threads 1
  for f in model.safetensors optimizer.safetensors; do
    check "cmp -s '$dir/gpt2/step_00000004/$f' '$dir/g16/step_00000004/$f'" "gpt2: the resumed step 4's $f differs"
  done
  "$ctron" ckpt verify "$dir/llama" > "$dir/v.out" 2>&1; rc=$?
  check "[ $rc -eq 0 ] && grep -q '2 of 2 verify' '$dir/v.out'" "ckpt verify of the BF16 checkpoints: exit $rc: $(cat "$dir/v.out")"

  # ---- resume: bitwise the uninterrupted run, from the BF16 checkpoint and from its F32 rewrite (an older ctron's)
  "${py[@]}" dtypes "$dir/r32/step_00000002/model.safetensors" > "$dir/d"
  check "! grep -q ' BF16 ' '$dir/d' && tail -1 '$dir/d' | grep -q ' data $((4 * base + 4 * (a + b))) '" \
    "the F32 rewrite: $(tail -1 "$dir/d")"
  for r in r16 r32; do
    run "resume-$r" --resume "$dir/$r" --data "$data" --threads 1 --log "$dir/$r.jsonl"
    check 'losses "$dir/llama.jsonl" "$dir/$r.jsonl" 3' "$r: the resumed losses differ from the whole run's"
    for f in model.safetensors optimizer.safetensors; do
      check "cmp -s '$dir/llama/step_00000004/$f' '$dir/$r/step_00000004/$f'" "$r: step 4's $f differs from the whole run's"
    done
  done

  # ---- every reader gives from the BF16 checkpoint what it gives from the F32 one
  for r in r16 r32; do
    c=$dir/$r/step_00000002
    ok_run "$dir/eval-$r.json" "$ctron" eval --model "$c" --data "$data" --max-windows 8 --threads 1 --json
    ok_run "$dir/exp-$r.out" "$ctron" export --hf "$dir/hf-$r" --ckpt "$c" --merge
    ok_run "$dir/peft-$r.out" "$ctron" export --peft "$dir/peft-$r" --ckpt "$c"
    for bd in bf16 fp32; do
      run "init-$r-$bd" "${llama[@]}" --init-from "$c" --lora-rank 4 --base-dtype $bd --steps 2 --log "$dir/init-$r-$bd.jsonl"
    done
  done
  check '[ "$(grep -o "\"loss\":[^,]*" "$dir/eval-r16.json")" = "$(grep -o "\"loss\":[^,]*" "$dir/eval-r32.json")" ]' \
    "eval: $(cat "$dir/eval-r16.json") vs $(cat "$dir/eval-r32.json")"
  check "cmp -s '$dir/hf-r16/model.safetensors' '$dir/hf-r32/model.safetensors'" "export --hf --merge: the files differ"
  check "cmp -s '$dir/peft-r16/adapter_model.safetensors' '$dir/peft-r32/adapter_model.safetensors'" "export --peft: the files differ"
  for bd in bf16 fp32; do
    check 'losses "$dir/init-r32-$bd.jsonl" "$dir/init-r16-$bd.jsonl"' "--init-from into a $bd base: the losses differ"
  done

  # ---- bad input: named, refused, nothing touched
  s4=$dir/llama/step_00000004
  ad=base_model.model.model.layers.1.mlp.down_proj.lora_B.weight
  mkdir -p "$dir/bad"; cp -r "$s4" "$dir/bad/"
  "${py[@]}" retype "$dir/bad/step_00000004" model.safetensors "$ad"
  before=$(cd "$dir/bad" && find . -type f ! -name .lock | sort | xargs md5sum)
  "$ctron" train --resume "$dir/bad" --data "$data" --threads 1 --steps 6 > "$dir/bad.out" 2>&1; rc=$?
  msg="tensor '$ad' is BF16, expected F32: a trained tensor stays fp32"
  check "[ $rc -eq 1 ] && [ \$(grep -cF \"$msg\" '$dir/bad.out') -eq 1 ]" "resume of a BF16 adapter: exit $rc: $(tail -2 "$dir/bad.out")"
  "$ctron" train "${llama[@]}" --init-from "$dir/bad" --lora-rank 4 --steps 1 > "$dir/bad2.out" 2>&1; rc=$?
  check "[ $rc -eq 2 ] && grep -qF \"$msg\" '$dir/bad2.out'" "--init-from a BF16 adapter: exit $rc: $(tail -2 "$dir/bad2.out")"
  "$ctron" eval --model "$dir/bad" --data "$data" --max-windows 2 > "$dir/bad3.out" 2>&1; rc=$?
  check "[ $rc -eq 2 ] && grep -qF \"$msg\" '$dir/bad3.out'" "eval of a BF16 adapter: exit $rc: $(tail -2 "$dir/bad3.out")"
  check '[ "$before" = "$(cd "$dir/bad" && find . -type f ! -name .lock | sort | xargs md5sum)" ]' "the refused run directory changed"
  cp -r "$s4" "$dir/badm"
  "${py[@]}" retype "$dir/badm" optimizer.safetensors "m.$ad"
  "$ctron" ckpt verify "$dir/badm" > "$dir/bad4.out" 2>&1; rc=$?
  check "[ $rc -eq 1 ] && grep -qF \"tensor 'm.$ad' is BF16, expected F32\" '$dir/bad4.out'" "a BF16 moment: exit $rc: $(cat "$dir/bad4.out")"
  run f32base "${llama[@]}" --lora-rank 4 --steps 1 --ckpt-dir "$dir/f32base"
  "${py[@]}" retype "$dir/f32base/step_00000001" model.safetensors model.norm.weight
  "$ctron" ckpt verify "$dir/f32base" > "$dir/bad5.out" 2>&1; rc=$?
  check "[ $rc -eq 1 ] && grep -qF \"tensor 'model.norm.weight' is BF16, expected F32\" '$dir/bad5.out'" \
    "a BF16 base in an fp32-base checkpoint: exit $rc: $(cat "$dir/bad5.out")"
  cp -r "$s4" "$dir/trunc"; rm "$dir/trunc/checksums.txt"   # an unchecksummed (older) checkpoint, cut short
  truncate -s -2 "$dir/trunc/model.safetensors"
  "$ctron" eval --model "$dir/trunc" --data "$data" --max-windows 2 > "$dir/bad6.out" 2>&1; rc=$?
  check "[ $rc -eq 1 ] && grep -q \"tensor 'lm_head.weight': data_offsets .* run past the data section\" '$dir/bad6.out'" \
    "a truncated BF16 file: exit $rc: $(tail -2 "$dir/bad6.out")"

else   # ---- layouts: the gathered save writes what one process writes; TP 2 reads BF16 as F32
  names=$(grep ' BF16 ' <("${py[@]}" dtypes "$s2/model.safetensors") | cut -d' ' -f1)
  for lay in "--tp 2" "--pp 2" "--zero 1"; do
    t=$dir/lay${lay// /}
    # shellcheck disable=SC2086
    ok_run "$t.out" timeout 120 "${launch[@]}" -np 2 "$ctron" train "${llama[@]}" --lora-rank 4 --base-dtype bf16 \
      --steps 2 $lay --ckpt-dir "$t"
    check '"${py[@]}" same "$s2/model.safetensors" "$t/step_00000002/model.safetensors" $names' \
      "$lay: the gathered BF16 base differs from one process's"
    "${py[@]}" dtypes "$t/step_00000002/model.safetensors" > "$dir/d"
    check "tail -1 '$dir/d' | grep -q ' data $((2 * base + 4 * (a + b))) '" "$lay: $(tail -1 "$dir/d")"
  done
  for r in r16 r32; do
    ok_run "$dir/tpi-$r.out" timeout 120 "${launch[@]}" -np 2 "$ctron" train "${llama[@]}" --lora-rank 4 --base-dtype bf16 \
      --steps 2 --tp 2 --init-from "$dir/$r/step_00000002" --log "$dir/tpi-$r.jsonl"
  done
  check 'losses "$dir/tpi-r32.jsonl" "$dir/tpi-r16.jsonl"' "tp 2 --init-from: BF16 and F32 checkpoints differ"
  mkdir -p "$dir/tpr"; cp -r "$s2" "$dir/tpr/"
  ok_run "$dir/tpr.out" timeout 120 "${launch[@]}" -np 2 "$ctron" train --resume "$dir/tpr" --data "$data" --threads 1 \
    --tp 2 --log "$dir/tpr.jsonl"
  check '[ "$(wc -l < "$dir/tpr.jsonl")" -eq 2 ]' "tp 2 resume of the BF16 checkpoint: not 2 steps logged"
  "${py[@]}" dtypes "$dir/tpr/step_00000004/model.safetensors" > "$dir/d"
  check "[ \$(grep -c ' BF16 ' '$dir/d') -eq 21 ]" "tp 2 resume: its checkpoint's base is not BF16"
fi

echo "test_ckpt_base16: $pass passed, $fail failed"
[ $fail -eq 0 ]
