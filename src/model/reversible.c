// Reversible blocks (model/reversible.h): the two streams wired through gpt.c's block halves
// (model/block.h). Stream 1 carries x1 → y1, stream 2 x2 → y2, both in place.
#include "model/reversible.h"
#include <math.h>
#include <string.h>
#include "model/block.h"
#include "model/saved.h"
#include "model/workspace.h"
#include "util/common.h"

static size_t rows_h(const GPT *m) { return (size_t)m->s_rank * m->b_cur * m->cfg.hidden; }

RevProbe *rev_probe_new(const GPT *m) {
    RevProbe *p = xcalloc(sizeof *p);
    size_t nh = (size_t)m->cfg.seq * m->cfg.batch * m->cfg.hidden;
    p->x = xcalloc((size_t)m->cfg.layers * 2 * nh * sizeof(float));
    p->err = xcalloc((size_t)m->cfg.layers * sizeof(double));
    return p;
}

void rev_probe_free(RevProbe *p) {
    if (!p) return;
    free(p->x);
    free(p->err);
    free(p);
}

// Stream k (0, 1) of block l's input in the probe.
static float *probe_at(const GPT *m, int l, int k) {
    return m->rev_probe->x + ((size_t)l * 2 + (size_t)k) * rows_h(m);
}

static void probe_store(GPT *m, int l, const float *s1, const float *s2) {
    if (!m->rev_probe) return;
    m->be->copy(m->be, probe_at(m, l, 0), s1, rows_h(m) * sizeof(float), COPY_D2H);
    m->be->copy(m->be, probe_at(m, l, 1), s2, rows_h(m) * sizeof(float), COPY_D2H);
}

static void probe_compare(GPT *m, int l, const float *s1, const float *s2) {
    if (!m->rev_probe) return;
    size_t n = rows_h(m);
    float *got = xmalloc(n * sizeof(float));
    double diff = 0.0, scale = 0.0;
    for (int k = 0; k < 2; k++) {
        m->be->copy(m->be, got, k ? s2 : s1, n * sizeof(float), COPY_D2H);
        const float *want = probe_at(m, l, k);
        for (size_t i = 0; i < n; i++) {
            diff = fmax(diff, fabs((double)got[i] - (double)want[i]));
            scale = fmax(scale, fabs((double)want[i]));
        }
    }
    free(got);
    m->rev_probe->err[l] = scale > 0.0 ? diff / scale : diff;
}

float *rev_forward(GPT *m, const int32_t *tokens) {
    int L = m->cfg.layers, train = m->act->ctx.train, nr = m->s_rank * m->b_cur, h = m->cfg.hidden;
    size_t nrh = rows_h(m);
    BlockActs *M = &m->act->model_acts;
    // The streams: kept (fp32) from here to the end of the backward, which rebuilds each block's
    // inputs in them; an evaluation forward uses working copies.
    float *s1 = saved_out(m, M, ACT_REV_X1, -1, nrh, train);
    float *s2 = saved_out(m, M, ACT_REV_X2, -1, nrh, train);
    gpt_embedding_forward(m, tokens, s1);
    m->be->copy(m->be, s2, s1, nrh * sizeof(float), COPY_D2D);   // x1 = x2 = the embedding
    for (int l = 0; l < L; l++) {
        scope_begin(m, l);
        probe_store(m, l, s1, s2);
        m->act->blocks[l].mark = arena_mark(&m->act->arena);
        const float *x2 = block_half_input(m, l, ACT_LN1_IN, s2, PASS_FORWARD);
        attn_half_forward(m, l, x2, s1, s1, PASS_FORWARD);                   // y1 = x1 + Attn(x2)
        const float *y1 = block_half_input(m, l, ACT_LN2_IN, s1, PASS_FORWARD);
        mlp_half_forward(m, l, y1, s2, s2, PASS_FORWARD, OUT_NEXT_BLOCK);    // y2 = x2 + MLP(y1)
        scope_end(m, l);
    }
    float *x = gpt_head_input(m);   // Norm(y1 + y2)
    m->be->dropout_residual_forward(m->be, x, s1, s2, NULL, NULL, 0.0f, nr, h);
    gpt_head_input_done(m, x);
    return x;
}

// Layer l's tensors are released: the arena back to `mark`, the layer's pointers forgotten.
static void release_to(GPT *m, int l, int mark) {
    arena_pop_to(&m->act->arena, mark);
    memset(m->act->blocks[l].saved, 0, sizeof m->act->blocks[l].saved);
}

void rev_backward(GPT *m) {
    int L = m->cfg.layers, nr = m->s_rank * m->b_cur, h = m->cfg.hidden, invert = !m->policy.rev_store;
    size_t nrh = rows_h(m);
    BlockActs *M = &m->act->model_acts;
    float *s1 = M->saved[ACT_REV_X1], *s2 = M->saved[ACT_REV_X2];
    if (!s1 || !s2) ctron_fatal("reversible backward: the streams were not kept (an evaluation forward?)");
    float *d1 = ws(m, W_D_RES), *d2 = ws(m, W_D_RES2);
    m->be->copy(m->be, d2, d1, nrh * sizeof(float), COPY_D2D);   // the sum's gradient reaches both streams
    for (int l = L - 1; l >= 0; l--) {
        scope_begin(m, l);
        int mark = invert ? arena_mark(&m->act->arena) : m->act->blocks[l].mark;
        if (invert) {   // x2 = y2 − MLP(y1), keeping what the MLP's backward reads
            const float *y1 = block_half_input(m, l, ACT_LN2_IN, s1, PASS_INVERT);
            mlp_half_forward(m, l, y1, s2, s2, PASS_INVERT, OUT_NEXT_BLOCK);
        }
        mlp_half_backward(m, l, d2, d1);   // dL/dy1 += MLP′(y1)ᵀ dL/dy2
        if (invert) {   // x1 = y1 − Attn(x2), keeping what the attention's backward reads
            release_to(m, l, mark);
            const float *x2 = block_half_input(m, l, ACT_LN1_IN, s2, PASS_INVERT);
            attn_half_forward(m, l, x2, s1, s1, PASS_INVERT);
        }
        attn_half_backward(m, l, d1, d2);   // dL/dx2 = dL/dy2 + Attn′(x2)ᵀ dL/dy1; dL/dx1 = dL/dy1
        release_to(m, l, mark);
        scope_end(m, l);
        if (invert) probe_compare(m, l, s1, s2);
    }
    m->be->dropout_residual_forward(m->be, d1, d1, d2, NULL, NULL, 0.0f, nr, h);   // x1 = x2 = x
}
