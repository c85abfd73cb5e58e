// Parameter layout, GPT-2 state-dict names and initialisation.
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "model/gpt.h"
#include "model/params.h"
#include "util/common.h"

BlockTensors block_tensors(const GPT *m, const GPTTensors *t, int l) {
    size_t L = (size_t)gpt_local_layer(m, l), H = (size_t)m->cfg.hidden, hl = (size_t)m->hl, fl = (size_t)m->fl;
    BlockTensors b = {
        t->ln1_w + L * H, t->ln1_b + L * H, t->qkv_w + L * 3 * hl * H, t->qkv_b + L * 3 * hl,
        t->proj_w + L * H * hl, t->proj_b + L * H, t->ln2_w + L * H, t->ln2_b + L * H,
        t->fc1_w + L * fl * H, t->fc1_b + L * fl, t->fc2_w + L * H * fl, t->fc2_b + L * H};
    return b;
}

size_t gpt_num_params(const GPTConfig *c) {
    size_t h = (size_t)c->hidden, L = (size_t)c->layers;
    size_t per_layer = 2 * h + 3 * h * h + 3 * h + h * h + h + 2 * h + 4 * h * h + 4 * h + 4 * h * h + h;
    return (size_t)c->vocab * h + (size_t)c->seq * h + L * per_layer + 2 * h;
}

// What this pipeline stage holds besides its layers: the token embedding on the first and the last
// stage (tied to the output layer), positions on the first, the final LN on the last.
static int has_wte(const GPT *m) { return gpt_first_stage(m) || gpt_last_stage(m); }

size_t local_num_params(const GPT *m) {
    size_t h = (size_t)m->cfg.hidden, L = (size_t)(m->cfg.layers / m->pp.p), hl = (size_t)m->hl, fl = (size_t)m->fl;
    size_t per_layer = 2 * h + 3 * hl * h + 3 * hl + h * hl + h + 2 * h + fl * h + fl + h * fl + h;
    return (has_wte(m) ? (size_t)m->vl * h : 0) + (gpt_first_stage(m) ? (size_t)m->cfg.seq * h : 0) + L * per_layer +
           (gpt_last_stage(m) ? 2 * h : 0);
}

// Lays the tensors out in one buffer (stacked per kind: the stage's layers in order); a tensor the
// stage does not hold is NULL.
void bind_tensors(const GPT *m, GPTTensors *t, float *base) {
    size_t h = (size_t)m->cfg.hidden, L = (size_t)(m->cfg.layers / m->pp.p), hl = (size_t)m->hl, fl = (size_t)m->fl;
    float *p = base;
#define TAKE(field, count) do { t->field = p; p += (count); } while (0)
    memset(t, 0, sizeof *t);
    if (has_wte(m)) TAKE(wte, (size_t)m->vl * h);
    if (gpt_first_stage(m)) TAKE(wpe, (size_t)m->cfg.seq * h);
    TAKE(ln1_w, L * h); TAKE(ln1_b, L * h);
    TAKE(qkv_w, L * 3 * hl * h); TAKE(qkv_b, L * 3 * hl);
    TAKE(proj_w, L * h * hl); TAKE(proj_b, L * h);
    TAKE(ln2_w, L * h); TAKE(ln2_b, L * h);
    TAKE(fc1_w, L * fl * h); TAKE(fc1_b, L * fl);
    TAKE(fc2_w, L * h * fl); TAKE(fc2_b, L * h);
    if (gpt_last_stage(m)) { TAKE(lnf_w, h); TAKE(lnf_b, h); }
#undef TAKE
}

typedef struct { int rows, cols, full_rows, full_cols; TPSplit split; int blocks; } Shard;

static void add_info(GPT *m, const char *name, const float *ptr, Shard sh, int decay, int full_index) {
    ParamInfo *pi = &m->info[m->n_info++];
    pi->full_index = full_index;
    pi->pp_mirror = 0;
    snprintf(pi->name, sizeof pi->name, "%s", name);
    pi->offset = (size_t)(ptr - m->params);
    pi->ndim = sh.cols > 0 ? 2 : 1;
    pi->shape[0] = sh.rows;
    pi->shape[1] = sh.cols > 0 ? sh.cols : 0;
    pi->full_shape[0] = sh.full_rows;
    pi->full_shape[1] = sh.cols > 0 ? sh.full_cols : 0;
    pi->numel = (size_t)sh.rows * (size_t)(sh.cols > 0 ? sh.cols : 1);
    pi->decay = decay;
    pi->split = sh.split;
    pi->row_blocks = sh.blocks;
    // SP runs LayerNorms, the row-parallel biases, dropout and the position embedding on s/t rows.
    pi->sp_partial = m->tp.sp && sh.split == TP_REPLICATED;
}

