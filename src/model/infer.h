// Inference with a KV cache: one sequence, dropout off. A prompt is prefilled in one pass (GEMMs
// over its tokens), then tokens are fed one at a time; each layer's keys and values are kept so a
// new token attends to the cache instead of recomputing the prefix. Same ops as the training
// forward (layernorm_forward, linear_forward, gelu, residual adds), so the logits match
// gpt_forward in evaluation mode to float rounding (tests/test_infer.c).
#ifndef CTRON_INFER_H
#define CTRON_INFER_H
#include <stdint.h>
#include "model/gpt.h"

typedef struct {
    const float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b;
    const float *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} InferLayer;

typedef struct {
    int layers, hidden, heads, seq, vocab;   // seq: positions the model has, the cache's capacity
    int pos;                                 // tokens in the cache (their positions are 0..pos-1)
    const float *wte, *wpe, *lnf_w, *lnf_b;
    InferLayer *layer;
    float *k, *v;                            // [layers, seq, hidden] cached keys and values
    // Scratch for up to seq tokens per call.
    float *x, *ln, *qkv, *ctx, *tmp, *fc_in, *fc_out, *stats, *scores;
    size_t bytes;                            // cache + scratch
} KVCache;

// Binds the model's parameters by name (they are read, never written) and allocates the cache.
void infer_init(KVCache *c, const GPT *m);
void infer_free(KVCache *c);
// Empties the cache: the next token is at position 0 again.
static inline void infer_reset(KVCache *c) { c->pos = 0; }
// Runs tokens[0..n) at positions pos..pos+n-1 (pos + n <= seq) and appends their keys and values.
// logits: [n, vocab] for every position when all_logits, else [vocab] for the last one.
void infer_forward(KVCache *c, const int32_t *tokens, int n, float *logits, int all_logits);
#endif
