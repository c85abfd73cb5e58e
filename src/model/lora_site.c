#include "model/lora_site.h"
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

// v = x·Aᵀ (the kept tensor, or its fp32 working copy), as the GEMM reads it in backward.
typedef struct { const float *f32; const uint16_t *bf16; } KeptV;
static KeptV kept_v(GPT *m, BlockActs *A, ActName name, int l, size_t count) {
    const uint16_t *b16 = m->params16 ? saved_in_bf16(m, A, name, l) : NULL;
    if (b16) return (KeptV){NULL, b16};
    return (KeptV){saved_in(m, A, name, l, count), NULL};
}

// y[rows, cols] += v[rows, r] · Bᵀ (B [cols, r]), through the adapter's workspace.
static void add_vb(GPT *m, float *y, int ld, const float *v, const uint16_t *v16, const float *b, int rows, int cols) {
    int r = m->cfg.lora_rank;
    if (ld != cols) ctron_fatal("lora: an output of %d columns with row stride %d", cols, ld);
    float *tmp = ws(m, W_LORA);
    m->be->linear_forward(m->be, tmp, cols, v, v16, r, b, gpt_w16(m, b), NULL, rows, r, cols);
    m->be->axpby(m->be, y, 1.0f, tmp, 1.0f, (size_t)rows * cols);
}

void lora_column_forward(GPT *m, int l, LoraSite s, const float *x, const uint16_t *x16, int in, const LoraOut *out,
                         int keep) {
    BlockActs *A = &m->act->blocks[l];
    int n = m->s_cur * m->b_cur, r = m->cfg.lora_rank;
    size_t nr = (size_t)n * r;
    ActName name = lora_act(s);
    const float *a = layer_a(m, &m->lw, s, l, in), *b = layer_b(m, &m->lw, s, l, out_rows(out));
    float *v = saved_out(m, A, name, l, nr, keep);
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
    m->be->linear_backward(m->be, dx, in_l, 1, ga, NULL, dv, r, ga ? x : NULL, ga ? x16 : NULL, in_l, a, gpt_w16(m, a),
                           n, in_l, r);
}
