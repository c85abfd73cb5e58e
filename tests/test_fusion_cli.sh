#!/usr/bin/env bash
# ctron train --recompute search (the fusion-aware recompute search): at fixed --search-rates the pick at a
# per-layer budget is a specific mode, its ledger equals the prediction line by line, its weights are
# bitwise the plain run's (GPT-2 and llama; flash; LoRA and LoRA-FA; under TP 2 + SP against TP 2 + SP when
# a launcher is given),
# and the flags it cannot take are refused with exit 2.
# usage: test_fusion_cli.sh CTRON DATA [LAUNCHER FLAGS...]
set -uo pipefail
ctron=$1; data=$2; shift 2; launch=("$@")
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass+1)); else fail=$((fail+1)); echo "FAIL: $2"; fi; }
gpt=(--layers 2 --hidden 64 --heads 4 --seq 32 --batch 2 --steps 2 --eval-every 2 --dropout 0.1 --threads 2
     --data "$data")
llama=(--arch llama --layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn-hidden 176 --seq 32 --batch 2 --steps 2
       --eval-every 2 --dropout 0.1 --threads 2 --data "$data")
# run NAME ARRAY flags...: exit 0, every ledger line ok
run() {
  local name=$1; local -n fl=$2; shift 2
  "$ctron" train "${fl[@]}" "$@" --ckpt-dir "$dir/$name" > "$dir/$name.out" 2>&1
  local rc=$?
  check "[ $rc -eq 0 ] && ! grep -q MISMATCH '$dir/$name.out' && grep -q 'peak of the step.*ok' '$dir/$name.out'" \
    "$name ($*): exit $rc, $(grep -m2 'MISMATCH\|error\|budget' "$dir/$name.out")"
}
same() { check "cmp -s '$dir/$1/step_00000002/model.safetensors' '$dir/$2/step_00000002/model.safetensors'" \
  "$2: the weights differ from $1's"; }
picks() { check "grep -q 'recompute search: .*: $2 keeps' '$dir/$1.out'" \
  "$1: expected the pick $2, got: $(grep -m1 'recompute search' "$dir/$1.out")"; }

run plain gpt
run s200 gpt --recompute search --act-budget-layer 200KiB --search-rates 100,10; picks s200 'selective+act,drop1_mask'; same plain s200
run s160 gpt --recompute search --act-budget-layer 160KiB --search-rates 100,10
picks s160 'selective+norm,act,proj'; same plain s160
# the GEMM parts: FC1 (and GeLU), q/k/v, the projection made again; the attention's output on top; the
# dropout masks drawn again alone (drop1's read by the remade residual and by its own backward)
run s100 gpt --recompute search --act-budget-layer 100KiB --search-rates 100,10
picks s100 'selective+norm,fc1,drop1_mask,drop2_mask'; same plain s100
run s90 gpt --recompute search --act-budget-layer 90KiB --search-rates 100,10; picks s90 'selective+norm,fc1,proj'
same plain s90
run s60 gpt --recompute search --act-budget-layer 60KiB --search-rates 100,10; picks s60 'selective+norm,qkv,fc1'
same plain s60
run s30 gpt --recompute search --act-budget-layer 30KiB --search-rates 100,10
picks s30 'selective+norm,attn,qkv,fc1,proj'; same plain s30
run s20 gpt --recompute search --act-budget-layer 20KiB --search-rates 100,10; picks s20 'full'; same plain s20
# --static-plan: every work_slot call is a temporary of its own, so a part's tensors are read back from where
# they were made (the attention's second forward, the norms, q/k/v, FC1, Proj, a mask), never from a second call
run s40sp gpt --recompute search --act-budget-layer 40KiB --search-rates 100,10 --static-plan
picks s40sp 'selective+norm,qkv,fc1,proj,drop1_mask'; same plain s40sp
run s30sp gpt --recompute search --act-budget-layer 30KiB --search-rates 100,10 --static-plan
picks s30sp 'selective+norm,attn,qkv,fc1,proj'; same plain s30sp
check "grep -q 'recompute selective+norm,act,proj' '$dir/s160.out'" "s160: the header names the parts"
check "grep -q 'recompute selective+norm,fc1,drop1_mask,drop2_mask' '$dir/s100.out'" "s100: the header names the mask parts"
run lplain llama
run l90 llama --recompute search --act-budget-layer 90KiB --search-rates 100,10 --act-dtype bf16
run lplain16 llama --act-dtype bf16; same lplain16 l90
picks l90 'selective+norm,drop1_mask'
run l80 llama --recompute search --act-budget-layer 80KiB --search-rates 100,10 --act-dtype bf16
picks l80 'selective+norm,proj,drop1_mask,drop2_mask'; same lplain16 l80
run l40 llama --recompute search --act-budget-layer 40KiB --search-rates 100,10 --act-dtype bf16
picks l40 'selective+norm,fc1,proj,drop1_mask'; same lplain16 l40

