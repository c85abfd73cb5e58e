#!/usr/bin/env bash
# valgrind memcheck of a tiny training run: 2 steps with dropout, a checkpoint, a resumed step and
# text generation; then a run with offload to a file (the I/O thread) and a static memory plan; then the
# pipeline executor on one process (layered, GPipe with keep-all contexts).
# Any invalid access, use of uninitialised memory or definite leak fails it.
set -euo pipefail
ctron=${1:-build-vg/ctron}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
vg=(valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite
    --show-leak-kinds=definite --track-origins=yes)
export OPENBLAS_CORETYPE=Haswell OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
tiny=(--layers 1 --hidden 16 --heads 2 --seq 16 --batch 2 --threads 1 --eval-batches 1 --peak-gflops 100 --data data/kjv.txt)
echo "valgrind: ctron train (2 steps, checkpoint)"
"${vg[@]}" "$ctron" train "${tiny[@]}" --act-dtype bf16 --steps 3 --stop-after 2 --ckpt-dir "$dir/ck" --no-ledger > "$dir/out" 2>&1 \
  || { cat "$dir/out"; exit 1; }
echo "valgrind: ctron train --resume (1 step, selective recompute and regenerated masks on a bf16-activation checkpoint, sample)"
"${vg[@]}" "$ctron" train --resume "$dir/ck" --peak-gflops 100 --recompute selective --dropout-masks regen \
  --sample 8 > "$dir/out" 2>&1 || { cat "$dir/out"; exit 1; }
echo "valgrind: ctron train (3 layers, offload to a file, static memory plan)"
mkdir -p "$dir/pool"
"${vg[@]}" "$ctron" train "${tiny[@]}" --layers 3 --steps 2 --offload all --offload-dir "$dir/pool" --static-plan \
  --recompute-layers 0:full,1:selective,2:none > "$dir/out" 2>&1 || { cat "$dir/out"; exit 1; }
echo "valgrind: ctron train (2 layers, layered and GPipe schedules on one process, --recompute-microbatches)"
"${vg[@]}" "$ctron" train "${tiny[@]}" --layers 2 --steps 2 --grad-accum 3 --pp-schedule layered --recompute full \
  > "$dir/out" 2>&1 || { cat "$dir/out"; exit 1; }
"${vg[@]}" "$ctron" train "${tiny[@]}" --layers 2 --steps 2 --grad-accum 3 --pp-schedule gpipe --recompute selective \
  --recompute-microbatches 1 > "$dir/out" 2>&1 || { cat "$dir/out"; exit 1; }
echo "valgrind: clean"
