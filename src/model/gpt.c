// The model, written as the block diagram of DESIGN.md §1:
//   x1 = x  + Dropout(Proj(Attn(LN1(x))))
//   x2 = x1 + Dropout(FC2(GeLU(FC1(LN2(x1)))))
// Every tensor the backward reads is kept under its ledger name (model/saved.h) or recomputed as
// the layer's policy says; nothing else is held between forward and backward.
#include "model/gpt.h"
#include <omp.h>
#include <string.h>
#include "model/params.h"
#include "model/saved.h"
#include "ops/attention.h"
#include "ops/crossentropy.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "util/common.h"

void gpt_init(GPT *m, const GPTConfig *cfg, const MemoryPolicy *policy) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    const GPTConfig *c = &m->cfg;
    policy_default(&m->policy, c->layers);
    if (policy) {
        memcpy(m->policy.kind, policy->kind, sizeof(LayerRecompute) * (size_t)c->layers);
        memcpy(m->policy.group_start, policy->group_start, sizeof(int) * (size_t)c->layers);
        m->policy.act_dtype = policy->act_dtype;
        m->policy.masks = policy->masks;
    }
    m->n_params = gpt_num_params(c);
    m->params = xcalloc(m->n_params * sizeof(float));
    m->grads = xcalloc(m->n_params * sizeof(float));
    bind_tensors(&m->w, m->params, c);
    bind_tensors(&m->g, m->grads, c);
    build_info(m);

    ActShape sh = {c->seq, c->batch, c->hidden, c->heads, c->layers, c->vocab,
                   m->policy.act_dtype == ACT_BF16 ? 2 : 4, m->policy.masks, c->dropout > 0.0f, 1, 0};
    m->shape = sh;
    // The arena holds exactly what the analytic model predicts at peak, plus alignment of each entry.
    int max_entries = act_max_entries(&m->policy);
    size_t capacity = act_peak_bytes(&sh, &m->policy) + (size_t)max_entries * 64;
    ledger_init(&m->ledger, c->layers);
    arena_init(&m->arena, capacity, max_entries, &m->ledger);
    m->blocks = xcalloc(sizeof(BlockActs) * (size_t)c->layers);

    size_t nh = (size_t)c->seq * c->batch * c->hidden, ss = (size_t)c->seq * c->seq;
    size_t threads = (size_t)omp_get_max_threads();
    m->ws_out = xmalloc(nh * sizeof(float));
    m->d_res = xmalloc(nh * sizeof(float));
    m->d_tmp = xmalloc(nh * sizeof(float));
    m->d_q = xmalloc(nh * sizeof(float));
    m->d_k = xmalloc(nh * sizeof(float));
    m->d_v = xmalloc(nh * sizeof(float));
    m->d_4h = xmalloc(4 * nh * sizeof(float));
    // Attention backward scratch per thread: dP, or with selective recompute P, D, dP and the mask.
    int any_selective = 0;
    for (int l = 0; l < c->layers; l++) any_selective |= m->policy.kind[l] == RECOMPUTE_SELECTIVE;
    size_t scratch = any_selective ? ATTENTION_RECOMPUTE_SCRATCH(c->seq) : ss;
    m->attn_scratch = xmalloc(threads * scratch * sizeof(float));
    m->row_loss = xmalloc((size_t)c->seq * c->batch * sizeof(float));
    m->workspace_bytes = (10 * nh + threads * scratch + (size_t)c->seq * c->batch) * sizeof(float);
}

void gpt_free(GPT *m) {
    arena_free(&m->arena);
    ledger_free(&m->ledger);
    policy_free(&m->policy);
    work_free(m);
    free(m->params); free(m->grads); free(m->info); free(m->blocks);
    free(m->ws_out); free(m->d_res); free(m->d_tmp); free(m->d_q); free(m->d_k); free(m->d_v);
    free(m->d_4h); free(m->attn_scratch); free(m->row_loss);
    memset(m, 0, sizeof *m);
}

enum { PASS_FORWARD, PASS_RECOMPUTE };

