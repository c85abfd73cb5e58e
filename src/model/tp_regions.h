// The communication at the edges of the tensor-parallel regions (Megatron's f / f̄, and SP's g / ḡ),
// on sequence-major [s·b, w] activations, where a rank's SP shard is the contiguous rows of its
// positions s0 .. s0+s/t−1.
//   gather: before a column-parallel linear (forward) and after a row-parallel one (backward):
//           SP all-gathers the rank's rows; plain TP has every row already (identity).
//   reduce: after a row-parallel linear (forward) and before a column-parallel one (backward):
//           the sum over ranks of partial products; SP reduce-scatters it to the rank's rows,
//           plain TP all-reduces it.
// With t = 1 both are the identity. The bytes moved are added to m->comm_bytes[why].
#ifndef CTRON_TP_REGIONS_H
#define CTRON_TP_REGIONS_H
#include "model/gpt.h"

// The whole [s·b, w] from the rank's rows x: buf after an all-gather (SP), or x itself.
const float *tp_gather_rows(GPT *m, const float *x, float *buf, int w, TPCommPurpose why);
// The rank's rows of Σ_ranks partial[s·b, w]: out after a reduce-scatter (SP), or partial itself,
// all-reduced in place (TP).
float *tp_reduce_rows(GPT *m, float *partial, float *out, int w, TPCommPurpose why);
// All-gather of n floats per rank into all[t·n] (vocabulary-parallel cross-entropy).
// In-place sum over the TP group of n floats on every rank (LoRA's partial x·Aᵀ of a row-parallel site).
void tp_allreduce(GPT *m, float *x, size_t n, TPCommPurpose why);
void tp_allgather(GPT *m, const float *send, float *all, size_t n, TPCommPurpose why);
#endif
