// Parameter layout, names and initialisation, from the families' tables (DESIGN.md §10).
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "model/gpt.h"
#include "model/params.h"
#include "util/common.h"

// Widths of the tensors' dimensions: this rank's (local) or the whole model's.
typedef struct { size_t h, q, kv, f, v, s, d; } Widths;

static Widths widths_of(const GPT *m, int local) {
    const GPTConfig *c = &m->cfg;
    int t = local && m->tp.t > 1 ? m->tp.t : 1;
    Widths w = {(size_t)c->hidden, (size_t)gpt_q_width(c) / t, (size_t)gpt_kv_width(c) / t, (size_t)c->ffn / t,
                local ? (size_t)m->vl : (size_t)c->vocab, (size_t)c->seq, (size_t)gpt_head_dim(c)};
    return w;
}

// The dimensions a table names: 1, h, q (heads·d), kv (kv heads·d), q + 2kv, the FFN (f), the MLP's
// input linears (f, or gate and up: 2f), q + kv (where v starts in the qkv slab), vocabulary rows, positions,
// a head (d: the per-head q/k norms' weights) and two (their buffer).
typedef enum { D_0, D_1, D_H, D_Q, D_KV, D_QKV, D_F, D_FC1, D_Q_KV, D_V, D_S, D_HD, D_2HD } Dim;

static size_t dim(const GPT *m, Widths w, Dim d) {
    switch (d) {
    case D_0: return 0;
    case D_1: return 1;
    case D_H: return w.h;
    case D_Q: return w.q;
    case D_KV: return w.kv;
    case D_QKV: return w.q + 2 * w.kv;
    case D_F: return w.f;
    case D_FC1: return arch_spec((ArchKind)m->cfg.arch)->mlp == MLP_SWIGLU ? 2 * w.f : w.f;
    case D_Q_KV: return w.q + w.kv;
    case D_V: return w.v;
    case D_S: return w.s;
    case D_HD: return w.d;
    case D_2HD: return 2 * w.d;
    }
    return 0;
}

// Which families have a buffer or a tensor.
typedef enum {
    NEED_ALWAYS, NEED_LINEAR_BIAS, NEED_QKV_BIAS, NEED_NORM_BIAS, NEED_LEARNED_POS, NEED_UNTIED, NEED_QK_NORM,
    NEED_SPLIT_PROJ, NEED_FUSED_PROJ   // llama's q, k, v, gate, up one tensor each, or Phi-3's qkv_proj and gate_up_proj
} Need;

static int needed(const GPTConfig *c, Need n) {
    const ArchSpec *a = arch_spec((ArchKind)c->arch);
    switch (n) {
    case NEED_ALWAYS: return 1;
    case NEED_LINEAR_BIAS: return a->linear_bias;
    case NEED_QKV_BIAS: return a->linear_bias || c->qkv_bias;
    case NEED_NORM_BIAS: return a->norm == NORM_LAYER;
    case NEED_LEARNED_POS: return a->pos == POS_LEARNED;
    case NEED_UNTIED: return !gpt_tied(c);
    case NEED_QK_NORM: return c->qk_norm;
    case NEED_SPLIT_PROJ: return !c->fused_proj;
    case NEED_FUSED_PROJ: return c->fused_proj;
    }
    return 0;
}

// Where a buffer lives on a pipeline: the token embedding on the first stage (and the last when it is
// the output layer too), positions on the first, the layers' on their stages, the head on the last.
typedef enum { AT_EMBED, AT_FIRST, AT_LAYER, AT_LAST } Place;