// Does this pass keep `name` of layer l? A recompute pass keeps everything (its backward follows).
static int keeps(const GPT *m, int l, ActName name, int pass) {
    if (!m->ctx.train) return 0;
    if (pass == PASS_RECOMPUTE) return 1;
    return act_kept(m->policy.kind[l], m->policy.group_start[l] == l, name);
}

static DropoutSite site_of(const GPT *m, int layer, int site) {
    DropoutSite d = {philox_key_from_seed(m->ctx.seed), m->ctx.step, (uint32_t)layer, (uint32_t)site,
                     m->ctx.train ? m->cfg.dropout : 0.0f};
    return d;
}

// softmax(q kᵀ/√d) → dropout → · v into ctx: the part selective recompute redoes (in its backward).
static void attention_core(GPT *m, int l, const float *q, const float *k, const float *v, float *ctx, int pass) {
    const GPTConfig *c = &m->cfg;
    BlockActs *A = &m->blocks[l];
    int s = m->s_cur, b = m->b_cur, bf16 = m->policy.act_dtype == ACT_BF16;
    size_t as2b = (size_t)c->heads * s * s * b;
    DropoutSite site = site_of(m, l, SITE_ATTN);
    int drop = site.p > 0.0f;
    int kp = keeps(m, l, ACT_ATTN_PROB, pass), km = keeps(m, l, ACT_ATTN_MASK, pass), kd = keeps(m, l, ACT_ATTN_DROP, pass);
    float *prob = saved_out(m, A, ACT_ATTN_PROB, l, as2b, kp);
    uint8_t *mask = drop ? mask_out(m, A, ACT_ATTN_MASK, l, as2b, km) : NULL;
    float *dropped = drop ? saved_out(m, A, ACT_ATTN_DROP, l, as2b, kd) : NULL;
    attention_forward(ctx, prob, mask, dropped, q, k, v, s, b, c->heads, c->hidden, site, m->ctx.sample0, bf16);
    saved_done(m, A, ACT_ATTN_PROB, l, prob, as2b, kp, 1);
    if (drop) {
        mask_done(m, A, ACT_ATTN_MASK, l, mask, as2b, km);
        saved_done(m, A, ACT_ATTN_DROP, l, dropped, as2b, kd, 1);
    }
}

enum { OUT_NEXT_BLOCK, OUT_HEAD, OUT_DISCARD };

// Allocates block l's input (ln1_in of l) where block l−1 or the embedding writes it.
static float *input_of(GPT *m, int l, int pass) {
    m->blocks[l].mark = arena_mark(&m->arena);
    size_t nh = (size_t)m->s_cur * m->b_cur * m->cfg.hidden;
    return saved_out(m, &m->blocks[l], ACT_LN1_IN, l, nh, keeps(m, l, ACT_LN1_IN, pass));
}

// Where block l's output goes, allocated after the block's own tensors (the arena is a stack):
// the next block's ln1_in, the final LN's input, or scratch when a recomputed group's output is
// not needed.
static float *output_of(GPT *m, int l, int pass, int where) {
    size_t nh = (size_t)m->s_cur * m->b_cur * m->cfg.hidden;
    if (where == OUT_NEXT_BLOCK) return input_of(m, l + 1, pass);
    if (where == OUT_DISCARD) return m->d_tmp;
    m->mark_head = arena_mark(&m->arena);
    return saved_out(m, &m->model_acts, ACT_LNF_IN, -1, nh, m->ctx.train);
}

static void output_done(GPT *m, int l, int pass, int where, float *out) {
    size_t nh = (size_t)m->s_cur * m->b_cur * m->cfg.hidden;
    if (where == OUT_NEXT_BLOCK) saved_done(m, &m->blocks[l + 1], ACT_LN1_IN, l + 1, out, nh, keeps(m, l + 1, ACT_LN1_IN, pass), 0);
    else if (where == OUT_HEAD) saved_done(m, &m->model_acts, ACT_LNF_IN, -1, out, nh, m->ctx.train, 0);
}

