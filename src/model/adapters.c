// LoRA adapters as parameters, built from arch/lora.h's rows: per targeted site A [L, r, in] and
// B [L, out, r] stacked over the stage's layers, split under TP as the row says, named as peft names them.
#include <stdio.h>
#include <string.h>
#include "model/gpt.h"
#include "model/params.h"

// A site's input or output width on this rank (local) or in the whole model.
static long site_width(const GPT *m, LoraWidth w, int local) {
    const GPTConfig *c = &m->cfg;
    int t = local && m->tp.t > 1 ? m->tp.t : 1;
    return lora_width(w, c->hidden, gpt_q_width(c) / t, gpt_kv_width(c) / t, c->ffn / t);
}

static int targeted(const GPTConfig *c, int s) { return c->lora_rank > 0 && (c->lora_targets >> s & 1u); }
static size_t stage_layers(const GPT *m) { return (size_t)(m->cfg.layers / (m->pp.p > 0 ? m->pp.p : 1)); }

size_t adapter_a_floats(const GPT *m) {
    size_t sum = 0;
    for (int s = 0; s < LORA_SITES; s++)
        if (targeted(&m->cfg, s)) sum += (size_t)m->cfg.lora_rank * (size_t)site_width(m, lora_site(s)->in, 1);
    return sum * stage_layers(m);
}

size_t adapter_b_floats(const GPT *m) {
    size_t sum = 0;
    for (int s = 0; s < LORA_SITES; s++)
        if (targeted(&m->cfg, s)) sum += (size_t)m->cfg.lora_rank * (size_t)site_width(m, lora_site(s)->out, 1);
    return sum * stage_layers(m);
}

static int n_targeted(const GPTConfig *c) {
    int n = 0;
    for (int s = 0; s < LORA_SITES; s++) n += targeted(c, s);
    return n;
}

int adapter_tensor_count(const GPTConfig *c) { return 2 * c->layers * n_targeted(c); }

void adapter_bind(const GPT *m, LoraTensors *t, float *a_base, float *b_base) {
    memset(t, 0, sizeof *t);
    size_t L = stage_layers(m), r = (size_t)m->cfg.lora_rank;
    for (int s = 0; s < LORA_SITES; s++) {
        if (!targeted(&m->cfg, s)) continue;
        if (a_base) {
            t->a[s] = a_base;
            a_base += L * r * (size_t)site_width(m, lora_site(s)->in, 1);
        }
        if (b_base) {
            t->b[s] = b_base;
            b_base += L * r * (size_t)site_width(m, lora_site(s)->out, 1);
        }
    }
}

// The whole model's adapter tensor k: layer k / (2n), site the (k / 2 mod n)-th targeted one, A or B.
static void adapter_of(const GPTConfig *c, int k, int *layer, int *site, int *is_b) {
    int n = n_targeted(c), j = (k / 2) % n;
    *layer = k / (2 * n);
    *is_b = k % 2;
    *site = 0;
    for (int s = 0; s < LORA_SITES; s++)
        if (targeted(c, s) && j-- == 0) *site = s;
}

int adapter_full_name(const GPTConfig *c, int k, char *buf, size_t len) {
    if (k < 0 || k >= adapter_tensor_count(c)) return 0;
    int layer, site, is_b;
    adapter_of(c, k, &layer, &site, &is_b);
    lora_param_name(gpt_lora_family(c), (LoraSite)site, layer, is_b ? 'B' : 'A', buf, len);
    return 1;
}

// One adapter matrix of layer l: its shard, split and place. Column-parallel base: A replicated (each TP
// rank's gradient is a partial sum: reduced over TP), B split by rows (a fused q|k|v's or gate|up's blocks each);
// row-parallel base: A split by columns, B replicated (every rank computes the same gradient).
static void add_adapter_info(GPT *m, int l, int s, int is_b, int full_index) {
    const LoraSiteRow *row = lora_site(s);
    int frozen = !is_b && m->cfg.lora_fa, r = m->cfg.lora_rank;
    ParamInfo *pi = frozen ? &m->frozen_info[m->n_frozen_info++] : &m->info[m->n_info++];
    memset(pi, 0, sizeof *pi);
    pi->full_index = full_index;
    lora_param_name(gpt_lora_family(&m->cfg), (LoraSite)s, l, is_b ? 'B' : 'A', pi->name, sizeof pi->name);
    long in_l = site_width(m, row->in, 1), out_l = site_width(m, row->out, 1);
    long in = site_width(m, row->in, 0), out = site_width(m, row->out, 0);
    const LoraTensors *lt = &m->lw;
    float *stack = is_b ? lt->b[s] : lt->a[s], *buf = frozen ? m->frozen : m->params;
    size_t per = (size_t)r * (size_t)(is_b ? out_l : in_l);
    size_t at = frozen && m->frozen_a ? m->n_base + (size_t)(stack - m->frozen_a)   // --base-dtype bf16: A's own
                                      : (size_t)(stack - buf);                       // buffer, after the base
    pi->offset = at + (size_t)gpt_local_layer(m, l) * per;
    pi->ndim = 2;
    pi->shape[0] = is_b ? (int)out_l : r;
    pi->shape[1] = is_b ? r : (int)in_l;
    pi->full_shape[0] = is_b ? (int)out : r;
    pi->full_shape[1] = is_b ? r : (int)in;
    pi->numel = per;
    pi->decay = 1;   // peft under HF's Trainer decays the adapters (they are weights, not biases or norms)
    pi->init = is_b ? INIT_ZERO : INIT_LORA_A;
    pi->row_blocks = 1;
    if (row->parallel == LORA_COLUMN) {
        pi->split = is_b ? TP_ROWS : TP_REPLICATED;
        pi->row_blocks = is_b ? row->out_blocks : 1;
        if (pi->row_blocks > 1) {   // q|k|v or gate|up, each block split over TP on its own
            const GPTConfig *c = &m->cfg;
            long rows[3];
            lora_out_block_rows((LoraSite)s, gpt_q_width(c), gpt_kv_width(c), c->ffn, rows);
            for (int k = 0; k < pi->row_blocks; k++) pi->block_rows[k] = (int)rows[k];
        }
        pi->sp_partial = !is_b && m->tp.t > 1;
    } else {
        pi->split = is_b ? TP_REPLICATED : TP_COLS;
    }
}

void adapter_build_info(GPT *m, int n_base) {
    int n = adapter_tensor_count(&m->cfg);
    for (int k = 0; k < n; k++) {
        int layer, site, is_b;
        adapter_of(&m->cfg, k, &layer, &site, &is_b);
        if (gpt_owns_layer(m, layer)) add_adapter_info(m, layer, site, is_b, n_base + k);
    }
}