// The stacked buffers in their order in the flat parameter buffer (per-layer ones are [L, rows, cols]).
typedef struct { size_t field; Dim rows, cols; Place at; Need need; } BufferRow;
#define FIELD(f) offsetof(GPTTensors, f)
static const BufferRow BUFFERS[] = {
    {FIELD(wte), D_V, D_H, AT_EMBED, NEED_ALWAYS},      {FIELD(wpe), D_S, D_H, AT_FIRST, NEED_LEARNED_POS},
    {FIELD(ln1_w), D_H, D_1, AT_LAYER, NEED_ALWAYS},    {FIELD(ln1_b), D_H, D_1, AT_LAYER, NEED_NORM_BIAS},
    {FIELD(qkv_w), D_QKV, D_H, AT_LAYER, NEED_ALWAYS},  {FIELD(qkv_b), D_QKV, D_1, AT_LAYER, NEED_QKV_BIAS},
    {FIELD(proj_w), D_H, D_Q, AT_LAYER, NEED_ALWAYS},   {FIELD(proj_b), D_H, D_1, AT_LAYER, NEED_LINEAR_BIAS},
    {FIELD(ln2_w), D_H, D_1, AT_LAYER, NEED_ALWAYS},    {FIELD(ln2_b), D_H, D_1, AT_LAYER, NEED_NORM_BIAS},
    {FIELD(fc1_w), D_FC1, D_H, AT_LAYER, NEED_ALWAYS},  {FIELD(fc1_b), D_FC1, D_1, AT_LAYER, NEED_LINEAR_BIAS},
    {FIELD(fc2_w), D_H, D_F, AT_LAYER, NEED_ALWAYS},    {FIELD(fc2_b), D_H, D_1, AT_LAYER, NEED_LINEAR_BIAS},
    {FIELD(qk_norm_w), D_2HD, D_1, AT_LAYER, NEED_QK_NORM},
    {FIELD(lnf_w), D_H, D_1, AT_LAST, NEED_ALWAYS},     {FIELD(lnf_b), D_H, D_1, AT_LAST, NEED_NORM_BIAS},
    {FIELD(lm_head), D_V, D_H, AT_LAST, NEED_UNTIED},
};
enum { N_BUFFERS = sizeof BUFFERS / sizeof BUFFERS[0] };

static float **field_of(GPTTensors *t, size_t field) { return (float **)((char *)t + field); }
static float *const *cfield_of(const GPTTensors *t, size_t field) { return (float *const *)((const char *)t + field); }

static int on_stage(const GPT *m, Place at) {
    switch (at) {
    case AT_EMBED: return gpt_first_stage(m) || (gpt_last_stage(m) && gpt_tied(&m->cfg));
    case AT_FIRST: return gpt_first_stage(m);
    case AT_LAYER: return 1;
    case AT_LAST: return gpt_last_stage(m);
    }
    return 0;
}

// Elements of one layer's (or the model-level buffer's) slice of a buffer on this rank; 0 if absent.
static size_t buffer_slice(const GPT *m, const BufferRow *b) {
    if (!needed(&m->cfg, b->need) || !on_stage(m, b->at)) return 0;
    Widths w = widths_of(m, 1);
    return dim(m, w, b->rows) * dim(m, w, b->cols);
}

BlockTensors block_tensors(const GPT *m, const GPTTensors *t, int l) {
    BlockTensors b;
    float **out = &b.ln1_w;   // BlockTensors lists the per-layer buffers in BUFFERS' order
    size_t L = (size_t)gpt_local_layer(m, l);
    for (int i = 0; i < N_BUFFERS; i++) {
        if (BUFFERS[i].at != AT_LAYER) continue;
        float *base = *cfield_of(t, BUFFERS[i].field);
        *out++ = base ? base + L * buffer_slice(m, &BUFFERS[i]) : NULL;
    }
    return b;
}

int block_buffers(const GPT *m, const GPTTensors *t, int l, float **ptr, size_t *count) {
    BlockTensors b = block_tensors(m, t, l);
    float **in = &b.ln1_w;
    int n = 0;
    for (int i = 0; i < N_BUFFERS; i++) {
        if (BUFFERS[i].at != AT_LAYER) continue;
        float *p = *in++;
        if (!p) continue;
        ptr[n] = p;
        count[n++] = buffer_slice(m, &BUFFERS[i]);
    }
    return n;
}

size_t local_num_params(const GPT *m) {
    size_t sum = 0, L = (size_t)(m->cfg.layers / m->pp.p);
    for (int i = 0; i < N_BUFFERS; i++) sum += buffer_slice(m, &BUFFERS[i]) * (BUFFERS[i].at == AT_LAYER ? L : 1);
    return sum;
}

size_t gpt_num_params(const GPTConfig *cfg) {
    GPT whole;   // the whole model's widths: one rank, one stage
    memset(&whole, 0, sizeof whole);
    whole.cfg = *cfg;
    gpt_config_resolve(&whole.cfg);
    whole.tp.t = 1;
    whole.vl = whole.cfg.vocab;
    whole.pp = (PPLayout){1, 0, 1, cfg->layers, 1, 0, NULL};
    return local_num_params(&whole);
}

