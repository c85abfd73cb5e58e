// The family's parts (arch/arch.h) as the model's code asks for them: the training block (gpt.c) and
// the KV-cache block (infer.c) switch on these, never on the family's name.
#ifndef CTRON_FAMILY_H
#define CTRON_FAMILY_H
#include <stddef.h>
#include "model/gpt.h"

static inline NormKind norm_kind(const GPT *m) { return arch_spec((ArchKind)m->cfg.arch)->norm; }
static inline int swiglu(const GPT *m) { return arch_spec((ArchKind)m->cfg.arch)->mlp == MLP_SWIGLU; }
static inline int rotary(const GPT *m) { return arch_spec((ArchKind)m->cfg.arch)->pos == POS_ROPE; }
// Statistics a norm keeps per row: LayerNorm's mean and 1/std, RMSNorm's 1/rms.
static inline size_t norm_stats(const GPT *m) { return norm_kind(m) == NORM_RMS ? 1 : 2; }
// The output layer's weight: the token embedding when tied, else its own.
static inline float *out_w(const GPT *m, const GPTTensors *t) { return gpt_tied(&m->cfg) ? t->wte : t->lm_head; }
// y = Norm(x) on n rows of the hidden size with the family's norm on backend be: LayerNorm (w, b;
// stats: mean, 1/std) or RMSNorm (w; stats: 1/rms).
static inline void family_norm_forward(Backend *be, const GPT *m, float *y, float *stats, const float *x,
                                       const float *w, const float *b, int n) {
    if (norm_kind(m) == NORM_RMS) be->rmsnorm_forward(be, y, stats, x, w, m->cfg.norm_eps, n, m->cfg.hidden, 0);
    else be->layernorm_forward(be, y, stats, x, w, b, n, m->cfg.hidden);
}
#endif
