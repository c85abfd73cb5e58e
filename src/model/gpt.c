// The model, written as the block diagram of DESIGN.md §1:
//   x1 = x  + Dropout(Proj(Attn(LN1(x))))
//   x2 = x1 + Dropout(FC2(GeLU(FC1(LN2(x1)))))
// Every tensor the backward reads is pushed to the arena under its ledger name; nothing else is kept.
#include "model/gpt.h"
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "ops/attention.h"
#include "ops/crossentropy.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/gelu.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "util/common.h"

// The slices of one block within the stacked [L, ...] tensors.
typedef struct {
    float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} BlockTensors;

static BlockTensors block_tensors(const GPTTensors *t, int h, int l) {
    size_t L = (size_t)l, H = (size_t)h;
    BlockTensors b = {
        t->ln1_w + L * H, t->ln1_b + L * H, t->qkv_w + L * 3 * H * H, t->qkv_b + L * 3 * H,
        t->proj_w + L * H * H, t->proj_b + L * H, t->ln2_w + L * H, t->ln2_b + L * H,
        t->fc1_w + L * 4 * H * H, t->fc1_b + L * 4 * H, t->fc2_w + L * 4 * H * H, t->fc2_b + L * H};
    return b;
}

size_t gpt_num_params(const GPTConfig *c) {
    size_t h = (size_t)c->hidden, L = (size_t)c->layers;
    size_t per_layer = 2 * h + 3 * h * h + 3 * h + h * h + h + 2 * h + 4 * h * h + 4 * h + 4 * h * h + h;
    return (size_t)c->vocab * h + (size_t)c->seq * h + L * per_layer + 2 * h;
}

// Lays the tensors out in one buffer (stacked per kind) and records their names.
static void bind_tensors(GPTTensors *t, float *base, const GPTConfig *c) {
    size_t h = (size_t)c->hidden, L = (size_t)c->layers;
    float *p = base;
#define TAKE(field, count) do { t->field = p; p += (count); } while (0)
    TAKE(wte, (size_t)c->vocab * h); TAKE(wpe, (size_t)c->seq * h);
    TAKE(ln1_w, L * h); TAKE(ln1_b, L * h);
    TAKE(qkv_w, L * 3 * h * h); TAKE(qkv_b, L * 3 * h);
    TAKE(proj_w, L * h * h); TAKE(proj_b, L * h);
    TAKE(ln2_w, L * h); TAKE(ln2_b, L * h);
    TAKE(fc1_w, L * 4 * h * h); TAKE(fc1_b, L * 4 * h);
    TAKE(fc2_w, L * 4 * h * h); TAKE(fc2_b, L * h);
    TAKE(lnf_w, h); TAKE(lnf_b, h);
#undef TAKE
}

static void add_info(GPT *m, const char *name, const float *ptr, int rows, int cols, int decay) {
    ParamInfo *pi = &m->info[m->n_info++];
    snprintf(pi->name, sizeof pi->name, "%s", name);
    pi->offset = (size_t)(ptr - m->params);
    pi->ndim = cols > 0 ? 2 : 1;
    pi->shape[0] = rows;
    pi->shape[1] = cols > 0 ? cols : 0;
    pi->numel = (size_t)rows * (size_t)(cols > 0 ? cols : 1);
    pi->decay = decay;
}

