// MEMO's fraction α chosen for a budget (`ctron plan --memo`, `ctron train --mem-budget B --memo auto`):
// every layer a memo layer; among α on the tile grid (r = 0, 64, 128, … positions of s, and all of them)
// the one of least predicted step time (memory/memo_model.h's layer time on a machine of given GEMM and
// host-link speeds) whose arena plus attention (and bf16 GEMM) scratch fits the device budget and whose
// pool fits the host one; ties go to the smaller α (the least host memory and traffic).
#ifndef CTRON_MEMO_PLAN_H
#define CTRON_MEMO_PLAN_H
#include <stddef.h>
#include "backend/backend.h"
#include "memory/memo_model.h"

typedef struct {
    double gemm_flops;    // FLOP/s every op of a layer runs at (the machine's measured or stated GEMM rate)
    double link_bps;      // host-link bytes/s, one direction (measured: memo_measure_link_bps)
} MemoSpeeds;

typedef struct {
    double alpha;         // the swapped fraction (positions / s)
    long positions;       // r
    size_t act_peak, arena_bytes, scratch_bytes, pool_bytes;
    MemoLayerCost cost;   // one layer's
    MemoTime layer;       // one layer's parts at alpha
    double head_s;        // the output layer, forward and backward
    double step_s;        // L·layer + head, per micro-batch
    double full_step_s;   // the same at α = 0: every position recomputed (full recompute's work)
} MemoPlanResult;

// sh: the shape (e, masks, dropout, family); tempo: ATTN_FLASH or 0; pool_budget 0: no limit. Returns 0
// with the plan, or -1 with out the α = 0 plan (the least device memory) when nothing fits.
int memo_plan(const ActShape *sh, unsigned tempo, Precision precision, int threads, double budget,
              double pool_budget, const MemoSpeeds *sp, MemoPlanResult *out);
// The plan's policy: every layer memo at its α (free with policy_free).
void memo_plan_policy(const MemoPlanResult *r, const ActShape *sh, unsigned tempo, MemoryPolicy *pol);
// Host-link bandwidth: `bytes` to an offload pool (host memory, or a file in dir) and back, timed
// through the pool's own thread as MEMO moves them; the slower direction, bytes/s.
double memo_measure_link_bps(Backend *be, size_t bytes, const char *dir);
#endif
