// Inference with a KV cache: one sequence, dropout off. A prompt is prefilled in one pass (GEMMs
// over its tokens), then tokens are fed one at a time; each layer's keys and values are kept so a
// new token attends to the cache instead of recomputing the prefix. Same ops as the training
// forward, for every family (model/family.h: LayerNorm or RMSNorm, GeLU MLP or SwiGLU, learned
// positions or RoPE at the cache's offset, a tied or untied output layer), so the logits match
// gpt_forward in evaluation mode to float rounding (tests/test_infer.c, tests/test_infer_llama.c).
// Grouped-query attention: the cache holds kv·d columns per position (the k/v heads), which the
// query heads of each group share.
// Every kernel runs on the model's backend (m->be) and the cache and scratch are its allocations;
// only the caller's tokens (in) and logits (out) are host memory, moved with the backend's copy.
// Under mixed precision (the model has a bf16 weight copy) the GEMMs use it, as training does.
#ifndef CTRON_INFER_H
#define CTRON_INFER_H
#include <stdint.h>
#include "model/gpt.h"
#include "model/params.h"

typedef struct {
    BlockTensors w;                          // the layer's slices (model/params.h; NULL where the family has none)
    const uint16_t *qkv_w16, *proj_w16, *fc1_w16, *fc2_w16;   // the bf16 copies (NULL under fp32)
} InferLayer;

typedef struct {
    const GPT *m;                            // the model (its config and family); it outlives the cache
    int layers, hidden, heads, kv_heads, seq, vocab;   // seq: positions the model has, the cache's capacity
    int qkv_width, kv_width, fc1_width, ffn; // q + 2·kv·d; kv·d; the FFN's input rows (f, or gate and up: 2f); f
    int q_width;                             // a·d: q's and the attention output's width
    int pos;                                 // tokens in the cache (their positions are 0..pos-1)
    Backend *be;                             // the model's: every tensor below is its allocation
    Backend *own_be;                         // opened here for a model without one (gpt_init_params)
    const float *wte, *wpe, *lnf_w, *lnf_b;  // wpe NULL with RoPE, lnf_b NULL with RMSNorm
    const float *out_w;                      // the output layer: wte when tied, else lm_head
    const uint16_t *out_w16;                 // its bf16 copy (the output layer's GEMM), or NULL
    InferLayer *layer;
    float *k, *v;                            // [layers, seq, kv·d] cached keys (rotated with RoPE) and values
    float *rope_cs;                          // RoPE: rope_table [seq, d] on the backend (NULL for learned positions)
    // Scratch for up to seq tokens per call.
    float *x, *ln, *qkv, *ctx, *tmp, *fc_in, *fc_out, *stats, *scores;
    int32_t *tok;                            // [seq] the call's tokens, copied from the host
    float *logits;                           // the call's logits before they go to the host
    size_t logits_cap;                       // floats in logits (grows for all_logits calls)
    size_t bytes;                            // cache + scratch
} KVCache;

// Binds the whole model's parameters (t = p = 1) through its tensor views, never by name (they are
// read, never written; the bf16 copy is made first when it is stale) and allocates the cache on the
// model's backend (a model of gpt_init_params has host parameters and none: the CPU backend, fp32).
void infer_init(KVCache *c, GPT *m);
void infer_free(KVCache *c);
// Empties the cache: the next token is at position 0 again.
static inline void infer_reset(KVCache *c) { c->pos = 0; }
// Runs tokens[0..n) at positions pos..pos+n-1 (pos + n <= seq) and appends their keys and values.
// tokens and logits are host memory. logits: [n, vocab] for every position when all_logits, else
// [vocab] for the last one.
void infer_forward(KVCache *c, const int32_t *tokens, int n, float *logits, int all_logits);
#endif