# flash attention (O and the log-sum-exp kept, no s×s tensors): 'attn' is flash's forward again, the GEMM parts
# remake what flash's backward reads; bitwise the keep-everything flash run (GPT-2 fp32, llama bf16 storage)
run fplain gpt --attention flash
run f100 gpt --attention flash --recompute search --act-budget-layer 100KiB --search-rates 100,10
picks f100 'none+norm,fc1,drop1_mask,drop2_mask'; same fplain f100
run f40 gpt --attention flash --recompute search --act-budget-layer 40KiB --search-rates 100,10 --static-plan
picks f40 'none+norm,qkv,fc1,proj,drop1_mask'; same fplain f40
run f30 gpt --attention flash --recompute search --act-budget-layer 30KiB --search-rates 100,10
picks f30 'selective+norm,attn,qkv,fc1,proj'; same fplain f30
run lfplain llama --attention flash --act-dtype bf16
run lf50 llama --attention flash --act-dtype bf16 --recompute search --act-budget-layer 50KiB --search-rates 100,10
picks lf50 'none+norm,fc1'; same lfplain lf50
run lf15 llama --attention flash --act-dtype bf16 --recompute search --act-budget-layer 15KiB --search-rates 100,10
picks lf15 'selective+norm,attn,qkv,fc1,proj,drop1_mask'; same lfplain lf15

# LoRA (the base frozen; each site's x·Aᵀ kept, the GEMM parts add the adapters' terms from it) and LoRA-FA
# (no GEMM input kept: a remade GEMM output's input is made again by its norm, or by flash's forward):
# the adapters' weights bitwise the keep-everything run's
run loplain gpt --lora-rank 2
run lo80 gpt --lora-rank 2 --recompute search --act-budget-layer 80KiB --search-rates 100,10
picks lo80 'selective+norm,qkv,fc1'; same loplain lo80
run lo30 gpt --lora-rank 2 --recompute search --act-budget-layer 30KiB --search-rates 100,10 --static-plan
picks lo30 'selective+norm,attn,qkv,fc1,proj'; same loplain lo30
run lfaplain llama --lora-rank 2 --lora-fa --attention flash --act-dtype bf16
run lfa40 llama --lora-rank 2 --lora-fa --attention flash --act-dtype bf16 --recompute search --act-budget-layer 40KiB \
  --search-rates 100,10
picks lfa40 'selective+attn,fc1,drop1_mask'; same lfaplain lfa40
run lfa15 llama --lora-rank 2 --lora-fa --attention flash --act-dtype bf16 --recompute search --act-budget-layer 15KiB \
  --search-rates 100,10
