#include "model/remat.h"
#include "model/family.h"
#include "model/params.h"
#include "model/saved.h"
#include "backend/cpu/dropout.h"
#include "util/common.h"

int remat_makes(const GPT *m, ActName name) {
    unsigned t = m->policy.tempo;
    if (name == ACT_QKV_IN || name == ACT_FC1_IN) return (t & RECOMPUTE_NORM_OUT) != 0;
    if (name == ACT_FC2_IN) return (t & RECOMPUTE_ACT_OUT) != 0;
    if (name == ACT_PROJ_IN) return (t & RECOMPUTE_ATTN_OUT) != 0;
    return 0;
}

// y = Norm(x) again on the rank's rows from the kept input; the statistics come out again too (into
// their workspace slot: backward reads the kept ones, bitwise the same).
static const float *norm_again(GPT *m, int l, ActName in, ActName out, ActName stats) {
    BlockActs *A = &m->act->blocks[l];
    BlockTensors w = block_tensors(m, &m->w, l);
    int nr = m->s_rank * m->b_cur, first = out == ACT_QKV_IN;
    size_t nrh = (size_t)nr * m->cfg.hidden;
    const float *x = saved_in(m, A, in, l, nrh);
    float *y = work_slot(m, out, l), *st = work_slot(m, stats, l);
    family_norm_forward(m->be, m, y, st, x, first ? w.ln1_w : w.ln2_w, first ? w.ln1_b : w.ln2_b, nr);
    if (m->policy.act_dtype == ACT_BF16) m->be->bf16_round(m->be, y, nrh);   // as saved_done rounds the forward's
    return y;
}

// fc2_in = GeLU(gelu_in): gelu_in already holds FC1's output plus its bias (bias_gelu_forward adds it in
// place, and rounds it under bf16 storage before GeLU reads it).
static const float *gelu_again(GPT *m, int l) {
    BlockActs *A = &m->act->blocks[l];
    size_t n = (size_t)m->s_cur * m->b_cur * (size_t)m->fl;
    const float *x = saved_in(m, A, ACT_GELU_IN, l, n);
    float *y = work_slot(m, ACT_FC2_IN, l);
    m->be->gelu_forward(m->be, y, x, n);
    if (m->policy.act_dtype == ACT_BF16) m->be->bf16_round(m->be, y, n);
    return y;
}

// ctx = Attention(q, k, v) with the forward's kernel, site and rounding; its probabilities, mask and dropped
// probabilities into their workspace slots (where a selective layer's forward wrote them), for the
// standard attention backward that follows.
static const float *attention_again(GPT *m, int l) {
    BlockActs *A = &m->act->blocks[l];
    int s = m->s_cur, b = m->b_cur, bf16 = m->policy.act_dtype == ACT_BF16;
    size_t n = (size_t)s * b, nhl = n * (size_t)m->hl, nkv = n * (size_t)m->kvl;
    DropoutSite site = {philox_key_from_seed(m->act->ctx.seed), m->act->ctx.step, (uint32_t)l, SITE_ATTN,
                        m->act->ctx.train ? m->cfg.dropout : 0.0f};   // as gpt.c's site_of
    int drop = site.p > 0.0f;
    const float *q = saved_in(m, A, ACT_Q, l, nhl), *k = saved_in(m, A, ACT_K, l, nkv), *v = saved_in(m, A, ACT_V, l, nkv);
    float *ctx = work_slot(m, ACT_PROJ_IN, l);
    m->be->attention_forward(m->be, ctx, work_slot(m, ACT_ATTN_PROB, l), drop ? work_slot(m, ACT_ATTN_MASK, l) : NULL,
                             drop ? work_slot(m, ACT_ATTN_DROP, l) : NULL, q, k, v, s, b, m->al, m->kvh, m->hl, m->head0,
                             site, m->act->ctx.sample0, bf16);
    if (bf16) m->be->bf16_round(m->be, ctx, nhl);   // as saved_done rounds the forward's
    m->remat_attn_layer = l + 1;
    return ctx;
}

void *remat_probs(GPT *m, int l, ActName name) {
    if (m->remat_attn_layer != l + 1) attention_again(m, l);   // Proj's weight gradient did not ask first
    return work_slot(m, name, l);
}

const float *remat_tensor(GPT *m, int l, ActName name) {
    switch (name) {
    case ACT_QKV_IN: return norm_again(m, l, ACT_LN1_IN, ACT_QKV_IN, ACT_LN1_STATS);
    case ACT_FC1_IN: return norm_again(m, l, ACT_LN2_IN, ACT_FC1_IN, ACT_LN2_STATS);
    case ACT_FC2_IN: return gelu_again(m, l);
    case ACT_PROJ_IN: return attention_again(m, l);
    default: ctron_fatal("remat_tensor: %s is not made again by the fusion search's parts", act_name_str(name));
    }
}

void remat_check(const MemoryPolicy *p) {
    unsigned t = p->tempo;
    for (int l = 0; (t & RECOMPUTE_ATTN_OUT) && l < p->layers; l++)
        if (p->kind[l] != RECOMPUTE_SELECTIVE)
            ctron_fatal("gpt_init: recomputing the attention's output in layer %d, which is %s (selective layers only: "
                        "their probabilities are not kept)", l, recompute_name(p->kind[l]));
    if ((t & RECOMPUTE_ATTN_OUT) && (t & ATTN_FLASH))
        ctron_fatal("gpt_init: recomputing the attention's output with flash attention, whose backward reads it");
    if ((t & RECOMPUTE_NORM_OUT) && (t & (TEMPO_LAYERNORM | MINI_SEQ)))
        ctron_fatal("gpt_init: recomputing the norms' outputs with %s, which reads them in backward",
                    t & MINI_SEQ ? "mini-seq" : "Tempo's norm-from-output");
    if ((t & RECOMPUTE_ACT_OUT) && (t & (TEMPO_GELU | GELU_FEWBIT | MINI_SEQ)))
        ctron_fatal("gpt_init: recomputing GeLU's output with %s, which keeps no GeLU input",
                    t & MINI_SEQ ? "mini-seq" : t & TEMPO_GELU ? "Tempo's GeLU" : "Few-Bit GeLU");
}
