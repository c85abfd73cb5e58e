// Flash-style causal attention on the CPU (Dao et al.'s tiling, here per (sequence, head) on one
// thread): softmax(q kᵀ/√d + causal) → dropout → · v computed in 64×64 tiles with an online
// softmax, keeping only the output and one log-sum-exp per query row; backward recomputes each
// tile's probabilities from q, k and the log-sum-exp. No s×s matrix exists at any time (scratch is
// O(tile²) per thread). Dropout draws each tile's mask from the same Philox key and element index
// as attention_forward (ops/attention.h), so the masks are identical and regenerable.
// Layouts as backend/cpu/attention.h: q, ctx [s, b, h] (head j = columns j·d ..), k, v [s, b, kv·d]
// (query head j reads kv head j / (a/kv)), lse [b, a, s] (per query head).
#ifndef CTRON_FLASH_ATTENTION_H
#define CTRON_FLASH_ATTENTION_H
#include <stddef.h>
#include <stdint.h>
#include "backend/cpu/dropout.h"

#define FLASH_TILE 64
// Per-thread scratch, floats: S/P tile, dP tile, mask tile (bytes, rounded up), O accumulator,
// row max/sum and the backward's row dot products.
#define FLASH_SCRATCH(s, d) (2 * FLASH_TILE * FLASH_TILE + FLASH_TILE * FLASH_TILE / 4 + FLASH_TILE * (size_t)(d) + \
                             3 * FLASH_TILE + (size_t)(s))
// The per-thread scratch of a call with a query heads and kv kv heads: FLASH_SCRATCH, and with kv < a
// the backward's dK, dV tiles of one query head (2·FLASH_TILE·d floats) after it.
size_t flash_scratch_floats(int s, int d, int a, int kv);

void flash_attention_forward(float *ctx, float *lse, const float *q, const float *k, const float *v, float *scratch,
                             int s, int b, int a, int kv, int h, int window, int head0, DropoutSite site,
                             uint32_t sample0);
// The forward of query positions [q0, q0+nq) only (keys 0 .. q0+nq−1): rows q0·b .. of ctx and, per head,
// entries q0 .. of lse are written; k and v must hold those keys. Query tiles start at q0, so with q0 a
// multiple of FLASH_TILE the rows are bitwise those of the whole call (MEMO's token ranges, model/memo.h).
void flash_attention_forward_rows(float *ctx, float *lse, const float *q, const float *k, const float *v,
                                  float *scratch, int s, int q0, int nq, int b, int a, int kv, int h, int window,
                                  int head0, DropoutSite site, uint32_t sample0);
// dctx [s,b,h] -> dq [s,b,h], dk, dv [s,b,kv·d] (overwritten); ctx and lse from the forward. One thread
// per (sequence, kv head): a kv head's dk, dv sum its query heads' in ascending head order, whatever
// the thread count.
void flash_attention_backward(float *dq, float *dk, float *dv, const float *dctx, const float *q, const float *k,
                              const float *v, const float *ctx, const float *lse, float *scratch, int s, int b, int a,
                              int kv, int h, int window, int head0, DropoutSite site, uint32_t sample0);
#endif
