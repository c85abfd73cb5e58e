// Causal multi-head attention core: softmax(q kᵀ/√d + causal) → dropout → · v.
// q and the context are [s, b, h] (h = a·d; head j = columns j·d .. j·d+d−1); k and v are
// [s, b, kv·d]: grouped-query attention, kv key/value heads for a query heads (kv divides a; kv = a is
// plain multi-head attention, kv = 1 multi-query). Query head j reads kv head j / (a/kv), HF's
// repeat_kv (consecutive query heads share a kv head). Probabilities are [b, a, s, s], per query head.
// Each (sequence, head) pair is two GEMMs on strided views: no copies.
#ifndef CTRON_ATTENTION_H
#define CTRON_ATTENTION_H
#include <stddef.h>
#include <stdint.h>
#include "backend/cpu/dropout.h"

// The kv head query head j of a reads (a/kv consecutive query heads per kv head).
static inline int attention_kv_head(int j, int a, int kv) { return j / (a / kv); }
// The first key query i sees. A sliding window of W positions (transformers' sliding_window: key j is
// seen iff i − j < W; Mistral, Phi-3) starts it at i − W + 1; window 0 (or W > i) at key 0. Keys past i
// are never seen (causal).
static inline int attention_first_key(int i, int window) { return window > 0 && i >= window ? i - window + 1 : 0; }

// q [s,b,h], k,v [s,b,kv·d] -> ctx [s,b,h]; prob [b,a,s,s]; keep, drop [b,a,s,s] (both NULL when p = 0).
// window: each query attends to its last `window` positions (attention_first_key; 0: all before it); the
// probabilities outside it are exact zeros, so the backward from prob needs no window.
// ctx NULL skips · v (selective recompute needs only prob, keep and drop). round_bf16: prob and drop
// are rounded to bf16 before use, as when they are stored in bf16. Under tensor parallelism a rank
// holds heads head0 .. head0+a−1 of the model (h = its a·d columns); masks use the global head.
void attention_forward(float *ctx, float *prob, uint8_t *keep, float *drop, const float *q, const float *k,
                       const float *v, int s, int b, int a, int kv, int h, int window, int head0, DropoutSite site,
                       uint32_t sample0, int round_bf16);
// The attention dropout mask [b,a,s,s] alone, exactly as attention_forward draws it.
void attention_mask(uint8_t *keep, int s, int b, int a, int head0, DropoutSite site, uint32_t sample0);
// dctx [s,b,h] -> dq [s,b,h], dk, dv [s,b,kv·d]; scratch holds s·s floats per OpenMP thread. Tempo's
// fused softmax–dropout: drop NULL with keep given re-forms the dropped probabilities from prob and
// keep per head (exactly as the forward did, round_bf16 alike); scratch then holds 2·s·s per thread.
// With kv < a each thread also holds ATTENTION_GQA_SCRATCH(s, d) floats after those: a kv head's dk,
// dv are the sum of its query heads' in ascending head order (the first written, each next one
// computed there and added), one thread per (sequence, kv head), so the sum does not depend on the
// thread count.
void attention_backward(float *dq, float *dk, float *dv, const float *dctx, const float *prob,
                        const uint8_t *keep, const float *drop, const float *q, const float *k, const float *v,
                        float *scratch, int s, int b, int a, int kv, int h, float p, int round_bf16);
// Selective recompute, fused: each (sequence, head) recomputes its P, mask and dropped P into this
// thread's scratch (ATTENTION_RECOMPUTE_SCRATCH(s) floats per OpenMP thread, and with kv < a
// ATTENTION_GQA_SCRATCH(s, d) more) with exactly the forward's code, then runs its backward while
// they are still in cache. Nothing is held for the whole layer, so nothing goes to the arena.
#define ATTENTION_RECOMPUTE_SCRATCH(s) (3 * (size_t)(s) * (size_t)(s) + ((size_t)(s) * (size_t)(s) + 3) / 4)
// Rows of a causal block (attention.c): the GEMMs run that many rows at a time.
#define ATTENTION_CAUSAL_BLOCK 256
// The per-thread floats a grouped-query backward adds (kv < a): one causal block of a query head's dk
// or dv, before it is added to its kv head's.
#define ATTENTION_GQA_SCRATCH(s, d) \
    ((size_t)((s) < ATTENTION_CAUSAL_BLOCK ? (s) : ATTENTION_CAUSAL_BLOCK) * (size_t)(d))
void attention_backward_recompute(float *dq, float *dk, float *dv, const float *dctx, const float *q,
                                  const float *k, const float *v, float *scratch, int s, int b, int a, int kv, int h,
                                  int window, int head0, DropoutSite site, uint32_t sample0, int round_bf16);

// Mixed precision: the same, with every per-head GEMM on bf16 copies of its operands (fp32
// accumulation), made in s16: ATTENTION_BF16_SCRATCH(s, d) elements per OpenMP thread. The GEMMs run
// causal blocks of ATTENTION_CAUSAL_BLOCK_BF16 rows. The head's k, v, q and dctx (s×d each) are packed once
// into the scratch's last 4·s·d elements, where every block reads them; a block of P, D or dP (at most
// s × the block) is packed into the first ATTENTION_BF16_A_ROOM(s, d) elements.
#define ATTENTION_CAUSAL_BLOCK_BF16 64
#define ATTENTION_BF16_A_ROOM(s, d) \
    ((size_t)(s) * (size_t)((s) < ATTENTION_CAUSAL_BLOCK_BF16 ? (s) : ATTENTION_CAUSAL_BLOCK_BF16))
#define ATTENTION_BF16_SCRATCH(s, d) (ATTENTION_BF16_A_ROOM(s, d) + 4 * (size_t)(s) * (size_t)(d))
void attention_forward_bf16(float *ctx, float *prob, uint8_t *keep, float *drop, const float *q, const float *k,
                            const float *v, int s, int b, int a, int kv, int h, int window, int head0,
                            DropoutSite site, uint32_t sample0, int round_bf16, uint16_t *s16);
void attention_backward_bf16(float *dq, float *dk, float *dv, const float *dctx, const float *prob,
                             const uint8_t *keep, const float *drop, const float *q, const float *k, const float *v,
                             float *scratch, int s, int b, int a, int kv, int h, float p, int round_bf16, uint16_t *s16);
void attention_backward_recompute_bf16(float *dq, float *dk, float *dv, const float *dctx, const float *q,
                                       const float *k, const float *v, float *scratch, int s, int b, int a, int kv,
                                       int h, int window, int head0, DropoutSite site, uint32_t sample0,
                                       int round_bf16, uint16_t *s16);
#endif