// Lays the tensors out in one buffer (stacked per kind: the stage's layers in order); a tensor the
// stage (or the family) does not have is NULL.
void bind_tensors(const GPT *m, GPTTensors *t, float *base) {
    size_t L = (size_t)(m->cfg.layers / m->pp.p);
    float *p = base;
    memset(t, 0, sizeof *t);
    for (int i = 0; i < N_BUFFERS; i++) {
        size_t n = buffer_slice(m, &BUFFERS[i]);
        if (!n) continue;
        *field_of(t, BUFFERS[i].field) = p;
        p += n * (BUFFERS[i].at == AT_LAYER ? L : 1);
    }
}

// The named tensors of each family, in checkpoint order (full_index): the model-level ones before
// the blocks, each block's, and those after. A tensor sits in a buffer at row `at` of the layer's
// slice (q, k and v share the qkv slab; gate and up the fc1 slab).
typedef enum { PART_BEFORE, PART_BLOCK, PART_AFTER } Part;
typedef struct {
    Part part;
    const char *name;             // a printf pattern with the layer number for PART_BLOCK
    size_t field;
    Dim at, rows, cols;           // cols D_0: a vector
    TPSplit split;
    int blocks;                   // TP_ROWS: row blocks split separately: 1, or a fused tensor's (QKV_BLOCKS,
                                  // GATE_UP_BLOCKS)
    Init init;
    int decay;                    // AdamW weight decay: weight matrices and embeddings
    Need need;
} TensorRow;

// A fused tensor's row blocks, each split over TP on its own: q|k|v (GPT-2's c_attn, Phi-3's qkv_proj) and
// gate|up (Phi-3's gate_up_proj).
enum { QKV_BLOCKS = 3, GATE_UP_BLOCKS = 2 };

// GPT-2's state-dict names (HF's GPT2Model without the "transformer." prefix; Conv1D weights are
// transposed in checkpoints, io/checkpoint.c). Initialisation as GPT-2: N(0, 0.02²), the residual
// projections N(0, (0.02/√(2L))²), zero biases, LayerNorm weights 1.
static const TensorRow GPT2_TENSORS[] = {
    {PART_BEFORE, "wte.weight", FIELD(wte), D_0, D_V, D_H, TP_ROWS, 1, INIT_NORMAL, 1, NEED_ALWAYS},
    {PART_BEFORE, "wpe.weight", FIELD(wpe), D_0, D_S, D_H, TP_REPLICATED, 1, INIT_NORMAL, 0, NEED_ALWAYS},
    {PART_BLOCK, "h.%d.ln_1.weight", FIELD(ln1_w), D_0, D_H, D_0, TP_REPLICATED, 1, INIT_ONES, 0, NEED_ALWAYS},
    {PART_BLOCK, "h.%d.ln_1.bias", FIELD(ln1_b), D_0, D_H, D_0, TP_REPLICATED, 1, INIT_ZERO, 0, NEED_ALWAYS},
    {PART_BLOCK, "h.%d.attn.c_attn.weight", FIELD(qkv_w), D_0, D_QKV, D_H, TP_ROWS, QKV_BLOCKS, INIT_NORMAL, 1, NEED_ALWAYS},
    {PART_BLOCK, "h.%d.attn.c_attn.bias", FIELD(qkv_b), D_0, D_QKV, D_0, TP_ROWS, QKV_BLOCKS, INIT_ZERO, 0, NEED_ALWAYS},
    {PART_BLOCK, "h.%d.attn.c_proj.weight", FIELD(proj_w), D_0, D_H, D_Q, TP_COLS, 1, INIT_NORMAL_RESID, 1, NEED_ALWAYS},
    {PART_BLOCK, "h.%d.attn.c_proj.bias", FIELD(proj_b), D_0, D_H, D_0, TP_REPLICATED, 1, INIT_ZERO, 0, NEED_ALWAYS},
    {PART_BLOCK, "h.%d.ln_2.weight", FIELD(ln2_w), D_0, D_H, D_0, TP_REPLICATED, 1, INIT_ONES, 0, NEED_ALWAYS},
    {PART_BLOCK, "h.%d.ln_2.bias", FIELD(ln2_b), D_0, D_H, D_0, TP_REPLICATED, 1, INIT_ZERO, 0, NEED_ALWAYS},
    {PART_BLOCK, "h.%d.mlp.c_fc.weight", FIELD(fc1_w), D_0, D_F, D_H, TP_ROWS, 1, INIT_NORMAL, 1, NEED_ALWAYS},
    {PART_BLOCK, "h.%d.mlp.c_fc.bias", FIELD(fc1_b), D_0, D_F, D_0, TP_ROWS, 1, INIT_ZERO, 0, NEED_ALWAYS},
    {PART_BLOCK, "h.%d.mlp.c_proj.weight", FIELD(fc2_w), D_0, D_H, D_F, TP_COLS, 1, INIT_NORMAL_RESID, 1, NEED_ALWAYS},
    {PART_BLOCK, "h.%d.mlp.c_proj.bias", FIELD(fc2_b), D_0, D_H, D_0, TP_REPLICATED, 1, INIT_ZERO, 0, NEED_ALWAYS},
    {PART_AFTER, "ln_f.weight", FIELD(lnf_w), D_0, D_H, D_0, TP_REPLICATED, 1, INIT_ONES, 0, NEED_ALWAYS},
    {PART_AFTER, "ln_f.bias", FIELD(lnf_b), D_0, D_H, D_0, TP_REPLICATED, 1, INIT_ZERO, 0, NEED_ALWAYS},
};

