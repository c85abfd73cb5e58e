#!/usr/bin/env bash
# Per-rank activation memory and communication under TP/SP (issue 5; the paper's Table 2 and §4.2.2):
#  - every rank's measured ledger bytes per layer equal the prediction for its layout, and with e = 2
#    (bf16 storage) and k = 1 (byte masks) the paper's closed forms: TP sbh(10 + 24/t + 5as/(ht)),
#    TP+SP sbh(34/t + 5as/(ht)), TP+selective sbh(10 + 24/t), TP+SP+selective 34sbh/t, full
#    recompute 2sbh (2sbh/t with SP), plus the LayerNorm statistics the paper leaves out;
#  - with SP, the all-gathers and reduce-scatters of a layer move exactly the bytes of TP's
#    all-reduces, from the byte counters (SP's re-gathering of its kept shards is counted apart).
# usage: test_tp_memory.sh CTRON DATA MPIEXEC [mpiexec flags...]
set -uo pipefail
ctron=$1; data=$2; shift 2; launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
S=32; B=2; H=32; A=4; L=2
common=(--layers $L --hidden $H --heads $A --seq $S --batch $B --steps 1 --eval-every 0 --eval-batches 1
        --dropout 0.1 --threads 1 --data "$data" --act-dtype bf16 --dropout-masks bytes)

ledger() {   # ledger NAME NP T SP POLICY flags...: the per-rank report against the closed form
  local name=$1 np=$2 t=$3 sp=$4 policy=$5; shift 5
  timeout 60 "${launch[@]}" -np "$np" "$ctron" train "${common[@]}" "$@" > "$dir/$name.out" 2>&1
  ec=$?; check '[ $ec -eq 0 ]' "$name: exit $ec: $(tail -3 "$dir/$name.out")"
  /usr/bin/python3 - "$dir/$name.out" $np $t $sp $policy $S $B $H $A <<'PY'
import re, sys
path, np_, t, sp, policy, s, b, h, a = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5], *map(int, sys.argv[6:])
text = open(path).read()
sbh = s * b * h
core = {"tp": sbh * (10 + 24 / t + 5 * a * s / (h * t)), "tpsp": sbh * (34 / t + 5 * a * s / (h * t)),
        "tpsel": sbh * (10 + 24 / t), "tpspsel": 34 * sbh / t,
        "full": 2 * sbh, "fullsp": 2 * sbh / t}[policy]
rows = s * b // (t if sp else 1)
stats = 0 if policy.startswith("full") else 2 * 2 * rows * 4        # ln1/ln2 (mean, rstd) in fp32
want = core + stats
table = text.split("activation bytes per rank")[1]
got = [(int(r), int(m), int(p)) for r, m, p in re.findall(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s", table, re.M)]
bad = "MISMATCH" in text
ok = len(got) == np_ and all(m == want and p == want for _, m, p in got) and not bad
print(f"{policy} t={t}: layer bytes per rank {[m for _, m, _ in got]}, closed form {want:.0f}"
      f"{' MISMATCH in the report' if bad else ''}")
sys.exit(0 if ok else 1)
PY
  ec=$?; check '[ $ec -eq 0 ]' "$name: per-rank ledger differs from the paper's form"
}
ledger tp2      2 2 0 tp        --tp 2
ledger tp2sp    2 2 1 tpsp      --tp 2 --sp
ledger tp2sel   2 2 0 tpsel     --tp 2 --recompute selective
ledger tp2spsel 2 2 1 tpspsel   --tp 2 --sp --recompute selective
ledger tp4sp    4 4 1 tpsp      --tp 4 --sp
ledger tp4spsel 4 4 1 tpspsel   --tp 4 --sp --recompute selective
ledger tp2full  2 2 0 full      --tp 2 --recompute full
ledger tp2spfull 2 2 1 fullsp   --tp 2 --sp --recompute full

# Communication per step: TP all-reduces vs SP all-gathers + reduce-scatters, inside the blocks.
comm() {
  timeout 60 "${launch[@]}" -np 2 "$ctron" train "${common[@]}" --act-dtype fp32 --tp 2 --no-ledger "$@" \
    --log "$dir/comm$#.jsonl" > /dev/null 2>&1
}
comm; comm --sp
/usr/bin/python3 - "$dir" $S $B $H $L <<'PY'
import json, sys
d, s, b, h, L = sys.argv[1], *map(int, sys.argv[2:])
tp = json.loads(open(f"{d}/comm0.jsonl").readline())
sp = json.loads(open(f"{d}/comm1.jsonl").readline())
N = s * b * h * 4          # bytes of one [s,b,h] fp32 activation
t = 2
want_block = L * 4 * 2 * (t - 1) / t * N   # 4 all-reduces per layer (2 forward, 2 backward)
want_regather = (2 * L + 1) * (t - 1) / t * N   # qkv_in, fc1_in per layer and lm_in, gathered again
print(f"per step: TP block all-reduce {tp['tp_bytes']['block']:.0f} B, SP block all-gather + reduce-scatter "
      f"{sp['tp_bytes']['block']:.0f} B (expected {want_block:.0f}); SP re-gather {sp['tp_bytes']['regather']:.0f} B "
      f"(expected {want_regather:.0f}); by kind TP {tp['comm_bytes']} SP {sp['comm_bytes']}")
ok = (tp["tp_bytes"]["block"] == sp["tp_bytes"]["block"] == want_block and tp["tp_bytes"]["regather"] == 0
      and sp["tp_bytes"]["regather"] == want_regather)
sys.exit(0 if ok else 1)
PY
ec=$?; check '[ $ec -eq 0 ]' "SP's all-gather + reduce-scatter bytes differ from TP's all-reduce bytes"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
