#include "model/lora_site.h"
#include "backend/cpu/dropout.h"
#include "model/params.h"
#include "model/saved.h"
#include "model/tp_regions.h"
#include "model/workspace.h"
#include "util/common.h"

// Layer l's A [r, in_l] and B [out_l, r] within the stacks (w: parameters or gradients; NULL stays NULL).
static float *layer_a(const GPT *m, const LoraTensors *w, LoraSite s, int l, int in_l) {
    return w->a[s] ? w->a[s] + (size_t)gpt_local_layer(m, l) * (size_t)m->cfg.lora_rank * (size_t)in_l : NULL;
}
static float *layer_b(const GPT *m, const LoraTensors *w, LoraSite s, int l, int out_l) {
    return w->b[s] ? w->b[s] + (size_t)gpt_local_layer(m, l) * (size_t)out_l * (size_t)m->cfg.lora_rank : NULL;
}

// B's rows on this rank: the sum of the blocks' widths.
static int out_rows(const LoraOut *o) {
    int sum = 0;
    for (int k = 0; k < o->blocks; k++) sum += o->cols[k];
    return sum;
}

// --lora-dropout p (peft's lora_dropout): the adapter reads u = x ⊙ keep/(1−p), the base x itself. Site s's
// mask at layer l is a Philox function of (seed, step, sample, layer, SITE_LORA + s, the element's index in the
// unsharded [s, b, in] input): every layout draws the same bits. It is drawn again wherever it is read (the
// forward; the backward's dA and dx), so the ledger keeps nothing for it; LoRA's dA reads x, which the site
// keeps for it anyway, and LoRA-FA reads no input at all.
static float lora_p(const GPT *m) { return m->act->ctx.train ? m->cfg.lora_dropout : 0.0f; }

// The mask of columns c0 .. c0+w−1 of the site's [s, b, W] input (a row-parallel site's rank holds a slice).
static const uint8_t *lora_mask(GPT *m, int l, LoraSite s, int w, int W, int c0) {
    uint8_t *keep = (uint8_t *)ws(m, W_LORA_MASK);
    DropoutSite site = {philox_key_from_seed(m->act->ctx.seed), m->act->ctx.step, (uint32_t)l,
                        (uint32_t)SITE_LORA + (uint32_t)s, lora_p(m)};
    m->be->dropout_mask_cols(m->be, keep, site, m->s_cur, m->b_cur, w, W, c0, m->act->ctx.sample0);
    return keep;
}

// u = x ⊙ keep/(1−p) [n, in] into W_LORA, from x or (kept in bf16 only) its bf16 copy: the same values. From x
// in one pass: dropout_backward is dst = keep ? src·(1/(1−p)) : 0 out of place, dropout_apply's very product
// (one kernel on the GPU), so no copy of x first.
static const float *dropped(GPT *m, const float *x, const uint16_t *x16, int in, const uint8_t *keep) {
    float *u = ws(m, W_LORA);
    size_t count = (size_t)m->s_cur * m->b_cur * (size_t)in;
    if (x) {
        m->be->dropout_backward(m->be, u, x, keep, lora_p(m), count);
        return u;
    }
    m->be->bf16_unpack(m->be, u, x16, count);
    m->be->dropout_apply(m->be, u, keep, lora_p(m), count);
    return u;
}

// The adapter's input-side backward under dropout: dA += duᵀ·u (A trains: x given), dx += (du·A) ⊙ keep/(1−p).
static void dropped_backward(GPT *m, float *dx, int ldx, float *ga, const float *du, const float *x,
                             const uint16_t *x16, const float *a, int in, const uint8_t *keep) {
    int n = m->s_cur * m->b_cur, r = m->cfg.lora_rank;
    if (ldx != in) ctron_fatal("lora: an input gradient of %d columns with row stride %d", in, ldx);
    if (ga) {
        const float *u = dropped(m, x, x16, in, keep);
        m->be->linear_backward(m->be, NULL, in, 0, ga, NULL, du, r, u, NULL, in, a, gpt_w16(m, a), n, in, r);
    }
    float *tmp = ws(m, W_LORA);
    m->be->linear_backward(m->be, tmp, in, 0, NULL, NULL, du, r, NULL, NULL, in, a, gpt_w16(m, a), n, in, r);
    m->be->dropout_apply(m->be, tmp, keep, lora_p(m), (size_t)n * in);
    m->be->axpby(m->be, dx, 1.0f, tmp, 1.0f, (size_t)n * in);
}

// v = x·Aᵀ (the kept tensor, or its fp32 working copy), as the GEMM reads it in backward.
typedef struct { const float *f32; const uint16_t *bf16; } KeptV;
static KeptV kept_v(GPT *m, BlockActs *A, ActName name, int l, size_t count) {
    const uint16_t *b16 = m->params16 ? saved_in_bf16(m, A, name, l) : NULL;
    if (b16) return (KeptV){NULL, b16};
    return (KeptV){saved_in(m, A, name, l, count), NULL};
}

// y[rows, cols] += v[rows, r] · Bᵀ (B [cols, r]): the GEMM adds into the base's output (beta 1), with no
// zeroed temporary and no second pass over y.
static void add_vb(GPT *m, float *y, int ld, const float *v, const uint16_t *v16, const float *b, int rows, int cols) {
    m->be->linear_forward_acc(m->be, y, ld, v, v16, m->cfg.lora_rank, b, gpt_w16(m, b), rows, m->cfg.lora_rank, cols);
}