picks lfa15 'selective+attn,qkv,fc1,proj,drop1_mask'; same lfaplain lfa15
# the frozen base in bf16 (no fp32 copy behind its views: the remade norm reads its widened weights; this
# combination segfaulted when the search first took adapters)
run b16plain llama --lora-rank 2 --base-dtype bf16
run b16s llama --lora-rank 2 --base-dtype bf16 --recompute search --act-budget-layer 30KiB --search-rates 100,10
same b16plain b16s

# ctron memory prices the same pick (a searched full recompute is one layer a group, as ctron train runs it)
mem=(--layers 2 --hidden 64 --heads 4 --seq 32 --batch 2 --vocab 256 --dropout 0.1 --act-dtype fp32 --recompute search
     --search-rates 100,10)
"$ctron" memory "${mem[@]}" --act-budget-layer 20KiB > "$dir/m20.out" 2>&1
check "[ $? -eq 0 ] && grep -q 'policy  recompute full ' '$dir/m20.out'" "memory 20KiB: $(head -2 "$dir/m20.out")"
"$ctron" memory "${mem[@]}" --act-budget-layer 40KiB > "$dir/m40.out" 2>&1
check "grep -q 'policy  recompute selective+norm,qkv,fc1,proj,drop1_mask ' '$dir/m40.out'" \
  "memory 40KiB: $(grep -m1 policy "$dir/m40.out")"
# under TP the link's rate is asked for, and prices Proj's reduction: slow, the attention's second forward instead
"$ctron" memory "${mem[@]}" --act-budget-layer 80KiB --tp 2 --sp > "$dir/mtp.out" 2>&1
check "[ $? -eq 2 ] && grep -q 'with --tp 2 needs the TP link' '$dir/mtp.out'" "memory --tp 2 without a link rate: $(head -1 "$dir/mtp.out")"
"$ctron" memory "${mem[@]/100,10/100,10,100}" --act-budget-layer 80KiB --tp 2 --sp > "$dir/mtp100.out" 2>&1
check "grep -q 'policy  recompute selective+norm,act,proj ' '$dir/mtp100.out'" "memory tp 100 GB/s: $(grep -m1 'policy\|rror' "$dir/mtp100.out")"
"$ctron" memory "${mem[@]/100,10/100,10,0.1}" --act-budget-layer 80KiB --tp 2 --sp > "$dir/mtp01.out" 2>&1
check "grep -q 'policy  recompute selective+norm,act,attn ' '$dir/mtp01.out'" "memory tp 0.1 GB/s: $(grep -m1 'policy\|rror' "$dir/mtp01.out")"

# refused: exit 2, the reason named
bad() {
  local msg=$1; shift
  "$ctron" train "${gpt[@]}" "$@" > "$dir/bad.out" 2>&1
  local rc=$?
  check "[ $rc -eq 2 ] && grep -qF -- '$msg' '$dir/bad.out'" "$*: exit $rc, expected 2 and '$msg': $(head -2 "$dir/bad.out")"
}
bad 'needs --act-budget-layer' --recompute search
bad 'is for --recompute search' --act-budget-layer 1MiB
bad 'is for --recompute search' --recompute selective --search-rates 1,1
bad 'with --tempo' --recompute search --act-budget-layer 1MiB --tempo softmax
bad 'with --reversible' --recompute search --act-budget-layer 1MiB --reversible
bad 'with --mini-seq' --recompute search --act-budget-layer 1MiB --mini-seq 2
bad 'chooses --recompute-layers' --recompute search --act-budget-layer 1MiB --recompute-layers 0-1:full
bad 'with a pipeline' --recompute search --act-budget-layer 1MiB --pp-schedule gpipe
bad 'expected GFLOPS,GBPS' --recompute search --act-budget-layer 1MiB --search-rates 0,5
bad 'expected GFLOPS,GBPS or GFLOPS,GBPS,LINK_GBPS' --recompute search --act-budget-layer 1MiB --search-rates 100,10,0
bad 'expected GFLOPS,GBPS or GFLOPS,GBPS,LINK_GBPS' --recompute search --act-budget-layer 1MiB --search-rates 100,10,5,1
bad 'with --tp 2 needs the TP link' --recompute search --act-budget-layer 1MiB --search-rates 100,10 --tp 2 --tp-solo
bad 'no recompute mode fits; the least a layer keeps is 16.00 KiB' --recompute search --act-budget-layer 10KiB \
  --search-rates 100,10

