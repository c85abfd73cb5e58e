#!/usr/bin/env bash
# Build ctron for a lent GPU machine here and pack what scripts/gpu_check.sh runs there (issue 30).
#
# The GPU machine has CUDA 13.0, cuBLASLt and python3 with torch, but none of ctron's CPU-side libraries
# (OpenBLAS, oneDNN, cJSON, PCRE2) and no network; its glibc is newer than this machine's, so a build made
# here runs there. This script
#   1. builds build-gpu/ (Release, host code at -march=x86-64-v3 rather than this CPU's own, kernels for
#      sm_90 only, no MPI: one GPU, one process; no emulation);
#   2. packs the binaries, the CTest files and the shared libraries they need that the GPU image lacks
#      (everything `ldd` names except glibc's, the compiler runtime's and the CUDA driver's and cuBLAS's, which are large and on the image) into
#      .gpu/bundle.tar.xz (about 30 MB; .gpu/ is git-ignored and travels with `carry`).
# usage: scripts/gpu_bundle.sh [JOBS]          then: device run with carry [".gpu", "data"]:
#        bash scripts/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-2}
build=build-gpu
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCTRON_MARCH=x86-64-v3 -DCTRON_CUDA_GENCODE=sm_90 \
  -DCTRON_CUDA_EMU=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=TRUE > /dev/null
cmake --build "$build" -j "$jobs"
test -f "$build/ctron" || { echo "gpu_bundle: $build/ctron was not built" >&2; exit 1; }
mapfile -t cuda_tests < <(find "$build/tests" -maxdepth 1 -type f -name 'test_cuda_*' -perm -u+x ! -name '*_emu*' | sort)
if [ ${#cuda_tests[@]} -eq 0 ]; then
  echo "gpu_bundle: no test_cuda_* binaries in $build/tests (was the CUDA toolkit found?)" >&2; exit 1
fi

stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/.gpu/lib"
# Libraries the image has or must not be replaced: glibc, the compiler runtime, CUDA's.
system='^(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libgcc_s|libstdc\+\+|libcuda|libcublas|libcublasLt|libnccl|libnvidia-)[.-]'
for bin in "$build/ctron" "${cuda_tests[@]}"; do
  ldd "$bin" | awk '$3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  if [[ ! $name =~ $system ]]; then cp -L "$lib" "$stage/.gpu/lib/$name"; fi
done
# OpenBLAS is the OpenMP build; its libgfortran/libquadmath come along through ldd above.
pwd > "$stage/.gpu/source_root"
git rev-parse HEAD > "$stage/.gpu/commit" 2>/dev/null || echo unknown > "$stage/.gpu/commit"
mkdir -p .gpu
files=("$build/ctron" "${cuda_tests[@]}")
mapfile -t ctest_files < <(find "$build" -name CTestTestfile.cmake)
tar -cJf .gpu/bundle.tar.xz "${files[@]}" "${ctest_files[@]}" -C "$stage" .gpu/lib .gpu/source_root .gpu/commit
echo "gpu_bundle: .gpu/bundle.tar.xz $(du -h .gpu/bundle.tar.xz | cut -f1) ($(ls "$stage/.gpu/lib" | wc -l) libraries, ${#cuda_tests[@]} tests, commit $(cut -c1-7 "$stage/.gpu/commit"))"
