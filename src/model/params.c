// Parameter layout, GPT-2 state-dict names and initialisation.
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "model/gpt.h"
#include "model/params.h"
#include "util/common.h"

BlockTensors block_tensors(const GPTTensors *t, int h, int l) {
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
void bind_tensors(GPTTensors *t, float *base, const GPTConfig *c) {
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

void build_info(GPT *m) {
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