if [ ${#launch[@]} -gt 0 ] && [ -n "${launch[0]}" ]; then   # the norms' outputs under SP: made on the rank's rows, gathered
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
  tp=(--layers 2 --hidden 64 --heads 4 --seq 32 --batch 2 --steps 2 --eval-every 2 --dropout 0.1 --threads 1
      --data "$data" --tp 2 --sp)
  timeout 120 "${launch[@]}" -np 2 "$ctron" train "${tp[@]}" --ckpt-dir "$dir/tp" --log "$dir/tp.jsonl" > "$dir/tp.out" 2>&1
  # the link's rate prices the collectives a remade GEMM repeats: fast, Proj is made again (its reduce-scatter
  # nearly free); at 0.1 GB/s the attention's second forward (no traffic) is cheaper
  timeout 120 "${launch[@]}" -np 2 "$ctron" train "${tp[@]}" --recompute search --act-budget-layer 80KiB \
    --search-rates 100,10,100 --ckpt-dir "$dir/tps" > "$dir/tps.out" 2>&1
  check "grep -q 'recompute search: .*: selective+norm,act,proj keeps' '$dir/tps.out'" \
    "tp 2 + SP: $(grep -m2 'recompute search\|error' "$dir/tps.out")"
  same tp tps
  timeout 120 "${launch[@]}" -np 2 "$ctron" train "${tp[@]}" --recompute search --act-budget-layer 80KiB \
    --search-rates 100,10,0.1 --ckpt-dir "$dir/tpslow" > "$dir/tpslow.out" 2>&1
  check "grep -q 'recompute search: .*, 0.1 GB/s TP link: selective+norm,act,attn keeps' '$dir/tpslow.out'" \
    "tp 2 + SP, slow link: $(grep -m2 'recompute search\|error' "$dir/tpslow.out")"
  same tp tpslow
  # the GEMM parts under SP: q, k, v and FC1 from gathered inputs, Proj's partial sums reduce-scattered, drop1 drawn
  # again; the TP bytes the run moves beyond the plain run's are the graph's, per layer (2 layers, 1 micro-batch)
  timeout 120 "${launch[@]}" -np 2 "$ctron" train "${tp[@]}" --recompute search --act-budget-layer 20KiB \
    --search-rates 100,10,100 --ckpt-dir "$dir/tps20" --log "$dir/tps20.jsonl" > "$dir/tps20.out" 2>&1
  check "grep -q 'recompute search: .*: selective+norm,qkv,fc1,proj,drop1_mask keeps' '$dir/tps20.out'" \
    "tp 2 + SP 20KiB: $(grep -m2 'recompute search\|error' "$dir/tps20.out")"
  same tp tps20
  tp_bytes() {   # step 1's TP bytes in the blocks and SP's re-gathers
    local n; n=$(grep -m1 -o '"tp_bytes":{"block":[0-9]*,"regather":[0-9]*' "$1" | grep -o '[0-9]*' | paste -sd+)
    echo $(( ${n:-0} ))
  }
  graph=$(grep -m1 -o 'TP traffic [0-9]* bytes' "$dir/tps20.out" | grep -o '[0-9]*')
  moved=$(( $(tp_bytes "$dir/tps20.jsonl") - $(tp_bytes "$dir/tp.jsonl") ))
  check "[ -n '$graph' ] && [ '$graph' -gt 0 ] && [ '$moved' -eq \$((2 * $graph)) ]" \
    "tp 2 + SP 20KiB: moved $moved TP bytes more than the plain run, the graph says 2 x ${graph:-?}"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