void build_info(GPT *m) {
    int h = m->cfg.hidden, hl = m->hl, fl = m->fl;
    m->info = xmalloc(sizeof(ParamInfo) * (size_t)(4 + 12 * m->cfg.layers));
    m->n_info = 0;
    Shard vec = {h, 0, h, 0, TP_REPLICATED, 1};
    Shard wte = {m->vl, h, m->cfg.vocab, h, TP_ROWS, 1}, wpe = {m->cfg.seq, h, m->cfg.seq, h, TP_REPLICATED, 1};
    Shard qkv_w = {3 * hl, h, 3 * h, h, TP_ROWS, 3}, qkv_b = {3 * hl, 0, 3 * h, 0, TP_ROWS, 3};
    Shard proj_w = {h, hl, h, h, TP_COLS, 1};
    Shard fc1_w = {fl, h, 4 * h, h, TP_ROWS, 1}, fc1_b = {fl, 0, 4 * h, 0, TP_ROWS, 1};
    Shard fc2_w = {h, fl, h, 4 * h, TP_COLS, 1};
    // Weight decay: weight matrices and the (tied) token embedding; not biases, LN or positions.
    // full_index: the place in the whole model's list (wte, wpe, 12 per layer, ln_f), on any stage.
    if (has_wte(m)) {
        add_info(m, "wte.weight", m->w.wte, wte, 1, 0);
        m->info[m->n_info - 1].pp_mirror = !gpt_first_stage(m);
    }
    if (gpt_first_stage(m)) add_info(m, "wpe.weight", m->w.wpe, wpe, 0, 1);
    char name[48];
    for (int l = 0; l < m->cfg.layers; l++) {
        if (!gpt_owns_layer(m, l)) continue;
        BlockTensors b = block_tensors(m, &m->w, l);
        int j = 2 + 12 * l;
#define INFO(suffix, ptr, shard, decay) \
        do { snprintf(name, sizeof name, "h.%d.%s", l, suffix); add_info(m, name, ptr, shard, decay, j++); } while (0)
        INFO("ln_1.weight", b.ln1_w, vec, 0);
        INFO("ln_1.bias", b.ln1_b, vec, 0);
        INFO("attn.c_attn.weight", b.qkv_w, qkv_w, 1);
        INFO("attn.c_attn.bias", b.qkv_b, qkv_b, 0);
        INFO("attn.c_proj.weight", b.proj_w, proj_w, 1);
        INFO("attn.c_proj.bias", b.proj_b, vec, 0);
        INFO("ln_2.weight", b.ln2_w, vec, 0);
        INFO("ln_2.bias", b.ln2_b, vec, 0);
        INFO("mlp.c_fc.weight", b.fc1_w, fc1_w, 1);
        INFO("mlp.c_fc.bias", b.fc1_b, fc1_b, 0);
        INFO("mlp.c_proj.weight", b.fc2_w, fc2_w, 1);
        INFO("mlp.c_proj.bias", b.fc2_b, vec, 0);
#undef INFO
    }
    if (gpt_last_stage(m)) {
        add_info(m, "ln_f.weight", m->w.lnf_w, vec, 0, 2 + 12 * m->cfg.layers);
        add_info(m, "ln_f.bias", m->w.lnf_b, vec, 0, 3 + 12 * m->cfg.layers);
    }
}

void gpt_param_full_name(const GPTConfig *c, int full_index, char *buf, size_t len) {
    static const char *suffix[12] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                     "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                     "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
    int k = full_index - 2, L = c->layers;
    if (full_index == 0) snprintf(buf, len, "wte.weight");
    else if (full_index == 1) snprintf(buf, len, "wpe.weight");
    else if (k >= 0 && k < 12 * L) snprintf(buf, len, "h.%d.%s", k / 12, suffix[k % 12]);
    else if (k == 12 * L) snprintf(buf, len, "ln_f.weight");
    else if (k == 12 * L + 1) snprintf(buf, len, "ln_f.bias");
    else snprintf(buf, len, "?");
}

const ParamInfo *gpt_find_param(const GPT *m, const char *name) {
    for (int i = 0; i < m->n_info; i++)
        if (strcmp(m->info[i].name, name) == 0) return &m->info[i];
    return NULL;
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

static void init_whole(const GPT *m, float *params, uint64_t seed);

void gpt_init_weights(GPT *m, uint64_t seed) {
    gpt_params_changed(m);
    if (m->tp.t <= 1 && m->pp.p <= 1) {   // drawn on the host, then one copy to the device
        float *host = xmalloc(m->n_params * sizeof(float));
        init_whole(m, host, seed);
        m->be->copy(m->be, m->params, host, m->n_params * sizeof(float), COPY_H2D);
        free(host);
        return;
    }
    // Each element is drawn at its index in the unsharded tensor: initialise the whole model and keep
    // this rank's slices (a transient copy of the model, once per run).
    GPT full;
    gpt_init_params(&full, &m->cfg);
    init_whole(&full, full.params, seed);
    gpt_shard_from_full(m, &full, full.params, m->params);
    gpt_free(&full);
}

// params: host memory laid out as m's parameters.
static void init_whole(const GPT *m, float *params, uint64_t seed) {
    // GPT-2 initialisation: N(0, 0.02²) for weights and embeddings, residual projections scaled by
    // 1/√(2L), zero biases, LayerNorm weight 1 and bias 0.
    float resid_std = 0.02f / sqrtf(2.0f * (float)m->cfg.layers);
    for (int i = 0; i < m->n_info; i++) {
        ParamInfo *pi = &m->info[i];
        float *x = params + pi->offset;
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
            fill_normal(x, pi->numel, resid ? resid_std : 0.02f, seed, (uint32_t)pi->full_index);
        }
    }
}