static void build_info(GPT *m) {
    int h = m->cfg.hidden;
    m->info = xmalloc(sizeof(ParamInfo) * (size_t)(4 + 12 * m->cfg.layers));
    m->n_info = 0;
    // Weight decay: weight matrices and the (tied) token embedding; not biases, LN or positions.
    add_info(m, "wte.weight", m->w.wte, m->cfg.vocab, h, 1);
    add_info(m, "wpe.weight", m->w.wpe, m->cfg.seq, h, 0);
    char name[48];
    for (int l = 0; l < m->cfg.layers; l++) {
        BlockTensors b = block_tensors(&m->w, h, l);
#define INFO(suffix, ptr, rows, cols, decay) \
        do { snprintf(name, sizeof name, "h.%d.%s", l, suffix); add_info(m, name, ptr, rows, cols, decay); } while (0)
        INFO("ln_1.weight", b.ln1_w, h, 0, 0);
        INFO("ln_1.bias", b.ln1_b, h, 0, 0);
        INFO("attn.c_attn.weight", b.qkv_w, 3 * h, h, 1);
        INFO("attn.c_attn.bias", b.qkv_b, 3 * h, 0, 0);
        INFO("attn.c_proj.weight", b.proj_w, h, h, 1);
        INFO("attn.c_proj.bias", b.proj_b, h, 0, 0);
        INFO("ln_2.weight", b.ln2_w, h, 0, 0);
        INFO("ln_2.bias", b.ln2_b, h, 0, 0);
        INFO("mlp.c_fc.weight", b.fc1_w, 4 * h, h, 1);
        INFO("mlp.c_fc.bias", b.fc1_b, 4 * h, 0, 0);
        INFO("mlp.c_proj.weight", b.fc2_w, h, 4 * h, 1);
        INFO("mlp.c_proj.bias", b.fc2_b, h, 0, 0);
#undef INFO
    }
    add_info(m, "ln_f.weight", m->w.lnf_w, h, 0, 0);
    add_info(m, "ln_f.bias", m->w.lnf_b, h, 0, 0);
}

const ParamInfo *gpt_find_param(const GPT *m, const char *name) {
    for (int i = 0; i < m->n_info; i++)
        if (strcmp(m->info[i].name, name) == 0) return &m->info[i];
    return NULL;
}

void gpt_init(GPT *m, const GPTConfig *cfg, const MemoryPolicy *policy) {
    (void)policy;
    int act_bytes = 4, mask_bytes = 1;
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    const GPTConfig *c = &m->cfg;
    m->n_params = gpt_num_params(c);
    m->params = xcalloc(m->n_params * sizeof(float));
    m->grads = xcalloc(m->n_params * sizeof(float));
    bind_tensors(&m->w, m->params, c);
    bind_tensors(&m->g, m->grads, c);
    build_info(m);

    ActShape sh = {c->seq, c->batch, c->hidden, c->heads, c->layers, c->vocab, act_bytes, mask_bytes,
                   c->dropout > 0.0f};
    m->shape = sh;
    // The arena holds exactly what the analytic model predicts, plus alignment of each entry.
    int max_entries = 18 * c->layers + 8;
    size_t capacity = act_total_bytes(&sh) + (size_t)max_entries * 64;
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
    m->attn_scratch = xmalloc(threads * ss * sizeof(float));
    m->row_loss = xmalloc((size_t)c->seq * c->batch * sizeof(float));
    m->workspace_bytes = (10 * nh + threads * ss + (size_t)c->seq * c->batch) * sizeof(float);
}

void gpt_free(GPT *m) {
    arena_free(&m->arena);
    ledger_free(&m->ledger);
    free(m->params); free(m->grads); free(m->info); free(m->blocks);
    free(m->ws_out); free(m->d_res); free(m->d_tmp); free(m->d_q); free(m->d_k); free(m->d_v);
    free(m->d_4h); free(m->attn_scratch); free(m->row_loss);
    memset(m, 0, sizeof *m);
}

// N(0, std²) from Philox, Box–Muller: element e of tensor `id` uses counter (e/2, id).
static void fill_normal(float *x, size_t n, float std, uint64_t seed, uint32_t id) {
    philox_key key = philox_key_from_seed(seed);
#pragma omp parallel for schedule(static)
    for (size_t pair = 0; pair < (n + 1) / 2; pair++) {
        philox_ctr ctr = {{(uint32_t)pair, (uint32_t)((uint64_t)pair >> 32), 0, ((uint32_t)PHILOX_INIT << 24) | id}};
        philox_ctr r = philox4x32_10(ctr, key);
        double u1 = ((double)r.v[0] + 1.0) / 4294967297.0, u2 = (double)r.v[1] / 4294967296.0;
        double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
        x[2 * pair] = (float)(std * rad * cos(th));
        if (2 * pair + 1 < n) x[2 * pair + 1] = (float)(std * rad * sin(th));
    }
}

