#!/usr/bin/env bash
# The GEMM peak behind MFU/HFU (issue 23 D), with cache values planted (no timing claims):
#  - a cached peak below what a step runs at (measured on a busy machine) is raised to the step's
#    figure with a note: MFU and HFU never print above 100 %, and the cache keeps the higher figure;
#  - an explicit --peak-gflops below a step's figure is kept, with a note that MFU reads above 100 %;
#  - an absurd (1e308) or expired cached figure is refused with the reason, not printed as 300 digits;
#  - `ctron peak` keeps a higher unexpired cached figure (the peak is the best measured).
# usage: test_peak_mfu.sh CTRON DATA
set -uo pipefail
ctron=$1; data=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
export CTRON_PEAK_CACHE=$dir/peak.json
cpu=$(grep -m1 "model name" /proc/cpuinfo | sed 's/^[^:]*:[ \t]*//; s/[ \t]*$//'); [ -n "$cpu" ] || cpu=unknown
plant() { printf '{"version":1,"entries":[{"cpu":"%s","threads":1,"gflops":%s,"measured_at":%s}]}\n' "$cpu" "$1" "$2" > "$CTRON_PEAK_CACHE"; }
now=$(date +%s)
S=(--layers 2 --hidden 64 --heads 4 --seq 64 --batch 2 --threads 1 --no-ledger --eval-every 0 --data "$data")

plant 0.02 "$now"
"$ctron" train "${S[@]}" --steps 4 > "$dir/a.out" 2>&1
rc=$?
mfus=$(grep -o "MFU [0-9.]*% HFU [0-9.]*%" "$dir/a.out" | grep -o "[0-9.]*" | tr '\n' ' ')
check '[ $rc -eq 0 ] && [ -n "$mfus" ] && /usr/bin/python3 -c "import sys; sys.exit(0 if all(float(x) <= 100.0 for x in sys.argv[1:]) else 1)" $mfus' \
  "a low cached peak: MFU/HFU $mfus must all be <= 100: $(grep -m2 "MFU" "$dir/a.out")"
check 'grep -q "above the cached GEMM peak 0.0 (measured on a busy machine?)" "$dir/a.out"' "the note: $(grep note "$dir/a.out")"
raised=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['entries'][0]['gflops'])" "$CTRON_PEAK_CACHE")
check '/usr/bin/python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0.02 else 1)" "$raised"' "the cache keeps the raised figure: $raised"

"$ctron" train "${S[@]}" --steps 2 --peak-gflops 0.01 > "$dir/b.out" 2>&1
check 'grep -q "above --peak-gflops 0.0: MFU/HFU read above 100 %" "$dir/b.out"' "an explicit low peak is noted: $(grep -m3 "note\|MFU" "$dir/b.out")"

plant 1e308 "$now"
"$ctron" peak --show --threads 1 > "$dir/c.out" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "the cached fp32 figure 1e+308 GFLOP/s in .* is not plausible (expected 0.01 to 1e+06 GFLOP/s)" "$dir/c.out"' \
  "1e308 refused: exit $rc: $(cat "$dir/c.out")"
plant 50 $((now - 40 * 86400))
"$ctron" peak --show --threads 1 > "$dir/c.out" 2>&1
rc=$?
check '[ $rc -eq 1 ] && grep -q "was measured 40 days ago (it expires after 30)" "$dir/c.out"' "expired: exit $rc: $(cat "$dir/c.out")"

plant 90000 "$now"
"$ctron" peak --threads 1 --sizes 64 --repeats 1 --json > "$dir/d.out" 2>&1
rc=$?
check '[ $rc -eq 0 ] && grep -q "\"kept_gflops\":90000" "$dir/d.out" && grep -q "\"gflops\":[ ]*90000" "$CTRON_PEAK_CACHE"' \
  "a higher cached figure is kept: exit $rc: $(cat "$dir/d.out")"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
