#include "model/qk_norm.h"

void qk_norm_rows(GPT *m, const BlockTensors *w, float *q, float *k, float *q_stats, float *k_stats, const float *q_in,
                  const float *k_in, int r0, int nr) {
    int d = gpt_head_dim(&m->cfg);
    float eps = m->cfg.norm_eps;   // transformers' Qwen3RMSNorm(head_dim, eps=config.rms_norm_eps)
    size_t qo = (size_t)r0 * m->ql, ko = (size_t)r0 * m->kvl;
    m->be->rmsnorm_forward(m->be, q + qo, q_stats + (size_t)r0 * m->al, q_in + qo, w->qk_norm_w, eps, nr * m->al, d, 0);
    m->be->rmsnorm_forward(m->be, k + ko, k_stats + (size_t)r0 * m->kvh, k_in + ko, w->qk_norm_w + d, eps, nr * m->kvh,
                           d, 0);
}

void qk_norm_backward(GPT *m, const BlockTensors *w, const BlockTensors *g, float *dq_in, float *dk_in, const float *dq,
                      const float *dk, const float *q_in, const float *k_in, const float *q_stats, const float *k_stats,
                      int n) {
    int d = gpt_head_dim(&m->cfg);
    float *gq = g->qk_norm_w, *gk = gq ? gq + d : NULL;
    m->be->rmsnorm_backward(m->be, dq_in, 0, gq, dq, q_in, q_stats, w->qk_norm_w, n * m->al, d);
    m->be->rmsnorm_backward(m->be, dk_in, 0, gk, dk, k_in, k_stats, w->qk_norm_w + d, n * m->kvh, d);
}
