#include "model/offload_sched.h"
#include <string.h>
#include "util/common.h"

static size_t padded(size_t n) { return (n + 63) / 64 * 64; }

size_t pool_regions_plan(const GPT *m, size_t (*span_of)(const ActShape *, const MemoryPolicy *, int),
                         size_t **pool_at, int **slot, int **order, int *n_order, size_t span[2]) {
    int L = m->cfg.layers, k = 0;
    *pool_at = xcalloc(sizeof(size_t) * (size_t)L);
    *order = xcalloc(sizeof(int) * (size_t)L);
    *slot = xcalloc(sizeof(int) * (size_t)L);
    *n_order = 0;
    span[0] = span[1] = 0;
    size_t at = 0;
    for (int l = 0; l < L; l++) {
        size_t region = span_of(&m->shape, &m->policy, l);
        (*pool_at)[l] = at;
        (*slot)[l] = region ? (k++ & 1) : -1;
        if (region && region > span[(*slot)[l]]) span[(*slot)[l]] = region;
        at += region;
    }
    for (int l = L - 1; l >= 0; l--)
        if ((*slot)[l] >= 0) (*order)[(*n_order)++] = l;
    return at;
}

void offload_init(GPT *m) {
    OffloadState *o = &m->off;
    memset(o, 0, sizeof *o);
    o->owner[0] = o->owner[1] = -1;
    if (!m->policy.offload) return;
    int L = m->cfg.layers;
    ledger_init(&o->ledger, L);   // even when nothing is offloaded: then every cell stays 0
    size_t span[2];
    size_t at = pool_regions_plan(m, act_layer_offload_span, &o->pool_at, &o->slot, &o->order, &o->n_order, span);
    o->span = span[0] > span[1] ? span[0] : span[1];   // two slots of the largest region
    if (at == 0) return;   // the policy keeps none of the named tensors: no pool, no stage (the run says so)
    char err[640];
    o->pool = offload_pool_open(m->be, at, m->policy.offload_dir, err, sizeof err);
    if (!o->pool) ctron_fatal("%s", err);
}

void offload_free(GPT *m) {
    OffloadState *o = &m->off;
    if (!m->policy.offload) return;
    offload_pool_close(o->pool);   // NULL-safe
    ledger_free(&o->ledger);
    free(o->pool_at); free(o->order); free(o->slot);
    memset(o, 0, sizeof *o);
}

void offload_begin_forward(GPT *m) {
    OffloadState *o = &m->off;
    if (!o->pool) return;
    o->stage = arena_push(&m->act->arena, ACT_OFFLOAD_STAGE, -1, act_offload_stage_bytes(&m->shape, &m->policy));
    o->owner[0] = o->owner[1] = -1;
    o->cursor = 0;
}

static uint8_t *slot_base(const OffloadState *o, int layer) { return o->stage + (size_t)o->slot[layer] * o->span; }

void *offload_place(GPT *m, ActName name, int layer, size_t bytes) {
    OffloadState *o = &m->off;
    size_t planned = act_layer_offload_name_bytes(&m->shape, &m->policy, layer, name);
    if (!o->pool || o->slot[layer] < 0 || bytes > planned)
        ctron_fatal("offload: %s of layer %d (%zu bytes) has no place in the offload plan (%zu planned)",
                    act_name_str(name), layer, bytes, planned);
    int s = o->slot[layer];
    if (o->owner[s] != layer) {   // the slot's previous layer must be in the pool before it is overwritten
        offload_pool_wait(o->pool, o->ticket[s]);
        o->owner[s] = layer;
    }
    size_t off = 0;
    for (int n = 0; n < (int)name; n++) off += padded(act_layer_offload_name_bytes(&m->shape, &m->policy, layer, (ActName)n));
    ledger_add(&o->ledger, name, layer, bytes);
    return slot_base(o, layer) + off;
}

void offload_layer_stored(GPT *m, int layer) {
    OffloadState *o = &m->off;
    if (!o->pool || o->slot[layer] < 0 || o->owner[o->slot[layer]] != layer) return;
    o->ticket[o->slot[layer]] = offload_pool_store(o->pool, o->pool_at[layer], slot_base(o, layer),
                                                   act_layer_offload_span(&m->shape, &m->policy, layer));
}

// The backward step at which a layer's offloaded tensors are first read: its own, or for a
// full-recompute checkpoint the last layer of its group (where the group is recomputed).
static int need_step(const GPT *m, int layer) {
    const MemoryPolicy *p = &m->policy;
    int l = layer;
    if (p->kind[l] != RECOMPUTE_FULL) return l;
    while (l + 1 < m->cfg.layers && p->kind[l + 1] == RECOMPUTE_FULL && p->group_start[l + 1] == p->group_start[layer]) l++;
    return l;
}

// Queue layer's region into its slot unless the slot still holds it (the forward's last layers).
static void bring(GPT *m, int layer) {
    OffloadState *o = &m->off;
    int s = o->slot[layer];
    if (o->owner[s] == layer) return;
    o->ticket[s] = offload_pool_load(o->pool, o->pool_at[layer], slot_base(o, layer),
                                     act_layer_offload_span(&m->shape, &m->policy, layer));
    o->owner[s] = layer;
}

void offload_fetch(GPT *m, int step) {
    OffloadState *o = &m->off;
    if (!o->pool) return;
    while (o->cursor < o->n_order && need_step(m, o->order[o->cursor]) >= step) {
        int layer = o->order[o->cursor++];
        bring(m, layer);
        offload_pool_wait(o->pool, o->ticket[o->slot[layer]]);
        // The other slot's layer is done with (its backward came before): fetch the next one into it.
        if (o->cursor < o->n_order) bring(m, o->order[o->cursor]);
    }
}

void offload_layer_released(GPT *m, int layer) {
    OffloadState *o = &m->off;
    if (!o->pool) return;
    for (int n = 0; n < ACT_N_LAYER; n++) {
        size_t b = ledger_cur_bytes(&o->ledger, (ActName)n, layer);
        if (b) ledger_sub(&o->ledger, (ActName)n, layer, b);
    }
}

void offload_end_step(GPT *m) {
    OffloadState *o = &m->off;
    if (!o->pool) return;
    offload_pool_drain(o->pool);
    for (int l = 0; l < m->cfg.layers; l++) offload_layer_released(m, l);
}
