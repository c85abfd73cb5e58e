#!/usr/bin/env bash
# ctron memory: bad flags exit 2 naming the flag; --json parses and holds the paper's numbers;
# --plot writes well-formed SVG; --pp prints every stage's exact peak; ctron plan --pp plans each stage.
set -uo pipefail
ctron=$1
py=${2:-/usr/bin/python3}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
ok()  { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
expect() {  # expect "needle" args...
  local needle=$1; shift
  out=$("$ctron" memory "$@" 2>&1 > /dev/null); rc=$?
  if [ $rc -eq 2 ] && grep -q -- "$needle" <<< "$out"; then ok
  else bad "ctron memory $* -> rc $rc, message: $out (wanted '$needle')"; fi
}
expect "--tp 3 does not divide --heads 64"        --preset 22B --tp 3
expect "--sp: --seq 2047 is not divisible by --tp 8" --preset 22B --sp --seq 2047
expect "--sp splits the sequence over the tensor-parallel group: it needs --tp 2 or more (this layout has --tp 1)" --sp
expect "--sp splits the sequence over the tensor-parallel group: it needs --tp 2 or more (this layout has --tp 1)" --preset 22B --tp 1 --sp
expect "--pp 5 does not divide --layers 48"       --preset 22B --pp 5
expect "--interleave 2 needs --pp > 1"            --preset 22B --interleave 2
expect "--interleave 5: --layers 96 is not divisible" --preset 175B --interleave 5
expect "--recompute: unknown policy 'sometimes'"  --recompute sometimes
expect "--recompute-method: unknown method 'diagonal'" --recompute full --recompute-method diagonal
expect "--recompute-num-layers 13 must be between 1 and the layer count 12" --recompute full --recompute-num-layers 13
expect "--recompute-num-layers 5 must be between 1 and the layer count 4" --preset 175B --recompute full --recompute-num-layers 5
expect "--recompute-layers: layer 6 is not covered" --recompute-layers 0-5:full
expect "--recompute-layers: cannot parse"         --recompute-layers 0-11:sel
expect "--recompute-layers replaces --recompute"  --recompute none --recompute-layers 0-11:full
expect "--recompute-num-layers is only for --recompute full" --recompute selective --recompute-num-layers 2
expect "--preset: unknown model 'foo'"            --preset foo
expect "--preset: unknown model '2B'"             --preset 22B,2B
expect "--act-dtype: unknown type 'fp16'"         --act-dtype fp16
expect "--dropout-masks: unknown mode 'none'"     --dropout-masks none
expect "--dropout: 1 is out of range"             --dropout 1
expect "--hidden 100 is not divisible by --heads 3" --hidden 100 --heads 3
expect "--layers: expected an integer, got 'x'"   --layers x
expect "--gpus 12 is not a multiple of tp × pp = 8" --preset 22B --gpus 12
expect "--global-batch 6 is not a multiple of micro-batch" --preset 22B --global-batch 6
expect "--iter-time: 0 is out of range"           --iter-time 0
expect "--plot: cannot write '$dir/no/x.svg'"     --plot "$dir/no/x.svg"
expect "unknown option '--bogus'"                 --bogus
expect "--tp: missing value"                      --tp
# (the help is read whole: grep -q stopping early would kill the writer with SIGPIPE under pipefail)
help=$("$ctron" memory --help)
if grep -q -- "--recompute-layers" <<< "$help" && grep -q -- "--pp-schedule S" <<< "$help"; then ok; else bad "memory --help"; fi

# JSON: 22B with SP + selective at Table 5's iteration time.
if "$ctron" memory --preset 22B --sp --recompute selective --json > "$dir/22b.json"; then ok; else bad "--json rc"; fi
if "$py" - "$dir/22b.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["model"] == "22B" and d["layout"]["tp"] == 8 and d["layout"]["sp"] is True, d["layout"]
assert d["shape"]["hidden"] == 6144 and d["shape"]["micro_batch"] == 4
pc = d["paper_comparison"]
s, b, h, a, t = 2048, 4, 6144, 64, 8
assert pc["tp"]["bytes_per_layer"] == 10*s*b*h + 24*s*b*h//t + 5*a*s*s*b//t
assert pc["tp_sp_selective"]["bytes_per_layer"] == 34*s*b*h//t
assert round(pc["tp_sp"]["percent_of_tp"], 1) == 66.8 and round(pc["full"]["percent_of_tp"], 1) == 7.6
cls = d["layer_classes"]
assert len(cls) == 1 and cls[0]["recompute"] == "selective" and cls[0]["layers"] == 48
assert cls[0]["bytes"]["attn_prob"] == 0 and cls[0]["bytes"]["gelu_in"] == 2*4*s*b*h//t
fs = d["first_stage"]
assert fs["activation_peak_bytes"] >= fs["held_bytes"] > 0 and fs["layers"] == 48
assert abs(d["flops"]["mfu"] - 0.4165) < 0.001 and abs(d["flops"]["hfu"] - 0.4381) < 0.001, d["flops"]
assert d["flops"]["iter_time_from_paper"] is True
PY
then ok; else bad "22B JSON fields"; fi
if "$ctron" memory --preset paper --json | "$py" -c 'import json,sys; d=json.load(sys.stdin); assert [m["model"] for m in d["models"]] == ["22B","175B","530B","1T"]; assert d["models"][1]["layout"]["interleave"] == 3'
then ok; else bad "paper JSON"; fi
# Overrides: --tp 4 on 22B keeps dp and the batch; a custom shape is named custom.
if "$ctron" memory --preset 22B --tp 4 --json | "$py" -c 'import json,sys; d=json.load(sys.stdin); assert d["layout"]["tp"] == 4 and d["layout"]["gpus"] == 4 and "flops" in d and "mfu" not in d["flops"]'
then ok; else bad "22B --tp 4 JSON"; fi
# A vocabulary that t does not divide is padded, as in training: each of 8 ranks holds ⌈50257/8⌉ = 6283
# logit columns: s·b·6283 elements, fp32 (logits are never stored in bf16).
if "$ctron" memory --preset 22B --vocab 50257 --json | "$py" -c 'import json,sys; d=json.load(sys.stdin); assert d["extras"]["logits"] == 2048 * 4 * 6283 * 4, d["extras"]["logits"]'; then ok
else bad "ctron memory --preset 22B --vocab 50257: logits per rank should use the vocabulary padded to 50264"; fi
if "$ctron" memory --layers 4 --hidden 128 --heads 4 --seq 64 --batch 2 --vocab 256 --json | "$py" -c 'import json,sys; d=json.load(sys.stdin); assert d["model"] == "custom" and d["shape"]["layers"] == 4'
then ok; else bad "custom JSON"; fi

# Text: the Figure 7 table and MFU.
out=$("$ctron" memory --preset 22B --sp --recompute selective)
if grep -q "TP + SP + selective .* 16.1 %" <<< "$out" && grep -q "MFU .*41.65 %" <<< "$out"; then ok; else bad "22B text: $out"; fi

# --plot: well-formed SVG with a bar per technique and model.
if "$ctron" memory --preset paper --plot "$dir/fig7.svg" > /dev/null 2>&1; then ok; else bad "--plot rc"; fi
if "$py" - "$dir/fig7.svg" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
bars = [r for r in root.iter(ns + "rect") if r.find(ns + "title") is not None]
assert len(bars) == 4 * 5, len(bars)
texts = " ".join(t.text or "" for t in root.iter(ns + "text"))
for w in ("22B", "1T", "TP + SP + selective", "% of TP baseline", "66.8", "16.1"):
    assert w in texts, w
PY
then ok; else bad "SVG not well-formed or incomplete"; fi
# --pp: every stage from the schedule. fp32, byte masks, s=64 b=2 h=64 a=4 v=128: a layer keeps
# 66sbh + 9as²b + 16sb (LN statistics) = 837632 bytes, the embedding mask sbh = 8192, the head
# 8sbh + 8sb + 4sbv = 132096. 1F1B, p = 4, m = 6: stage r holds min(p − r, m) micro-batches of its 2 layers.
small=(--layers 8 --hidden 64 --heads 4 --seq 64 --batch 2 --vocab 128 --act-dtype fp32)
if "$ctron" memory "${small[@]}" --pp 4 --grad-accum 6 --json > "$dir/pp.json" && "$py" - "$dir/pp.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s, b, h, a, v, p = 64, 2, 64, 4, 128, 4
layer = 66*s*b*h + 9*a*s*s*b + 16*s*b
emb, head = s*b*h, 8*s*b*h + 8*s*b + 4*s*b*v
assert (layer, emb, head) == (837632, 8192, 132096)
st = d["stages"]
assert [x["layers"] for x in st] == ["0-1", "2-3", "4-5", "6-7"], st
assert [x["contexts"] for x in st] == [4, 3, 2, 1], [x["contexts"] for x in st]
want = [(p - r) * 2 * layer + (p * emb if r == 0 else 0) + (head if r == p - 1 else 0) for r in range(p)]
assert [x["peak_bytes"] for x in st] == want == [6733824, 5025792, 3350528, 1807360], [x["peak_bytes"] for x in st]
assert st[0]["largest"] and d["pipeline"]["largest_stage"] == 0 and d["pipeline"]["micro_batches"] == 6
eq5 = d["pipeline"]["first_stage_closed_form"]   # Eq. 5: L layers' worth; the embedding masks of p micro-batches
assert eq5["layers_worth"] == 8 and eq5["schedule_layers_bytes"] == 8 * layer and eq5["layers_agree"], eq5
assert eq5["rest_bytes"] == p * emb == eq5["paper_extra_bytes"] and eq5["rest_agrees"], eq5
PY
then ok; else bad "memory --pp 4 --json: stage peaks"; fi
out=$("$ctron" memory "${small[@]}" --pp 4 --grad-accum 6)
if [ "$(grep -cE '^ +[0-3]  [0-9]+-[0-9]+ ' <<< "$out")" -eq 4 ] && grep -qE '^ +0  0-1 .* 6\.42 MiB  <- largest$' <<< "$out" &&
   [ "$(grep -c -- '— agrees' <<< "$out")" -eq 2 ]; then ok; else bad "memory --pp 4 text: $out"; fi
expect "--pp-schedule interleaved needs the micro-batches (--grad-accum 6) to be a multiple of --pp 4" \
  "${small[@]}" --pp 4 --pp-schedule interleaved --virtual-stages 2 --grad-accum 6
expect "--virtual-stages 2 needs --pp-schedule interleaved (got 1f1b)" "${small[@]}" --pp 4 --pp-schedule 1f1b --virtual-stages 2
expect "--pp-schedule interleaved needs --virtual-stages V >= 2 (not given)" "${small[@]}" --pp 2 --pp-schedule interleaved
expect "--virtual-stages 2 and --interleave 3 disagree" "${small[@]}" --pp 2 --virtual-stages 2 --interleave 3
expect "--pp-schedule: unknown schedule 'zb'"     "${small[@]}" --pp 2 --pp-schedule zb
expect "--grad-accum 3 and --global-batch 4 disagree" "${small[@]}" --pp 2 --grad-accum 3 --global-batch 4

# ctron plan --pp: each stage its own plan; the first stage (two micro-batches in flight) recomputes more.
shape=(--layers 8 --hidden 256 --heads 4 --seq 128 --batch 4 --vocab 256 --threads 2)
out=$("$ctron" plan "${shape[@]}" --pp 2 --grad-accum 4 --mem-budget 20MiB); rc=$?
s0=$(grep -E '^ +0  0-3 ' <<< "$out" | awk '{print $3, $4, $5}'); s1=$(grep -E '^ +1  4-7 ' <<< "$out" | awk '{print $3, $4, $5}')
f0=$(grep -E '^ +0  0-3 ' <<< "$out" | awk '{print $9}'); f1=$(grep -E '^ +1  4-7 ' <<< "$out" | awk '{print $9}')
if [ $rc -eq 0 ] && [ -n "$s0" ] && [ -n "$s1" ] && [ "$s0" != "$s1" ] && "$py" -c "assert $f0 > $f1" &&
   grep -q -- "ctron train flags: --pp 2 --pp-schedule 1f1b --grad-accum 4 --recompute-layers 0-" <<< "$out"
then ok; else bad "plan --pp 2: stage 0 '$s0' ($f0 GFLOP) and stage 1 '$s1' ($f1) should differ: $out"; fi
out=$("$ctron" plan "${shape[@]}" --pp 2 --grad-accum 4 --mem-budget 1MiB); rc=$?
if [ $rc -eq 2 ] && grep -q "stage 0 does not fit 1.00 MiB: the least it needs is" <<< "$out"; then ok
else bad "plan --pp 2 --mem-budget 1MiB: rc $rc, $out"; fi
out=$("$ctron" plan "${shape[@]}" --pp 3 --mem-budget 1GiB 2>&1 >/dev/null); rc=$?
if [ $rc -eq 2 ] && grep -q "L = 8 layers is not divisible by P = 3 (--pp 3)" <<< "$out"; then ok; else bad "plan --pp 3: rc $rc, $out"; fi
# Sizes out of range say the range (issue 23: "not a size" for 0 and 1e30).
for b in 0 1e30 -5; do
  out=$("$ctron" plan --budget $b 2>&1 > /dev/null); rc=$?
  if [ $rc -eq 2 ] && grep -q -- "--budget: '$b' is out of range: expected a size from 1 B to 1 EiB" <<< "$out"; then ok
  else bad "plan --budget $b -> rc $rc: $out"; fi
done
out=$("$ctron" plan --budget 2GiBs 2>&1 > /dev/null); rc=$?
if [ $rc -eq 2 ] && grep -q -- "--budget: '2GiBs' is not a size: expected a size from 1 B to 1 EiB" <<< "$out"; then ok
else bad "plan --budget 2GiBs -> rc $rc: $out"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
