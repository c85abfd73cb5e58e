// The block of DESIGN.md §1 for a single sequence with cached keys and values, for every family:
//   x1 = x  + Proj(Attn(Norm1(x)))           (dropout is off at inference; llama: RoPE on q and k
//                                             at their positions, k and v grouped into kv heads)
//   x2 = x1 + FC2(Act(FC1(Norm2(x1))))       (GPT-2: GeLU; llama: Down(SiLU(Gate) ⊙ Up))
// The family's parts come from model/family.h, as in gpt.c. Every kernel is the backend's (c->be);
// this file computes only shapes and offsets.
#include "model/infer.h"
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "backend/cpu/rope.h"
#include "model/family.h"
#include "util/common.h"

static float *dev_floats(Backend *be, size_t n) { return be->alloc(be, n * sizeof(float)); }

// The bf16 copy of a weight under mixed precision (the copy has the parameters' layout), else NULL.
static const uint16_t *w16_of(const GPT *m, const float *w) {
    return m->params16 && w ? m->params16 + (w - m->params) : NULL;
}

// The tensors the cache reads: the model around the blocks and each block's slices.
static void bind_weights(KVCache *c, const GPT *m) {
    c->wte = m->w.wte;
    c->wpe = m->w.wpe;
    c->lnf_w = m->w.lnf_w;
    c->lnf_b = m->w.lnf_b;
    c->out_w = out_w(m, &m->w);
    c->out_w16 = w16_of(m, c->out_w);
    c->layer = xmalloc(sizeof(InferLayer) * (size_t)c->layers);
    for (int l = 0; l < c->layers; l++) {
        InferLayer *L = &c->layer[l];
        L->w = block_tensors(m, &m->w, l);
        L->qkv_w16 = w16_of(m, L->w.qkv_w);
        L->proj_w16 = w16_of(m, L->w.proj_w);
        L->fc1_w16 = w16_of(m, L->w.fc1_w);
        L->fc2_w16 = w16_of(m, L->w.fc2_w);
    }
}

// RoPE's cos/sin table for the cache's positions, built on the host as gpt.c's and copied once
// (its own copy: a model of gpt_init_params has none).
static void make_rope_table(KVCache *c, const GPT *m) {
    if (!rotary(m)) return;
    int d = gpt_rotary_dim(&m->cfg);   // the rotated dims: the table's rows
    size_t floats = rope_table_floats(c->seq, d);
    float *host = xmalloc(floats * sizeof(float));
    rope_table(host, c->seq, d, m->cfg.rope_theta, &m->cfg.rope_scaling);
    c->rope_cs = dev_floats(c->be, floats);
    c->be->copy(c->be, c->rope_cs, host, floats * sizeof(float), COPY_H2D);
    free(host);
    c->bytes += floats * sizeof(float);
}

void infer_init(KVCache *c, GPT *m) {
    memset(c, 0, sizeof *c);
    if (m->tp.t > 1 || m->pp.p > 1)
        ctron_fatal("infer: the KV cache runs the whole model; this one is a shard (t = %d, p = %d)", m->tp.t, m->pp.p);
    gpt_refresh_params16(m);   // a checkpoint or initialisation wrote the masters since the copy was made
    const GPTConfig *g = &m->cfg;
    Backend *be = c->be = m->be;
    if (!be) {   // a model of gpt_init_params (TP's gathered model): host parameters, so a CPU backend
        char err[256];
        be = c->be = c->own_be = backend_open("cpu", PRECISION_FP32, err, sizeof err);
        if (!be) ctron_fatal("infer: %s", err);
    }
    c->m = m;
    c->layers = g->layers;
    c->hidden = g->hidden;
    c->heads = g->heads;
    c->kv_heads = g->kv_heads;
    c->seq = g->seq;
    c->vocab = g->vocab;
    c->kv_width = gpt_kv_width(g);
    c->q_width = gpt_q_width(g);
    c->qkv_width = c->q_width + 2 * c->kv_width;
    c->ffn = g->ffn;
    c->fc1_width = swiglu(m) ? 2 * g->ffn : g->ffn;
    bind_weights(c, m);
    size_t s = (size_t)g->seq, h = (size_t)g->hidden, threads = (size_t)omp_get_max_threads();
    size_t cache = (size_t)g->layers * s * (size_t)c->kv_width;   // each of k and v
    c->k = dev_floats(be, cache);
    c->v = dev_floats(be, cache);
    c->x = dev_floats(be, s * h);
    c->ln = dev_floats(be, s * h);
    c->ctx = dev_floats(be, s * (size_t)c->q_width);
    c->tmp = dev_floats(be, s * h);
    c->qkv = dev_floats(be, s * (size_t)c->qkv_width);
    c->fc_in = dev_floats(be, s * (size_t)c->fc1_width);
    c->fc_out = dev_floats(be, s * (size_t)c->ffn);
    c->stats = dev_floats(be, s * 2 + (size_t)g->heads);   // + one token's per-head q/k norm statistics
    c->scores = dev_floats(be, threads * s);
    c->tok = be->alloc(be, s * sizeof(int32_t));
    c->logits_cap = (size_t)g->vocab;   // one row: what decoding needs
    c->logits = dev_floats(be, c->logits_cap);
    size_t scratch = s * (3 * h + (size_t)c->q_width + (size_t)c->qkv_width + (size_t)c->fc1_width + (size_t)c->ffn + 2) +
                     threads * s + (size_t)g->heads;
    c->bytes = (2 * cache + scratch + c->logits_cap) * sizeof(float) + s * sizeof(int32_t);
    make_rope_table(c, m);
}