void gpt_refresh_params16(GPT *m) {
    if (!m->params16 || !m->params16_stale) return;
    m->be->bf16_pack(m->be, m->params16, m->params, m->n_params);
    m->params16_stale = 0;
}

void gpt_zero_grad(GPT *m) { m->be->memset(m->be, m->grads, 0, m->n_params * sizeof(float)); }


// Element (row, col) of this rank's shard of pi ↔ the element of the unsharded tensor, or -1 for a
// padded vocabulary row that the model does not have.
static long full_index(const ParamInfo *pi, int t_rank, long row, long col) {
    long cols = pi->ndim == 2 ? pi->full_shape[1] : 1;
    switch (pi->split) {
    case TP_REPLICATED:
        return row * cols + col;
    case TP_ROWS: {
        long blk_local = pi->shape[0] / pi->row_blocks, blk_full = pi->full_shape[0] / pi->row_blocks;
        long blk = row / blk_local, r = (long)t_rank * blk_local + row % blk_local;
        if (r >= blk_full) return -1;
        return (blk * blk_full + r) * cols + col;
    }
    case TP_COLS:
        return row * cols + (long)t_rank * pi->shape[1] + col;
    }
    return -1;
}

// Copies between this rank's tensors (local) and the unsharded ones (full), for rank t_rank's slices.
// A pipeline stage has its own tensors only; the last stage's copy of wte is not gathered (the first
// stage's is the same).
static void shard_copy(const GPT *m, const GPT *full, int t_rank, float *local, float *full_buf, int to_local) {
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *pi = &m->info[i], *fi = &full->info[pi->full_index];
        if (!to_local && pi->pp_mirror) continue;
        long rows = pi->shape[0], cols = pi->ndim == 2 ? pi->shape[1] : 1;
        float *lp = local + pi->offset, *fp = full_buf + fi->offset;
#pragma omp parallel for schedule(static)
        for (long r = 0; r < rows; r++)
            for (long c = 0; c < cols; c++) {
                long f = full_index(pi, t_rank, r, c);
                if (to_local) lp[r * cols + c] = f < 0 ? 0.0f : fp[f];
                else if (f >= 0) fp[f] = lp[r * cols + c];
            }
    }
}

// full_buf is host memory (a model of gpt_init_params); dst and src are device tensors of m, which
// move through one host staging copy (the _host forms: host memory laid out as m's parameters).
void gpt_shard_from_full_host(const GPT *m, const GPT *full, const float *full_buf, float *host) {
    shard_copy(m, full, m->tp.t > 1 ? m->tp.rank : 0, host, (float *)full_buf, 1);
}

void gpt_shard_from_full(const GPT *m, const GPT *full, const float *full_buf, float *dst) {
    if (dst == m->params) ((GPT *)m)->params16_stale = 1;   // the bf16 copy follows the new weights
    float *host = xmalloc(m->n_params * sizeof(float));
    gpt_shard_from_full_host(m, full, full_buf, host);
    m->be->copy(m->be, dst, host, m->n_params * sizeof(float), COPY_H2D);
    free(host);
}

void gpt_gather_to_full_host(const GPT *m, const GPT *full, const float *host, float *full_buf) {
    int t = m->tp.t > 1 ? m->tp.t : 1;
    if (t == 1) {
        shard_copy(m, full, 0, (float *)host, full_buf, 0);
        return;
    }
    float *all = xmalloc(m->n_params * (size_t)t * sizeof(float));
    comm_allgather(m->tp.group, host, all, m->n_params);
    for (int r = 0; r < t; r++) shard_copy(m, full, r, all + (size_t)r * m->n_params, full_buf, 0);
    free(all);
}

void gpt_gather_to_full(const GPT *m, const GPT *full, const float *src, float *full_buf) {
    float *host = xmalloc(m->n_params * sizeof(float));
    m->be->copy(m->be, host, src, m->n_params * sizeof(float), COPY_D2H);
    gpt_gather_to_full_host(m, full, host, full_buf);
    free(host);
}