// Hugging Face LlamaForCausalLM's names and nn.Linear orientation [out, in]: a ctron checkpoint is its
// state dict. Initialisation as HF's _init_weights: N(0, 0.02²) for every linear and the embedding,
// RMSNorm weights 1, biases 0.
static const TensorRow LLAMA_TENSORS[] = {
    {PART_BEFORE, "model.embed_tokens.weight", FIELD(wte), D_0, D_V, D_H, TP_ROWS, 1, INIT_NORMAL, 1, NEED_ALWAYS},
    {PART_BLOCK, "model.layers.%d.input_layernorm.weight", FIELD(ln1_w), D_0, D_H, D_0, TP_REPLICATED, 1, INIT_ONES, 0,
     NEED_ALWAYS},
    {PART_BLOCK, "model.layers.%d.self_attn.q_proj.weight", FIELD(qkv_w), D_0, D_Q, D_H, TP_ROWS, 1, INIT_NORMAL, 1,
     NEED_SPLIT_PROJ},
    {PART_BLOCK, "model.layers.%d.self_attn.k_proj.weight", FIELD(qkv_w), D_Q, D_KV, D_H, TP_ROWS, 1, INIT_NORMAL, 1,
     NEED_SPLIT_PROJ},
    {PART_BLOCK, "model.layers.%d.self_attn.v_proj.weight", FIELD(qkv_w), D_Q_KV, D_KV, D_H, TP_ROWS, 1, INIT_NORMAL, 1,
     NEED_SPLIT_PROJ},
    {PART_BLOCK, "model.layers.%d.self_attn.qkv_proj.weight", FIELD(qkv_w), D_0, D_QKV, D_H, TP_ROWS, QKV_BLOCKS,
     INIT_NORMAL, 1, NEED_FUSED_PROJ},
    {PART_BLOCK, "model.layers.%d.self_attn.q_proj.bias", FIELD(qkv_b), D_0, D_Q, D_0, TP_ROWS, 1, INIT_ZERO, 0,
     NEED_QKV_BIAS},
    {PART_BLOCK, "model.layers.%d.self_attn.k_proj.bias", FIELD(qkv_b), D_Q, D_KV, D_0, TP_ROWS, 1, INIT_ZERO, 0,
     NEED_QKV_BIAS},
    {PART_BLOCK, "model.layers.%d.self_attn.v_proj.bias", FIELD(qkv_b), D_Q_KV, D_KV, D_0, TP_ROWS, 1, INIT_ZERO, 0,
     NEED_QKV_BIAS},
    {PART_BLOCK, "model.layers.%d.self_attn.o_proj.weight", FIELD(proj_w), D_0, D_H, D_Q, TP_COLS, 1, INIT_NORMAL, 1,
     NEED_ALWAYS},
    {PART_BLOCK, "model.layers.%d.self_attn.q_norm.weight", FIELD(qk_norm_w), D_0, D_HD, D_0, TP_REPLICATED, 1, INIT_ONES, 0,
     NEED_QK_NORM},
    {PART_BLOCK, "model.layers.%d.self_attn.k_norm.weight", FIELD(qk_norm_w), D_HD, D_HD, D_0, TP_REPLICATED, 1, INIT_ONES,
     0, NEED_QK_NORM},
    {PART_BLOCK, "model.layers.%d.post_attention_layernorm.weight", FIELD(ln2_w), D_0, D_H, D_0, TP_REPLICATED, 1,
     INIT_ONES, 0, NEED_ALWAYS},
    {PART_BLOCK, "model.layers.%d.mlp.gate_proj.weight", FIELD(fc1_w), D_0, D_F, D_H, TP_ROWS, 1, INIT_NORMAL, 1,
     NEED_SPLIT_PROJ},
    {PART_BLOCK, "model.layers.%d.mlp.up_proj.weight", FIELD(fc1_w), D_F, D_F, D_H, TP_ROWS, 1, INIT_NORMAL, 1,
     NEED_SPLIT_PROJ},
    {PART_BLOCK, "model.layers.%d.mlp.gate_up_proj.weight", FIELD(fc1_w), D_0, D_FC1, D_H, TP_ROWS, GATE_UP_BLOCKS,
     INIT_NORMAL, 1, NEED_FUSED_PROJ},
    {PART_BLOCK, "model.layers.%d.mlp.down_proj.weight", FIELD(fc2_w), D_0, D_H, D_F, TP_COLS, 1, INIT_NORMAL, 1,
     NEED_ALWAYS},
    {PART_AFTER, "model.norm.weight", FIELD(lnf_w), D_0, D_H, D_0, TP_REPLICATED, 1, INIT_ONES, 0, NEED_ALWAYS},
    {PART_AFTER, "lm_head.weight", FIELD(lm_head), D_0, D_V, D_H, TP_ROWS, 1, INIT_NORMAL, 1, NEED_UNTIED},
};