// One block forward from x (this block's ln1_in, already rounded and kept as the policy says).
// Returns the block output (see output_of), rounded and kept likewise.
static float *block_forward(GPT *m, int l, const float *x, int pass, int where) {
    const GPTConfig *c = &m->cfg;
    int h = c->hidden, n = m->s_cur * m->b_cur, bf16 = m->policy.act_dtype == ACT_BF16;
    size_t nh = (size_t)n * h;
    BlockActs *A = &m->blocks[l];
    BlockTensors w = block_tensors(&m->w, h, l);
    float p = m->ctx.train ? c->dropout : 0.0f;
    int drop = p > 0.0f;
#define KEEP(name) keeps(m, l, name, pass)

    // x1 = x + Dropout(Proj(Attn(LN1(x))))
    float *ln1_stats = saved_out(m, A, ACT_LN1_STATS, l, 2 * (size_t)n, KEEP(ACT_LN1_STATS));
    float *qkv_in = saved_out(m, A, ACT_QKV_IN, l, nh, KEEP(ACT_QKV_IN));
    layernorm_forward(qkv_in, ln1_stats, x, w.ln1_w, w.ln1_b, n, h);
    saved_done(m, A, ACT_QKV_IN, l, qkv_in, nh, KEEP(ACT_QKV_IN), 0);
    float *q = saved_out(m, A, ACT_Q, l, nh, KEEP(ACT_Q));
    float *k = saved_out(m, A, ACT_K, l, nh, KEEP(ACT_K));
    float *v = saved_out(m, A, ACT_V, l, nh, KEEP(ACT_V));
    linear_forward(q, h, qkv_in, h, w.qkv_w, w.qkv_b, n, h, h);
    linear_forward(k, h, qkv_in, h, w.qkv_w + (size_t)h * h, w.qkv_b + h, n, h, h);
    linear_forward(v, h, qkv_in, h, w.qkv_w + 2 * (size_t)h * h, w.qkv_b + 2 * h, n, h, h);
    saved_done(m, A, ACT_Q, l, q, nh, KEEP(ACT_Q), 0);
    saved_done(m, A, ACT_K, l, k, nh, KEEP(ACT_K), 0);
    saved_done(m, A, ACT_V, l, v, nh, KEEP(ACT_V), 0);
    float *proj_in = saved_out(m, A, ACT_PROJ_IN, l, nh, KEEP(ACT_PROJ_IN));
    attention_core(m, l, q, k, v, proj_in, pass);
    saved_done(m, A, ACT_PROJ_IN, l, proj_in, nh, KEEP(ACT_PROJ_IN), 0);
    linear_forward(m->ws_out, h, proj_in, h, w.proj_w, NULL, n, h, h);
    uint8_t *drop1 = NULL;
    if (drop) {
        drop1 = mask_out(m, A, ACT_DROP1_MASK, l, nh, KEEP(ACT_DROP1_MASK));
        dropout_mask_sbw(drop1, site_of(m, l, SITE_DROP1), m->s_cur, m->b_cur, h, m->ctx.sample0);
        mask_done(m, A, ACT_DROP1_MASK, l, drop1, nh, KEEP(ACT_DROP1_MASK));
    }
    float *x1 = saved_out(m, A, ACT_LN2_IN, l, nh, KEEP(ACT_LN2_IN));
    dropout_residual_forward(x1, x, m->ws_out, w.proj_b, drop1, p, n, h);
    saved_done(m, A, ACT_LN2_IN, l, x1, nh, KEEP(ACT_LN2_IN), 0);

    // x2 = x1 + Dropout(FC2(GeLU(FC1(LN2(x1)))))
    float *ln2_stats = saved_out(m, A, ACT_LN2_STATS, l, 2 * (size_t)n, KEEP(ACT_LN2_STATS));
    float *fc1_in = saved_out(m, A, ACT_FC1_IN, l, nh, KEEP(ACT_FC1_IN));
    layernorm_forward(fc1_in, ln2_stats, x1, w.ln2_w, w.ln2_b, n, h);
    saved_done(m, A, ACT_FC1_IN, l, fc1_in, nh, KEEP(ACT_FC1_IN), 0);
    float *gelu_in = saved_out(m, A, ACT_GELU_IN, l, 4 * nh, KEEP(ACT_GELU_IN));
    float *fc2_in = saved_out(m, A, ACT_FC2_IN, l, 4 * nh, KEEP(ACT_FC2_IN));
    linear_forward(gelu_in, 4 * h, fc1_in, h, w.fc1_w, NULL, n, h, 4 * h);
    bias_gelu_forward(fc2_in, gelu_in, w.fc1_b, n, 4 * h, bf16);
    saved_done(m, A, ACT_GELU_IN, l, gelu_in, 4 * nh, KEEP(ACT_GELU_IN), 1);
    saved_done(m, A, ACT_FC2_IN, l, fc2_in, 4 * nh, KEEP(ACT_FC2_IN), 1);
    linear_forward(m->ws_out, h, fc2_in, 4 * h, w.fc2_w, NULL, n, 4 * h, h);
    uint8_t *drop2 = NULL;
    if (drop) {
        drop2 = mask_out(m, A, ACT_DROP2_MASK, l, nh, KEEP(ACT_DROP2_MASK));
        dropout_mask_sbw(drop2, site_of(m, l, SITE_DROP2), m->s_cur, m->b_cur, h, m->ctx.sample0);
        mask_done(m, A, ACT_DROP2_MASK, l, drop2, nh, KEEP(ACT_DROP2_MASK));
    }
    float *out = output_of(m, l, pass, where);
    dropout_residual_forward(out, x1, m->ws_out, w.fc2_b, drop2, p, n, h);
    output_done(m, l, pass, where, out);
    return out;
#undef KEEP
}

