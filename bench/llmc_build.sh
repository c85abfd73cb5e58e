#!/usr/bin/env bash
# Build karpathy/llm.c's train_gpt2cu here for a lent Hopper GPU, the peer of bench/gpu_bench.py
# (issue 30). llm.c's code is never committed: bring it with the `fetch` tool (github:karpathy/llm.c),
# pass the mirror's git directory or a checkout; the binary lands in .gpu/llmc/ (git-ignored, carried).
# Two changes are made to a scratch copy, both needed with CUDA 13.0 and this project's machines:
#   - its out-of-memory fallback to managed memory (cudaMallocManaged + a cudaMemAdvise overload that
#     CUDA 13 removed) becomes a plain failure: the device machines' notes forbid managed memory, and the
#     bench sizes every run to fit;
#   - no -lnvidia-ml: NVML is only used where nvml.h is found, and neither machine has it at build time.
# usage: bench/llmc_build.sh /work/.mirror/karpathy+llm.c/repo
set -euo pipefail
src=${1:?usage: bench/llmc_build.sh LLMC_GIT_DIR_OR_CHECKOUT}
cd "$(dirname "$0")/.."
dest=$PWD/.gpu/llmc
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
git clone -q "$src" "$work/llmc"
cd "$work/llmc"
python3 - <<'EOF'
p = "llmc/cuda_utils.cuh"
s = open(p).read()
fallback = ("        cudaCheck_(cudaMallocManaged(out, bytes), file, line);\n"
            "        cudaCheck_(cudaMemAdvise(*out, bytes, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId), file, line);\n")
if fallback not in s:
    raise SystemExit("llmc_build: llmc/cuda_utils.cuh's managed-memory fallback not found: llm.c changed, look again")
open(p, "w").write(s.replace(fallback, "        cudaCheck_(err, file, line);\n"))
EOF
make train_gpt2cu NO_MULTI_GPU=1 GPU_COMPUTE_CAPABILITY=90 NVCC_LDFLAGS="-lcublas -lcublasLt" > build.log 2>&1 ||
  { tail -20 build.log >&2; exit 1; }
mkdir -p "$dest"
cp train_gpt2cu "$dest/"
git rev-parse HEAD > "$dest/commit"
echo "llmc_build: $dest/train_gpt2cu (llm.c $(cut -c1-10 "$dest/commit"))"