void gpt_init_weights(GPT *m, uint64_t seed) {
    // GPT-2 initialisation: N(0, 0.02²) for weights and embeddings, residual projections scaled by
    // 1/√(2L), zero biases, LayerNorm weight 1 and bias 0.
    float resid_std = 0.02f / sqrtf(2.0f * (float)m->cfg.layers);
    for (int i = 0; i < m->n_info; i++) {
        ParamInfo *pi = &m->info[i];
        float *x = m->params + pi->offset;
        const char *n = pi->name;
        size_t len = strlen(n);
        int is_bias = len > 5 && strcmp(n + len - 5, ".bias") == 0;
        int is_ln = strstr(n, "ln_") != NULL;
        if (is_ln && !is_bias) {
            for (size_t e = 0; e < pi->numel; e++) x[e] = 1.0f;
        } else if (is_bias) {
            memset(x, 0, pi->numel * sizeof(float));
        } else {
            int resid = strstr(n, "c_proj.weight") != NULL;
            fill_normal(x, pi->numel, resid ? resid_std : 0.02f, seed, (uint32_t)i);
        }
    }
}

void gpt_zero_grad(GPT *m) { memset(m->grads, 0, m->n_params * sizeof(float)); }

static void *push(GPT *m, ActName name, int layer, size_t elements, size_t elem_bytes) {
    return arena_push(&m->arena, name, layer, elements * elem_bytes);
}

// One block forward. x is this block's ln1_in (already in the arena); returns the block output,
// written straight into the next block's ln1_in (or the final LN's input).
static float *block_forward(GPT *m, int l, float *x, int s, int b, float p, StepCtx ctx) {
    const GPTConfig *c = &m->cfg;
    int h = c->hidden, a = c->heads, n = s * b, drop = p > 0.0f;
    size_t nh = (size_t)n * h, as2b = (size_t)a * s * s * b, e = sizeof(float);
    BlockActs *A = &m->blocks[l];
    BlockTensors w = block_tensors(&m->w, h, l);
    DropoutSite site = {philox_key_from_seed(ctx.seed), ctx.step, (uint32_t)l, SITE_ATTN, p};
    A->ln1_in = x;

    // x1 = x + Dropout(Proj(Attn(LN1(x))))
    A->ln1_stats = push(m, ACT_LN1_STATS, l, 2 * (size_t)n, sizeof(float));
    A->qkv_in = push(m, ACT_QKV_IN, l, nh, e);
    layernorm_forward(A->qkv_in, A->ln1_stats, x, w.ln1_w, w.ln1_b, n, h);
    A->q = push(m, ACT_Q, l, nh, e);
    A->k = push(m, ACT_K, l, nh, e);
    A->v = push(m, ACT_V, l, nh, e);
    linear_forward(A->q, h, A->qkv_in, h, w.qkv_w, w.qkv_b, n, h, h);
    linear_forward(A->k, h, A->qkv_in, h, w.qkv_w + (size_t)h * h, w.qkv_b + h, n, h, h);
    linear_forward(A->v, h, A->qkv_in, h, w.qkv_w + 2 * (size_t)h * h, w.qkv_b + 2 * h, n, h, h);
    A->attn_prob = push(m, ACT_ATTN_PROB, l, as2b, e);
    A->attn_mask = drop ? push(m, ACT_ATTN_MASK, l, as2b, 1) : NULL;
    A->attn_drop = drop ? push(m, ACT_ATTN_DROP, l, as2b, e) : NULL;
    A->proj_in = push(m, ACT_PROJ_IN, l, nh, e);
    attention_forward(A->proj_in, A->attn_prob, A->attn_mask, A->attn_drop, A->q, A->k, A->v, s, b, a, h, site,
                      ctx.sample0);
    linear_forward(m->ws_out, h, A->proj_in, h, w.proj_w, NULL, n, h, h);
    A->drop1_mask = drop ? push(m, ACT_DROP1_MASK, l, nh, 1) : NULL;
    if (drop) { site.site = SITE_DROP1; dropout_mask_sbw(A->drop1_mask, site, s, b, h, ctx.sample0); }
    A->ln2_in = push(m, ACT_LN2_IN, l, nh, e);
    dropout_residual_forward(A->ln2_in, x, m->ws_out, w.proj_b, A->drop1_mask, p, n, h);

    // x2 = x1 + Dropout(FC2(GeLU(FC1(LN2(x1)))))
    A->ln2_stats = push(m, ACT_LN2_STATS, l, 2 * (size_t)n, sizeof(float));
    A->fc1_in = push(m, ACT_FC1_IN, l, nh, e);
    layernorm_forward(A->fc1_in, A->ln2_stats, A->ln2_in, w.ln2_w, w.ln2_b, n, h);
    A->gelu_in = push(m, ACT_GELU_IN, l, 4 * nh, e);
    A->fc2_in = push(m, ACT_FC2_IN, l, 4 * nh, e);
    linear_forward(A->gelu_in, 4 * h, A->fc1_in, h, w.fc1_w, NULL, n, h, 4 * h);
    bias_gelu_forward(A->fc2_in, A->gelu_in, w.fc1_b, n, 4 * h);
    linear_forward(m->ws_out, h, A->fc2_in, 4 * h, w.fc2_w, NULL, n, 4 * h, h);
    A->drop2_mask = drop ? push(m, ACT_DROP2_MASK, l, nh, 1) : NULL;
    if (drop) { site.site = SITE_DROP2; dropout_mask_sbw(A->drop2_mask, site, s, b, h, ctx.sample0); }

    float *out;
    if (l + 1 < c->layers) {
        m->blocks[l + 1].mark = arena_mark(&m->arena);
        out = push(m, ACT_LN1_IN, l + 1, nh, e);
    } else {
        m->head.mark_head = arena_mark(&m->arena);
        out = m->head.lnf_in = push(m, ACT_LNF_IN, -1, nh, e);
    }
    dropout_residual_forward(out, A->ln2_in, m->ws_out, w.fc2_b, A->drop2_mask, p, n, h);
    return out;
}