typedef struct { const TensorRow *rows; int n; } TensorTable;

static TensorTable tensor_table(const GPTConfig *c) {
    static const TensorTable tables[ARCH_COUNT] = {
        [ARCH_GPT2] = {GPT2_TENSORS, sizeof GPT2_TENSORS / sizeof GPT2_TENSORS[0]},
        [ARCH_LLAMA] = {LLAMA_TENSORS, sizeof LLAMA_TENSORS / sizeof LLAMA_TENSORS[0]},
    };
    return tables[c->arch >= 0 && c->arch < ARCH_COUNT ? c->arch : ARCH_GPT2];
}

// The whole model's tensors in checkpoint order: entry k is (row, layer) (layer -1 outside blocks).
typedef struct { const TensorRow *row; int layer; } TensorRef;

static int whole_model_list(const GPTConfig *c, TensorRef *out) {
    TensorTable tt = tensor_table(c);
    int n = 0;
    for (int part = PART_BEFORE; part <= PART_AFTER; part++)
        for (int l = 0; l < (part == PART_BLOCK ? c->layers : 1); l++)
            for (int i = 0; i < tt.n; i++) {
                if ((int)tt.rows[i].part != part || !needed(c, tt.rows[i].need)) continue;
                if (out) out[n] = (TensorRef){&tt.rows[i], part == PART_BLOCK ? l : -1};
                n++;
            }
    return n;
}

static void tensor_name(const TensorRef *r, char *buf, size_t len) {
    if (r->layer >= 0) snprintf(buf, len, r->row->name, r->layer);
    else snprintf(buf, len, "%s", r->row->name);
}