double gpt_forward(GPT *m, const int32_t *tokens, const int32_t *targets, int s, int b, StepCtx ctx,
                   float grad_scale) {
    const GPTConfig *c = &m->cfg;
    if (m->arena.n_entries != 0) ctron_fatal("gpt_forward: activations of the previous forward are still held");
    if (s > c->seq || b > c->batch || s < 1 || b < 1)
        ctron_fatal("gpt_forward: batch [%d, %d] exceeds the model's [%d, %d]", s, b, c->seq, c->batch);
    int h = c->hidden, v = c->vocab, n = s * b, L = c->layers, train = ctx.train;
    size_t nh = (size_t)n * h;
    float p = train ? c->dropout : 0.0f;
    m->ledger.paused = !train;
    m->ctx = ctx;
    m->s_cur = s;
    m->b_cur = b;
    memset(&m->model_acts, 0, sizeof m->model_acts);
    for (int l = 0; l < L; l++) memset(m->blocks[l].saved, 0, sizeof m->blocks[l].saved);
    BlockActs *M = &m->model_acts;

    // x = Dropout(wte[tokens] + wpe)
    uint8_t *emb_mask = p > 0.0f ? mask_out(m, M, ACT_EMB_MASK, -1, nh, train) : NULL;
    float *x = input_of(m, 0, PASS_FORWARD);
    embedding_forward(x, tokens, m->w.wte, m->w.wpe, s, b, h);
    if (emb_mask) {
        dropout_mask_sbw(emb_mask, site_of(m, 0, SITE_EMB), s, b, h, ctx.sample0);
        mask_done(m, M, ACT_EMB_MASK, -1, emb_mask, nh, train);
        dropout_apply(x, emb_mask, p, nh);
    }
    saved_done(m, &m->blocks[0], ACT_LN1_IN, 0, x, nh, keeps(m, 0, ACT_LN1_IN, PASS_FORWARD), 0);

    for (int l = 0; l < L; l++) x = block_forward(m, l, x, PASS_FORWARD, l + 1 < L ? OUT_NEXT_BLOCK : OUT_HEAD);

    // logits = LN_f(x) · wteᵀ ; loss = cross-entropy
    float *lnf_stats = saved_out(m, M, ACT_LNF_STATS, -1, 2 * (size_t)n, train);
    float *lm_in = saved_out(m, M, ACT_LM_IN, -1, nh, train);
    layernorm_forward(lm_in, lnf_stats, x, m->w.lnf_w, m->w.lnf_b, n, h);
    saved_done(m, M, ACT_LM_IN, -1, lm_in, nh, train, 0);
    float *logits = m->logits = saved_out(m, M, ACT_LOGITS, -1, (size_t)n * v, train);
    linear_forward(logits, v, lm_in, h, m->w.wte, NULL, n, h, v);
    ledger_snapshot_forward_end(&m->ledger);
    if (!targets) return 0.0;
    if (train) return crossentropy_forward_backward(logits, targets, m->row_loss, n, v, grad_scale);
    return crossentropy_loss(logits, targets, m->row_loss, n, v);
}

