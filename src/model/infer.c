// The block of DESIGN.md §1 for a single sequence with cached keys and values:
//   x1 = x  + Proj(Attn(LN1(x)))           (dropout is off at inference)
//   x2 = x1 + FC2(GeLU(FC1(LN2(x1))))
// Every kernel is the backend's (c->be); this file computes only shapes and offsets.
#include "model/infer.h"
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "model/params.h"
#include "util/common.h"

static const ParamInfo *info(const GPT *m, const char *name) {
    const ParamInfo *pi = gpt_find_param(m, name);
    if (!pi) ctron_fatal("infer: the model has no parameter '%s'", name);
    return pi;
}
static const float *param(const GPT *m, const char *name) { return m->params + info(m, name)->offset; }
// The bf16 copy of a weight under mixed precision (the copy has the parameters' layout), else NULL.
static const uint16_t *param16(const GPT *m, const char *name) {
    return m->params16 ? m->params16 + info(m, name)->offset : NULL;
}

static float *dev_floats(Backend *be, size_t n) { return be->alloc(be, n * sizeof(float)); }

void infer_init(KVCache *c, GPT *m) {
    memset(c, 0, sizeof *c);
    gpt_refresh_params16(m);   // a checkpoint or initialisation wrote the masters since the copy was made
    const GPTConfig *g = &m->cfg;
    Backend *be = c->be = m->be;
    if (!be) {   // a model of gpt_init_params (TP's gathered model): host parameters, so a CPU backend
        char err[256];
        be = c->be = c->own_be = backend_open("cpu", PRECISION_FP32, err, sizeof err);
        if (!be) ctron_fatal("infer: %s", err);
    }
    c->layers = g->layers;
    c->hidden = g->hidden;
    c->heads = g->heads;
    c->seq = g->seq;
    c->vocab = g->vocab;
    c->wte = param(m, "wte.weight");
    c->wte16 = param16(m, "wte.weight");
    c->wpe = param(m, "wpe.weight");
    c->lnf_w = param(m, "ln_f.weight");
    c->lnf_b = param(m, "ln_f.bias");
    c->layer = xmalloc(sizeof(InferLayer) * (size_t)g->layers);
    char name[64];
    for (int l = 0; l < g->layers; l++) {
        InferLayer *L = &c->layer[l];
#define BIND(field, suffix) do { snprintf(name, sizeof name, "h.%d.%s", l, suffix); L->field = param(m, name); } while (0)
#define BIND16(field, suffix) do { snprintf(name, sizeof name, "h.%d.%s", l, suffix); L->field = param16(m, name); } while (0)
        BIND(ln1_w, "ln_1.weight"); BIND(ln1_b, "ln_1.bias");
        BIND(qkv_w, "attn.c_attn.weight"); BIND(qkv_b, "attn.c_attn.bias");
        BIND(proj_w, "attn.c_proj.weight"); BIND(proj_b, "attn.c_proj.bias");
        BIND(ln2_w, "ln_2.weight"); BIND(ln2_b, "ln_2.bias");
        BIND(fc1_w, "mlp.c_fc.weight"); BIND(fc1_b, "mlp.c_fc.bias");
        BIND(fc2_w, "mlp.c_proj.weight"); BIND(fc2_b, "mlp.c_proj.bias");
        BIND16(qkv_w16, "attn.c_attn.weight"); BIND16(proj_w16, "attn.c_proj.weight");
        BIND16(fc1_w16, "mlp.c_fc.weight"); BIND16(fc2_w16, "mlp.c_proj.weight");
#undef BIND
#undef BIND16
    }
    size_t s = (size_t)g->seq, h = (size_t)g->hidden, threads = (size_t)omp_get_max_threads();
    size_t cache = 2 * (size_t)g->layers * s * h, scratch = s * (h * 4 + 3 * h + 8 * h + 2) + threads * s;
    c->k = dev_floats(be, cache / 2);
    c->v = dev_floats(be, cache / 2);
    c->x = dev_floats(be, s * h);
    c->ln = dev_floats(be, s * h);
    c->ctx = dev_floats(be, s * h);
    c->tmp = dev_floats(be, s * h);
    c->qkv = dev_floats(be, s * 3 * h);
    c->fc_in = dev_floats(be, s * 4 * h);
    c->fc_out = dev_floats(be, s * 4 * h);
    c->stats = dev_floats(be, s * 2);
    c->scores = dev_floats(be, threads * s);
    c->tok = be->alloc(be, s * sizeof(int32_t));
    c->logits_cap = (size_t)g->vocab;   // one row: what decoding needs
    c->logits = dev_floats(be, c->logits_cap);
    c->bytes = (cache + scratch + c->logits_cap) * sizeof(float) + s * sizeof(int32_t);
}