static void add_info(GPT *m, const TensorRef *r, int full_index) {
    const TensorRow *row = r->row;
    Widths lw = widths_of(m, 1), fw = widths_of(m, 0);
    ParamInfo *pi = &m->info[m->n_info++];
    memset(pi, 0, sizeof *pi);
    pi->full_index = full_index;
    tensor_name(r, pi->name, sizeof pi->name);
    float *base = *cfield_of(&m->w, row->field);
    if (r->layer >= 0) {
        const BufferRow *b = NULL;
        for (int i = 0; i < N_BUFFERS; i++)
            if (BUFFERS[i].field == row->field) b = &BUFFERS[i];
        base += (size_t)gpt_local_layer(m, r->layer) * buffer_slice(m, b);
    }
    size_t cols = row->cols == D_0 ? 1 : dim(m, lw, row->cols);
    pi->offset = (size_t)(base - (m->frozen ? m->frozen : m->params)) + dim(m, lw, row->at) * cols;
    pi->ndim = row->cols == D_0 ? 1 : 2;
    pi->shape[0] = (int)dim(m, lw, row->rows);
    pi->shape[1] = row->cols == D_0 ? 0 : (int)cols;
    pi->full_shape[0] = (int)dim(m, fw, row->rows);
    pi->full_shape[1] = row->cols == D_0 ? 0 : (int)dim(m, fw, row->cols);
    pi->numel = (size_t)pi->shape[0] * cols;
    pi->decay = row->decay;
    pi->split = row->split;
    pi->row_blocks = row->blocks;
    if (row->blocks == QKV_BLOCKS) pi->block_rows[0] = (int)fw.q, pi->block_rows[1] = pi->block_rows[2] = (int)fw.kv;
    if (row->blocks == GATE_UP_BLOCKS) pi->block_rows[0] = pi->block_rows[1] = (int)fw.f;
    pi->init = (int)row->init;
    // SP runs the norms, the row-parallel biases, dropout and the position embedding on s/t rows; the per-head
    // q/k norms' weights (rows D_HD) are summed over the rank's own heads, with SP or without.
    pi->sp_partial = (m->tp.sp || (m->tp.t > 1 && row->rows == D_HD)) && row->split == TP_REPLICATED;
    // the last stage's copy of a tied token embedding: the first stage's counts
    pi->pp_mirror = row->field == FIELD(wte) && !gpt_first_stage(m);
}

int base_tensor_count(const GPTConfig *c) { return whole_model_list(c, NULL); }

void build_info(GPT *m) {
    int n = whole_model_list(&m->cfg, NULL);
    TensorRef *all = xmalloc(sizeof(TensorRef) * (size_t)n);
    whole_model_list(&m->cfg, all);
    m->info = xmalloc(sizeof(ParamInfo) * (size_t)(n + adapter_tensor_count(&m->cfg)));
    m->n_info = 0;
    for (int k = 0; k < n; k++) {
        const TensorRow *row = all[k].row;
        const BufferRow *b = NULL;
        for (int i = 0; i < N_BUFFERS; i++)
            if (BUFFERS[i].field == row->field) b = &BUFFERS[i];
        if (all[k].layer >= 0 ? !gpt_owns_layer(m, all[k].layer) : !on_stage(m, b->at)) continue;
        add_info(m, &all[k], k);
    }
    free(all);
    if (m->frozen) {   // LoRA: the base is frozen; the adapters (adapters.c) are what the optimizer trains
        m->frozen_info = m->info;
        m->n_frozen_info = m->n_info;
        m->info = xmalloc(sizeof(ParamInfo) * (size_t)(adapter_tensor_count(&m->cfg) + 1));
        m->n_info = 0;
        adapter_build_info(m, n);
    }
}