double gpt_forward(GPT *m, const int32_t *tokens, const int32_t *targets, int s, int b, StepCtx ctx,
                   float grad_scale) {
    const GPTConfig *c = &m->cfg;
    if (m->arena.n_entries != 0) ctron_fatal("gpt_forward: activations of the previous forward are still held");
    if (s > c->seq || b > c->batch || s < 1 || b < 1)
        ctron_fatal("gpt_forward: batch [%d, %d] exceeds the model's [%d, %d]", s, b, c->seq, c->batch);
    int h = c->hidden, v = c->vocab, n = s * b;
    size_t nh = (size_t)n * h, e = sizeof(float);
    float p = ctx.train ? c->dropout : 0.0f;
    m->ledger.paused = !ctx.train;
    m->s_cur = s;
    m->b_cur = b;

    // x = Dropout(wte[tokens] + wpe)
    ModelActs *hd = &m->head;
    hd->emb_mask = p > 0.0f ? push(m, ACT_EMB_MASK, -1, nh, 1) : NULL;
    m->blocks[0].mark = arena_mark(&m->arena);
    float *x = push(m, ACT_LN1_IN, 0, nh, e);
    embedding_forward(x, tokens, m->w.wte, m->w.wpe, s, b, h);
    if (hd->emb_mask) {
        DropoutSite site = {philox_key_from_seed(ctx.seed), ctx.step, 0, SITE_EMB, p};
        dropout_mask_sbw(hd->emb_mask, site, s, b, h, ctx.sample0);
        dropout_apply(x, hd->emb_mask, p, nh);
    }

    for (int l = 0; l < c->layers; l++) x = block_forward(m, l, x, s, b, p, ctx);

    // logits = LN_f(x) · wteᵀ ; loss = cross-entropy
    hd->lnf_stats = push(m, ACT_LNF_STATS, -1, 2 * (size_t)n, sizeof(float));
    hd->lm_in = push(m, ACT_LM_IN, -1, nh, e);
    layernorm_forward(hd->lm_in, hd->lnf_stats, hd->lnf_in, m->w.lnf_w, m->w.lnf_b, n, h);
    hd->logits = push(m, ACT_LOGITS, -1, (size_t)n * v, sizeof(float));
    linear_forward(hd->logits, v, hd->lm_in, h, m->w.wte, NULL, n, h, v);
    if (!targets) return 0.0;
    if (ctx.train) return crossentropy_forward_backward(hd->logits, targets, m->row_loss, n, v, grad_scale);
    return crossentropy_loss(hd->logits, targets, m->row_loss, n, v);
}

