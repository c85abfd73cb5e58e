// Qwen3's per-head q/k norms: q and k, as their projections (and adapters) make them, are RMS-normalised over
// each head's d columns with one weight [d] each (q's, then k's, in qk_norm_w), before RoPE. The block keeps
// the norms' inputs (q_norm_in, k_norm_in) and 1/rms per row and head (q_norm_stats, k_norm_stats): what their
// backward reads. Used by the block (gpt.c), its recompute (remat.c) and MEMO's token ranges (memo.c).
#ifndef CTRON_QK_NORM_H
#define CTRON_QK_NORM_H
#include "model/gpt.h"
#include "model/params.h"

// Token rows [r0, r0 + nr) of the rank's heads: q [rows, ql] = Norm_q(q_in), k [rows, kvl] = Norm_k(k_in), and
// their 1/rms [rows, al], [rows, kvh] (rows: s·b in the forward's order).
void qk_norm_rows(GPT *m, const BlockTensors *w, float *q, float *k, float *q_stats, float *k_stats, const float *q_in,
                  const float *k_in, int r0, int nr);
// dq_in, dk_in = dL/d(the norms' inputs) from dq, dk = dL/dq, dL/dk (after RoPE's transpose) over n rows; the
// weights' gradients (g's qk_norm_w; NULL when frozen) accumulate over this rank's heads (a TP group sums them).
void qk_norm_backward(GPT *m, const BlockTensors *w, const BlockTensors *g, float *dq_in, float *dk_in, const float *dq,
                      const float *dk, const float *q_in, const float *k_in, const float *q_stats, const float *k_stats,
                      int n);
#endif