// d_res holds dL/d(block output) on entry and dL/d(block input) on return. Block l's tensors are
// all held (kept by the forward, or recomputed just before); selective layers redo the attention core.
static void block_backward(GPT *m, int l) {
    const GPTConfig *c = &m->cfg;
    int h = c->hidden, a = c->heads, s = m->s_cur, b = m->b_cur, n = s * b;
    size_t nh = (size_t)n * h, as2b = (size_t)a * s * s * b;
    float p = c->dropout;
    int drop = p > 0.0f;
    BlockActs *A = &m->blocks[l];
    BlockTensors w = block_tensors(&m->w, h, l), g = block_tensors(&m->g, h, l);

    // x2 = x1 + Dropout(FC2(GeLU(FC1(LN2(x1)))))
    const float *d_fc2_out = m->d_res;
    if (drop) {
        dropout_backward(m->d_tmp, m->d_res, mask_in(m, A, ACT_DROP2_MASK, l, nh), p, nh);
        d_fc2_out = m->d_tmp;
    }
    linear_backward(m->d_4h, 4 * h, 0, g.fc2_w, g.fc2_b, d_fc2_out, h, saved_in(m, A, ACT_FC2_IN, l, 4 * nh), 4 * h,
                    w.fc2_w, n, 4 * h, h);
    gelu_backward(m->d_4h, m->d_4h, saved_in(m, A, ACT_GELU_IN, l, 4 * nh), 4 * nh);
    linear_backward(m->d_tmp, h, 0, g.fc1_w, g.fc1_b, m->d_4h, 4 * h, saved_in(m, A, ACT_FC1_IN, l, nh), h, w.fc1_w,
                    n, h, 4 * h);
    layernorm_backward(m->d_res, 1, g.ln2_w, g.ln2_b, m->d_tmp, saved_in(m, A, ACT_LN2_IN, l, nh),
                       saved_in(m, A, ACT_LN2_STATS, l, 2 * (size_t)n), w.ln2_w, n, h);

    // x1 = x + Dropout(Proj(Attn(LN1(x))))
    const float *d_proj_out = m->d_res;
    if (drop) {
        dropout_backward(m->d_tmp, m->d_res, mask_in(m, A, ACT_DROP1_MASK, l, nh), p, nh);
        d_proj_out = m->d_tmp;
    }
    float *d_ctx = m->d_4h;  // [s,b,h] slice of the 4h scratch
    linear_backward(d_ctx, h, 0, g.proj_w, g.proj_b, d_proj_out, h, saved_in(m, A, ACT_PROJ_IN, l, nh), h, w.proj_w,
                    n, h, h);
    const float *q = saved_in(m, A, ACT_Q, l, nh), *k = saved_in(m, A, ACT_K, l, nh), *v = saved_in(m, A, ACT_V, l, nh);
    if (m->policy.kind[l] == RECOMPUTE_SELECTIVE)   // the core again, one head at a time, straight into its backward
        attention_backward_recompute(m->d_q, m->d_k, m->d_v, d_ctx, q, k, v, m->attn_scratch, s, b, a, h,
                                     site_of(m, l, SITE_ATTN), m->ctx.sample0, m->policy.act_dtype == ACT_BF16);
    else
        attention_backward(m->d_q, m->d_k, m->d_v, d_ctx, saved_in(m, A, ACT_ATTN_PROB, l, as2b),
                           drop ? mask_in(m, A, ACT_ATTN_MASK, l, as2b) : NULL,
                           drop ? saved_in(m, A, ACT_ATTN_DROP, l, as2b) : NULL, q, k, v, m->attn_scratch, s, b, a,
                           h, p);
    size_t hh = (size_t)h * h;
    const float *qkv_in = saved_in(m, A, ACT_QKV_IN, l, nh);
    linear_backward(m->d_tmp, h, 0, g.qkv_w, g.qkv_b, m->d_q, h, qkv_in, h, w.qkv_w, n, h, h);
    linear_backward(m->d_tmp, h, 1, g.qkv_w + hh, g.qkv_b + h, m->d_k, h, qkv_in, h, w.qkv_w + hh, n, h, h);
    linear_backward(m->d_tmp, h, 1, g.qkv_w + 2 * hh, g.qkv_b + 2 * h, m->d_v, h, qkv_in, h, w.qkv_w + 2 * hh, n, h, h);
    layernorm_backward(m->d_res, 1, g.ln1_w, g.ln1_b, m->d_tmp, saved_in(m, A, ACT_LN1_IN, l, nh),
                       saved_in(m, A, ACT_LN1_STATS, l, 2 * (size_t)n), w.ln1_w, n, h);
}

