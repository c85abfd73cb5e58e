// Inference with a KV cache: one sequence, dropout off. A prompt is prefilled in one pass (GEMMs
// over its tokens), then tokens are fed one at a time; each layer's keys and values are kept so a
// new token attends to the cache instead of recomputing the prefix. Same ops as the training
// forward (layernorm_forward, linear_forward, gelu, residual adds), so the logits match
// gpt_forward in evaluation mode to float rounding (tests/test_infer.c).
// Every kernel runs on the model's backend (m->be) and the cache and scratch are its allocations;
// only the caller's tokens (in) and logits (out) are host memory, moved with the backend's copy.
// Under mixed precision (the model has a bf16 weight copy) the GEMMs use it, as training does.
#ifndef CTRON_INFER_H
#define CTRON_INFER_H
#include <stdint.h>
#include "model/gpt.h"

typedef struct {
    const float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b;
    const float *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
    const uint16_t *qkv_w16, *proj_w16, *fc1_w16, *fc2_w16;   // the bf16 copies (NULL under fp32)
} InferLayer;

typedef struct {
    int layers, hidden, heads, seq, vocab;   // seq: positions the model has, the cache's capacity
    int pos;                                 // tokens in the cache (their positions are 0..pos-1)
    Backend *be;                             // the model's: every tensor below is its allocation
    Backend *own_be;                         // opened here for a model without one (gpt_init_params)
    const float *wte, *wpe, *lnf_w, *lnf_b;
    const uint16_t *wte16;                   // bf16 copy of wte (the output layer's GEMM), or NULL
    InferLayer *layer;
    float *k, *v;                            // [layers, seq, hidden] cached keys and values
    // Scratch for up to seq tokens per call.
    float *x, *ln, *qkv, *ctx, *tmp, *fc_in, *fc_out, *stats, *scores;
    int32_t *tok;                            // [seq] the call's tokens, copied from the host
    float *logits;                           // the call's logits before they go to the host
    size_t logits_cap;                       // floats in logits (grows for all_logits calls)
    size_t bytes;                            // cache + scratch
} KVCache;

// Binds the model's parameters by name (they are read, never written; the bf16 copy is made first
// when it is stale) and allocates the cache on the model's backend (a model of gpt_init_params has
// host parameters and none: the CPU backend, fp32).
void infer_init(KVCache *c, GPT *m);
void infer_free(KVCache *c);
// Empties the cache: the next token is at position 0 again.
static inline void infer_reset(KVCache *c) { c->pos = 0; }
// Runs tokens[0..n) at positions pos..pos+n-1 (pos + n <= seq) and appends their keys and values.
// tokens and logits are host memory. logits: [n, vocab] for every position when all_logits, else
// [vocab] for the last one.
void infer_forward(KVCache *c, const int32_t *tokens, int n, float *logits, int all_logits);
#endif
