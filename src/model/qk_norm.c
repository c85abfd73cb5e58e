#include "model/qk_norm.h"
#include "model/family.h"

void qk_rows(GPT *m, const BlockTensors *w, float *q, float *k, float *q_stats, float *k_stats, const float *q_in,
             const float *k_in, int p0, int p1) {
    const GPTConfig *c = &m->cfg;
    int b = m->b_cur, d = gpt_head_dim(c), rot = gpt_rotary_dim(c), nr = (p1 - p0) * b;
    size_t r0 = (size_t)p0 * b, qo = r0 * m->ql, ko = r0 * m->kvl;
    if (c->qk_norm) {   // transformers' Qwen3RMSNorm(head_dim, eps=config.rms_norm_eps)
        m->be->rmsnorm_forward(m->be, q + qo, q_stats + r0 * m->al, q_in + qo, w->qk_norm_w, c->norm_eps, nr * m->al, d, 0);
        m->be->rmsnorm_forward(m->be, k + ko, k_stats + r0 * m->kvh, k_in + ko, w->qk_norm_w + d, c->norm_eps,
                               nr * m->kvh, d, 0);
    }
    if (!rotary(m)) return;
    m->be->rope_forward(m->be, q + qo, q + qo, m->ql, m->rope_cs, c->seq, nr, b, m->al, d, rot, p0, 0);
    m->be->rope_forward(m->be, k + ko, k + ko, m->kvl, m->rope_cs, c->seq, nr, b, m->kvh, d, rot, p0, 0);
}

void qk_norm_backward(GPT *m, const BlockTensors *w, const BlockTensors *g, float *dq_in, float *dk_in, const float *dq,
                      const float *dk, const float *q_in, const float *k_in, const float *q_stats, const float *k_stats,
                      int n) {
    int d = gpt_head_dim(&m->cfg);
    float *gq = g->qk_norm_w, *gk = gq ? gq + d : NULL;
    m->be->rmsnorm_backward(m->be, dq_in, 0, gq, dq, q_in, q_stats, w->qk_norm_w, n * m->al, d);
    m->be->rmsnorm_backward(m->be, dk_in, 0, gk, dk, k_in, k_stats, w->qk_norm_w + d, n * m->kvh, d);
}