void infer_free(KVCache *c) {
    Backend *be = c->be;
    free(c->layer);
    float *bufs[] = {c->k, c->v, c->x, c->ln, c->ctx, c->tmp, c->qkv, c->fc_in, c->fc_out, c->stats, c->scores,
                     c->logits, c->rope_cs};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->free(be, bufs[i]);
    be->free(be, c->tok);
    backend_close(c->own_be);   // NULL-safe
    memset(c, 0, sizeof *c);
}

// x = wte[tokens] (+ wpe[p0 ..] with learned positions; RoPE places the tokens in the attention).
static void embed(KVCache *c, int n, int p0) {
    Backend *be = c->be;
    if (c->wpe) be->embedding_forward(be, c->x, c->tok, c->wte, c->wpe + (size_t)p0 * c->hidden, n, 1, c->hidden);
    else be->embedding_vocab_forward(be, c->x, c->tok, c->wte, 0, c->vocab, n, c->hidden);
}

// Qwen3's per-head norms of the n new rows' q and k, in place: each row's heads are contiguous d-wide rows
// (a row of [q | k | v] at a time: the heads of one token).
static void head_norms(KVCache *c, const InferLayer *L, int n) {
    Backend *be = c->be;
    const GPT *m = c->m;
    int d = gpt_head_dim(&m->cfg), ldq = c->qkv_width;
    float *st = c->stats + 2 * (size_t)c->seq;
    for (int i = 0; i < n; i++) {
        float *q = c->qkv + (size_t)i * ldq, *k = q + c->q_width;
        be->rmsnorm_forward(be, q, st, q, L->w.qk_norm_w, m->cfg.norm_eps, c->heads, d, 0);
        be->rmsnorm_forward(be, k, st, k, L->w.qk_norm_w + d, m->cfg.norm_eps, c->kv_heads, d, 0);
    }
}

