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

// The mask of columns c0 .. c0+w−1 of rows [r0, r0 + rows) of the site's [s, b, W] input (a row-parallel
// site's rank holds a column slice; mini-seq's chunk a row range): [rows, w] bytes in W_LORA_MASK.
static const uint8_t *lora_mask(GPT *m, int l, LoraSite s, int r0, int rows, int w, int W, int c0) {
    uint8_t *keep = (uint8_t *)ws(m, W_LORA_MASK);
    DropoutSite site = {philox_key_from_seed(m->act->ctx.seed), m->act->ctx.step, (uint32_t)l,
                        (uint32_t)SITE_LORA + (uint32_t)s, lora_p(m)};
    m->be->dropout_mask_cols(m->be, keep, site, r0, rows, m->b_cur, w, W, c0, m->act->ctx.sample0);
    return keep;
}

// u = x ⊙ keep/(1−p) [rows, in] into W_LORA, from x or (kept in bf16 only) its bf16 copy: the same values. From
// x in one pass: dropout_backward is dst = keep ? src·(1/(1−p)) : 0 out of place, dropout_apply's very product
// (one kernel on the GPU), so no copy of x first.
static const float *dropped(GPT *m, const float *x, const uint16_t *x16, int rows, int in, const uint8_t *keep) {
    float *u = ws(m, W_LORA);
    size_t count = (size_t)rows * (size_t)in;
    if (x) {
        m->be->dropout_backward(m->be, u, x, keep, lora_p(m), count);
        return u;
    }
    m->be->bf16_unpack(m->be, u, x16, count);
    m->be->dropout_apply(m->be, u, keep, lora_p(m), count);
    return u;
}

// The mask of rows [r0, r0 + rows) of the site's input, those rows alone drawn (their bits in the whole
// [s, b, in] mask), a row-parallel site's rank holding its own columns of the unsharded input.
static const uint8_t *rows_mask(GPT *m, int l, LoraSite s, int in, int r0, int rows) {
    int row = lora_site(s)->parallel == LORA_ROW;
    return lora_mask(m, l, s, r0, rows, in, row ? in * m->tp.t : in, row ? in * m->tp.rank : 0);
}

// The adapter's input side of the backward over `rows` rows, from dv = dy·B in W_LORA_R: du = (α/r)·dv;
// dA += duᵀ·u (ga given: A trains; u = x or its dropped copy); dx += du·A (⊙ keep/(1−p) under dropout; dx
// NULL: nothing reads it).
static void input_backward(GPT *m, float *ga, const float *a, const float *x, const uint16_t *x16, int in, float *dx,
                           int ldx, int rows, const uint8_t *keep) {
    int r = m->cfg.lora_rank;
    if (!ga && !dx) return;
    float *du = ws(m, W_LORA_R);
    m->be->axpby(m->be, du, 0.0f, NULL, m->lora_scale, (size_t)rows * r);
    if (!keep) {
        m->be->linear_backward(m->be, dx, ldx, 1, ga, NULL, du, r, ga ? x : NULL, ga ? x16 : NULL, in, a,
                               gpt_w16(m, a), rows, in, r);
        return;
    }
    if (ldx != in) ctron_fatal("lora: an input gradient of %d columns with row stride %d", in, ldx);
    if (ga) {
        const float *u = dropped(m, x, x16, rows, in, keep);
        m->be->linear_backward(m->be, NULL, in, 0, ga, NULL, du, r, u, NULL, in, a, gpt_w16(m, a), rows, in, r);
    }
    if (!dx) return;
    float *tmp = ws(m, W_LORA);
    m->be->linear_backward(m->be, tmp, in, 0, NULL, NULL, du, r, NULL, NULL, in, a, gpt_w16(m, a), rows, in, r);
    m->be->dropout_apply(m->be, tmp, keep, lora_p(m), (size_t)rows * in);
    m->be->axpby(m->be, dx, 1.0f, tmp, 1.0f, (size_t)rows * in);
}

