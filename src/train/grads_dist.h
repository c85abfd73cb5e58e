// Gradients across ranks: the TP all-reduce of what SP computes in parts, the data-parallel
// all-reduce, and the global norm over a model that is sharded over TP (and, with ZeRO-1, over DP).
#ifndef CTRON_GRADS_DIST_H
#define CTRON_GRADS_DIST_H
#include "model/gpt.h"
#include "train/zero.h"

// Under SP each TP rank holds the LayerNorm, row-parallel bias and position-embedding gradients of
// its s/t rows only: sum them over the TP group (contiguous runs, a few calls per step).
void grads_reduce_sp(GPT *m);
// Data parallelism: sum the gradients over the dp group, in buckets (no second parameter buffer).
void grads_allreduce_dp(CommGroup *dp, float *g, size_t n);
// ‖g‖ of the whole model: sharded tensors count on every TP rank, replicated ones on TP rank 0
// only; with zero, only the owned pieces of each dp rank hold summed gradients and count. The
// squares are summed over tp (and dp with zero) and over the pipeline's stages (pp may be NULL; the last
// stage's copy of the tied wte does not count). Without TP, ZeRO or stages: grad_global_norm.
double grads_global_norm(const GPT *m, const Zero *zero, CommGroup *tp, CommGroup *dp, CommGroup *pp);
#endif
