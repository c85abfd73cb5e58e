#include "model/saved.h"
#include <string.h>
#include "model/offload_sched.h"
#include "model/workspace.h"
#include "backend/cpu/bf16.h"
#include "util/common.h"

static int stored_bf16(const GPT *m, ActName name) {
    return m->policy.act_dtype == ACT_BF16 && !act_is_fp32_always(name) && !act_is_mask(name);
}

void *work_slot(GPT *m, ActName name, int layer) {
    int slot = (name == ACT_LN1_IN && (layer & 1)) ? ACT_COUNT : (int)name;
    // Sized for a whole training micro-batch: fp32 for tensors, one byte per mask element.
    ActShape full = m->shape;
    full.t = 1;
    full.sp = 0;
    full.dropout = 1;
    full.mini_seq = 0;
    if (!act_is_lora(name)) full.lora_rank = 0;   // LoRA keeps no emb_mask or lm_in; the forward still writes them
    size_t bytes = act_elements(&full, name) * (act_is_mask(name) ? 1 : sizeof(float));
    // --static-plan: a temporary of the tensor's layer (or the head or embedding), until its scope ends
    void *planned = stepmem_alloc(&m->mem, bytes, MEM_TEMP, TAG_WORK + (int)name, tensor_scope(m, name, layer), NULL);
    if (planned) return planned;
    if (!m->work[slot]) {
        m->work[slot] = m->be->alloc(m->be, bytes);   // a device tensor, as the workspace
        m->workspace_bytes += bytes;
    }
    return m->work[slot];
}

void work_free(GPT *m) {
    for (int i = 0; i <= ACT_COUNT; i++) {
        if (m->work[i]) m->be->free(m->be, m->work[i]);
        m->work[i] = NULL;
    }
}

// The kept copy's place: the arena's top, or the layer's stage slot when it is offloaded.
static void *keep_place(GPT *m, ActName name, int layer, size_t bytes, int keep) {
    return keep == KEEP_OFFLOAD ? offload_place(m, name, layer, bytes) : arena_push(&m->act->arena, name, layer, bytes);
}

float *saved_out(GPT *m, BlockActs *A, ActName name, int layer, size_t n, int keep) {
    if (keep && !stored_bf16(m, name)) {
        float *p = keep_place(m, name, layer, n * sizeof(float), keep);
        A->saved[name] = p;
        return p;
    }
    return work_slot(m, name, layer);
}

void saved_done(GPT *m, BlockActs *A, ActName name, int layer, float *buf, size_t n, int keep, int rounded) {
    if (!stored_bf16(m, name)) return;
    if (keep) {
        uint16_t *p = keep_place(m, name, layer, n * sizeof(uint16_t), keep);
        A->saved[name] = p;
        if (!rounded && m->be->bf16_pack_round) {   // the forward goes on with the stored value
            m->be->bf16_pack_round(m->be, p, buf, n);
            return;
        }
        m->be->bf16_pack(m->be, p, buf, n);                 // exact when already rounded
        if (!rounded) m->be->bf16_unpack(m->be, buf, p, n);
    } else if (!rounded) {
        m->be->bf16_round(m->be, buf, n);
    }
}

int saved_as_bf16_copy(const GPT *m, ActName name, int keep) { return keep == KEEP_ARENA && stored_bf16(m, name); }

uint16_t *saved_copy_out(GPT *m, BlockActs *A, ActName name, int layer, size_t n) {
    if (!saved_as_bf16_copy(m, name, KEEP_ARENA)) ctron_fatal("saved_copy_out: %s is not kept in bf16", act_name_str(name));
    uint16_t *p = keep_place(m, name, layer, n * sizeof(uint16_t), KEEP_ARENA);
    A->saved[name] = p;
    return p;
}

void saved_done_copy_only(GPT *m, BlockActs *A, ActName name, int layer, float *buf, size_t n, int keep) {
    if (!saved_as_bf16_copy(m, name, keep)) {
        saved_done(m, A, name, layer, buf, n, keep, 0);
        return;
    }
    uint16_t *p = keep_place(m, name, layer, n * sizeof(uint16_t), keep);
    m->be->bf16_pack(m->be, p, buf, n);   // the bits saved_done keeps; buf is left unrounded: nobody reads it
    A->saved[name] = p;
}

float *saved_out_placed(GPT *m, BlockActs *A, ActName name, int layer, size_t n) {
    if (!stored_bf16(m, name)) return saved_out(m, A, name, layer, n, KEEP_ARENA);
    A->saved[name] = keep_place(m, name, layer, n * sizeof(uint16_t), KEEP_ARENA);
    return work_slot(m, name, layer);
}

