// The block of DESIGN.md §1 for a single sequence with cached keys and values:
//   x1 = x  + Proj(Attn(LN1(x)))           (dropout is off at inference)
//   x2 = x1 + FC2(GeLU(FC1(LN2(x1))))
#include "model/infer.h"
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "backend/cpu/dropout.h"
#include "backend/cpu/embedding.h"
#include "backend/cpu/gelu.h"
#include "backend/cpu/layernorm.h"
#include "backend/cpu/linear.h"
#include "util/common.h"

static const float *param(const GPT *m, const char *name) {
    const ParamInfo *pi = gpt_find_param(m, name);
    if (!pi) ctron_fatal("infer: the model has no parameter '%s'", name);
    return m->params + pi->offset;
}

void infer_init(KVCache *c, const GPT *m) {
    memset(c, 0, sizeof *c);
    const GPTConfig *g = &m->cfg;
    c->layers = g->layers;
    c->hidden = g->hidden;
    c->heads = g->heads;
    c->seq = g->seq;
    c->vocab = g->vocab;
    c->wte = param(m, "wte.weight");
    c->wpe = param(m, "wpe.weight");
    c->lnf_w = param(m, "ln_f.weight");
    c->lnf_b = param(m, "ln_f.bias");
    c->layer = xmalloc(sizeof(InferLayer) * (size_t)g->layers);
    char name[64];
    for (int l = 0; l < g->layers; l++) {
        InferLayer *L = &c->layer[l];
#define BIND(field, suffix) do { snprintf(name, sizeof name, "h.%d.%s", l, suffix); L->field = param(m, name); } while (0)
        BIND(ln1_w, "ln_1.weight"); BIND(ln1_b, "ln_1.bias");
        BIND(qkv_w, "attn.c_attn.weight"); BIND(qkv_b, "attn.c_attn.bias");
        BIND(proj_w, "attn.c_proj.weight"); BIND(proj_b, "attn.c_proj.bias");
        BIND(ln2_w, "ln_2.weight"); BIND(ln2_b, "ln_2.bias");
        BIND(fc1_w, "mlp.c_fc.weight"); BIND(fc1_b, "mlp.c_fc.bias");
        BIND(fc2_w, "mlp.c_proj.weight"); BIND(fc2_b, "mlp.c_proj.bias");
#undef BIND
    }
    size_t s = (size_t)g->seq, h = (size_t)g->hidden, threads = (size_t)omp_get_max_threads();
    size_t cache = 2 * (size_t)g->layers * s * h, scratch = s * (h * 4 + 3 * h + 8 * h + 2) + threads * s;
    c->k = xmalloc(cache / 2 * sizeof(float));
    c->v = xmalloc(cache / 2 * sizeof(float));
    c->x = xmalloc(s * h * sizeof(float));
    c->ln = xmalloc(s * h * sizeof(float));
    c->ctx = xmalloc(s * h * sizeof(float));
    c->tmp = xmalloc(s * h * sizeof(float));
    c->qkv = xmalloc(s * 3 * h * sizeof(float));
    c->fc_in = xmalloc(s * 4 * h * sizeof(float));
    c->fc_out = xmalloc(s * 4 * h * sizeof(float));
    c->stats = xmalloc(s * 2 * sizeof(float));
    c->scores = xmalloc(threads * s * sizeof(float));
    c->bytes = (cache + scratch) * sizeof(float);
}

void infer_free(KVCache *c) {
    free(c->layer);
    free(c->k); free(c->v);
    free(c->x); free(c->ln); free(c->ctx); free(c->tmp); free(c->qkv);
    free(c->fc_in); free(c->fc_out); free(c->stats); free(c->scores);
    memset(c, 0, sizeof *c);
}