static const ParamInfo *find_full(const ParamInfo *info, int n, int full_index) {
    int lo = 0, hi = n - 1;   // each list is in full_index order
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (info[mid].full_index == full_index) return &info[mid];
        if (info[mid].full_index < full_index) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

const ParamInfo *gpt_info_by_full_index(const GPT *m, int full_index) {
    const ParamInfo *pi = find_full(m->info, m->n_info, full_index);
    return pi ? pi : find_full(m->frozen_info, m->n_frozen_info, full_index);
}

void gpt_param_full_name(const GPTConfig *c, int full_index, char *buf, size_t len) {
    GPTConfig rc = *c;
    gpt_config_resolve(&rc);
    int n = whole_model_list(&rc, NULL);
    if (full_index >= n && adapter_full_name(&rc, full_index - n, buf, len)) return;
    if (full_index < 0 || full_index >= n) {
        snprintf(buf, len, "?");
        return;
    }
    TensorRef *all = xmalloc(sizeof(TensorRef) * (size_t)n);
    whole_model_list(&rc, all);
    tensor_name(&all[full_index], buf, len);
    free(all);
}

const ParamInfo *gpt_find_param(const GPT *m, const char *name) {
    for (int i = 0; i < m->n_info; i++)
        if (strcmp(m->info[i].name, name) == 0) return &m->info[i];
    for (int i = 0; i < m->n_frozen_info; i++)
        if (strcmp(m->frozen_info[i].name, name) == 0) return &m->frozen_info[i];
    return NULL;
}

#undef FIELD
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

// U(−bound, bound) from Philox: element e of tensor `id` uses counter (e, 1, id) (word 2 = 1: apart
// from fill_normal's pairs).
static void fill_uniform(float *x, size_t n, float bound, uint64_t seed, uint32_t id) {
    philox_key key = philox_key_from_seed(seed);
#pragma omp parallel for schedule(static)
    for (size_t e = 0; e < n; e++) {
        philox_ctr ctr = {{(uint32_t)e, (uint32_t)((uint64_t)e >> 32), 1, ((uint32_t)PHILOX_INIT << 24) | id}};
        philox_ctr r = philox4x32_10(ctr, key);
        double u = (double)r.v[0] / 4294967296.0;   // [0, 1)
        x[e] = (float)((2.0 * u - 1.0) * bound);
    }
}

static void init_set(const GPT *m, const ParamInfo *info, int n, float *params, uint64_t seed);

// host: n floats drawn as the list says, copied to dst on the device.
static void init_to_device(GPT *m, const ParamInfo *info, int n_info, float *dst, size_t n, uint64_t seed) {
    float *host = xcalloc((n ? n : 1) * sizeof(float));
    init_set(m, info, n_info, host, seed);
    m->be->copy(m->be, dst, host, n * sizeof(float), COPY_H2D);
    free(host);
}

void gpt_init_weights(GPT *m, uint64_t seed) {
    gpt_params_changed(m);
    if (m->tp.t <= 1 && m->pp.p <= 1) {   // drawn on the host, then one copy to the device
        init_to_device(m, m->info, m->n_info, m->params, m->n_params, seed);
        if (m->frozen) {
            float *host = xcalloc(m->n_frozen * sizeof(float));
            init_set(m, m->frozen_info, m->n_frozen_info, host, seed);
            gpt_frozen_to_device(m, host);   // --base-dtype bf16: rounded to bf16
            free(host);
        }
        return;
    }
    // Each element is drawn at its index in the unsharded tensor: initialise the whole model and keep
    // this rank's slices (a transient copy of the model, once per run).
    GPT full;
    gpt_init_params(&full, &m->cfg);
    init_set(&full, full.info, full.n_info, full.params, seed);
    if (full.frozen) init_set(&full, full.frozen_info, full.n_frozen_info, full.frozen, seed);
    gpt_shard_from_full(m, &full, full.params, m->params);
    gpt_free(&full);
}

// params: host memory laid out as the list's buffer (m's parameters, or its frozen tensors).
static void init_set(const GPT *m, const ParamInfo *info, int n, float *params, uint64_t seed) {
    // The family's table says how (TensorRow.init): GPT-2 scales its residual projections by 1/√(2L).
    float resid_std = 0.02f / sqrtf(2.0f * (float)m->cfg.layers);
    for (int i = 0; i < n; i++) {
        const ParamInfo *pi = &info[i];
        float *x = params + pi->offset;
        if (pi->init == INIT_LORA_A) {   // peft: kaiming_uniform_(a=√5) on [r, in]: bound 1/√in
            fill_uniform(x, pi->numel, 1.0f / sqrtf((float)pi->full_shape[1]), seed, (uint32_t)pi->full_index);
        } else if (pi->init == INIT_ONES) {
            for (size_t e = 0; e < pi->numel; e++) x[e] = 1.0f;
        } else if (pi->init == INIT_ZERO) {
            memset(x, 0, pi->numel * sizeof(float));
        } else {
            fill_normal(x, pi->numel, pi->init == INIT_NORMAL_RESID ? resid_std : 0.02f, seed, (uint32_t)pi->full_index);
        }
    }
}

void gpt_refresh_params16(GPT *m) {
    if (!m->params16 || !m->params16_stale) return;
    m->be->bf16_pack(m->be, m->params16, m->params, m->n_params);
    if (m->base16 && m->frozen_a) m->be->bf16_pack(m->be, m->frozen16 + m->n_base, m->frozen_a, m->n_frozen - m->n_base);
    else if (m->frozen16 && !m->base16) m->be->bf16_pack(m->be, m->frozen16, m->frozen, m->n_frozen);
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
        if (pi->row_blocks <= 1) {   // the vocabulary's last rank may hold padded rows
            long r = (long)t_rank * pi->shape[0] + row;
            return r < pi->full_shape[0] ? r * cols + col : -1;
        }
        long full0 = 0;   // block k: full rows block_rows[k], split evenly over the ranks
        for (int k = 0; k < pi->row_blocks; k++) {
            long full_k = pi->block_rows[k], local_k = full_k * pi->shape[0] / pi->full_shape[0];
            if (row < local_k) return (full0 + (long)t_rank * local_k + row) * cols + col;
            row -= local_k;
            full0 += full_k;
        }
        return -1;
    }
    case TP_COLS:
        return row * cols + (long)t_rank * pi->shape[1] + col;
    }
    return -1;
}