void saved_done_placed(GPT *m, BlockActs *A, ActName name, const float *buf, size_t n) {
    if (stored_bf16(m, name)) m->be->bf16_pack(m->be, A->saved[name], buf, n);   // exact: already rounded
}

static _Noreturn void not_kept(const GPT *m, ActName name, int layer) {
    char plan[256];
    policy_describe(&m->policy, plan, sizeof plan);
    ctron_fatal("backward of layer %d needs %s, which the policy (%s, masks %s) did not keep", layer,
                act_name_str(name), plan, mask_mode_name(m->policy.masks));
}

const float *saved_in(GPT *m, BlockActs *A, ActName name, int layer, size_t n) {
    void *p = A->saved[name];
    if (!p) not_kept(m, name, layer);
    if (!stored_bf16(m, name)) return p;
    float *buf = work_slot(m, name, layer);
    m->be->bf16_unpack(m->be, buf, p, n);
    return buf;
}

const uint16_t *saved_bf16(const GPT *m, const BlockActs *A, ActName name, int keep) {
    // Only the arena's copy: an offloaded one sits in the pool (host memory on a GPU), and the
    // forward's own fp32 value is at hand anyway.
    return keep == KEEP_ARENA && stored_bf16(m, name) ? A->saved[name] : NULL;
}

const uint16_t *saved_in_bf16(GPT *m, BlockActs *A, ActName name, int layer) {
    if (!A->saved[name]) not_kept(m, name, layer);
    return stored_bf16(m, name) ? A->saved[name] : NULL;
}

uint8_t *mask_out(GPT *m, BlockActs *A, ActName name, int layer, size_t n, int keep) {
    if (keep && m->policy.masks == MASKS_BYTES) {
        uint8_t *p = keep_place(m, name, layer, n, keep);
        A->saved[name] = p;
        return p;
    }
    return work_slot(m, name, layer);
}

void mask_done(GPT *m, BlockActs *A, ActName name, int layer, const uint8_t *buf, size_t n, int keep) {
    if (!keep || m->policy.masks != MASKS_BITS) return;
    uint8_t *p = keep_place(m, name, layer, mask_bits_bytes(n), keep);
    m->be->mask_pack_bits(m->be, p, buf, n);
    A->saved[name] = p;
}

void mask_regenerate(GPT *m, ActName name, int layer, uint8_t *keep) {
    const GPTConfig *c = &m->cfg;
    DropoutSite site = {philox_key_from_seed(m->act->ctx.seed), m->act->ctx.step, (uint32_t)(layer < 0 ? 0 : layer), 0,
                        c->dropout};
    switch (name) {
    case ACT_EMB_MASK: site.site = SITE_EMB; break;
    case ACT_DROP1_MASK: site.site = SITE_DROP1; break;
    case ACT_DROP2_MASK: site.site = SITE_DROP2; break;
    case ACT_ATTN_MASK:
        site.site = SITE_ATTN;
        m->be->attention_mask(m->be, keep, m->s_cur, m->b_cur, m->al, m->head0, site, m->act->ctx.sample0);
        return;
    default:
        ctron_fatal("mask_regenerate: %s is not a dropout mask", act_name_str(name));
    }
    m->be->dropout_mask_sbw(m->be, keep, site, m->s0, m->s_rank, m->b_cur, c->hidden, m->act->ctx.sample0);
}

const uint8_t *mask_in(GPT *m, BlockActs *A, ActName name, int layer, size_t n) {
    if (m->policy.masks == MASKS_REGEN) {
        uint8_t *buf = work_slot(m, name, layer);
        mask_regenerate(m, name, layer, buf);
        return buf;
    }
    void *p = A->saved[name];
    if (!p) not_kept(m, name, layer);
    if (m->policy.masks == MASKS_BYTES) return p;
    uint8_t *buf = work_slot(m, name, layer);
    m->be->mask_unpack_bits(m->be, buf, p, n);
    return buf;
}

uint8_t *bits_out(GPT *m, BlockActs *A, ActName name, int layer, size_t nbits, int keep) {
    uint8_t *p = keep_place(m, name, layer, (nbits + 7) / 8, keep);
    A->saved[name] = p;
    return p;
}

const uint8_t *bits_in(GPT *m, BlockActs *A, ActName name, int layer) {
    if (!A->saved[name]) not_kept(m, name, layer);
    return A->saved[name];
}
