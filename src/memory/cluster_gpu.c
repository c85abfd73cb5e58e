#include "memory/cluster_gpu.h"
#include <strings.h>

// Spec sheets: NVIDIA A100 datasheet (312 TFLOP/s dense bf16, no FP8, 1.555 / 2.039 TB/s HBM, NVLink 3
// 600 GB/s both directions = 300 GB/s each way, 108 SMs); H100 SXM5 datasheet (989 TFLOP/s dense
// bf16, 1979 dense FP8, 3.35 TB/s, NVLink 4 900 GB/s = 450 each way, 132 SMs); H200 SXM (989 / 1979,
// 141 GB at 4.8 TB/s).
// Inter-node: one HDR (200 Gb/s = 25 GB/s) InfiniBand NIC per A100 as in a DGX A100 / Selene, the
// paper's cluster; one NDR (400 Gb/s = 50 GB/s) per H100/H200 as in a DGX H100. Memory in the bytes
// nvidia-smi reports. The tile is cuBLAS's common 256×128 tensor-core tile.
// Efficiencies (one set for every GPU kind, row and layout; docs/PLANNER.md):
//   gemm_eff 0.80  cuBLAS bf16 on large well-shaped GEMMs reaches 80-90 % of the dense peak;
//   hbm_eff  0.80  PyTorch/Apex element-wise kernels stream at ~80 % of the HBM spec;
//   link_eff 0.78  nccl-tests' all-reduce bus bandwidth on a DGX A100 (~235 of 300 GB/s);
//   latency  5 us  one ring step of NCCL's simple protocol across NVLink or InfiniBand;
//   overlap  0.5   fitted once, to the paper's Table 4 (docs/PLANNER.md);
//   gap      2 us  between two dependent kernels on one stream (launch, ramp-up, tail): the order of
//                  magnitude of a kernel launch, not fitted.
#define EFF 0.80, 0.80, 0.78, 5e-6, 0.5, 2e-6
// Hopper's GEMMs reach less of their peak than Ampere's: the largest GEMM efficiency measured by
// shape search (Bekman's MAMF table, ml-engineering: A100 SXM 267.9 of 312 TFLOP/s = 85.9 %, H100 SXM
// 792.1 of 989 = 80.1 %) scales the calibrated A100 figure: 0.80 × 80.1 / 85.9 = 0.746.
#define EFF_HOPPER 0.80 * 0.801 / 0.859, 0.80, 0.78, 5e-6, 0.5, 2e-6
static const GpuSpec kinds[] = {
    {"a100-40g", 312e12, 0, 40.0 * 1073741824.0, 1.555e12, 300e9, 25e9, 108, 256, 128, EFF},
    {"a100-80g", 312e12, 0, 80.0 * 1073741824.0, 2.039e12, 300e9, 25e9, 108, 256, 128, EFF},
    {"h100-80g", 989e12, 1979e12, 81559.0 * 1048576.0, 3.35e12, 450e9, 50e9, 132, 256, 128, EFF_HOPPER},
    {"h200", 989e12, 1979e12, 143771.0 * 1048576.0, 4.8e12, 450e9, 50e9, 132, 256, 128, EFF_HOPPER},
};

int gpu_kind_count(void) { return (int)(sizeof kinds / sizeof kinds[0]); }
const GpuSpec *gpu_kind_at(int i) { return i >= 0 && i < gpu_kind_count() ? &kinds[i] : 0; }

const GpuSpec *gpu_kind_find(const char *name) {
    for (int i = 0; i < gpu_kind_count(); i++)
        if (strcasecmp(name, kinds[i].name) == 0) return &kinds[i];
    return 0;
}

const char *gpu_kind_names(void) { return "a100-40g, a100-80g, h100-80g, h200"; }