// x1 = x + Proj(Attn(Norm1(x))) for n new tokens at positions p0..: q, k, v in one GEMM ([q | k | v]
// rows), q and k normalised per head (Qwen3) and rotated at their positions, the new k and v rows into the
// layer's cache.
static void attention_part(KVCache *c, const InferLayer *L, int l, int n, int p0) {
    Backend *be = c->be;
    const GPT *m = c->m;
    int h = c->hidden, qw = c->q_width, kvw = c->kv_width, ldq = c->qkv_width;
    size_t skv = (size_t)c->seq * kvw, row = (size_t)kvw * sizeof(float);
    float *kc = c->k + (size_t)l * skv, *vc = c->v + (size_t)l * skv;
    float *q = c->qkv, *k = c->qkv + qw, *v = c->qkv + qw + kvw;
    family_norm_forward(be, m, c->ln, c->stats, c->x, L->w.ln1_w, L->w.ln1_b, n);
    be->linear_forward_rows(be, c->qkv, ldq, c->ln, h, L->w.qkv_w, L->qkv_w16, L->w.qkv_b, n, h, ldq);
    if (m->cfg.qk_norm) head_norms(c, L, n);
    if (rotary(m)) {   // row i is at position p0 + i (one sequence: b = 1)
        int d = gpt_head_dim(&m->cfg), rot = gpt_rotary_dim(&m->cfg);
        be->rope_forward(be, q, q, ldq, c->rope_cs, c->seq, n, 1, c->heads, d, rot, p0, 0);
        be->rope_forward(be, k, k, ldq, c->rope_cs, c->seq, n, 1, c->kv_heads, d, rot, p0, 0);
    }
    for (int i = 0; i < n; i++) {   // the new keys and values join the cache
        be->copy(be, kc + (size_t)(p0 + i) * kvw, k + (size_t)i * ldq, row, COPY_D2D);
        be->copy(be, vc + (size_t)(p0 + i) * kvw, v + (size_t)i * ldq, row, COPY_D2D);
    }
    be->kv_attention_forward(be, c->ctx, q, ldq, kc, vc, c->scores, c->seq, p0, n, c->heads, c->kv_heads, qw,
                             gpt_layer_window(&m->cfg, l));
    be->linear_forward_rows(be, c->tmp, h, c->ctx, qw, L->w.proj_w, L->proj_w16, NULL, n, qw, h);
    be->dropout_residual_forward(be, c->x, c->x, c->tmp, L->w.proj_b, NULL, 0.0f, n, h);
}

// x2 = x1 + FC2(Act(FC1(Norm2(x1)))): GeLU(FC1 x + b), or SiLU(gate) ⊙ up from one GEMM of [gate | up] rows.
static void mlp_part(KVCache *c, const InferLayer *L, int n) {
    Backend *be = c->be;
    const GPT *m = c->m;
    int h = c->hidden, f = c->ffn, f1 = c->fc1_width;
    family_norm_forward(be, m, c->ln, c->stats, c->x, L->w.ln2_w, L->w.ln2_b, n);
    be->linear_forward_rows(be, c->fc_in, f1, c->ln, h, L->w.fc1_w, L->fc1_w16, L->w.fc1_b, n, h, f1);
    if (swiglu(m)) be->swiglu_forward(be, c->fc_out, c->fc_in, c->fc_in + f, f1, n, f, 0);
    else be->gelu_forward(be, c->fc_out, c->fc_in, (size_t)n * f);
    be->linear_forward_rows(be, c->tmp, h, c->fc_out, f, L->w.fc2_w, L->fc2_w16, NULL, n, f, h);
    be->dropout_residual_forward(be, c->x, c->x, c->tmp, L->w.fc2_b, NULL, 0.0f, n, h);
}

// logits = Norm_f(x) · out_wᵀ for rows [first, n), to the host.
static void head(KVCache *c, int first, int n, float *logits) {
    Backend *be = c->be;
    int h = c->hidden, rows = n - first;
    size_t need = (size_t)rows * c->vocab;
    if (need > c->logits_cap) {   // all rows of a prefill: a caller that checks them (tests), not decoding
        be->free(be, c->logits);
        c->logits = dev_floats(be, need);
        c->bytes += (need - c->logits_cap) * sizeof(float);
        c->logits_cap = need;
    }
    family_norm_forward(be, c->m, c->ln, c->stats, c->x + (size_t)first * h, c->lnf_w, c->lnf_b, rows);
    be->linear_forward_rows(be, c->logits, c->vocab, c->ln, h, c->out_w, c->out_w16, NULL, rows, h, c->vocab);
    be->copy(be, logits, c->logits, need * sizeof(float), COPY_D2H);
}

void infer_forward(KVCache *c, const int32_t *tokens, int n, float *logits, int all_logits) {
    int p0 = c->pos;
    if (n < 1 || p0 + n > c->seq)
        ctron_fatal("infer_forward: %d tokens at position %d exceed the model's %d positions", n, p0, c->seq);
    c->be->copy(c->be, c->tok, tokens, (size_t)n * sizeof(int32_t), COPY_H2D);
    embed(c, n, p0);
    for (int l = 0; l < c->layers; l++) {
        attention_part(c, &c->layer[l], l, n, p0);
        mlp_part(c, &c->layer[l], n);
    }
    c->pos = p0 + n;
    head(c, all_logits ? 0 : n - 1, n, logits);
}
