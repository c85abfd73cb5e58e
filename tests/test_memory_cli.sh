#!/usr/bin/env bash
# ctron memory: bad flags exit 2 naming the flag; --json parses and holds the paper's numbers;
# --plot writes well-formed SVG.
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
if "$ctron" memory --help | grep -q -- "--recompute-layers"; then ok; else bad "memory --help"; fi

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
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
