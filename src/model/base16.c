// --base-dtype bf16 (docs/LORA.md): LoRA's frozen base stored only in bf16. The model's views of the base
// (m->w) point into an address range with no memory behind it (PROT_NONE), so that every fp32 read of a
// base tensor that was not routed here faults at once instead of reading wrong numbers. The readers:
//   - the base linears and the output layer: their GEMMs take the bf16 tensor (gpt_w16), as the mixed
//     precision GEMMs take their weight copies;
//   - the token embedding: embedding_vocab_forward16 widens the rows it looks up;
//   - the one-dimensional tensors (norm weights, biases) and the learned positions: widened into
//     base_stage (fp32 workspace) for the pass that reads them, one layer (or the head) at a time.
// LoRA-FA's frozen A is an adapter and stays fp32 (frozen_a).
#define _DEFAULT_SOURCE   // MAP_ANONYMOUS, MAP_NORESERVE
#include <string.h>
#include <sys/mman.h>
#include "backend/cpu/bf16.h"
#include "model/base16.h"
#include "model/params.h"
#include "util/common.h"

// The one-dimensional tensors of a block (BlockTensors' fields), widened per use.
enum { N_VECTORS = 9 };
static void vector_fields(BlockTensors *b, float **f[N_VECTORS]) {
    float **all[N_VECTORS] = {&b->ln1_w, &b->ln1_b, &b->qkv_b, &b->proj_b, &b->ln2_w, &b->ln2_b, &b->fc1_b, &b->fc2_b,
                              &b->qk_norm_w};
    memcpy(f, all, sizeof all);
}

// Elements of layer l's tensor at p (one of block_buffers' slices), 0 when p is none of them.
static size_t slice_count(const GPT *m, int l, const float *p) {
    float *ptr[BLOCK_BUFFERS_MAX];
    size_t count[BLOCK_BUFFERS_MAX];
    int n = block_buffers(m, &m->w, l, ptr, count);
    for (int i = 0; i < n; i++)
        if (ptr[i] == p) return count[i];
    return 0;
}

static size_t block_vector_floats(const GPT *m, int l) {
    BlockTensors b = block_tensors(m, &m->w, l);
    float **f[N_VECTORS];
    vector_fields(&b, f);
    size_t sum = 0;
    for (int i = 0; i < N_VECTORS; i++)
        if (*f[i]) sum += slice_count(m, l, *f[i]);
    return sum;
}

void base16_alloc(GPT *m) {
    size_t fa = m->n_frozen - m->n_base;
    m->frozen = mmap(NULL, m->n_frozen * sizeof(float), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m->frozen == MAP_FAILED) ctron_fatal("--base-dtype bf16: cannot reserve %zu bytes of addresses", m->n_frozen * sizeof(float));
    m->frozen16 = m->be->alloc(m->be, (m->n_base + (m->params16 ? fa : 0)) * sizeof(uint16_t));
    if (fa) m->frozen_a = m->be->alloc(m->be, fa * sizeof(float));
    m->base16 = 1;
}

void base16_stage_alloc(GPT *m) {
    // The stage: one layer's vectors, the final norm's, or (learned positions) this rank's position rows.
    size_t floats = 2 * (size_t)m->cfg.hidden;
    int first = m->pp.rank * m->pp.n;   // every layer has the same vectors
    size_t layer = block_vector_floats(m, first);
    if (layer > floats) floats = layer;
    if (arch_spec((ArchKind)m->cfg.arch)->pos == POS_LEARNED && (size_t)m->cfg.seq * m->cfg.hidden > floats)
        floats = (size_t)m->cfg.seq * m->cfg.hidden;
    m->base_stage_floats = floats;
    m->base_stage = m->be->alloc(m->be, floats * sizeof(float));
}

void base16_free(GPT *m) {
    if (m->frozen) munmap(m->frozen, m->n_frozen * sizeof(float));
    m->be->free(m->be, m->frozen_a);
    m->be->free(m->be, m->base_stage);
    m->frozen = m->frozen_a = m->base_stage = NULL;
}

size_t base16_stage_bytes(const GPT *m) { return m->base_stage_floats * sizeof(float); }

// The stage's floats [at, at + n) = the widened base tensor at key p.
static float *widen(GPT *m, const float *p, size_t at, size_t n) {
    float *dst = m->base_stage + at;
    m->be->bf16_unpack(m->be, dst, m->frozen16 + (p - m->frozen), n);
    return dst;
}