// dv = Σ_k dy_k·B_k into W_LORA_R, dB_k += dy_kᵀ·v over `rows` rows (dy's blocks and v at the first).
static void output_backward(GPT *m, int l, LoraSite s, const LoraOut *dy, LoraV v, int rows) {
    int r = m->cfg.lora_rank, out = out_rows(dy);
    const float *b = layer_b(m, &m->lw, s, l, out);
    float *gb = layer_b(m, &m->lg, s, l, out);
    for (int k = 0; k < dy->blocks; k++) {
        size_t off = (size_t)dy->row0[k] * r;
        if (dy->y16[k])
            m->be->linear_backward16(m->be, ws(m, W_LORA_R), r, k > 0, gb + off, dy->y16[k], dy->ld[k], v.f32, v.bf16,
                                     r, gpt_w16(m, b + off), rows, r, dy->cols[k]);
        else
            m->be->linear_backward(m->be, ws(m, W_LORA_R), r, k > 0, gb + off, NULL, dy->y[k], dy->ld[k], v.f32,
                                   v.bf16, r, b + off, gpt_w16(m, b + off), rows, r, dy->cols[k]);
    }
}

LoraV lora_v_kept(GPT *m, int l, LoraSite s) {
    BlockActs *A = &m->act->blocks[l];
    const uint16_t *b16 = m->params16 ? saved_in_bf16(m, A, lora_act(s), l) : NULL;
    if (b16) return (LoraV){NULL, b16};
    return (LoraV){saved_in(m, A, lora_act(s), l, (size_t)m->s_cur * m->b_cur * (size_t)m->cfg.lora_rank), NULL};
}

// Rows [r0, ...) of v.
static LoraV v_rows(LoraV v, int r0, int r) {
    size_t off = (size_t)r0 * (size_t)r;
    return (LoraV){v.f32 ? v.f32 + off : NULL, v.bf16 ? v.bf16 + off : NULL};
}

// y[rows, cols] += v[rows, r] · Bᵀ (B [cols, r]): the GEMM adds into the base's output (beta 1), with no
// zeroed temporary and no second pass over y.
static void add_vb(GPT *m, float *y, int ld, const float *v, const uint16_t *v16, const float *b, int rows, int cols) {
    m->be->linear_forward_acc(m->be, y, ld, v, v16, m->cfg.lora_rank, b, gpt_w16(m, b), rows, m->cfg.lora_rank, cols);
}

LoraV lora_column_forward(GPT *m, int l, LoraSite s, const float *x, const uint16_t *x16, int in, const LoraOut *out,
                          int keep) {
    BlockActs *A = &m->act->blocks[l];
    int n = m->s_cur * m->b_cur, r = m->cfg.lora_rank;
    size_t nr = (size_t)n * r;
    ActName name = lora_act(s);
    const float *a = layer_a(m, &m->lw, s, l, in);
    float *v = saved_out(m, A, name, l, nr, keep);
    if (lora_p(m) > 0.0f) {   // the adapter's input dropped (the base read x)
        x = dropped(m, x, x16, n, in, rows_mask(m, l, s, in, 0, n));
        x16 = NULL;
    }
    m->be->linear_forward(m->be, v, r, x, x16, in, a, gpt_w16(m, a), NULL, n, in, r);
    m->be->axpby(m->be, v, 0.0f, NULL, m->lora_scale, nr);   // v = (α/r)·x Aᵀ
    saved_done(m, A, name, l, v, nr, keep, 0);
    const uint16_t *v16 = saved_bf16(m, A, name, keep);
    lora_rows_add_out(m, l, s, (LoraV){v, v16}, out, 0, n);
    return (LoraV){v, v16};
}

void lora_column_add(GPT *m, int l, LoraSite s, const LoraOut *out) {
    lora_rows_add_out(m, l, s, lora_v_kept(m, l, s), out, 0, m->s_cur * m->b_cur);
}

void lora_column_backward(GPT *m, int l, LoraSite s, const LoraOut *dy, const float *x, const uint16_t *x16, int in,
                          float *dx, int ldx) {
    int n = m->s_cur * m->b_cur;
    output_backward(m, l, s, dy, lora_v_kept(m, l, s), n);
    const float *a = layer_a(m, &m->lw, s, l, in);
    float *ga = layer_a(m, &m->lg, s, l, in);
    input_backward(m, ga, a, x, x16, in, dx, ldx, n, lora_p(m) > 0.0f ? rows_mask(m, l, s, in, 0, n) : NULL);
}