// Runs the forward of layers g0..g1 again from g0's checkpoint, keeping everything, so that their
// backward can follow. The recomputation is the same code on the same inputs: bit-identical.
static void recompute_group(GPT *m, int g0, int g1) {
    size_t nh = (size_t)m->s_cur * m->b_cur * m->cfg.hidden;
    const float *x = saved_in(m, &m->blocks[g0], ACT_LN1_IN, g0, nh);
    for (int l = g0; l <= g1; l++) x = block_forward(m, l, x, PASS_RECOMPUTE, l < g1 ? OUT_NEXT_BLOCK : OUT_DISCARD);
}

void gpt_backward(GPT *m, const int32_t *tokens, StepCtx ctx) {
    const GPTConfig *c = &m->cfg;
    if (!ctx.train || !m->ctx.train) ctron_fatal("gpt_backward after an evaluation forward");
    int s = m->s_cur, b = m->b_cur, h = c->hidden, v = c->vocab, n = s * b, L = c->layers;
    size_t nh = (size_t)n * h;
    BlockActs *M = &m->model_acts;
    const MemoryPolicy *pol = &m->policy;

    // logits = lm_in · wteᵀ (the logits buffer already holds dL/dlogits), then the final LN
    linear_backward(m->d_tmp, h, 0, m->g.wte, NULL, m->logits, v, saved_in(m, M, ACT_LM_IN, -1, nh), h, m->w.wte, n,
                    h, v);
    layernorm_backward(m->d_res, 0, m->g.lnf_w, m->g.lnf_b, m->d_tmp, saved_in(m, M, ACT_LNF_IN, -1, nh),
                       saved_in(m, M, ACT_LNF_STATS, -1, 2 * (size_t)n), m->w.lnf_w, n, h);
    arena_pop_to(&m->arena, m->mark_head);

    for (int l = L - 1; l >= 0; l--) {
        if (pol->kind[l] == RECOMPUTE_FULL) {
            int g0 = pol->group_start[l];
            int last = l + 1 == L || pol->kind[l + 1] != RECOMPUTE_FULL || pol->group_start[l + 1] != g0;
            if (last) recompute_group(m, g0, l);
        }
        block_backward(m, l);
        arena_pop_to(&m->arena, m->blocks[l].mark);
        memset(m->blocks[l].saved, 0, sizeof m->blocks[l].saved);
    }

    // x = Dropout(wte[tokens] + wpe)
    if (c->dropout > 0.0f) dropout_apply(m->d_res, mask_in(m, M, ACT_EMB_MASK, -1, nh), c->dropout, nh);
    embedding_backward(m->g.wte, m->g.wpe, m->d_res, tokens, s, b, h);
    arena_pop_to(&m->arena, 0);
    memset(M->saved, 0, sizeof M->saved);
}

void gpt_release(GPT *m) {
    arena_pop_to(&m->arena, 0);
    m->ledger.paused = 0;
}