// d_res holds dL/d(block output) on entry and dL/d(block input) on return.
static void block_backward(GPT *m, int l, int s, int b, float p) {
    const GPTConfig *c = &m->cfg;
    int h = c->hidden, a = c->heads, n = s * b;
    size_t nh = (size_t)n * h;
    BlockActs *A = &m->blocks[l];
    BlockTensors w = block_tensors(&m->w, h, l), g = block_tensors(&m->g, h, l);

    // x2 = x1 + Dropout(FC2(GeLU(FC1(LN2(x1)))))
    const float *d_fc2_out = m->d_res;
    if (A->drop2_mask) { dropout_backward(m->d_tmp, m->d_res, A->drop2_mask, p, nh); d_fc2_out = m->d_tmp; }
    linear_backward(m->d_4h, 4 * h, 0, g.fc2_w, g.fc2_b, d_fc2_out, h, A->fc2_in, 4 * h, w.fc2_w, n, 4 * h, h);
    gelu_backward(m->d_4h, m->d_4h, A->gelu_in, 4 * nh);
    linear_backward(m->d_tmp, h, 0, g.fc1_w, g.fc1_b, m->d_4h, 4 * h, A->fc1_in, h, w.fc1_w, n, h, 4 * h);
    layernorm_backward(m->d_res, 1, g.ln2_w, g.ln2_b, m->d_tmp, A->ln2_in, A->ln2_stats, w.ln2_w, n, h);

    // x1 = x + Dropout(Proj(Attn(LN1(x))))
    const float *d_proj_out = m->d_res;
    if (A->drop1_mask) { dropout_backward(m->d_tmp, m->d_res, A->drop1_mask, p, nh); d_proj_out = m->d_tmp; }
    float *d_ctx = m->d_4h;  // [s,b,h] slice of the 4h scratch
    linear_backward(d_ctx, h, 0, g.proj_w, g.proj_b, d_proj_out, h, A->proj_in, h, w.proj_w, n, h, h);
    attention_backward(m->d_q, m->d_k, m->d_v, d_ctx, A->attn_prob, A->attn_mask, A->attn_drop, A->q, A->k, A->v,
                       m->attn_scratch, s, b, a, h, p);
    size_t hh = (size_t)h * h;
    linear_backward(m->d_tmp, h, 0, g.qkv_w, g.qkv_b, m->d_q, h, A->qkv_in, h, w.qkv_w, n, h, h);
    linear_backward(m->d_tmp, h, 1, g.qkv_w + hh, g.qkv_b + h, m->d_k, h, A->qkv_in, h, w.qkv_w + hh, n, h, h);
    linear_backward(m->d_tmp, h, 1, g.qkv_w + 2 * hh, g.qkv_b + 2 * h, m->d_v, h, A->qkv_in, h, w.qkv_w + 2 * hh,
                    n, h, h);
    layernorm_backward(m->d_res, 1, g.ln1_w, g.ln1_b, m->d_tmp, A->ln1_in, A->ln1_stats, w.ln1_w, n, h);
}

void gpt_backward(GPT *m, const int32_t *tokens, StepCtx ctx) {
    const GPTConfig *c = &m->cfg;
    if (!ctx.train) ctron_fatal("gpt_backward after an evaluation forward");
    int s = m->s_cur, b = m->b_cur, h = c->hidden, v = c->vocab, n = s * b;
    float p = c->dropout;
    ModelActs *hd = &m->head;

    // logits = lm_in · wteᵀ (the logits buffer already holds dL/dlogits), then the final LN
    linear_backward(m->d_tmp, h, 0, m->g.wte, NULL, hd->logits, v, hd->lm_in, h, m->w.wte, n, h, v);
    layernorm_backward(m->d_res, 0, m->g.lnf_w, m->g.lnf_b, m->d_tmp, hd->lnf_in, hd->lnf_stats, m->w.lnf_w, n, h);
    arena_pop_to(&m->arena, hd->mark_head);

    for (int l = c->layers - 1; l >= 0; l--) {
        block_backward(m, l, s, b, p);
        arena_pop_to(&m->arena, m->blocks[l].mark);
    }

    // x = Dropout(wte[tokens] + wpe)
    if (hd->emb_mask) dropout_apply(m->d_res, hd->emb_mask, p, (size_t)n * h);
    embedding_backward(m->g.wte, m->g.wpe, m->d_res, tokens, s, b, h);
    arena_pop_to(&m->arena, 0);
}

void gpt_release(GPT *m) {
    arena_pop_to(&m->arena, 0);
    m->ledger.paused = 0;
}
