#include "model/generate.h"
#include <string.h>
#include "model/infer.h"
#include "model/sampler.h"
#include "util/common.h"

// Empties the cache and prefills hist[from..to); logits of the last token.
static void prefill(KVCache *c, const int32_t *hist, int from, int to, float *logits, GenStats *st) {
    double t0 = now_seconds();
    infer_reset(c);
    infer_forward(c, hist + from, to - from, logits, 0);
    st->prefill_tokens += to - from;
    st->prefill_seconds += now_seconds() - t0;
}

void generate(GPT *m, const int32_t *prompt, int n_prompt, const GenOptions *o, int32_t *out,
              GenTokenFn on_token, void *ctx, GenStats *st) {
    double t_start = now_seconds();
    memset(st, 0, sizeof *st);
    KVCache c;
    infer_init(&c, m);
    Sampler smp;
    sampler_init(&smp, m->cfg.vocab, o->temperature, o->top_k, o->seed);
    int s = m->cfg.seq, keep = s / 2 > 0 ? s / 2 : 1;
    int32_t *hist = xmalloc((size_t)(n_prompt + o->max_new + 1) * sizeof(int32_t));
    memcpy(hist, prompt, (size_t)n_prompt * sizeof(int32_t));
    float *logits = xmalloc((size_t)m->cfg.vocab * sizeof(float));
    int len = n_prompt;
    st->prompt_tokens = n_prompt;
    st->prompt_used = n_prompt < s ? n_prompt : s;
    st->cache_bytes = c.bytes;
    prefill(&c, hist, len - st->prompt_used, len, logits, st);
    for (int i = 0; i < o->max_new; i++) {
        int32_t tok = sampler_draw(&smp, logits, (uint32_t)i);
        out[i] = tok;
        hist[len++] = tok;
        st->generated++;
        if (on_token) on_token(ctx, tok);
        for (int k = 0; k < o->n_stop; k++) st->stopped |= tok == o->stop[k];
        if (st->stopped || i + 1 == o->max_new) break;   // the last token needs no forward
        if (c.pos == s) {                     // window full: slide by re-prefilling the newest half
            prefill(&c, hist, len - keep, len, logits, st);
            st->slides++;
            continue;
        }
        double t0 = now_seconds();
        infer_forward(&c, &tok, 1, logits, 0);
        st->decode_seconds += now_seconds() - t0;
        st->decode_tokens++;
    }
    st->total_seconds = now_seconds() - t_start;
    free(logits);
    free(hist);
    sampler_free(&smp);
    infer_free(&c);
}
