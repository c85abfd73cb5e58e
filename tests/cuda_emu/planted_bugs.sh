#!/usr/bin/env bash
# Planted bugs the CUDA emulation must catch (issue 24). Copies the checkout's tracked files to WORKDIR,
# builds the cuda-emu tests there once, then for each mutation: applies it to the copy, rebuilds, runs
# the tests that cover the code under the given schedules, and restores the file. Each mutation must
# make at least one run fail (a FAIL line, or the emulation's report and abort). Not part of `make test`
# (about 10 minutes on 2 cores); run it after changing the emulation or the kernels.
# Usage: bash tests/cuda_emu/planted_bugs.sh [WORKDIR]   (default /tmp/ctron-planted)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
w=${1:-/tmp/ctron-planted}
rm -rf "$w" && mkdir -p "$w/src"
(cd "$root" && git ls-files -z | xargs -0 tar c) | tar x -C "$w/src"
cmake -S "$w/src" -B "$w/build" -DCMAKE_BUILD_TYPE=Release -DCTRON_CUDA=OFF > "$w/configure.log" 2>&1 || {
  echo "configure failed: $w/configure.log"; exit 2; }
caught=0; missed=0

# plant NAME FILE OLD NEW "TESTS" "SCHEDULES": OLD must occur exactly once in FILE.
plant() {
  local name=$1 file=$w/src/$2 old=$3 new=$4 tests=$5 scheds=$6 failed=0
  cp "$file" "$file.orig"
  if ! python3 - "$file" "$old" "$new" <<'EOF'
import sys
p, old, new = sys.argv[1:4]
s = open(p).read()
if s.count(old) != 1:
    sys.exit(f'{p}: the text to mutate occurs {s.count(old)} times, expected once')
open(p, 'w').write(s.replace(old, new))
EOF
  then mv "$file.orig" "$file"; echo "SETUP FAILED: $name"; missed=$((missed + 1)); return; fi
  local targets=""; for t in $tests; do targets="$targets ${t}_emu"; done
  # shellcheck disable=SC2086
  if ! cmake --build "$w/build" -j2 --target $targets > "$w/build.log" 2>&1; then
    echo "== $name: the mutant does not compile (see $w/build.log)"; failed=1
  else
    for t in $tests; do
      for s in $scheds; do
        local log="$w/${name// /_}.$t.$s.log"
        CT_EMU_SCHEDULE=$s OMP_NUM_THREADS=1 timeout 900 "$w/build/tests/cuda_emu/${t}_emu" > "$log" 2>&1
        local rc=$? nfail
        nfail=$(grep -c '^FAIL' "$log")
        printf '  %-28s %-9s rc %3d, %4d FAIL lines; %s\n' "$t" "$s" "$rc" "$nfail" \
          "$(grep -m1 -E '^FAIL|cuda-emu:' "$log" | cut -c1-150)"
        [ "$rc" -ne 0 ] && failed=1
      done
    done
  fi
  # restored with a new mtime: the .orig copy is older than the mutant's objects, and make would
  # otherwise keep the mutant compiled into every later plant's run
  mv "$file.orig" "$file" && touch "$file"
  if [ $failed -eq 1 ]; then echo "CAUGHT: $name"; caught=$((caught + 1)); else echo "MISSED: $name"; missed=$((missed + 1)); fi
}

echo "building the cuda-emu tests in $w/build"
cmake --build "$w/build" -j2 --target test_cuda_elementwise_emu test_cuda_flash_emu test_cuda_copy_async_emu \
  test_cuda_llama_ops_emu \
  > "$w/build.log" 2>&1 || { echo "build failed: $w/build.log"; exit 2; }

plant "removed __syncthreads (block_sum's trailing barrier)" src/backend/cuda/cuda_common.cuh \
  $'    t = warp_sum(t);\n    __syncthreads();\n    return t;' $'    t = warp_sum(t);\n    return t;' \
  test_cuda_elementwise "rr warp-rev"
plant "removed __syncthreads (fp32 flash forward, before a key tile is loaded)" src/backend/cuda/flash_attention.cu \
  '        __syncthreads();   // the previous tile'"'"'s readers of Ks, Vs, Ps, bits are done' '' \
  test_cuda_flash "rr warp-rev"
plant "wrong shuffle offset (warp_sum xor 2 for 1)" src/backend/cuda/cuda_common.cuh \
  $'__device__ __forceinline__ float warp_sum(float v) {\n#pragma unroll\n    for (int o = CT_WARP / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);' \
  $'__device__ __forceinline__ float warp_sum(float v) {\n#pragma unroll\n    for (int o = CT_WARP / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xFFFFFFFFu, v, o == 1 ? 2 : o);' \
  test_cuda_elementwise rr
plant "off-by-one tile bound (bf16 flash staging, r0 + r <= s)" src/backend/cuda/flash_attention.cu \
  'if (r0 + r < f.s && c < f.d) cp_async16(' 'if (r0 + r <= f.s && c < f.d) cp_async16(' \
  test_cuda_flash rr
plant "wrong mma fragment index (P·V's second B register b[1] -> b[2])" src/backend/cuda/flash_attention.cu \
  '                mma_bf16(o[2 * dp], a, b[0], b[1]);' '                mma_bf16(o[2 * dp], a, b[0], b[2]);' \
  test_cuda_flash rr
plant "missing stream wait (copy stream after the compute stream)" src/backend/cuda/cuda_backend.c \
  '    CUDA_CHECK(cudaStreamWaitEvent(c->copy_stream, after_compute, 0));' '' \
  test_cuda_copy_async rr
plant "RoPE pairing j with j + 1 (interleaved), not with j + half" src/backend/cuda/rope.cu \
  '        load_v<V>(x1, x + o + half);' '        load_v<V>(x1, x + o + 1);' \
  test_cuda_llama_ops rr
plant "RMSNorm dw rows summed last to first" src/backend/cuda/rmsnorm.cu \
  '            for (int r = 0; r < rows; r++) acc = fadd(acc, b[r][lane]);' \
  '            for (int r = rows - 1; r >= 0; r--) acc = fadd(acc, b[r][lane]);' \
  test_cuda_llama_ops rr
plant "removed __syncthreads (RMSNorm dw, after a tile is stored)" src/backend/cuda/rmsnorm.cu \
  $'        }\n        __syncthreads();\n    }\n    if (warp == 0 && col)' $'        }\n    }\n    if (warp == 0 && col)' \
  test_cuda_llama_ops "rr warp-rev"
echo "$caught caught, $missed missed"
[ $missed -eq 0 ]