void infer_free(KVCache *c) {
    Backend *be = c->be;
    free(c->layer);
    float *bufs[] = {c->k, c->v, c->x, c->ln, c->ctx, c->tmp, c->qkv, c->fc_in, c->fc_out, c->stats, c->scores,
                     c->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->free(be, bufs[i]);
    be->free(be, c->tok);
    backend_close(c->own_be);   // NULL-safe
    memset(c, 0, sizeof *c);
}

void infer_forward(KVCache *c, const int32_t *tokens, int n, float *logits, int all_logits) {
    Backend *be = c->be;
    int h = c->hidden, p0 = c->pos;
    if (n < 1 || p0 + n > c->seq)
        ctron_fatal("infer_forward: %d tokens at position %d exceed the model's %d positions", n, p0, c->seq);
    size_t sh = (size_t)c->seq * h, row = (size_t)h * sizeof(float);
    be->copy(be, c->tok, tokens, (size_t)n * sizeof(int32_t), COPY_H2D);
    be->embedding_forward(be, c->x, c->tok, c->wte, c->wpe + (size_t)p0 * h, n, 1, h);
    for (int l = 0; l < c->layers; l++) {
        const InferLayer *w = &c->layer[l];
        float *kc = c->k + (size_t)l * sh, *vc = c->v + (size_t)l * sh;
        // x1 = x + Proj(Attn(LN1(x)))
        be->layernorm_forward(be, c->ln, c->stats, c->x, w->ln1_w, w->ln1_b, n, h);
        be->linear_forward_rows(be, c->qkv, 3 * h, c->ln, h, w->qkv_w, w->qkv_w16, w->qkv_b, n, h, 3 * h);   // [q | k | v]
        for (int i = 0; i < n; i++) {   // the new keys and values join the cache
            be->copy(be, kc + (size_t)(p0 + i) * h, c->qkv + (size_t)i * 3 * h + h, row, COPY_D2D);
            be->copy(be, vc + (size_t)(p0 + i) * h, c->qkv + (size_t)i * 3 * h + 2 * (size_t)h, row, COPY_D2D);
        }
        be->kv_attention_forward(be, c->ctx, c->qkv, 3 * h, kc, vc, c->scores, c->seq, p0, n, c->heads, c->heads, h);
        be->linear_forward_rows(be, c->tmp, h, c->ctx, h, w->proj_w, w->proj_w16, NULL, n, h, h);
        be->dropout_residual_forward(be, c->x, c->x, c->tmp, w->proj_b, NULL, 0.0f, n, h);
        // x2 = x1 + FC2(GeLU(FC1(LN2(x1))))
        be->layernorm_forward(be, c->ln, c->stats, c->x, w->ln2_w, w->ln2_b, n, h);
        be->linear_forward_rows(be, c->fc_in, 4 * h, c->ln, h, w->fc1_w, w->fc1_w16, w->fc1_b, n, h, 4 * h);
        be->gelu_forward(be, c->fc_out, c->fc_in, (size_t)n * 4 * h);
        be->linear_forward_rows(be, c->tmp, h, c->fc_out, 4 * h, w->fc2_w, w->fc2_w16, NULL, n, 4 * h, h);
        be->dropout_residual_forward(be, c->x, c->x, c->tmp, w->fc2_b, NULL, 0.0f, n, h);
    }
    c->pos = p0 + n;
    // logits = LN_f(x) · wteᵀ, for every row or only the last
    int first = all_logits ? 0 : n - 1, rows = n - first;
    size_t need = (size_t)rows * c->vocab;
    if (need > c->logits_cap) {   // all rows of a prefill: a caller that checks them (tests), not decoding
        be->free(be, c->logits);
        c->logits = dev_floats(be, need);
        c->bytes += (need - c->logits_cap) * sizeof(float);
        c->logits_cap = need;
    }
    be->layernorm_forward(be, c->ln, c->stats, c->x + (size_t)first * h, c->lnf_w, c->lnf_b, rows, h);
    be->linear_forward_rows(be, c->logits, c->vocab, c->ln, h, c->wte, c->wte16, NULL, rows, h, c->vocab);
    be->copy(be, logits, c->logits, need * sizeof(float), COPY_D2H);
}