// ctx[i] = softmax(q_i · K[0..p0+i]ᵀ / √d) · V[0..p0+i] per head: each new token attends to the
// cache up to and including itself (causal), as a row of the training attention does. Both
// products are matrix-vector products on the head's strided view of the cache.
static void attend(KVCache *c, const float *kc, const float *vc, int p0, int n) {
    int h = c->hidden, a = c->heads, d = h / a;
    float scale = 1.0f / sqrtf((float)d);
    long work = (long)n * a * (p0 + n) * d;
#pragma omp parallel for schedule(static) if (work > 32768)
    for (int ij = 0; ij < n * a; ij++) {
        int i = ij / a, j = ij % a, len = p0 + i + 1;
        const float *q = c->qkv + (size_t)i * 3 * h + (size_t)j * d;
        float *sc = c->scores + (size_t)omp_get_thread_num() * c->seq;
        cblas_sgemv(CblasRowMajor, CblasNoTrans, len, d, scale, kc + (size_t)j * d, h, q, 1, 0.0f, sc, 1);
        float mx = sc[0];
        for (int u = 1; u < len; u++) mx = sc[u] > mx ? sc[u] : mx;
        float sum = 0.0f;
        for (int u = 0; u < len; u++) { sc[u] = expf(sc[u] - mx); sum += sc[u]; }
        float inv = 1.0f / sum;
        for (int u = 0; u < len; u++) sc[u] *= inv;
        cblas_sgemv(CblasRowMajor, CblasTrans, len, d, 1.0f, vc + (size_t)j * d, h, sc, 1, 0.0f,
                    c->ctx + (size_t)i * h + (size_t)j * d, 1);
    }
}

// y[n,out] = x[n,in] · Wᵀ (+ bias). One token (decoding) is a matrix-vector product: sgemv reads W
// once, where sgemm with one row would first pack all of W (3x slower on small models).
static void linear(float *y, int ldy, const float *x, int ldx, const float *w, const float *bias, int n, int in,
                   int out) {
    if (n > 1) { linear_forward(y, ldy, x, ldx, w, bias, n, in, out); return; }
    cblas_sgemv(CblasRowMajor, CblasNoTrans, out, in, 1.0f, w, in, x, 1, 0.0f, y, 1);
    if (bias) for (int c = 0; c < out; c++) y[c] += bias[c];
}

static void gelu_rows(float *y, const float *x, size_t count) {
#pragma omp parallel for schedule(static) if (count > 65536)
    for (size_t i = 0; i < count; i++) y[i] = gelu_scalar(x[i]);
}

void infer_forward(KVCache *c, const int32_t *tokens, int n, float *logits, int all_logits) {
    int h = c->hidden, p0 = c->pos;
    if (n < 1 || p0 + n > c->seq)
        ctron_fatal("infer_forward: %d tokens at position %d exceed the model's %d positions", n, p0, c->seq);
    size_t sh = (size_t)c->seq * h;
    embedding_forward(c->x, tokens, c->wte, c->wpe + (size_t)p0 * h, n, 1, h);
    for (int l = 0; l < c->layers; l++) {
        const InferLayer *w = &c->layer[l];
        float *kc = c->k + (size_t)l * sh, *vc = c->v + (size_t)l * sh;
        // x1 = x + Proj(Attn(LN1(x)))
        layernorm_forward(c->ln, c->stats, c->x, w->ln1_w, w->ln1_b, n, h);
        linear(c->qkv, 3 * h, c->ln, h, w->qkv_w, w->qkv_b, n, h, 3 * h);   // rows [q | k | v]
        for (int i = 0; i < n; i++) {
            memcpy(kc + (size_t)(p0 + i) * h, c->qkv + (size_t)i * 3 * h + h, (size_t)h * sizeof(float));
            memcpy(vc + (size_t)(p0 + i) * h, c->qkv + (size_t)i * 3 * h + 2 * (size_t)h, (size_t)h * sizeof(float));
        }
        attend(c, kc, vc, p0, n);
        linear(c->tmp, h, c->ctx, h, w->proj_w, NULL, n, h, h);
        dropout_residual_forward(c->x, c->x, c->tmp, w->proj_b, NULL, 0.0f, n, h);
        // x2 = x1 + FC2(GeLU(FC1(LN2(x1))))
        layernorm_forward(c->ln, c->stats, c->x, w->ln2_w, w->ln2_b, n, h);
        linear(c->fc_in, 4 * h, c->ln, h, w->fc1_w, w->fc1_b, n, h, 4 * h);
        gelu_rows(c->fc_out, c->fc_in, (size_t)n * 4 * h);
        linear(c->tmp, h, c->fc_out, 4 * h, w->fc2_w, NULL, n, 4 * h, h);
        dropout_residual_forward(c->x, c->x, c->tmp, w->fc2_b, NULL, 0.0f, n, h);
    }
    c->pos = p0 + n;
    // logits = LN_f(x) · wteᵀ, for every row or only the last
    int first = all_logits ? 0 : n - 1, rows = n - first;
    layernorm_forward(c->ln, c->stats, c->x + (size_t)first * h, c->lnf_w, c->lnf_b, rows, h);
    linear(logits, c->vocab, c->ln, h, c->wte, NULL, rows, h, c->vocab);
}
