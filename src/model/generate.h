// Autoregressive generation with the KV cache (model/infer.h) and the sampler (model/sampler.h).
//
// Context window: the model has seq positions. A prompt longer than seq keeps its last seq
// tokens. When the cache is full the window slides: the cache is emptied and the last seq/2
// tokens are prefilled again (one GEMM pass), so each slide costs one prefill of seq/2 tokens and
// buys seq/2 more tokens of generation.
#ifndef CTRON_GENERATE_H
#define CTRON_GENERATE_H
#include <stdint.h>
#include "model/gpt.h"

typedef struct {
    int max_new;          // tokens to generate
    float temperature;    // 0: greedy
    int top_k;            // 0: no cut
    uint64_t seed;
    const int32_t *stop;  // end-of-sequence ids: generation ends after drawing one (it is the last token out)
    int n_stop;
} GenOptions;

typedef struct {
    int prompt_tokens, prompt_used;   // prompt_used < prompt_tokens: the prompt was cut to the window
    int generated, slides;
    int stopped;                      // 1: ended at one of o->stop, not at max_new
    int prefill_tokens, decode_tokens;
    double prefill_seconds, decode_seconds, total_seconds;
    size_t cache_bytes;
} GenStats;

// Called with each token as soon as it is drawn (streaming output); may be NULL.
typedef void (*GenTokenFn)(void *ctx, int32_t token);

// Continues prompt[0..n_prompt) (n_prompt >= 1, ids < vocab) by up to o->max_new tokens written to out
// (stats->generated of them: fewer when a stop id was drawn, as transformers' generate ends at eos_token_id).
void generate(GPT *m, const int32_t *prompt, int n_prompt, const GenOptions *o, int32_t *out,
              GenTokenFn on_token, void *ctx, GenStats *stats);
#endif
