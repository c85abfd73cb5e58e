// The cluster planner's hardware: a small table of GPU kinds (spec-sheet figures) and the few
// efficiency constants that turn spec figures into achieved rates. docs/PLANNER.md gives the
// source of every number.
#ifndef CTRON_CLUSTER_GPU_H
#define CTRON_CLUSTER_GPU_H
#include <stddef.h>

typedef struct {
    char name[32];
    double peak_flops;     // dense tensor-core FLOP/s of the GEMM precision (bf16 on GPUs)
    double fp8_flops;      // dense FP8 tensor-core FLOP/s (0: the GPU has no FP8 tensor cores)
    double mem_bytes;      // device memory
    double hbm_bw;         // device memory bandwidth, bytes/s
    double nvlink_bw;      // per GPU, one direction, bytes/s (the ring's link inside a node)
    double internode_bw;   // per GPU (its NIC), one direction, bytes/s
    int sms;               // units a GEMM's tiles are spread over (wave quantisation); 1: none
    int tile_m, tile_n;    // output tile of one unit
    // What a kernel reaches of the spec figures (the same for every model, layout and row):
    double gemm_eff;       // a large GEMM of full waves, of peak_flops
    double hbm_eff;        // a streaming element-wise kernel, of hbm_bw
    double link_eff;       // a ring collective's bus bandwidth, of the link bandwidth
    double link_latency;   // seconds per ring step (one hop)
    double overlap_cost;   // what a collective hidden under a GEMM still costs, of its own time
    double launch_gap;     // seconds between two dependent kernels (launch, ramp-up and tail)
} GpuSpec;

int gpu_kind_count(void);
const GpuSpec *gpu_kind_at(int i);
const GpuSpec *gpu_kind_find(const char *name);   // NULL when unknown (case-insensitive)
const char *gpu_kind_names(void);                  // "a100-40g, a100-80g, …" for help and errors
#endif
