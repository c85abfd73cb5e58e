// MEMO's fractions α chosen for a budget (`ctron plan --memo`, `ctron train --mem-budget B --memo auto`):
// every layer a memo layer. A plan is a mix of two positions counts on the tile grid (r = 0, 64, 128, …
// of s, and all of them): r_hi for the first n_hi even layers, r_lo for every other layer (n_hi = 0: one
// α for every layer). A memo layer's step time (memory/memo_model.h) depends on its own r only, and the
// device memory on the mix only through memo_stage, whose two slots are each as large as their own
// layers' largest slice: with r_lo > 0 the swapping layers alternate slots, so the even layers at r_hi
// fill slot 0 and cost span(r_hi) + span(r_lo), not 2·span(r_hi). So where the budget's slack holds one
// slot of the faster α but not two, half the layers take it; with r_lo = 0 a single r_hi layer (the only
// one that swaps) needs one slot; and a host-pool budget takes as many r_hi layers as it holds. The plan is the mix of least predicted step time whose arena plus attention (and
// bf16 GEMM) scratch fits the device budget and whose pool fits the host one; ties go to the uniform α,
// then to the smaller one (the least host memory and traffic).
#ifndef CTRON_MEMO_PLAN_H
#define CTRON_MEMO_PLAN_H
#include <stddef.h>
#include "backend/backend.h"
#include "memory/memo_model.h"

typedef struct {
    double gemm_flops;    // FLOP/s every op of a layer runs at (the machine's measured or stated GEMM rate)
    double link_bps;      // host-link bytes/s, one direction (measured: memo_measure_link_bps)
    double tp_link_bps;   // the TP link's bytes/s (given: --tp-link-gbps; 0 at t = 1, where nothing is repeated on it)
} MemoSpeeds;

typedef struct {
    double alpha;         // the swapped fraction of the r_hi layers (positions / s); of every layer when uniform
    long positions;       // r_hi: positions swapped by the first n_hi even layers (every layer when n_hi = 0)
    long positions_lo;    // r_lo: positions swapped by the other layers (= positions when uniform)
    int n_hi;             // layers at r_hi (0, 2, …: the first n_hi even layers); 0: uniform
    size_t act_peak, arena_bytes, scratch_bytes, pool_bytes;
    MemoLayerCost cost;   // one layer's
    MemoTime layer;       // one layer's parts at r_hi
    MemoTime layer_lo;    // one layer's parts at r_lo
    double head_s;        // the output layer, forward and backward
    double step_s;        // L·layer + head, per micro-batch
    double full_step_s;   // the same at α = 0: every position recomputed (full recompute's work)
} MemoPlanResult;

// sh: the shape (e, masks, dropout, family); tempo: ATTN_FLASH or 0; pool_budget 0: no limit. Returns 0
// with the plan, or -1 with out the α = 0 plan (the least device memory) when nothing fits.
int memo_plan(const ActShape *sh, unsigned tempo, Precision precision, int threads, double budget,
              double pool_budget, const MemoSpeeds *sp, MemoPlanResult *out);
// A uniform plan's or one mix's figures (the search's evaluation; n_hi 0: uniform at r_lo).
void memo_plan_evaluate(const ActShape *sh, unsigned tempo, Precision precision, int threads, const MemoSpeeds *sp,
                        long r_hi, long r_lo, int n_hi, MemoPlanResult *x);
// The α whose memo_swap_positions(s, α) is r (r/s, nudged up where float rounding would lose a position).
float memo_alpha_of(long r, long s);
// Positions layer l swaps under the plan.
long memo_plan_layer_positions(const MemoPlanResult *r, int l);
// The plan's policy: every layer memo at its α (memo_alpha when uniform, alpha[l] for a mix; free with
// policy_free).
void memo_plan_policy(const MemoPlanResult *r, const ActShape *sh, unsigned tempo, MemoryPolicy *pol);
// Host-link bandwidth: `bytes` to an offload pool (host memory, or a file in dir) and back, timed
// through the pool's own thread as MEMO moves them; the slower direction, bytes/s.
double memo_measure_link_bps(Backend *be, size_t bytes, const char *dir);
#endif