BlockTensors gpt_block_weights(GPT *m, int l) {
    BlockTensors b = block_tensors(m, &m->w, l);
    if (!m->base16) return b;
    float **f[N_VECTORS];
    vector_fields(&b, f);
    size_t at = 0;
    for (int i = 0; i < N_VECTORS; i++) {
        if (!*f[i]) continue;
        size_t count = slice_count(m, l, *f[i]);
        *f[i] = widen(m, *f[i], at, count);
        at += count;
    }
    return b;
}

void gpt_head_norm_weights(GPT *m, const float **w, const float **b) {
    *w = m->w.lnf_w;
    *b = m->w.lnf_b;
    if (!m->base16) return;
    int h = m->cfg.hidden;
    *w = widen(m, m->w.lnf_w, 0, (size_t)h);
    if (m->w.lnf_b) *b = widen(m, m->w.lnf_b, (size_t)h, (size_t)h);
}

const float *gpt_position_rows(GPT *m, int s0, int s) {
    if (!m->base16) return m->w.wpe + (size_t)s0 * m->cfg.hidden;
    size_t h = (size_t)m->cfg.hidden;
    return widen(m, m->w.wpe + (size_t)s0 * h, 0, (size_t)s * h);
}

size_t gpt_weight_bytes(const GPT *m) {
    size_t f32 = m->n_params + (m->base16 ? m->n_frozen - m->n_base : m->n_frozen);
    return f32 * sizeof(float) + (m->base16 ? m->n_base * sizeof(uint16_t) : 0);
}

size_t gpt_weight_copy_bytes(const GPT *m) {   // (under --base-dtype bf16 the base has no copy: it is one)
    return m->params16 ? (m->n_params + m->n_frozen - (m->base16 ? m->n_base : 0)) * sizeof(uint16_t) : 0;
}

void gpt_frozen_to_device(GPT *m, const float *host) {
    if (!m->base16) {
        m->be->copy(m->be, m->frozen, host, m->n_frozen * sizeof(float), COPY_H2D);
        return;
    }
    uint16_t *h16 = xmalloc((m->n_base ? m->n_base : 1) * sizeof(uint16_t));
    for (size_t i = 0; i < m->n_base; i++) h16[i] = bf16_from_f32(host[i]);
    m->be->copy(m->be, m->frozen16, h16, m->n_base * sizeof(uint16_t), COPY_H2D);
    free(h16);
    if (m->frozen_a) m->be->copy(m->be, m->frozen_a, host + m->n_base, (m->n_frozen - m->n_base) * sizeof(float), COPY_H2D);
}

void gpt_frozen_put(GPT *m, const ParamInfo *pi, const float *host) {
    size_t n = pi->numel;
    if (!m->base16) {
        m->be->copy(m->be, m->frozen + pi->offset, host, n * sizeof(float), COPY_H2D);
    } else if (pi->offset >= m->n_base) {   // LoRA-FA's A
        m->be->copy(m->be, m->frozen_a + (pi->offset - m->n_base), host, n * sizeof(float), COPY_H2D);
    } else {
        uint16_t *h16 = xmalloc((n ? n : 1) * sizeof(uint16_t));
        for (size_t i = 0; i < n; i++) h16[i] = bf16_from_f32(host[i]);
        m->be->copy(m->be, m->frozen16 + pi->offset, h16, n * sizeof(uint16_t), COPY_H2D);
        free(h16);
    }
}

void gpt_frozen_to_host(const GPT *m, float *host) {
    if (!m->base16) {
        m->be->copy(m->be, host, m->frozen, m->n_frozen * sizeof(float), COPY_D2H);
        return;
    }
    uint16_t *h16 = xmalloc((m->n_base ? m->n_base : 1) * sizeof(uint16_t));
    m->be->copy(m->be, h16, m->frozen16, m->n_base * sizeof(uint16_t), COPY_D2H);
    for (size_t i = 0; i < m->n_base; i++) host[i] = bf16_to_f32(h16[i]);
    free(h16);
    if (m->frozen_a) m->be->copy(m->be, host + m->n_base, m->frozen_a, (m->n_frozen - m->n_base) * sizeof(float), COPY_D2H);
}