// v rows [r0, r0 + rows) of a site from its input rows (x points at row r0), scaled: a row-parallel
// site's are this rank's partial products of its input columns, summed over TP first; a column-parallel
// site's input is whole on every rank (A replicated), its product already the site's.
static void row_v(GPT *m, int l, LoraSite s, const float *x, const uint16_t *x16, int in_l, float *v, int r0,
                  int rows) {
    int r = m->cfg.lora_rank;
    size_t nr = (size_t)rows * r;
    const float *a = layer_a(m, &m->lw, s, l, in_l);
    float *vr = v + (size_t)r0 * r;
    if (lora_p(m) > 0.0f) {
        x = dropped(m, x, x16, rows, in_l, rows_mask(m, l, s, in_l, r0, rows));
        x16 = NULL;
    }
    m->be->linear_forward(m->be, vr, r, x, x16, in_l, a, gpt_w16(m, a), NULL, rows, in_l, r);
    if (lora_site(s)->parallel == LORA_ROW) tp_allreduce(m, vr, nr, TPC_BLOCK);   // the rank's input columns'
    m->be->axpby(m->be, vr, 0.0f, NULL, m->lora_scale, nr);
}

void lora_row_add(GPT *m, int l, LoraSite s, LoraV v, float *y, int out) {
    LoraV mine = v_rows(v, m->s0 * m->b_cur, m->cfg.lora_rank);
    add_vb(m, y, out, mine.f32, mine.bf16, layer_b(m, &m->lw, s, l, out), m->s_rank * m->b_cur, out);
}

void lora_row_forward(GPT *m, int l, LoraSite s, const float *x, const uint16_t *x16, int in_l, float *y, int out,
                      int keep) {
    BlockActs *A = &m->act->blocks[l];
    int n = m->s_cur * m->b_cur;
    size_t nr = (size_t)n * m->cfg.lora_rank;
    ActName name = lora_act(s);
    float *v = saved_out(m, A, name, l, nr, keep);
    row_v(m, l, s, x, x16, in_l, v, 0, n);
    saved_done(m, A, name, l, v, nr, keep, 0);
    if (y) lora_row_add(m, l, s, (LoraV){v, saved_bf16(m, A, name, keep)}, y, out);
}

void lora_row_backward(GPT *m, int l, LoraSite s, const float *dy, const uint16_t *dy16, const float *x,
                       const uint16_t *x16, int in_l, float *dx, int out) {
    int n = m->s_cur * m->b_cur;
    LoraOut d = {1, {(float *)dy}, {out}, {out}, {0}, {dy16}};
    output_backward(m, l, s, &d, lora_v_kept(m, l, s), n);
    input_backward(m, layer_a(m, &m->lg, s, l, in_l), layer_a(m, &m->lw, s, l, in_l), x, x16, in_l, dx, in_l, n,
                   lora_p(m) > 0.0f ? rows_mask(m, l, s, in_l, 0, n) : NULL);
}

// ---- mini-seq's chunked MLP (model/mini_mlp.c): one site over rows [r0, r0 + rows)

// Each block of y (y[k] at the first of `rows` rows) += part·B_kᵀ.
static void add_blocks(GPT *m, int l, LoraSite s, LoraV part, const LoraOut *y, size_t y_row, int rows) {
    int r = m->cfg.lora_rank;
    const float *b = layer_b(m, &m->lw, s, l, out_rows(y));
    for (int k = 0; k < y->blocks; k++)
        add_vb(m, y->y[k] + y_row * (size_t)y->ld[k], y->ld[k], part.f32, part.bf16, b + (size_t)y->row0[k] * r, rows,
               y->cols[k]);
}

void lora_chunk_add(GPT *m, int l, LoraSite s, LoraV v, const LoraOut *y, int r0, int rows) {
    add_blocks(m, l, s, v_rows(v, r0, m->cfg.lora_rank), y, 0, rows);
}

void lora_v_rows(GPT *m, int l, LoraSite s, const float *x, int in_l, float *v, int r0, int rows) {
    row_v(m, l, s, x, NULL, in_l, v, r0, rows);
}

void lora_rows_add_out(GPT *m, int l, LoraSite s, LoraV v, const LoraOut *out, int r0, int rows) {
    add_blocks(m, l, s, v_rows(v, r0, m->cfg.lora_rank), out, (size_t)r0, rows);
}

void lora_chunk_backward(GPT *m, int l, LoraSite s, const LoraOut *dy, LoraV v, const float *x, int in, float *dx,
                         int ldx, int r0, int rows) {
    output_backward(m, l, s, dy, v_rows(v, r0, m->cfg.lora_rank), rows);
    float *ga = layer_a(m, &m->lg, s, l, in);
    input_backward(m, ga, layer_a(m, &m->lw, s, l, in), ga ? x : NULL, NULL, in, dx, ldx, rows,
                   lora_p(m) > 0.0f ? rows_mask(m, l, s, in, r0, rows) : NULL);
}