// Copies between this rank's tensors (local) and the unsharded ones (full), for rank t_rank's slices.
// A pipeline stage has its own tensors only; the last stage's copy of wte is not gathered (the first
// stage's is the same).
static void shard_copy_list(const ParamInfo *info, int n, const GPT *full, int t_rank, float *local, float *full_buf,
                            int to_local) {
    for (int i = 0; i < n; i++) {
        const ParamInfo *pi = &info[i], *fi = gpt_info_by_full_index(full, pi->full_index);
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

static void shard_copy(const GPT *m, const GPT *full, int t_rank, float *local, float *full_buf, int to_local) {
    shard_copy_list(m->info, m->n_info, full, t_rank, local, full_buf, to_local);
}

// LoRA: the frozen tensors travel with the parameters (they change only by initialisation and loading).
static void shard_frozen_from_full(const GPT *m, const GPT *full) {
    if (!m->frozen) return;
    float *host = xmalloc(m->n_frozen * sizeof(float));
    shard_copy_list(m->frozen_info, m->n_frozen_info, full, m->tp.t > 1 ? m->tp.rank : 0, host, full->frozen, 1);
    gpt_frozen_to_device((GPT *)m, host);
    free(host);
}

static void gather_frozen_to_full(const GPT *m, const GPT *full) {
    if (!m->frozen) return;
    int t = m->tp.t > 1 ? m->tp.t : 1;
    float *host = xmalloc(m->n_frozen * sizeof(float)), *all = xmalloc(m->n_frozen * (size_t)t * sizeof(float));
    gpt_frozen_to_host(m, host);
    if (t > 1) comm_allgather(m->tp.group, host, all, m->n_frozen);
    else memcpy(all, host, m->n_frozen * sizeof(float));
    for (int r = 0; r < t; r++)
        shard_copy_list(m->frozen_info, m->n_frozen_info, full, r, all + (size_t)r * m->n_frozen, full->frozen, 0);
    free(all);
    free(host);
}

// full_buf is host memory (a model of gpt_init_params); dst and src are device tensors of m, which
// move through one host staging copy (the _host forms: host memory laid out as m's parameters).
void gpt_shard_from_full_host(const GPT *m, const GPT *full, const float *full_buf, float *host) {
    shard_copy(m, full, m->tp.t > 1 ? m->tp.rank : 0, host, (float *)full_buf, 1);
}

void gpt_shard_from_full(const GPT *m, const GPT *full, const float *full_buf, float *dst) {
    if (dst == m->params) ((GPT *)m)->params16_stale = 1;   // the bf16 copy follows the new weights
    if (dst == m->params) shard_frozen_from_full(m, full);
    float *host = xmalloc(m->n_params * sizeof(float));
    gpt_shard_from_full_host(m, full, full_buf, host);
    m->be->copy(m->be, dst, host, m->n_params * sizeof(float), COPY_H2D);
    free(host);
}

void gpt_set_frozen_base(GPT *m, const GPT *base) {
    if (!m->frozen) return;
    int n_base = base_tensor_count(&m->cfg), k = 0;
    while (k < m->n_frozen_info && m->frozen_info[k].full_index < n_base) k++;   // the base's come first
    float *host = xmalloc(m->n_frozen * sizeof(float));
    gpt_frozen_to_host(m, host);   // LoRA-FA's A stays as drawn
    shard_copy_list(m->frozen_info, k, base, m->tp.t > 1 ? m->tp.rank : 0, host, base->params, 1);
    gpt_frozen_to_device(m, host);   // --base-dtype bf16: rounded to bf16 (a BF16 source's values exactly)
    free(host);
    gpt_params_changed(m);
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
    if (src == m->params) gather_frozen_to_full(m, full);
    float *host = xmalloc(m->n_params * sizeof(float));
    m->be->copy(m->be, host, src, m->n_params * sizeof(float), COPY_D2H);
    gpt_gather_to_full_host(m, full, host, full_buf);
    free(host);
}