void lora_column_forward(GPT *m, int l, LoraSite s, const float *x, const uint16_t *x16, int in, const LoraOut *out,
                         int keep) {
    BlockActs *A = &m->act->blocks[l];
    int n = m->s_cur * m->b_cur, r = m->cfg.lora_rank;
    size_t nr = (size_t)n * r;
    ActName name = lora_act(s);
    const float *a = layer_a(m, &m->lw, s, l, in), *b = layer_b(m, &m->lw, s, l, out_rows(out));
    float *v = saved_out(m, A, name, l, nr, keep);
    if (lora_p(m) > 0.0f) {   // the adapter's input dropped (the base read x)
        x = dropped(m, x, x16, in, lora_mask(m, l, s, in, in, 0));
        x16 = NULL;
    }
    m->be->linear_forward(m->be, v, r, x, x16, in, a, gpt_w16(m, a), NULL, n, in, r);
    m->be->axpby(m->be, v, 0.0f, NULL, m->lora_scale, nr);   // v = (α/r)·x Aᵀ
    saved_done(m, A, name, l, v, nr, keep, 0);
    const uint16_t *v16 = saved_bf16(m, A, name, keep);
    for (int k = 0; k < out->blocks; k++)
        add_vb(m, out->y[k], out->ld[k], v, v16, b + (size_t)out->row0[k] * r, n, out->cols[k]);
}

void lora_column_backward(GPT *m, int l, LoraSite s, const LoraOut *dy, const float *x, const uint16_t *x16, int in,
                          float *dx, int ldx) {
    BlockActs *A = &m->act->blocks[l];
    int n = m->s_cur * m->b_cur, r = m->cfg.lora_rank, rows = out_rows(dy);
    size_t nr = (size_t)n * r;
    KeptV v = kept_v(m, A, lora_act(s), l, nr);
    const float *a = layer_a(m, &m->lw, s, l, in), *b = layer_b(m, &m->lw, s, l, rows);
    float *ga = layer_a(m, &m->lg, s, l, in), *gb = layer_b(m, &m->lg, s, l, rows), *dv = ws(m, W_LORA_R);
    for (int k = 0; k < dy->blocks; k++) {   // dv = Σ_k dy_k·B_k;  dB_k += dy_kᵀ v
        size_t off = (size_t)dy->row0[k] * r;
        m->be->linear_backward(m->be, dv, r, k > 0, gb + off, NULL, dy->y[k], dy->ld[k], v.f32, v.bf16, r, b + off,
                               gpt_w16(m, b + off), n, r, dy->cols[k]);
    }
    m->be->axpby(m->be, dv, 0.0f, NULL, m->lora_scale, nr);   // du = (α/r)·dv
    if (lora_p(m) > 0.0f) {
        dropped_backward(m, dx, ldx, ga, dv, x, x16, a, in, lora_mask(m, l, s, in, in, 0));
        return;
    }
    m->be->linear_backward(m->be, dx, ldx, 1, ga, NULL, dv, r, ga ? x : NULL, ga ? x16 : NULL, in, a, gpt_w16(m, a), n,
                           in, r);
}

void lora_row_forward(GPT *m, int l, LoraSite s, const float *x, const uint16_t *x16, int in_l, float *y, int out,
                      int keep) {
    BlockActs *A = &m->act->blocks[l];
    int n = m->s_cur * m->b_cur, r = m->cfg.lora_rank, nrows = m->s_rank * m->b_cur;
    size_t nr = (size_t)n * r, first = (size_t)m->s0 * m->b_cur * r;
    ActName name = lora_act(s);
    const float *a = layer_a(m, &m->lw, s, l, in_l), *b = layer_b(m, &m->lw, s, l, out);
    float *v = saved_out(m, A, name, l, nr, keep);
    if (lora_p(m) > 0.0f) {   // this rank's columns of the whole input's mask
        x = dropped(m, x, x16, in_l, lora_mask(m, l, s, in_l, in_l * m->tp.t, in_l * m->tp.rank));
        x16 = NULL;
    }
    m->be->linear_forward(m->be, v, r, x, x16, in_l, a, gpt_w16(m, a), NULL, n, in_l, r);
    tp_allreduce(m, v, nr, TPC_BLOCK);   // the partial products of the rank's input columns
    m->be->axpby(m->be, v, 0.0f, NULL, m->lora_scale, nr);
    saved_done(m, A, name, l, v, nr, keep, 0);
    if (!y) return;
    const uint16_t *v16 = saved_bf16(m, A, name, keep);
    add_vb(m, y, out, v + first, v16 ? v16 + first : NULL, b, nrows, out);
}

void lora_row_backward(GPT *m, int l, LoraSite s, const float *dy, const float *x, const uint16_t *x16, int in_l,
                       float *dx, int out) {
    BlockActs *A = &m->act->blocks[l];
    int n = m->s_cur * m->b_cur, r = m->cfg.lora_rank;
    size_t nr = (size_t)n * r;
    KeptV v = kept_v(m, A, lora_act(s), l, nr);
    const float *a = layer_a(m, &m->lw, s, l, in_l), *b = layer_b(m, &m->lw, s, l, out);
    float *ga = layer_a(m, &m->lg, s, l, in_l), *gb = layer_b(m, &m->lg, s, l, out), *dv = ws(m, W_LORA_R);
    m->be->linear_backward(m->be, dv, r, 0, gb, NULL, dy, out, v.f32, v.bf16, r, b, gpt_w16(m, b), n, r, out);
    m->be->axpby(m->be, dv, 0.0f, NULL, m->lora_scale, nr);
    if (lora_p(m) > 0.0f) {
        dropped_backward(m, dx, in_l, ga, dv, x, x16, a, in_l, lora_mask(m, l, s, in_l, in_l * m->tp.t, in_l * m->tp.rank));
        return;
    }
    m->be->linear_backward(m->be, dx, in_l, 1, ga, NULL, dv, r, ga ? x : NULL, ga ? x16 : NULL, in_l, a, gpt_w16(m, a),
                           n, in_l, r);
}
