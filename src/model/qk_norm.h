// q and k as attention reads them, from the projections' outputs: Qwen3's per-head q/k norms (q and k
// RMS-normalised over each head's d columns with one weight [d] each, q's then k's in qk_norm_w), then RoPE.
// A Qwen3 layer keeps the norms' inputs (q_norm_in, k_norm_in); backward makes q, k and the norms' 1/rms again
// from them (QK_NORM_REBUILD, model/policy.h). Used by the block (gpt.c), its recompute (remat.c) and MEMO's
// token ranges (memo.c).
#ifndef CTRON_QK_NORM_H
#define CTRON_QK_NORM_H
#include "model/gpt.h"
#include "model/params.h"

// Positions [p0, p1) of the micro-batch's b sequences (token rows [p0·b, p1·b), the forward's order), the rank's
// heads: with per-head norms q [rows, ql] = Norm_q(q_in), k [rows, kvl] = Norm_k(k_in) and their 1/rms into
// q_stats [rows, al], k_stats [rows, kvh]; without, q_in and k_in are q and k (the stats NULL). Then RoPE on q
// and k in place at each row's global position (rotary families). The caller rounds q and k as storage does.
void qk_rows(GPT *m, const BlockTensors *w, float *q, float *k, float *q_stats, float *k_stats, const float *q_in,
             const float *k_in, int p0, int p1);
// dq_in, dk_in = dL/d(the norms' inputs) from dq, dk = dL/dq, dL/dk (after RoPE's transpose) over n rows; the
// weights' gradients (g's qk_norm_w; NULL when frozen) accumulate over this rank's heads (a TP group sums them).
void qk_norm_backward(GPT *m, const BlockTensors *w, const BlockTensors *g, float *dq_in, float *dk_in, const float *dq,
                      const float *dk, const float *q_in, const float *k_in, const float *q_stats, const float *k_stats,
                      int n);
#endif
