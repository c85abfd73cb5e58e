// The model, written as the block diagram of DESIGN.md §1:
//   x1 = x  + Dropout(Proj(Attn(LN1(x))))
//   x2 = x1 + Dropout(FC2(GeLU(FC1(LN2(x1)))))
// Every tensor the backward reads is kept under its ledger name (model/saved.h) or recomputed as
// the layer's policy says; nothing else is held between forward and backward.
#include "model/gpt.h"
#include <omp.h>
#include <string.h>
#include "model/base16.h"
#include "model/block.h"
#include "model/family.h"
#include "model/linear.h"
#include "model/lora_site.h"
#include "model/mini_mlp.h"
#include "model/memo.h"
#include "model/offload_sched.h"
#include "model/params.h"
#include "model/qk_norm.h"
#include "model/remat.h"
#include "model/reversible.h"
#include "model/saved.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/gelu_fewbit.h"
#include "backend/cpu/flash_attention.h"
#include "backend/cpu/rope.h"
#include "memory/reversible_model.h"
#include "model/tp_regions.h"
#include "model/workspace.h"
#include "parallel/comm_device.h"
#include "util/common.h"

void gpt_init(GPT *m, const GPTConfig *cfg, const MemoryPolicy *policy) { gpt_init_tp(m, cfg, policy, NULL); }

// This rank's widths under the layout (all of the model when t = 1).
static void set_layout(GPT *m, const GPTConfig *c, const TPLayout *tp) {
    TPLayout one = {1, 0, 0, NULL};
    m->tp = tp && tp->t > 1 ? *tp : one;
    int t = m->tp.t;
    m->ql = gpt_q_width(c) / t;
    m->al = c->heads / t;
    m->kvh = c->kv_heads / t;
    m->kvl = gpt_kv_width(c) / t;
    m->fl = c->ffn / t;
    m->vl = (c->vocab + t - 1) / t;
    m->head0 = m->tp.rank * m->al;
    m->v0 = m->tp.rank * m->vl;
}

// The parameter buffers' sizes: the base and the adapters. Without LoRA params holds the base; with
// it the frozen buffer holds the base (and A under LoRA-FA) and params the adapters that train.
static void size_params(GPT *m) {
    m->n_params = local_num_params(m);
    if (!gpt_lora(m)) return;
    m->lora_scale = gpt_lora_scale(&m->cfg);
    size_t a = adapter_a_floats(m), b = adapter_b_floats(m);
    m->n_base = m->n_params;
    m->n_frozen = m->n_params + (m->cfg.lora_fa ? a : 0);
    m->n_params = b + (m->cfg.lora_fa ? 0 : a);
}

// Views into the buffers (and grads, NULL for parameters only), once they are allocated.
static void bind_params(GPT *m) {
    bind_tensors(m, &m->w, m->frozen ? m->frozen : m->params);
    if (m->grads && !m->frozen) bind_tensors(m, &m->g, m->grads);   // a frozen base has no gradients
    if (gpt_lora(m)) {
        size_t base = local_num_params(m);
        int fa = m->cfg.lora_fa;
        float *frozen_a = m->frozen_a ? m->frozen_a : m->frozen + base;   // --base-dtype bf16: A's own buffer
        adapter_bind(m, &m->lw, fa ? frozen_a : m->params, fa ? m->params : m->params + adapter_a_floats(m));
        if (m->grads) adapter_bind(m, &m->lg, fa ? NULL : m->grads, fa ? m->grads : m->grads + adapter_a_floats(m));
    }
    build_info(m);
}

void gpt_init_params(GPT *m, const GPTConfig *cfg) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    gpt_config_resolve(&m->cfg);
    set_layout(m, &m->cfg, NULL);
    m->pp = (PPLayout){1, 0, 1, cfg->layers, 1, 0, NULL};
    size_params(m);
    m->params = xcalloc((m->n_params ? m->n_params : 1) * sizeof(float));
    if (gpt_lora(m)) m->frozen = xcalloc(m->n_frozen * sizeof(float));
    bind_params(m);
}

void gpt_init_tp(GPT *m, const GPTConfig *cfg, const MemoryPolicy *policy, const TPLayout *tp) {
    gpt_init_pp(m, cfg, policy, tp, NULL);
}

// Bytes one context's arena needs: the one-process step's peak, or on a pipeline stage the largest
// backward peak of its chunks (memory_model.h's act_chunk_bytes), and each entry's alignment.
static size_t context_capacity(const GPT *m, const MemoryPolicy *pol) {
    size_t peak = 0, stored, bwd;
    if (m->pp.p <= 1) {
        peak = act_peak_bytes(&m->shape, pol);
    } else {
        for (int v = 0; v < m->pp.V; v++) {
            int l0 = (v * m->pp.p + m->pp.rank) * m->pp.n;
            act_chunk_bytes(&m->shape, pol, l0, l0 + m->pp.n, &stored, &bwd);
            if (bwd > peak) peak = bwd;
        }
    }
    return peak + (size_t)(act_max_entries(pol) + rev_arena_entries(&m->shape)) * 64;
}

// W_X16's columns: the widest GEMM input rounded once for its GEMMs (the norms' outputs, h; the attention output,
// a·d/t), and with an adapter on q, k or v where the GEMMs take a bf16 dy (grad_shared16: linear_backward16) the
// widest gradient of them so (dq, dk and dv at once).
static size_t x16_cols(const GPT *m) {
    size_t cols = (size_t)(m->ql > m->cfg.hidden ? m->ql : m->cfg.hidden), dqkv = (size_t)m->ql + 2 * (size_t)m->kvl;
    int qkv_adapter = 0;
    for (int i = 0; i < LORA_QKV_SITE_COUNT; i++) qkv_adapter |= lora_on(m, lora_qkv_site(i));
    return qkv_adapter && m->be->linear_backward16 && dqkv > cols ? dqkv : cols;
}

// --lora-dropout's workspace: W_LORA (floats) and W_LORA_MASK (bytes) hold one site's [rows, in] input at a
// time, so they are as large as the largest any site this rank adapts reads (a buffer no targeted site reads
// is not kept: a q,v run needs n·h, a down-only one n·f/t). In-widths on a TP rank are model/adapters.c's:
// a column-parallel site (q, k, v, gate, up; GPT-2's qkv, fc) reads the whole x, h; a row-parallel one its
// columns, o/proj h/t and down/fc2 f/t. Rows are n but for the FFN-width site under mini-seq, which reads one
// chunk's (mini_rows, 0 without it; the column sites read all n rows in their forward).
static size_t lora_dropout_elems(const GPT *m, size_t n, size_t mini_rows) {
    if (!gpt_lora(m) || !(m->cfg.lora_dropout > 0.0f)) return 0;
    size_t most = 0;
    for (int s = 0; s < LORA_SITES; s++) {
        if (!lora_on(m, (LoraSite)s)) continue;
        LoraWidth in = lora_site((LoraSite)s)->in;
        size_t rows = in == LW_F && mini_rows ? mini_rows : n;
        size_t elems = rows * (size_t)lora_width(in, m->cfg.hidden, m->ql, m->kvl, m->fl);
        if (elems > most) most = elems;
    }
    return most;
}

void gpt_init_pp(GPT *m, const GPTConfig *cfg, const MemoryPolicy *policy, const TPLayout *tp, const PPLayout *pp) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    gpt_config_resolve(&m->cfg);
    const GPTConfig *c = &m->cfg;
    set_layout(m, c, tp);
    PPLayout one = {1, 0, 1, c->layers, 1, 0, NULL};
    m->pp = pp ? *pp : one;
    if (m->pp.contexts < 1) m->pp.contexts = 1;
    if (policy && policy->layers != c->layers)
        ctron_fatal("gpt_init: a policy of %d layers for a model of %d", policy->layers, c->layers);
    if (policy) policy_copy(&m->policy, policy);
    else policy_default(&m->policy, c->layers);
    m->policy.tempo |= gpt_keep_bits(c);   // what the frozen base and the adapters keep
    if (m->policy.tempo & GELU_FEWBIT) fewbit_gelu_table(m->policy.gelu_bits);   // computed once, here
    remat_check(&m->policy);
    char err[256];
    m->be = backend_open(m->policy.device ? m->policy.device : "cpu", (Precision)m->policy.precision, err, sizeof err);
    if (!m->be) ctron_fatal("%s", err);
    size_params(m);
    m->params = m->be->alloc(m->be, m->n_params * sizeof(float));
    m->grads = m->be->alloc(m->be, m->n_params * sizeof(float));
    if (m->policy.precision == PRECISION_BF16) m->params16 = m->be->alloc(m->be, m->n_params * sizeof(uint16_t));
    if (gpt_lora(m) && c->base_bf16) {
        base16_alloc(m);
    } else {
        if (gpt_lora(m)) m->frozen = m->be->alloc(m->be, m->n_frozen * sizeof(float));
        if (gpt_lora(m) && m->params16) m->frozen16 = m->be->alloc(m->be, m->n_frozen * sizeof(uint16_t));
    }
    m->params16_stale = 1;
    bind_params(m);
    if (m->base16) base16_stage_alloc(m);

    ActShape sh = {.s = c->seq, .b = c->batch, .h = c->hidden, .a = c->heads, .L = c->layers, .v = c->vocab,
                   .elem_bytes = m->policy.act_dtype == ACT_BF16 ? 2 : 4, .masks = m->policy.masks,
                   .dropout = c->dropout > 0.0f, .t = m->tp.t, .sp = m->tp.sp,
                   .gelu_bits = m->policy.tempo & GELU_FEWBIT ? m->policy.gelu_bits : 0,
                   .mini_seq = m->policy.mini_seq > 1 ? m->policy.mini_seq : 0};
    gpt_shape_family(c, &sh);
    m->shape = sh;
    if (c->reversible && m->pp.p > 1) ctron_fatal("gpt_init: reversible blocks on a pipeline of %d stages", m->pp.p);
    // Each context's arena holds exactly what the analytic model predicts at its peak, plus alignment
    // of each entry.
    if (m->pp.keep_all > 0) policy_keep_everything(&m->policy_all, &m->policy);
    ledger_init_slots(&m->ledger, c->layers, m->pp.contexts);
    m->acts = xcalloc(sizeof(ActContext) * (size_t)m->pp.contexts);
    for (int k = 0; k < m->pp.contexts; k++) {
        ActContext *a = &m->acts[k];
        a->keep_all = k < m->pp.keep_all;
        const MemoryPolicy *pol = a->keep_all ? &m->policy_all : &m->policy;
        size_t capacity = context_capacity(m, pol);
        if (policy && policy->arena_budget && m->pp.p <= 1) {   // a hard limit: exceeding it is a bug, the arena aborts
            if (capacity > policy->arena_budget)
                ctron_fatal("the policy needs %zu bytes of activations, more than the --mem-budget of %zu", capacity,
                            policy->arena_budget);
            capacity = policy->arena_budget;
        }
        arena_init(&a->arena, m->be, capacity, act_max_entries(pol) + rev_arena_entries(&m->shape), &m->ledger);
        a->arena.slot = k;
        a->arena.mem = &m->mem;   // --static-plan records and then places the saved tensors
        a->blocks = xcalloc(sizeof(BlockActs) * (size_t)c->layers);
    }
    m->act = &m->acts[0];
    offload_init(m);
    memo_init(m);

    size_t n = (size_t)c->seq * c->batch, nh = n * c->hidden, nql = n * m->ql;
    int mini = m->policy.mini_seq > 1, sp = m->tp.t > 1 && m->tp.sp;
    size_t mini_rows = mini ? (n + (size_t)m->policy.mini_seq - 1) / (size_t)m->policy.mini_seq : 0;
    // Attention scratch: the backward's (dP; with Tempo's softmax P too), the selective recompute's
    // (P, D, dP and the mask), or flash's tiles only. The backend sizes each for its own kernels.
    int any_selective = 0, any_stored = 0;
    for (int l = 0; l < c->layers; l++) {
        LayerRecompute k = m->policy.kind[l];   // a memo layer's backward recomputes its core as selective's does
        any_selective |= k == RECOMPUTE_SELECTIVE || k == RECOMPUTE_MEMO;
        any_stored |= k != RECOMPUTE_SELECTIVE && k != RECOMPUTE_MEMO;
    }
    AttnScratchKind stored = (m->policy.tempo & TEMPO_SOFTMAX) ? ATTN_SCRATCH_BACKWARD_TEMPO : ATTN_SCRATCH_BACKWARD;
    size_t scratch = 0;
    if (m->policy.tempo & ATTN_FLASH) {
        scratch = m->be->attention_scratch_floats(m->be, ATTN_SCRATCH_FLASH, c->seq, c->batch, m->al, m->kvh, m->ql);
    } else {
        size_t st = any_stored ? m->be->attention_scratch_floats(m->be, stored, c->seq, c->batch, m->al, m->kvh, m->ql) : 0;
        size_t re = any_selective
                        ? m->be->attention_scratch_floats(m->be, ATTN_SCRATCH_RECOMPUTE, c->seq, c->batch, m->al, m->kvh, m->ql)
                        : 0;
        scratch = st > re ? st : re;
    }
    if (m->memo) {   // MEMO's layers run flash's forward over their token ranges
        size_t fl = m->be->attention_scratch_floats(m->be, ATTN_SCRATCH_FLASH, c->seq, c->batch, m->al, m->kvh, m->ql);
        if (fl > scratch) scratch = fl;
    }
    int gemm16 = m->policy.precision == PRECISION_BF16 || c->base_bf16;   // some GEMMs read bf16 inputs
    size_t floats[W_COUNT] = {
        // SP's gathered inputs and gradients (without SP the region edges need no buffer)
        [W_OUT] = nh, [W_GATHER] = sp ? nh : 0, [W_GATHER2] = sp && mini ? nh : 0, [W_D_RES] = nh, [W_D_TMP] = nh,
        [W_D_Q] = nql, [W_D_K] = n * (size_t)m->kvl, [W_D_V] = n * (size_t)m->kvl,
        // the MLP's [s,b,ffn/t] gradient, which the [s,b,ql] attention-context gradient shares (with
        // mini-seq it holds only that one)
        [W_D_4H] = n * (size_t)(mini || m->ql > m->fl ? m->ql : m->fl), [W_ATTN_SCRATCH] = scratch,
        [W_MINI_A] = mini_rows * (size_t)m->fl, [W_MINI_B] = mini_rows * (size_t)m->fl,
        [W_MINI_C] = mini_rows * (size_t)m->fl, [W_MINI_LOGITS] = mini_rows * (size_t)m->vl,
        [W_FFN] = swiglu(m) && !mini ? n * (size_t)m->fl : 0, [W_D_UP] = swiglu(m) && !mini ? n * (size_t)m->fl : 0,
        [W_MINI_D] = swiglu(m) ? mini_rows * (size_t)m->fl : 0, [W_D_RES2] = c->reversible ? nh : 0,
        [W_LORA] = lora_dropout_elems(m, n, mini_rows), [W_LORA_R] = gpt_lora(m) ? n * (size_t)c->lora_rank : 0,
        [W_LORA_MASK] = (lora_dropout_elems(m, n, mini_rows) + 3) / 4,
        [W_X16] = gemm16 ? (n * x16_cols(m) + 1) / 2 : 0};
    m->workspace_bytes = 0;
    for (int w = 0; w < W_COUNT; w++) {
        m->ws_bytes[w] = floats[w] * sizeof(float);
        m->ws[w] = floats[w] ? m->be->alloc(m->be, m->ws_bytes[w]) : NULL;
        m->workspace_bytes += m->ws_bytes[w];
    }
    m->row_loss = m->be->alloc(m->be, n * sizeof(float));
    m->ce_lse = m->be->alloc(m->be, n * sizeof(float));
    m->ce_part = m->be->alloc(m->be, n * 3 * (size_t)m->tp.t * sizeof(float));
    for (int k = 0; k < m->pp.contexts; k++) {
        m->acts[k].tokens = m->be->alloc(m->be, n * sizeof(int32_t));
        m->acts[k].targets = m->be->alloc(m->be, n * sizeof(int32_t));
    }
    if (arch_spec((ArchKind)c->arch)->pos == POS_ROPE) {   // the table, built on the host, copied once
        int d = gpt_rotary_dim(c);   // its rows: the rotated dims (the head's, or partial rotary's)
        size_t floats = rope_table_floats(c->seq, d);
        float *host = xmalloc(floats * sizeof(float));
        rope_table(host, c->seq, d, c->rope_theta, &c->rope_scaling);
        m->rope_cs = m->be->alloc(m->be, floats * sizeof(float));
        m->be->copy(m->be, m->rope_cs, host, floats * sizeof(float), COPY_H2D);
        free(host);
        m->workspace_bytes += floats * sizeof(float);
    }
    m->io_bytes = (size_t)m->pp.contexts * 2 * n * sizeof(int32_t);
    m->workspace_bytes += (2 * n + 3 * n * (size_t)m->tp.t) * sizeof(float);   // the cross-entropy rows
    if (m->base16) m->workspace_bytes += base16_stage_bytes(m);   // --base-dtype bf16: the widened vectors
    stepmem_init(&m->mem, c->layers + SCOPE_KEYS, mem_tag_name);
}

void gpt_free(GPT *m) {
    offload_free(m);
    memo_free(m);
    for (int k = 0; m->acts && k < m->pp.contexts; k++) {   // the arenas, the offload pool and the static plan's
        arena_free(&m->acts[k].arena);                       // block go back to the backend before it closes
        free(m->acts[k].blocks);
        if (m->be) {
            m->be->free(m->be, m->acts[k].tokens);
            m->be->free(m->be, m->acts[k].targets);
        }
    }
    free(m->acts);
    stepmem_free(&m->mem);
    ledger_free(&m->ledger);
    policy_free(&m->policy);
    if (m->policy_all.kind) policy_free(&m->policy_all);
    work_free(m);
    if (m->be) {   // a model of gpt_init_tp; gpt_init_params' has host parameters only
        m->be->free(m->be, m->params);
        m->be->free(m->be, m->grads);
        m->be->free(m->be, m->params16);
        if (m->base16) base16_free(m);
        else m->be->free(m->be, m->frozen);
        m->be->free(m->be, m->frozen16);
        for (int w = 0; w < W_COUNT; w++) m->be->free(m->be, m->ws[w]);
        m->be->free(m->be, m->ce_part);
        m->be->free(m->be, m->rope_cs);
        m->be->free(m->be, m->ce_lse);
        m->be->free(m->be, m->row_loss);
        backend_close(m->be);
    } else {
        free(m->params);
        free(m->frozen);
    }
    free(m->info);
    free(m->frozen_info);
    memset(m, 0, sizeof *m);
}

// The recompute plan of the context in use: the policy, or nothing recomputed for a keep-all context.
static const MemoryPolicy *plan_of(const GPT *m) { return m->act->keep_all ? &m->policy_all : &m->policy; }

void gpt_use_context(GPT *m, int k) {
    if (k < 0 || k >= m->pp.contexts) ctron_fatal("gpt_use_context: context %d of %d", k, m->pp.contexts);
    m->act = &m->acts[k];
}

// W's bf16 copy under mixed precision (the mirror has the parameters' layout), else NULL. Under
// --base-dtype bf16 the base's tensors are their bf16 storage at any precision.
const uint16_t *gpt_w16(const GPT *m, const float *w) {
    if (gpt_base_key(m, w)) return m->frozen16 + (w - m->frozen);
    if (m->frozen_a && w >= m->frozen_a && w < m->frozen_a + (m->n_frozen - m->n_base))
        return m->params16 ? m->frozen16 + m->n_base + (w - m->frozen_a) : NULL;
    if (!m->params16) return NULL;
    if (m->frozen16 && !(w >= m->params && w < m->params + m->n_params)) return m->frozen16 + (w - m->frozen);
    return m->params16 + (w - m->params);
}

// Does this pass keep `name` of layer l, and where (saved.h's KEEP_*)? A recompute pass keeps what a
// none layer would, in the arena (its backward follows at once); the forward offloads what --offload names.
static int keeps(const GPT *m, int l, ActName name, int pass) {
    if (!m->act->ctx.train) return KEEP_NO;
    if (pass == PASS_FORWARD && m->cfg.reversible && !m->policy.rev_store) return KEEP_NO;   // inverted in backward
    if (pass != PASS_FORWARD) return act_kept_rebuilt(&m->shape, m->policy.tempo, l, name) ? KEEP_ARENA : KEEP_NO;
    if (!act_kept_layer(&m->shape, plan_of(m), l, name)) return KEEP_NO;   // layer 0 without an input gradient too
    return act_offloaded(&m->policy, name) ? KEEP_OFFLOAD : KEEP_ARENA;
}

static DropoutSite site_of(const GPT *m, int layer, int site) {
    DropoutSite d = {philox_key_from_seed(m->act->ctx.seed), m->act->ctx.step, (uint32_t)layer, (uint32_t)site,
                     m->act->ctx.train ? m->cfg.dropout : 0.0f};
    return d;
}

// softmax(q kᵀ/√d) → dropout → · v into ctx, over this rank's heads: the part selective recompute
// redoes (in its backward).
static void attention_core(GPT *m, int l, const float *q, const float *k, const float *v, float *ctx, int pass) {
    BlockActs *A = &m->act->blocks[l];
    int s = m->s_cur, b = m->b_cur, bf16 = m->policy.act_dtype == ACT_BF16, window = gpt_layer_window(&m->cfg, l);
    size_t as2b = (size_t)m->al * s * s * b;
    DropoutSite site = site_of(m, l, SITE_ATTN);
    if (m->policy.tempo & ATTN_FLASH) {   // tiles with an online softmax: only the log-sum-exp is kept
        size_t asb = (size_t)m->al * s * b;
        int kl = keeps(m, l, ACT_ATTN_LSE, pass);
        float *lse = saved_out(m, A, ACT_ATTN_LSE, l, asb, kl);
        // The copies q, k and v were just kept in, where the backend's flash multiplies bf16 (backend.h)
        FlashIn16 in = {saved_bf16(m, A, ACT_Q, keeps(m, l, ACT_Q, pass)),
                        saved_bf16(m, A, ACT_K, keeps(m, l, ACT_K, pass)),
                        saved_bf16(m, A, ACT_V, keeps(m, l, ACT_V, pass)), NULL};
        if (m->be->flash_attention_forward16 && (in.q || in.k || in.v))
            m->be->flash_attention_forward16(m->be, ctx, lse, &in, q, k, v, ws(m, W_ATTN_SCRATCH), s, 0, s, b, m->al,
                                             m->kvh, m->ql, window, m->head0, site, m->act->ctx.sample0);
        else
            m->be->flash_attention_forward(m->be, ctx, lse, q, k, v, ws(m, W_ATTN_SCRATCH), s, b, m->al, m->kvh, m->ql,
                                           window, m->head0, site, m->act->ctx.sample0);
        saved_done(m, A, ACT_ATTN_LSE, l, lse, asb, kl, 1);
        return;
    }
    int drop = site.p > 0.0f;
    int kp = keeps(m, l, ACT_ATTN_PROB, pass), km = keeps(m, l, ACT_ATTN_MASK, pass), kd = keeps(m, l, ACT_ATTN_DROP, pass);
    float *prob = saved_out(m, A, ACT_ATTN_PROB, l, as2b, kp);
    uint8_t *mask = drop ? mask_out(m, A, ACT_ATTN_MASK, l, as2b, km) : NULL;
    float *dropped = drop ? saved_out(m, A, ACT_ATTN_DROP, l, as2b, kd) : NULL;
    m->be->attention_forward(m->be, ctx, prob, mask, dropped, q, k, v, s, b, m->al, m->kvh, m->ql, window, m->head0,
                             site, m->act->ctx.sample0, bf16);
    saved_done(m, A, ACT_ATTN_PROB, l, prob, as2b, kp, 1);
    if (drop) {
        mask_done(m, A, ACT_ATTN_MASK, l, mask, as2b, km);
        saved_done(m, A, ACT_ATTN_DROP, l, dropped, as2b, kd, 1);
    }
}

// What each layer keeps, in the arena and in the offload pool, at the end of a training forward.
static void snapshot_forward_end(GPT *m) {
    ledger_snapshot_forward_end(&m->ledger);
    if (m->off.pool && m->act->ctx.train) ledger_snapshot_forward_end(&m->off.ledger);
}

// The buffer an SP region edge gathers or reduce-scatters into (none without SP: the edge is the
// identity or an in-place all-reduce).
static float *sp_buf(GPT *m, WorkName w) { return m->tp.t > 1 && m->tp.sp ? ws(m, w) : NULL; }

// Rows of the residual stream on this rank (s/t positions under SP) times the hidden size.
static size_t rank_rows_h(const GPT *m) { return (size_t)m->s_rank * m->b_cur * m->cfg.hidden; }

// Allocates block l's input (ln1_in of l) where block l−1 or the embedding writes it.
static float *input_of(GPT *m, int l, int pass) {
    m->act->blocks[l].mark = arena_mark(&m->act->arena);
    return saved_out(m, &m->act->blocks[l], ACT_LN1_IN, l, rank_rows_h(m), keeps(m, l, ACT_LN1_IN, pass));
}

// Where block l's output goes, allocated after the block's own tensors (the arena is a stack):
// the next block's ln1_in or the final LN's input (a recomputed group's last block has none).
static float *output_of(GPT *m, int l, int pass, int where) {
    if (where == OUT_NEXT_BLOCK) return input_of(m, l + 1, pass);
    if (where == OUT_CHUNK) return m->chunk_out;
    m->act->mark_head = arena_mark(&m->act->arena);
    return saved_out(m, &m->act->model_acts, ACT_LNF_IN, -1, rank_rows_h(m), m->act->ctx.train);
}

float *gpt_head_input(GPT *m) { return output_of(m, m->cfg.layers - 1, PASS_FORWARD, OUT_HEAD); }
float *block_output_of(GPT *m, int l, int pass, int where) { return output_of(m, l, pass, where); }

static void output_done(GPT *m, int l, int pass, int where, float *out) {
    size_t nh = rank_rows_h(m);
    if (where == OUT_NEXT_BLOCK) saved_done(m, &m->act->blocks[l + 1], ACT_LN1_IN, l + 1, out, nh, keeps(m, l + 1, ACT_LN1_IN, pass), 0);
    else if (where == OUT_HEAD) saved_done(m, &m->act->model_acts, ACT_LNF_IN, -1, out, nh, m->act->ctx.train, 0);
}

void gpt_head_input_done(GPT *m, float *x) { output_done(m, m->cfg.layers - 1, PASS_FORWARD, OUT_HEAD, x); }
void block_output_done(GPT *m, int l, int pass, int where, float *out) { output_done(m, l, pass, where, out); }

// A copy of src as the input of a half's norm (ln1_in or ln2_in of layer l), kept as the pass says and
// rounded like any kept tensor (the copy, not src: a reversible stream stays fp32).
float *block_half_input(GPT *m, int l, ActName name, const float *src, int pass) {
    size_t nrh = rank_rows_h(m);
    int keep = keeps(m, l, name, pass);
    float *x = saved_out(m, &m->act->blocks[l], name, l, nrh, keep);
    m->be->copy(m->be, x, src, nrh * sizeof(float), COPY_D2D);
    saved_done(m, &m->act->blocks[l], name, l, x, nrh, keep, 0);
    return x;
}

// The residual dropout mask of a site over this rank's rows (global positions: layout-invariant).
static uint8_t *residual_mask(GPT *m, BlockActs *A, ActName name, int l, int site, int keep) {
    size_t nh = rank_rows_h(m);
    uint8_t *mask = mask_out(m, A, name, l, nh, keep);
    m->be->dropout_mask_sbw(m->be, mask, site_of(m, l, site), m->s0, m->s_rank, m->b_cur, m->cfg.hidden, m->act->ctx.sample0);
    mask_done(m, A, name, l, mask, nh, keep);
    return mask;
}

// out = res + Dropout(y + bias) on the rank's rows; PASS_INVERT undoes it, out = res − Dropout(y + bias),
// the branch computed with the same arithmetic (reversible blocks, model/reversible.c).
static void residual_forward(GPT *m, float *out, const float *res, const float *y, const float *bias,
                             const uint8_t *keep, float p, int pass) {
    int nr = m->s_rank * m->b_cur, h = m->cfg.hidden;
    if (pass == PASS_INVERT) m->be->dropout_residual_inverse(m->be, out, res, y, bias, keep, p, nr, h);
    else m->be->dropout_residual_forward(m->be, out, res, y, bias, keep, p, nr, h);
}

// y = Norm(x) on nr rows with the family's norm: LayerNorm (stats: mean, 1/std) or RMSNorm (1/rms).
static void norm_forward(GPT *m, float *y, float *stats, const float *x, const float *w, const float *b, int nr) {
    family_norm_forward(m->be, m, y, stats, x, w, b, nr);
}

// Whether a GEMM input kept in bf16 goes on as its arena copy alone: its readers, the block's GEMMs and their
// adapters, take the copy as it is (backend.h's linear_backward16: the CUDA backend at bf16), unless LoRA's
// dropout drops the adapters' fp32 input. Then the fp32 values are left unrounded: nothing reads them.
static int gemm_input_copy_only(const GPT *m) { return m->be->linear_backward16 && m->cfg.lora_dropout <= 0.0f; }

// A GEMM input that several GEMMs read (w: the first's weight) in bf16, as they read it: x16, the arena's copy, when
// it keeps one; else x rounded once into W_X16 (the backend would round it again for each GEMM); NULL when the
// GEMMs run in fp32.
static const uint16_t *gemm_input_shared16(GPT *m, const float *x, const uint16_t *x16, size_t count, const float *w) {
    if (x16 || !gpt_w16(m, w)) return x16;
    uint16_t *p = (uint16_t *)ws(m, W_X16);
    m->be->bf16_pack(m->be, p, x, count);
    return p;
}

// A gradient dy [count] that a base GEMM and its adapter's GEMMs read, rounded once into W_X16 from element `at` on
// and handed to them all as bf16 (backend.h's linear_backward16), where each would round it again: only with an
// adapter on the site (else one reader), no base bias gradient (linear_backward16 makes none) and bf16 GEMMs. Else
// NULL, and W_X16 is not asked for (the static plan records each buffer a step asks for).
static const uint16_t *grad_shared16(GPT *m, size_t at, const float *dy, size_t count, int adapter,
                                     const float *bias_grad) {
    if (!adapter || bias_grad || !m->be->linear_backward16) return NULL;
    uint16_t *dst = (uint16_t *)ws(m, W_X16) + at;
    m->be->bf16_pack(m->be, dst, dy, count);
    return dst;
}

// LN on the rank's rows into the kept input of a column-parallel linear (`out`, with its statistics),
// then g: the whole input for the linear (SP all-gathers the rows; otherwise it is the kept tensor).
// x16: the whole input in bf16 for the GEMMs that read it (gemm_input_shared16; w: the first one's weight), else NULL.
static const float *norm_and_gather(GPT *m, int l, ActName stats_name, ActName out_name, const float *x,
                                    const float *gamma, const float *beta, int pass, const float *w,
                                    const uint16_t **x16) {
    BlockActs *A = &m->act->blocks[l];
    int h = m->cfg.hidden, nr = m->s_rank * m->b_cur;
    size_t nrh = (size_t)nr * h;
    int keep_out = keeps(m, l, out_name, pass);
    float *stats = saved_out(m, A, stats_name, l, norm_stats(m) * (size_t)nr, keeps(m, l, stats_name, pass));
    float *out = saved_out(m, A, out_name, l, nrh, keep_out);
    norm_forward(m, out, stats, x, gamma, beta, nr);
    if (gemm_input_copy_only(m) && (m->tp.t <= 1 || !m->tp.sp) && (out_name != ACT_FC1_IN || m->policy.mini_seq <= 1))
        saved_done_copy_only(m, A, out_name, l, out, nrh, keep_out);   // no gathered or chunked fp32 rows either
    else saved_done(m, A, out_name, l, out, nrh, keep_out, 0);
    const float *all = tp_gather_rows(m, out, sp_buf(m, W_GATHER), h, TPC_BLOCK);
    *x16 = gemm_input_shared16(m, all, all == out ? saved_bf16(m, A, out_name, keep_out) : NULL,
                               (size_t)m->s_cur * m->b_cur * h, w);
    return all;
}

#define KEEP(name) keeps(m, l, name, pass)

// q, k, v += their adapters' (α/r)·B(A x), before RoPE (peft adapts the projections).
static void qkv_adapters_forward(GPT *m, int l, const float *x, const uint16_t *x16, int pass, float *q, float *k,
                                 float *v) {
    for (int i = 0; i < LORA_QKV_SITE_COUNT; i++) {
        LoraSite s = lora_qkv_site(i);
        if (!lora_on(m, s)) continue;
        LoraOut o = lora_qkv_outs(m, s, q, k, v);
        lora_column_forward(m, l, s, x, x16, m->cfg.hidden, &o, KEEP(lora_act(s)));
    }
}

// One column-parallel site with one output block y [n, cols].
static void column_adapter_forward(GPT *m, int l, LoraSite s, const float *x, const uint16_t *x16, float *y, int cols,
                                   int pass) {
    if (!lora_on(m, s)) return;
    LoraOut o = {1, {y}, {cols}, {cols}, {0}, {NULL}};
    lora_column_forward(m, l, s, x, x16, m->cfg.hidden, &o, KEEP(lora_act(s)));
}

// Qwen3: q = RoPE(Norm_q(q_in)), k likewise, per head, after q_in and k_in are stored (the norms read the stored
// values, as their backward and a recompute do); the 1/rms as the policy keeps them (QK_NORM_REBUILD: not).
static void qk_norm_forward(GPT *m, int l, const BlockTensors *w, int pass, float *q_in, float *k_in, float *q, float *k) {
    BlockActs *A = &m->act->blocks[l];
    int n = m->s_cur * m->b_cur;
    size_t nql = (size_t)n * m->ql, nkv = (size_t)n * m->kvl, nqh = (size_t)n * m->al, nkh = (size_t)n * m->kvh;
    saved_done(m, A, ACT_Q_NORM_IN, l, q_in, nql, KEEP(ACT_Q_NORM_IN), 0);
    saved_done(m, A, ACT_K_NORM_IN, l, k_in, nkv, KEEP(ACT_K_NORM_IN), 0);
    float *qs = saved_out(m, A, ACT_Q_NORM_STATS, l, nqh, KEEP(ACT_Q_NORM_STATS));
    float *ks = saved_out(m, A, ACT_K_NORM_STATS, l, nkh, KEEP(ACT_K_NORM_STATS));
    qk_rows(m, w, q, k, qs, ks, q_in, k_in, 0, m->s_cur);
    saved_done(m, A, ACT_Q_NORM_STATS, l, qs, nqh, KEEP(ACT_Q_NORM_STATS), 1);
    saved_done(m, A, ACT_K_NORM_STATS, l, ks, nkh, KEEP(ACT_K_NORM_STATS), 1);
}

// q, k and v of this rank's heads from the gathered norm output ([s,b,ql], [s,b,kvl] ×2), kept as the
// policy says. With rotary positions q and k are rotated before they are kept: attention and its
// backward read the rotated ones, and RoPE's backward needs nothing saved. With per-head q/k norms (Qwen3)
// the projections write the norms' inputs, and q and k are the norms' outputs.
static void qkv_forward(GPT *m, int l, const BlockTensors *w, const float *x_all, const uint16_t *x16, int pass,
                        float **q, float **k, float **v) {
    BlockActs *A = &m->act->blocks[l];
    int h = m->cfg.hidden, ql = m->ql, kvl = m->kvl, n = m->s_cur * m->b_cur;
    size_t nql = (size_t)n * ql, nkv = (size_t)n * kvl;
    const float *wq = w->qkv_w, *wk = wq + (size_t)ql * h, *wv = wk + (size_t)kvl * h;
    const float *bq = w->qkv_b, *bk = bq ? bq + ql : NULL, *bv = bq ? bk + kvl : NULL;
    *q = saved_out(m, A, ACT_Q, l, nql, KEEP(ACT_Q));
    *k = saved_out(m, A, ACT_K, l, nkv, KEEP(ACT_K));
    *v = saved_out(m, A, ACT_V, l, nkv, KEEP(ACT_V));
    float *q_in = *q, *k_in = *k;   // where the projections go
    if (m->cfg.qk_norm) {
        q_in = saved_out(m, A, ACT_Q_NORM_IN, l, nql, KEEP(ACT_Q_NORM_IN));
        k_in = saved_out(m, A, ACT_K_NORM_IN, l, nkv, KEEP(ACT_K_NORM_IN));
    }
    linear_fwd16(m, q_in, ql, x_all, x16, h, wq, bq, n, h, ql);
    linear_fwd16(m, k_in, kvl, x_all, x16, h, wk, bk, n, h, kvl);
    linear_fwd16(m, *v, kvl, x_all, x16, h, wv, bv, n, h, kvl);
    qkv_adapters_forward(m, l, x_all, x16, pass, q_in, k_in, *v);
    // every row at its global position (after SP's gather)
    if (m->cfg.qk_norm) qk_norm_forward(m, l, w, pass, q_in, k_in, *q, *k);
    else qk_rows(m, w, *q, *k, NULL, NULL, *q, *k, 0, m->s_cur);
    if ((m->policy.tempo & ATTN_FLASH) && m->be->flash_attention_forward16) {   // flash reads the copies
        saved_done_copy_only(m, A, ACT_Q, l, *q, nql, KEEP(ACT_Q));
        saved_done_copy_only(m, A, ACT_K, l, *k, nkv, KEEP(ACT_K));
        saved_done_copy_only(m, A, ACT_V, l, *v, nkv, KEEP(ACT_V));
        return;
    }
    saved_done(m, A, ACT_Q, l, *q, nql, KEEP(ACT_Q), 0);
    saved_done(m, A, ACT_K, l, *k, nkv, KEEP(ACT_K), 0);
    saved_done(m, A, ACT_V, l, *v, nkv, KEEP(ACT_V), 0);
}

// GPT-2's MLP up to what its backward reads: gelu_in = FC1(x), fc2_in = GeLU(gelu_in + b) (with Tempo's
// branch bits or Few-Bit's codes instead of gelu_in). Returns fc2_in (NULL with mini-seq: nothing kept; NULL
// too when it exists only as its kept bf16 copy, saved_bf16's).
static const float *mlp_inner_gelu(GPT *m, int l, const BlockTensors *w, const float *x_all, const uint16_t *x16,
                                   int pass) {
    if (m->policy.mini_seq > 1) return NULL;
    BlockActs *A = &m->act->blocks[l];
    int h = m->cfg.hidden, fl = m->fl, n = m->s_cur * m->b_cur, bf16 = m->policy.act_dtype == ACT_BF16;
    size_t nfl = (size_t)n * fl;
    float *gelu_in = saved_out(m, A, ACT_GELU_IN, l, nfl, KEEP(ACT_GELU_IN));
    float *fc2_in = saved_out(m, A, ACT_FC2_IN, l, nfl, KEEP(ACT_FC2_IN));
    linear_fwd16(m, gelu_in, fl, x_all, x16, h, w->fc1_w, NULL, n, h, fl);
    column_adapter_forward(m, l, LORA_FC, x_all, x16, gelu_in, fl, pass);
    if (m->be->bias_gelu_forward16 && saved_as_bf16_copy(m, ACT_GELU_IN, KEEP(ACT_GELU_IN)) &&
        saved_as_bf16_copy(m, ACT_FC2_IN, KEEP(ACT_FC2_IN)) && !KEEP(ACT_GELU_BRANCH) && !KEEP(ACT_GELU_CODE)) {
        // both outputs straight into their kept bf16 copies: their only readers take those (FC2's GEMMs and its
        // adapter, GeLU's backward); NULL: no fp32 fc2_in
        uint16_t *in16 = saved_copy_out(m, A, ACT_GELU_IN, l, nfl), *out16 = saved_copy_out(m, A, ACT_FC2_IN, l, nfl);
        m->be->bias_gelu_forward16(m->be, out16, in16, gelu_in, w->fc1_b, n, fl);
        return NULL;
    }
    m->be->bias_gelu_forward(m->be, fc2_in, gelu_in, w->fc1_b, n, fl, bf16);
    saved_done(m, A, ACT_GELU_IN, l, gelu_in, nfl, KEEP(ACT_GELU_IN), 1);
    saved_done(m, A, ACT_FC2_IN, l, fc2_in, nfl, KEEP(ACT_FC2_IN), 1);
    if (KEEP(ACT_GELU_BRANCH))
        m->be->gelu_branch_pack(m->be, bits_out(m, A, ACT_GELU_BRANCH, l, nfl, KEEP(ACT_GELU_BRANCH)), gelu_in, nfl);
    if (KEEP(ACT_GELU_CODE)) {   // Few-Bit: k bits per GeLU input
        const FewBitGelu *fb = fewbit_gelu_table(m->policy.gelu_bits);
        m->be->fewbit_gelu_encode(m->be, bits_out(m, A, ACT_GELU_CODE, l, nfl * (size_t)fb->k, KEEP(ACT_GELU_CODE)),
                                  gelu_in, nfl, fb);
    }
    return fc2_in;
}

// --lora-dropout on the down projection's adapter: its input (SwiGLU's output) is dropped from the fp32
// values, so SwiGLU writes fp32 rather than bf16 for the GEMMs.
static int down_input_dropped(const GPT *m) { return lora_on(m, LORA_DOWN) && m->cfg.lora_dropout > 0.0f; }

// How SwiGLU's forward meets gate and up kept in bf16 (mlp_inner_swiglu).
enum {
    SWIGLU_FP32,          // the fp32 values, rounded
    SWIGLU_COPIES,        // their arena copies (backend.h's swiglu_forward16)
    SWIGLU_WRITES_COPIES  // the fp32 values, writing the copies as it goes (swiglu_forward_pack16)
};

// Llama's MLP up to what its backward reads: gate = x·W_gateᵀ and up = x·W_upᵀ ([s,b,fl] each), kept.
// Returns how SwiGLU is to read them (SWIGLU_*): from the copies, the fp32 gate and up are left unrounded,
// since nothing reads them; swiglu_runs: SwiGLU's forward comes, so it may write the copies itself.
static int mlp_inner_swiglu(GPT *m, int l, const BlockTensors *w, const float *x_all, const uint16_t *x16, int pass,
                            int swiglu_runs, float **gate, float **up) {
    BlockActs *A = &m->act->blocks[l];
    int h = m->cfg.hidden, fl = m->fl, n = m->s_cur * m->b_cur;
    size_t nfl = (size_t)n * fl;
    *gate = saved_out(m, A, ACT_GATE, l, nfl, KEEP(ACT_GATE));
    *up = saved_out(m, A, ACT_UP, l, nfl, KEEP(ACT_UP));
    linear_fwd16(m, *gate, fl, x_all, x16, h, w->fc1_w, NULL, n, h, fl);
    linear_fwd16(m, *up, fl, x_all, x16, h, w->fc1_w + (size_t)fl * h, NULL, n, h, fl);
    for (int i = 0; i < LORA_GATE_UP_SITE_COUNT; i++) {
        LoraSite s = lora_gate_up_site(i);
        LoraOut o = lora_gate_up_outs(m, s, *gate, *up);
        if (lora_on(m, s)) lora_column_forward(m, l, s, x_all, x16, h, &o, KEEP(lora_act(s)));
    }
    if (m->be->swiglu_forward16 && !down_input_dropped(m) && saved_as_bf16_copy(m, ACT_GATE, KEEP(ACT_GATE)) &&
        saved_as_bf16_copy(m, ACT_UP, KEEP(ACT_UP))) {
        if (swiglu_runs && m->be->swiglu_forward_pack16) {   // the copies' places, in the same arena order
            saved_copy_out(m, A, ACT_GATE, l, nfl);
            saved_copy_out(m, A, ACT_UP, l, nfl);
            return SWIGLU_WRITES_COPIES;
        }
        saved_done_copy_only(m, A, ACT_GATE, l, *gate, nfl, KEEP(ACT_GATE));
        saved_done_copy_only(m, A, ACT_UP, l, *up, nfl, KEEP(ACT_UP));
        return SWIGLU_COPIES;
    }
    saved_done(m, A, ACT_GATE, l, *gate, nfl, KEEP(ACT_GATE), 0);
    saved_done(m, A, ACT_UP, l, *up, nfl, KEEP(ACT_UP), 0);
    return SWIGLU_FP32;
}

// The attention half: out = res + Dropout(Proj(Attn(Norm1(x)))) (the standard block: res = x, out NULL:
// x1, kept as ln2_in, is returned; a reversible block: y1 = x1 + F(x2) into out; PASS_INVERT: out = res − F).
float *attn_half_forward(GPT *m, int l, const float *x, const float *res, float *out, int pass) {
    const GPTConfig *c = &m->cfg;
    int h = c->hidden, ql = m->ql, n = m->s_cur * m->b_cur, nr = m->s_rank * m->b_cur;
    size_t nrh = (size_t)nr * h, nql = (size_t)n * ql;
    BlockActs *A = &m->act->blocks[l];
    BlockTensors w = gpt_block_weights(m, l);
    float p = m->act->ctx.train ? c->dropout : 0.0f;
    int drop = p > 0.0f;

    // x1 = x + Dropout(Proj(Attn(Norm1(x))))     (llama: RoPE on q and k, grouped k and v)
    const uint16_t *qkv16, *x16;
    const float *qkv_all = norm_and_gather(m, l, ACT_LN1_STATS, ACT_QKV_IN, x, w.ln1_w, w.ln1_b, pass, w.qkv_w, &qkv16);
    float *q, *k, *v;
    qkv_forward(m, l, &w, qkv_all, qkv16, pass, &q, &k, &v);
    float *proj_in = saved_out(m, A, ACT_PROJ_IN, l, nql, KEEP(ACT_PROJ_IN));
    attention_core(m, l, q, k, v, proj_in, pass);
    if (gemm_input_copy_only(m)) saved_done_copy_only(m, A, ACT_PROJ_IN, l, proj_in, nql, KEEP(ACT_PROJ_IN));
    else saved_done(m, A, ACT_PROJ_IN, l, proj_in, nql, KEEP(ACT_PROJ_IN), 0);
    LoraSite o_site = swiglu(m) ? LORA_O : LORA_PROJ;
    x16 = saved_bf16(m, A, ACT_PROJ_IN, KEEP(ACT_PROJ_IN));
    if (lora_on(m, o_site)) x16 = gemm_input_shared16(m, proj_in, x16, nql, w.proj_w);   // o's GEMM and its adapter's
    linear_fwd16(m, ws(m, W_OUT), h, proj_in, x16, ql, w.proj_w, NULL, n, ql, h);
    float *attn_out = tp_reduce_rows(m, ws(m, W_OUT), sp_buf(m, W_GATHER), h, TPC_BLOCK);   // ḡ
    if (lora_on(m, o_site)) lora_row_forward(m, l, o_site, proj_in, x16, ql, attn_out, h, KEEP(lora_act(o_site)));
    uint8_t *drop1 = drop ? residual_mask(m, A, ACT_DROP1_MASK, l, SITE_DROP1, KEEP(ACT_DROP1_MASK)) : NULL;
    float *x1 = out ? out : saved_out(m, A, ACT_LN2_IN, l, nrh, KEEP(ACT_LN2_IN));
    residual_forward(m, x1, res, attn_out, w.proj_b, drop1, p, pass);
    if (!out) saved_done(m, A, ACT_LN2_IN, l, x1, nrh, KEEP(ACT_LN2_IN), 0);
    return x1;
}

// Mini-seq's MLP (model/mini_mlp.c) into W_OUT (out 0: only the down adapter's v), with its adapters' v
// kept as the pass says: the column sites' from the whole input first, the down site's chunk by chunk.
// Returns the down adapter's v (NULL pointers without one).
static LoraV mlp_chunks_forward(GPT *m, int l, const BlockTensors *w, const float *x_all, const uint16_t *x16,
                                int pass, int out) {
    BlockActs *A = &m->act->blocks[l];
    MiniAdapters ad = mini_adapters(m);
    LoraOut v_only = {0};
    for (int i = 0; i < 2; i++)
        if (ad.on[i])
            ad.v[i] = lora_column_forward(m, l, ad.site[i], x_all, x16, m->cfg.hidden, &v_only, KEEP(lora_act(ad.site[i])));
    if (!ad.on[2]) {
        if (out) mini_mlp_forward(m, l, w, x_all, &ad, ws(m, W_OUT));
        return (LoraV){0};
    }
    size_t nr = (size_t)m->s_cur * m->b_cur * (size_t)m->cfg.lora_rank;
    ActName dn = lora_act(ad.site[2]);
    ad.down_v = saved_out(m, A, dn, l, nr, KEEP(dn));
    mini_mlp_forward(m, l, w, x_all, &ad, out ? ws(m, W_OUT) : NULL);
    saved_done(m, A, dn, l, ad.down_v, nr, KEEP(dn), 0);
    return (LoraV){ad.down_v, saved_bf16(m, A, dn, KEEP(dn))};
}

// The MLP half: out = res + Dropout(FC2(GeLU(FC1(Norm2(x1))))) (the standard block: res = x1, out NULL:
// the output goes where `where` says; a reversible block: y2 = x2 + G(y1) into out; PASS_INVERT: out = res − G).
float *mlp_half_forward(GPT *m, int l, const float *x1, const float *res, float *out_buf, int pass, int where) {
    const GPTConfig *c = &m->cfg;
    int h = c->hidden, fl = m->fl, n = m->s_cur * m->b_cur;
    BlockActs *A = &m->act->blocks[l];
    BlockTensors w = gpt_block_weights(m, l);
    float p = m->act->ctx.train ? c->dropout : 0.0f;
    int drop = p > 0.0f;
    const uint16_t *fc1_16;

    // x2 = x1 + Dropout(FC2(GeLU(FC1(Norm2(x1)))))     (llama: Down(SiLU(Gate) ⊙ Up))
    const float *fc1_all = norm_and_gather(m, l, ACT_LN2_STATS, ACT_FC1_IN, x1, w.ln2_w, w.ln2_b, pass, w.fc1_w, &fc1_16);
    const float *fc2_in = NULL;
    float *gate = NULL, *up = NULL;
    int mini = m->policy.mini_seq > 1, reads = SWIGLU_FP32;
    // The down projection's adapter (row-parallel): its input is SwiGLU's output or fc2_in (mini-seq: the
    // chunks' hidden rows).
    LoraSite d_site = swiglu(m) ? LORA_DOWN : LORA_FC2;
    int swiglu_runs = swiglu(m) && !mini && (where != OUT_DISCARD || lora_on(m, d_site));
    if (swiglu(m) && !mini) reads = mlp_inner_swiglu(m, l, &w, fc1_all, fc1_16, pass, swiglu_runs, &gate, &up);
    else if (!swiglu(m)) fc2_in = mlp_inner_gelu(m, l, &w, fc1_all, fc1_16, pass);
    uint8_t *drop2 = drop ? residual_mask(m, A, ACT_DROP2_MASK, l, SITE_DROP2, KEEP(ACT_DROP2_MASK)) : NULL;
    const float *d_in = swiglu(m) ? ws(m, W_FFN) : fc2_in;
    const uint16_t *d_in16 = swiglu(m) ? NULL : saved_bf16(m, A, ACT_FC2_IN, KEEP(ACT_FC2_IN));
    if (swiglu_runs) {   // SwiGLU's output is not kept: its backward makes it again
        uint16_t *y16 = (uint16_t *)ws(m, W_FFN);   // in bf16 from the copies' values, for the GEMMs as they are
        uint16_t *gate16 = (uint16_t *)saved_bf16(m, A, ACT_GATE, KEEP(ACT_GATE));
        uint16_t *up16 = (uint16_t *)saved_bf16(m, A, ACT_UP, KEEP(ACT_UP));
        if (reads == SWIGLU_WRITES_COPIES) m->be->swiglu_forward_pack16(m->be, y16, gate16, up16, gate, up, fl, n, fl);
        else if (reads == SWIGLU_COPIES) m->be->swiglu_forward16(m->be, y16, gate16, up16, fl, n, fl);
        if (reads != SWIGLU_FP32) {
            d_in16 = y16;
            d_in = NULL;
        } else {
            m->be->swiglu_forward(m->be, ws(m, W_FFN), gate, up, fl, n, fl, 0);
        }
    }
    // A recomputed group's last block ends here: backward reads what the MLP kept and the mask (and the
    // down adapter's x·Aᵀ), never the block's output, so FC2 (a third of the block's GEMM work) and the
    // residual are not redone.
    if (where == OUT_DISCARD) {
        if (mini) mlp_chunks_forward(m, l, &w, fc1_all, fc1_16, pass, 0);
        else if (lora_on(m, d_site)) lora_row_forward(m, l, d_site, d_in, d_in16, fl, NULL, h, KEEP(lora_act(d_site)));
        return NULL;
    }
    LoraV down_v = {0};
    if (mini) {   // FC1, GeLU, FC2 (gate, up, SwiGLU, down) a chunk at a time; nothing kept
        down_v = mlp_chunks_forward(m, l, &w, fc1_all, fc1_16, pass, 1);
    } else if (swiglu(m)) {
        linear_fwd16(m, ws(m, W_OUT), h, d_in, d_in16, fl, w.fc2_w, NULL, n, fl, h);
    } else {
        linear_fwd16(m, ws(m, W_OUT), h, fc2_in, saved_bf16(m, A, ACT_FC2_IN, KEEP(ACT_FC2_IN)), fl, w.fc2_w, NULL, n,
                     fl, h);
    }
    float *mlp_out = tp_reduce_rows(m, ws(m, W_OUT), sp_buf(m, W_GATHER), h, TPC_BLOCK);   // ḡ
    if (lora_on(m, d_site) && mini) lora_row_add(m, l, d_site, down_v, mlp_out, h);
    else if (lora_on(m, d_site)) lora_row_forward(m, l, d_site, d_in, d_in16, fl, mlp_out, h, KEEP(lora_act(d_site)));
    float *out = out_buf ? out_buf : output_of(m, l, pass, where);
    residual_forward(m, out, res, mlp_out, w.fc2_b, drop2, p, pass);
    if (!out_buf) output_done(m, l, pass, where, out);
    return out;
}
#undef KEEP

// One block forward from x (this block's ln1_in on this rank's rows, already rounded and kept as
// the policy says). Returns the block output (see output_of), rounded and kept likewise; NULL for
// OUT_DISCARD, whose output nobody reads. Under TP the linears hold this rank's columns; the norms,
// dropout and residual run on the rank's rows (all rows without SP).
static float *block_forward_pass(GPT *m, int l, const float *x, int pass, int where) {
    if (pass == PASS_FORWARD && m->act->ctx.train && plan_of(m)->kind[l] == RECOMPUTE_MEMO)
        return memo_block_forward(m, l, x, where);   // by token ranges, the first swapped (model/memo.h)
    const float *x1 = attn_half_forward(m, l, x, x, NULL, pass);
    return mlp_half_forward(m, l, x1, x1, NULL, pass, where);
}

// One block's forward in its scope: its temporaries are free when it returns (its output is the
// next block's).
static float *block_forward(GPT *m, int l, const float *x, int pass, int where) {
    scope_begin(m, l);
    float *out = block_forward_pass(m, l, x, pass, where);
    scope_end(m, l);
    return out;
}

// The TP ranks' partial lookups in W_OUT summed into x (reduce-scattered to the rank's rows under SP).
static void embed_reduce(GPT *m, float *x) {
    size_t sbh = (size_t)m->s_cur * m->b_cur * m->cfg.hidden;
    if (m->tp.sp) {
        comm_device_reduce_scatter_sum(m->tp.group, ws(m, W_OUT), x, rank_rows_h(m));
        m->comm_bytes[TPC_VOCAB] += comm_bytes_for(COMM_REDUCE_SCATTER, m->tp.t, (uint64_t)sbh * sizeof(float));
    } else {
        comm_device_allreduce_sum(m->tp.group, ws(m, W_OUT), x, sbh);
        m->comm_bytes[TPC_VOCAB] += comm_bytes_for(COMM_ALLREDUCE, m->tp.t, (uint64_t)sbh * sizeof(float));
    }
}

// x = Dropout(wte[tokens] + wpe) on this rank's rows. Under TP each rank looks up the tokens of its
// vocabulary rows; the sum over ranks (all-reduce, or reduce-scatter to the rank's rows under SP)
// has exactly one nonzero term per row, so x is bitwise the single-process embedding.
static void embed_forward(GPT *m, float *x, const int32_t *tokens) {
    int s = m->s_cur, b = m->b_cur, h = m->cfg.hidden;
    if (m->base16) {   // the bf16 table's rows widened; positions added from their widened rows
        float *out = m->tp.t > 1 ? ws(m, W_OUT) : x;
        m->be->embedding_vocab_forward16(m->be, out, tokens, m->frozen16 + (m->w.wte - m->frozen), m->v0, m->vl, s * b, h);
        if (m->tp.t > 1) embed_reduce(m, x);
        if (m->w.wpe) m->be->embedding_add_positions(m->be, x, gpt_position_rows(m, m->s0, m->s_rank), 0, m->s_rank, b, h);
        return;
    }
    if (m->tp.t <= 1 && !m->w.wpe) {   // rotary positions: the token rows alone (the whole vocabulary is here)
        m->be->embedding_vocab_forward(m->be, x, tokens, m->w.wte, 0, m->vl, s * b, h);
        return;
    }
    if (m->tp.t <= 1) {
        m->be->embedding_forward(m->be, x, tokens, m->w.wte, m->w.wpe, s, b, h);
        return;
    }
    m->be->embedding_vocab_forward(m->be, ws(m, W_OUT), tokens, m->w.wte, m->v0, m->vl, s * b, h);
    embed_reduce(m, x);
    if (m->w.wpe) m->be->embedding_add_positions(m->be, x, m->w.wpe, m->s0, m->s_rank, b, h);
}

// Mini-seq output layer + cross-entropy, one chunk of the sequence at a time: the chunk's logits,
// its loss and (training) at once its backward — dL/dwte accumulates, dL/d lm_in goes to lm_grad,
// kept for gpt_backward. Under TP returns Σ loss over the rows; on one rank the chunks' sums go to the
// backend's deferred sum (forward_loss reads it) and 0 is returned.
static double head_chunks(GPT *m, const float *lm_all, const int32_t *targets, int train, float grad_scale) {
    int h = m->cfg.hidden, vl = m->vl, n = m->s_cur * m->b_cur, t = m->tp.t, r0, r1;
    BlockActs *M = &m->act->model_acts;
    float *lm_grad = train ? saved_out(m, M, ACT_LM_GRAD, -1, (size_t)n * h, 1) : NULL;
    double loss = 0.0;
    for (int c = 0; c < m->policy.mini_seq; c++) {
        mini_chunk_rows(n, m->policy.mini_seq, c, &r0, &r1);
        int nc = r1 - r0;
        if (nc <= 0) continue;
        float *logits = ws(m, W_MINI_LOGITS);
        linear_fwd(m, logits, vl, lm_all + (size_t)r0 * h, h, out_w(m, &m->w), NULL, nc, h, vl);
        if (t <= 1) {
            m->be->crossentropy_deferred(m->be, logits, targets + r0, m->row_loss, nc, vl, grad_scale, train);
        } else {
            float *part = m->ce_part + (size_t)m->tp.rank * nc * 3;
            m->be->crossentropy_vocab_partial(m->be, part, logits, targets + r0, nc, vl, m->v0, m->cfg.vocab);
            tp_allgather(m, part, m->ce_part, (size_t)nc * 3, TPC_VOCAB);
            loss += m->be->crossentropy_vocab_combine(m->be, m->ce_lse, m->row_loss, m->ce_part, t, nc);
            if (train) m->be->crossentropy_vocab_backward(m->be, logits, m->ce_lse, targets + r0, nc, vl, m->v0, m->cfg.vocab, grad_scale);
        }
        if (train)
            linear_bwd(m, lm_grad + (size_t)r0 * h, h, 0, out_w(m, &m->g), NULL, logits, vl, lm_all + (size_t)r0 * h, h,
                       out_w(m, &m->w), nc, h, vl);
    }
    if (train) saved_done(m, M, ACT_LM_GRAD, -1, lm_grad, (size_t)n * h, 1, 0);
    m->logits = m->act->logits = NULL;
    snapshot_forward_end(m);
    return loss;
}

// The output layer's gradient left in bf16 in the logits' own storage by the cross-entropy, for its GEMMs as
// it is (backend.h's crossentropy_deferred16, linear_backward16): one rank's whole vocabulary at once.
static int logits_grad16(const GPT *m) {
    return m->tp.t <= 1 && m->policy.mini_seq <= 1 && m->be->crossentropy_deferred16 && m->be->linear_backward16;
}

// logits = LN_f(x) · wteᵀ ; loss = cross-entropy (vocabulary-parallel under TP: returned; on one rank
// to the backend's deferred sum, 0 returned)
static double head_forward(GPT *m, const float *x, const int32_t *targets, float grad_scale) {
    const GPTConfig *c = &m->cfg;
    BlockActs *M = &m->act->model_acts;
    int h = c->hidden, n = m->s_cur * m->b_cur, train = m->act->ctx.train, vl = m->vl;
    size_t nrh = rank_rows_h(m), nr = (size_t)m->s_rank * m->b_cur;
    int mini = m->policy.mini_seq > 1 && targets;
    float *lnf_stats = saved_out(m, M, ACT_LNF_STATS, -1, norm_stats(m) * nr, train);
    int keep_lm = train && !mini && !gpt_lora(m);   // a frozen output layer reads no input in backward
    float *lm_in = saved_out(m, M, ACT_LM_IN, -1, nrh, keep_lm);
    const float *lnf_w, *lnf_b;
    gpt_head_norm_weights(m, &lnf_w, &lnf_b);
    norm_forward(m, lm_in, lnf_stats, x, lnf_w, lnf_b, (int)nr);
    saved_done(m, M, ACT_LM_IN, -1, lm_in, nrh, keep_lm, 0);
    const float *lm_all = tp_gather_rows(m, lm_in, sp_buf(m, W_GATHER), h, TPC_VOCAB);
    if (mini) return head_chunks(m, lm_all, targets, train, grad_scale);
    const uint16_t *lm16 = lm_all == lm_in ? saved_bf16(m, M, ACT_LM_IN, keep_lm) : NULL;
    float *logits = m->logits = m->act->logits = saved_out(m, M, ACT_LOGITS, -1, (size_t)n * vl, train);
    linear_fwd16(m, logits, vl, lm_all, lm16, h, out_w(m, &m->w), NULL, n, h, vl);
    snapshot_forward_end(m);
    if (!targets) return 0.0;
    if (train && logits_grad16(m)) {
        m->be->crossentropy_deferred16(m->be, logits, targets, m->row_loss, n, vl, grad_scale);
        return 0.0;
    }
    if (m->tp.t <= 1) {
        m->be->crossentropy_deferred(m->be, logits, targets, m->row_loss, n, vl, grad_scale, train);
        return 0.0;
    }
    // Three numbers per row from every rank: its max, its Σexp and its target logit.
    float *part = m->ce_part + (size_t)m->tp.rank * n * 3;
    m->be->crossentropy_vocab_partial(m->be, part, logits, targets, n, vl, m->v0, c->vocab);
    tp_allgather(m, part, m->ce_part, (size_t)n * 3, TPC_VOCAB);
    double loss = m->be->crossentropy_vocab_combine(m->be, m->ce_lse, m->row_loss, m->ce_part, m->tp.t, n);
    if (train) m->be->crossentropy_vocab_backward(m->be, logits, m->ce_lse, targets, n, vl, m->v0, c->vocab, grad_scale);
    return loss;
}


// The micro-batch's loss: on one TP rank the backend's deferred sum (the micro-batch's joins the step's,
// read back here unless the caller defers it to gpt_loss_take); under TP the combine's sum, tp_loss.
static double forward_loss(GPT *m, double tp_loss, int has_targets) {
    if (m->tp.t > 1) {
        if (!m->defer_loss) return tp_loss;
        m->loss_pending += tp_loss;
        return 0.0;
    }
    if (!has_targets) return 0.0;
    m->be->loss_end_microbatch(m->be);
    return m->defer_loss ? 0.0 : m->be->loss_take(m->be);
}

double gpt_loss_take(GPT *m) {
    if (m->tp.t > 1) {
        double r = m->loss_pending;
        m->loss_pending = 0.0;
        return r;
    }
    return m->be->loss_take(m->be);
}

double gpt_forward(GPT *m, const int32_t *tokens, const int32_t *targets, int s, int b, StepCtx ctx,
                   float grad_scale) {
    return gpt_forward_chunk(m, 0, m->cfg.layers, tokens, targets, NULL, NULL, s, b, ctx, grad_scale);
}

// The micro-batch's shape and key in the current context, before its forward.
static void forward_begin(GPT *m, int l0, int l1, int s, int b, StepCtx ctx) {
    const GPTConfig *c = &m->cfg;
    if (m->act->arena.n_entries != 0) ctron_fatal("gpt_forward: activations of the previous forward are still held");
    if (s > c->seq || b > c->batch || s < 1 || b < 1)
        ctron_fatal("gpt_forward: batch [%d, %d] exceeds the model's [%d, %d]", s, b, c->seq, c->batch);
    if (m->tp.sp && s % m->tp.t != 0)
        ctron_fatal("gpt_forward: sequence parallelism needs the sequence (%d) divisible by t = %d", s, m->tp.t);
    for (int l = l0; l < l1; l++)
        if (!gpt_owns_layer(m, l)) ctron_fatal("gpt_forward: layer %d is not on pipeline stage %d", l, m->pp.rank);
    m->ledger.paused = !ctx.train;
    m->act->ctx = ctx;
    if (m->params16 && m->params16_stale) {   // mixed precision: the GEMMs' bf16 weights from the masters
        gpt_refresh_params16(m);
    }
    m->s_cur = s;
    m->b_cur = b;
    m->s_rank = m->tp.sp ? s / m->tp.t : s;
    m->s0 = m->tp.sp ? m->tp.rank * m->s_rank : 0;
    memset(&m->act->model_acts, 0, sizeof m->act->model_acts);
    for (int l = l0; l < l1; l++) memset(m->act->blocks[l].saved, 0, sizeof m->act->blocks[l].saved);
    stepmem_begin(&m->mem, ctx.train ? STEP_TRAIN : STEP_EVAL);
    if (ctx.train) offload_begin_forward(m);
    if (ctx.train) memo_begin_forward(m);
}

// x = Dropout(wte[tokens] + wpe) into block 0's input.
// into: the buffer to write (reversible blocks' first stream); NULL: block 0's input, kept as it says.
float *gpt_embedding_forward(GPT *m, const int32_t *tokens, float *into) {
    int h = m->cfg.hidden, train = m->act->ctx.train;
    float p = train ? m->cfg.dropout : 0.0f;
    size_t nrh = rank_rows_h(m);
    BlockActs *M = &m->act->model_acts;
    scope_begin(m, scope_key(m, SCOPE_EMB));
    int keep_mask = train && !gpt_lora(m);   // a frozen embedding (LoRA) has no backward to read it
    uint8_t *emb_mask = p > 0.0f ? mask_out(m, M, ACT_EMB_MASK, -1, nrh, keep_mask) : NULL;
    float *x = into ? into : input_of(m, 0, PASS_FORWARD);
    embed_forward(m, x, tokens);
    if (emb_mask) {
        m->be->dropout_mask_sbw(m->be, emb_mask, site_of(m, 0, SITE_EMB), m->s0, m->s_rank, m->b_cur, h, m->act->ctx.sample0);
        mask_done(m, M, ACT_EMB_MASK, -1, emb_mask, nrh, keep_mask);
        m->be->dropout_apply(m->be, x, emb_mask, p, nrh);
    }
    if (!into) saved_done(m, &m->act->blocks[0], ACT_LN1_IN, 0, x, nrh, keeps(m, 0, ACT_LN1_IN, PASS_FORWARD), 0);
    scope_end(m, scope_key(m, SCOPE_EMB));
    return x;
}

// A chunk's input from the previous stage, kept (and rounded) as block l0's input would be.
static float *received_input(GPT *m, int l0, const float *input) {
    size_t nrh = rank_rows_h(m);
    float *x = input_of(m, l0, PASS_FORWARD);
    m->be->copy(m->be, x, input, nrh * sizeof(float), COPY_D2D);
    saved_done(m, &m->act->blocks[l0], ACT_LN1_IN, l0, x, nrh, keeps(m, l0, ACT_LN1_IN, PASS_FORWARD), 0);
    return x;
}

// Tokens or targets to the device: queued where the caller holds them (m->inputs_held), else a copy
// that returns when it is done (the caller may reuse its buffer at once).
static void upload_input(GPT *m, int32_t *dst, const int32_t *src, size_t bytes) {
    if (m->inputs_held) m->be->copy_enqueue(m->be, dst, src, bytes);
    else m->be->copy(m->be, dst, src, bytes, COPY_H2D);
}

double gpt_forward_chunk(GPT *m, int l0, int l1, const int32_t *tokens, const int32_t *targets, const float *input,
                         float *output, int s, int b, StepCtx ctx, float grad_scale) {
    int L = m->cfg.layers;
    forward_begin(m, l0, l1, s, b, ctx);
    // The inputs go to the device once per micro-batch, into the context (backward reads the tokens).
    size_t rows = (size_t)s * (size_t)b;
    if (rows > (size_t)m->cfg.seq * (size_t)m->cfg.batch)
        ctron_fatal("gpt_forward: %d×%d rows, the model holds %d×%d", s, b, m->cfg.seq, m->cfg.batch);
    if (l0 == 0 && tokens) {
        upload_input(m, m->act->tokens, tokens, rows * sizeof(int32_t));
        tokens = m->act->tokens;
    }
    if (l1 == L && targets) {
        upload_input(m, m->act->targets, targets, rows * sizeof(int32_t));
        targets = m->act->targets;
    }
    float *x = m->cfg.reversible ? rev_forward(m, tokens)   // two residual streams (model/reversible.c)
               : l0 == 0 ? gpt_embedding_forward(m, tokens, NULL) : received_input(m, l0, input);
    m->chunk_out = output;
    for (int l = l0; l < l1 && !m->cfg.reversible; l++) {
        int where = l + 1 < l1 ? OUT_NEXT_BLOCK : l1 == L ? OUT_HEAD : OUT_CHUNK;
        x = block_forward(m, l, x, PASS_FORWARD, where);
        if (ctx.train) offload_layer_stored(m, l);   // to the pool while the next block computes
    }
    m->chunk_out = NULL;
    if (l1 < L) {
        snapshot_forward_end(m);
        return 0.0;
    }
    scope_begin(m, scope_key(m, SCOPE_HEAD));
    double loss = head_forward(m, x, targets, grad_scale);
    scope_end(m, scope_key(m, SCOPE_HEAD));
    return forward_loss(m, loss, targets != NULL);
}

// The rank's copy of a kept input of a column-parallel linear, for its weight gradient: the kept
// tensor itself, or under SP its s/t shard gathered again.
static const float *regather(GPT *m, BlockActs *A, ActName name, int layer) {
    const float *shard = saved_in(m, A, name, layer, rank_rows_h(m));
    return tp_gather_rows(m, shard, sp_buf(m, W_GATHER), m->cfg.hidden, TPC_REGATHER);
}

// A kept GEMM input of `count` elements for the weight gradient: its bf16 copy as kept when the GEMM
// runs in bf16 and nothing is gathered (no SP), else the fp32 values (gathered under SP).
static GemmIn saved_gemm_in(GPT *m, BlockActs *A, ActName name, int layer, size_t count, int gathered) {
    if (remat_makes(m, name)) {   // the fusion search's part: made again from its kept input (model/remat.h)
        const float *x = remat_tensor(m, layer, name);
        return (GemmIn){gathered ? tp_gather_rows(m, x, sp_buf(m, W_GATHER), m->cfg.hidden, TPC_REGATHER) : x, NULL};
    }
    int gathers = gathered && m->tp.t > 1 && m->tp.sp;
    const uint16_t *b16 = m->params16 && !gathers ? saved_in_bf16(m, A, name, layer) : NULL;
    if (b16) return (GemmIn){NULL, b16};
    return (GemmIn){gathered ? regather(m, A, name, layer) : saved_in(m, A, name, layer, count), NULL};
}

static int tempo(const GPT *m, unsigned part) { return (m->policy.tempo & part) != 0; }

// A linear's kept input, fetched only when a weight gradient reads it: the base's (dw given: not frozen)
// or an adapter's A (LoRA, not LoRA-FA). A frozen linear's backward reads no input at all.
static GemmIn grad_input(GPT *m, BlockActs *A, ActName name, int layer, size_t count, int gathered, int needed) {
    if (!needed) return (GemmIn){NULL, NULL};
    return saved_gemm_in(m, A, name, layer, count, gathered);
}

// Does A of site s train (LoRA on the site, not LoRA-FA)? Then its backward reads the site's input.
static int lora_a_trains(const GPT *m, LoraSite s) { return lora_on(m, s) && !m->cfg.lora_fa; }

// dx (= or +=) dL/d(norm input), dgamma (and dbeta) +=: from the norm's input, or with Tempo from its
// output (the input of the next linear) and the statistics: LayerNorm's, or RMSNorm's analogue.
static void norm_backward_rows(GPT *m, float *dx, int accumulate, float *dgamma, float *dbeta, const float *dy,
                               const float *x, const float *y, const float *stats, const float *gamma,
                               const float *beta, int nr) {
    int h = m->cfg.hidden;
    if (norm_kind(m) == NORM_RMS) {
        if (y) m->be->rmsnorm_backward_from_output(m->be, dx, accumulate, dgamma, dy, y, stats, gamma, nr, h);
        else m->be->rmsnorm_backward(m->be, dx, accumulate, dgamma, dy, x, stats, gamma, nr, h);
    } else if (y) {
        m->be->layernorm_backward_from_output(m->be, dx, accumulate, dgamma, dbeta, dy, y, stats, gamma, beta, nr, h);
    } else {
        m->be->layernorm_backward(m->be, dx, accumulate, dgamma, dbeta, dy, x, stats, gamma, nr, h);
    }
}

// The family's norm backward from its input's bf16 copy (backend.h's *norm_backward16), when the backend has it.
static int norm_backward16(const GPT *m) {
    return norm_kind(m) == NORM_RMS ? m->be->rmsnorm_backward16 != NULL : m->be->layernorm_backward16 != NULL;
}
// norm_backward_rows from x16, the copy of the norm's input.
static void norm_backward_rows16(GPT *m, float *dx, int accumulate, float *dgamma, float *dbeta, const float *dy,
                                 const uint16_t *x16, const float *stats, const float *gamma, int nr) {
    int h = m->cfg.hidden;
    if (norm_kind(m) == NORM_RMS) m->be->rmsnorm_backward16(m->be, dx, accumulate, dgamma, dy, x16, stats, gamma, nr, h);
    else m->be->layernorm_backward16(m->be, dx, accumulate, dgamma, dbeta, dy, x16, stats, gamma, nr, h);
}

// dx += dL/d(norm input) for one of the block's norms: from its kept input, or with Tempo from
// its kept output (the input of the next linear) and the statistics.
static void norm_backward(GPT *m, int l, ActName in_name, ActName out_name, ActName stats_name, const float *dy, float *dx,
                          const float *gamma, const float *beta, float *dgamma, float *dbeta) {
    BlockActs *A = &m->act->blocks[l];
    int h = m->cfg.hidden, nr = m->s_rank * m->b_cur;
    size_t nrh = (size_t)nr * h;
    const float *stats = saved_in(m, A, stats_name, l, norm_stats(m) * (size_t)nr);
    if (tempo(m, TEMPO_LAYERNORM)) {
        norm_backward_rows(m, dx, 1, dgamma, dbeta, dy, NULL, saved_in(m, A, out_name, l, nrh), stats,
                           gamma, beta, nr);
        return;
    }
    const uint16_t *x16 = norm_backward16(m) ? remat_copy16(m, l, in_name) : NULL;
    if (x16) norm_backward_rows16(m, dx, 1, dgamma, dbeta, dy, x16, stats, gamma, nr);
    else norm_backward_rows(m, dx, 1, dgamma, dbeta, dy, remat_in(m, l, in_name, nrh), NULL, stats, gamma, beta, nr);
}

// Mini-seq: the MLP's chunks again from the kept (regathered) norm output, each straight into its
// backward (model/mini_mlp.c), with the adapters' kept v; dL/dx into W_OUT (the rank's partial sum).
static void mlp_backward_chunks(GPT *m, int l, const BlockTensors *w, const BlockTensors *g, const float *d_out) {
    int h = m->cfg.hidden;
    size_t nrh = (size_t)m->s_rank * m->b_cur * (size_t)h;
    const float *kept = saved_in(m, &m->act->blocks[l], ACT_FC1_IN, l, nrh);
    const float *x_all = tp_gather_rows(m, kept, sp_buf(m, W_GATHER2), h, TPC_REGATHER);
    MiniAdapters ad = mini_adapters(m);
    for (int i = 0; i < 3; i++)
        if (ad.on[i]) ad.v[i] = lora_v_kept(m, l, ad.site[i]);
    mini_mlp_backward(m, l, w, g, x_all, &ad, d_out, ws(m, W_OUT));
}

// GPT-2's MLP backward from dL/d(FC2 output) (all rows): dL/dx into W_OUT (the rank's partial sum).
static void mlp_backward_gelu(GPT *m, int l, const BlockTensors *w, const BlockTensors *g, const float *d_fc2_out) {
    BlockActs *A = &m->act->blocks[l];
    int h = m->cfg.hidden, fl = m->fl, n = m->s_cur * m->b_cur, nr = m->s_rank * m->b_cur;
    size_t nrh = (size_t)nr * h, nfl = (size_t)n * fl;
    if (m->policy.mini_seq > 1) {   // FC1 and GeLU again, a chunk at a time, straight into their backward
        mlp_backward_chunks(m, l, w, g, d_fc2_out);
        return;
    }
    GemmIn fc2_in = grad_input(m, A, ACT_FC2_IN, l, nfl, 0, g->fc2_w || lora_a_trains(m, LORA_FC2));
    const uint16_t *d16 =
        grad_shared16(m, 0, d_fc2_out, (size_t)n * h, lora_on(m, LORA_FC2), NULL);
    if (d16) linear_bwd_dy16(m, ws(m, W_D_4H), fl, 0, g->fc2_w, d16, h, fc2_in, fl, w->fc2_w, n, fl, h);
    else linear_bwd16(m, ws(m, W_D_4H), fl, 0, g->fc2_w, NULL, d_fc2_out, h, fc2_in, fl, w->fc2_w, n, fl, h);
    if (lora_on(m, LORA_FC2))
        lora_row_backward(m, l, LORA_FC2, d_fc2_out, d16, fc2_in.f32, fc2_in.bf16, fl, ws(m, W_D_4H), h);
    if (tempo(m, GELU_FEWBIT))   // the optimal piecewise-constant GeLU′ of the input's k-bit code
        m->be->fewbit_gelu_backward(m->be, ws(m, W_D_4H), ws(m, W_D_4H), bits_in(m, A, ACT_GELU_CODE, l), nfl,
                                    fewbit_gelu_table(m->policy.gelu_bits));
    else if (tempo(m, TEMPO_GELU))   // GeLU's input recovered from its output and the branch bits
        m->be->gelu_backward_from_output(m->be, ws(m, W_D_4H), ws(m, W_D_4H), saved_in(m, A, ACT_FC2_IN, l, nfl),
                                         bits_in(m, A, ACT_GELU_BRANCH, l), nfl);
    else if (m->be->gelu_backward16 && !remat_makes(m, ACT_GELU_IN) && saved_in_bf16(m, A, ACT_GELU_IN, l))
        m->be->gelu_backward16(m->be, ws(m, W_D_4H), ws(m, W_D_4H), saved_in_bf16(m, A, ACT_GELU_IN, l), nfl);
    else
        m->be->gelu_backward(m->be, ws(m, W_D_4H), ws(m, W_D_4H), remat_in(m, l, ACT_GELU_IN, nfl), nfl);
    GemmIn fc1_in = grad_input(m, A, ACT_FC1_IN, l, nrh, 1, g->fc1_w || lora_a_trains(m, LORA_FC));
    linear_bwd16(m, ws(m, W_OUT), h, 0, g->fc1_w, g->fc1_b, ws(m, W_D_4H), fl, fc1_in, h, w->fc1_w, n, h, fl);
    if (lora_on(m, LORA_FC)) {
        LoraOut dy = {1, {ws(m, W_D_4H)}, {fl}, {fl}, {0}, {NULL}};
        lora_column_backward(m, l, LORA_FC, &dy, fc1_in.f32, fc1_in.bf16, h, ws(m, W_OUT), h);
    }
}

// Llama's MLP backward: SwiGLU's output made again from the kept gate and up (the forward's bits) for
// the down projection's weight gradient, then SwiGLU's backward and the gate and up projections'.
static void mlp_backward_swiglu(GPT *m, int l, const BlockTensors *w, const BlockTensors *g, const float *d_down_out) {
    BlockActs *A = &m->act->blocks[l];
    int h = m->cfg.hidden, fl = m->fl, n = m->s_cur * m->b_cur, nr = m->s_rank * m->b_cur;
    size_t nrh = (size_t)nr * h, nfl = (size_t)n * fl, fh = (size_t)fl * h;
    if (m->policy.mini_seq > 1) {   // gate, up and SwiGLU again, a chunk at a time, straight into their backward
        mlp_backward_chunks(m, l, w, g, d_down_out);
        return;
    }
    // The kept bf16 copies of gate and up as they are, where the backend's SwiGLU reads them (backend.h)
    const uint16_t *gate16 = NULL, *up16 = NULL;
    if (m->be->swiglu_backward16 && !remat_makes(m, ACT_GATE) && !remat_makes(m, ACT_UP)) {
        gate16 = saved_in_bf16(m, A, ACT_GATE, l);
        up16 = saved_in_bf16(m, A, ACT_UP, l);
    }
    int copies = gate16 && up16;
    int down_x = g->fc2_w || lora_a_trains(m, LORA_DOWN);   // only a weight gradient reads SwiGLU's output
    int y16 = down_x && copies && !down_input_dropped(m);   // SwiGLU's output in bf16, for the GEMMs as it is
    int f32 = !copies || (down_x && !y16);                  // gate and up in fp32
    float *gate = f32 ? (float *)remat_in(m, l, ACT_GATE, nfl) : NULL;
    float *up = f32 ? (float *)remat_in(m, l, ACT_UP, nfl) : NULL;
    GemmIn ffn = {NULL, NULL};
    if (y16) m->be->swiglu_forward16(m->be, (uint16_t *)ws(m, W_FFN), gate16, up16, fl, n, fl);
    else if (down_x) m->be->swiglu_forward(m->be, ws(m, W_FFN), gate, up, fl, n, fl, 0);
    if (down_x) ffn = y16 ? (GemmIn){NULL, (const uint16_t *)ws(m, W_FFN)} : (GemmIn){ws(m, W_FFN), NULL};
    const uint16_t *d16 =
        grad_shared16(m, 0, d_down_out, (size_t)n * h, lora_on(m, LORA_DOWN), NULL);
    if (d16) linear_bwd_dy16(m, ws(m, W_D_4H), fl, 0, g->fc2_w, d16, h, ffn, fl, w->fc2_w, n, fl, h);
    else linear_bwd16(m, ws(m, W_D_4H), fl, 0, g->fc2_w, NULL, d_down_out, h, ffn, fl, w->fc2_w, n, fl, h);
    if (lora_on(m, LORA_DOWN))
        lora_row_backward(m, l, LORA_DOWN, d_down_out, d16, ffn.f32, ffn.bf16, fl, ws(m, W_D_4H), h);
    // dgate and dup: bf16 for the GEMMs straight from SwiGLU's backward where the backend has both (W_FFN and W_D_UP
    // hold them in their first halves), else fp32
    int grad16 = copies && m->be->linear_backward16;
    if (copies)
        m->be->swiglu_backward16(m->be, ws(m, W_FFN), ws(m, W_D_UP), fl, grad16, ws(m, W_D_4H), gate16, up16, fl, n, fl);
    else
        m->be->swiglu_backward(m->be, ws(m, W_FFN), ws(m, W_D_UP), fl, NULL, ws(m, W_D_4H), gate, up, fl, n, fl, 0);
    int x_read = g->fc1_w != NULL;
    for (int i = 0; i < LORA_GATE_UP_SITE_COUNT; i++) x_read |= lora_a_trains(m, lora_gate_up_site(i));
    GemmIn x = grad_input(m, A, ACT_FC1_IN, l, nrh, 1, x_read);
    float *dw_up = g->fc1_w ? g->fc1_w + fh : NULL;
    if (grad16) {
        const uint16_t *dgate16 = (const uint16_t *)ws(m, W_FFN), *dup16 = (const uint16_t *)ws(m, W_D_UP);
        linear_bwd_dy16(m, ws(m, W_OUT), h, 0, g->fc1_w, dgate16, fl, x, h, w->fc1_w, n, h, fl);
        linear_bwd_dy16(m, ws(m, W_OUT), h, 1, dw_up, dup16, fl, x, h, w->fc1_w + fh, n, h, fl);
    } else {
        linear_bwd16(m, ws(m, W_OUT), h, 0, g->fc1_w, NULL, ws(m, W_FFN), fl, x, h, w->fc1_w, n, h, fl);
        linear_bwd16(m, ws(m, W_OUT), h, 1, dw_up, NULL, ws(m, W_D_UP), fl, x, h, w->fc1_w + fh, n, h, fl);
    }
    for (int i = 0; i < LORA_GATE_UP_SITE_COUNT; i++) {   // dgate in W_FFN, dup in W_D_UP
        LoraSite s = lora_gate_up_site(i);
        if (!lora_on(m, s)) continue;
        LoraOut dy = lora_gate_up_outs(m, s, ws(m, W_FFN), ws(m, W_D_UP));
        for (int k = 0; grad16 && k < dy.blocks; k++) dy.y16[k] = (const uint16_t *)dy.y[k];
        lora_column_backward(m, l, s, &dy, lora_a_trains(m, s) ? x.f32 : NULL, lora_a_trains(m, s) ? x.bf16 : NULL, h,
                             ws(m, W_OUT), h);
    }
}

// Flash's backward: q, k, v and the output O as the arena keeps them in bf16 where the backend takes those
// (nothing unpacked to fp32 and rounded again), else in fp32.
static void flash_backward(GPT *m, int l, const float *d_ctx) {
    int s = m->s_cur, b = m->b_cur;
    size_t nql = (size_t)s * b * m->ql, nkv = (size_t)s * b * m->kvl;
    FlashIn16 in = {remat_flash16(m, l, ACT_Q), remat_flash16(m, l, ACT_K), remat_flash16(m, l, ACT_V),
                    remat_flash16(m, l, ACT_PROJ_IN)};
    const float *q = in.q ? NULL : remat_in(m, l, ACT_Q, nql), *k = in.k ? NULL : remat_in(m, l, ACT_K, nkv);
    const float *v = in.v ? NULL : remat_in(m, l, ACT_V, nkv), *o = in.ctx ? NULL : remat_in(m, l, ACT_PROJ_IN, nql);
    const float *lse = remat_in(m, l, ACT_ATTN_LSE, (size_t)m->al * s * b);
    DropoutSite site = site_of(m, l, SITE_ATTN);
    int window = gpt_layer_window(&m->cfg, l);
    if (in.q || in.k || in.v || in.ctx)
        m->be->flash_attention_backward16(m->be, ws(m, W_D_Q), ws(m, W_D_K), ws(m, W_D_V), d_ctx, &in, q, k, v, o, lse,
                                          ws(m, W_ATTN_SCRATCH), s, b, m->al, m->kvh, m->ql, window, m->head0, site,
                                          m->act->ctx.sample0);
    else
        m->be->flash_attention_backward(m->be, ws(m, W_D_Q), ws(m, W_D_K), ws(m, W_D_V), d_ctx, q, k, v, o, lse,
                                        ws(m, W_ATTN_SCRATCH), s, b, m->al, m->kvh, m->ql, window, m->head0, site,
                                        m->act->ctx.sample0);
}

// dL/dq, dL/dk, dL/dv (W_D_Q, W_D_K, W_D_V) from dL/d(attention output) d_ctx: the stored probabilities,
// the core recomputed (selective), or flash's tiles.
static void attention_core_backward(GPT *m, int l, const float *d_ctx) {
    BlockActs *A = &m->act->blocks[l];
    int s = m->s_cur, b = m->b_cur, n = s * b, ql = m->ql, window = gpt_layer_window(&m->cfg, l);
    size_t nql = (size_t)n * ql, nkv = (size_t)n * m->kvl, as2b = (size_t)m->al * s * s * b;
    float p = m->cfg.dropout;
    int drop = p > 0.0f, bf16 = m->policy.act_dtype == ACT_BF16;
    if (m->policy.tempo & ATTN_FLASH) {   // each tile's probabilities again from q, k and the log-sum-exp
        flash_backward(m, l, d_ctx);
        return;
    }
    const float *q = remat_in(m, l, ACT_Q, nql), *k = remat_in(m, l, ACT_K, nkv), *v = remat_in(m, l, ACT_V, nkv);
    if (remat_makes(m, ACT_PROJ_IN))   // the attention forward again (model/remat.h), the standard backward
        m->be->attention_backward(m->be, ws(m, W_D_Q), ws(m, W_D_K), ws(m, W_D_V), d_ctx, remat_probs(m, l, ACT_ATTN_PROB),
                                  drop ? (const uint8_t *)remat_probs(m, l, ACT_ATTN_MASK) : NULL,
                                  drop && !tempo(m, TEMPO_SOFTMAX) ? remat_probs(m, l, ACT_ATTN_DROP) : NULL, q, k, v,
                                  ws(m, W_ATTN_SCRATCH), s, b, m->al, m->kvh, ql, p, bf16);
    else if (plan_of(m)->kind[l] == RECOMPUTE_SELECTIVE || plan_of(m)->kind[l] == RECOMPUTE_MEMO)   // the core again, one head at a time, into its backward
        m->be->attention_backward_recompute(m->be, ws(m, W_D_Q), ws(m, W_D_K), ws(m, W_D_V), d_ctx, q, k, v,
                                            ws(m, W_ATTN_SCRATCH), s, b, m->al, m->kvh, ql, window, m->head0,
                                            site_of(m, l, SITE_ATTN), m->act->ctx.sample0, bf16);
    else
        m->be->attention_backward(m->be, ws(m, W_D_Q), ws(m, W_D_K), ws(m, W_D_V), d_ctx,
                                  saved_in(m, A, ACT_ATTN_PROB, l, as2b), drop ? remat_mask_in(m, l, ACT_ATTN_MASK, as2b) : NULL,
                                  drop && !tempo(m, TEMPO_SOFTMAX) ? saved_in(m, A, ACT_ATTN_DROP, l, as2b) : NULL, q, k,
                                  v, ws(m, W_ATTN_SCRATCH), s, b, m->al, m->kvh, ql, p, bf16);
}

// Qwen3: dL/d(the per-head norms' inputs) from dL/dq, dL/dk into q's and k's working slots (attention's
// backward, the last reader of q and k, is done), and the norms' weight gradients.
static void qk_norm_grad(GPT *m, int l, const BlockTensors *w, const BlockTensors *g, float **dq, float **dk) {
    int n = m->s_cur * m->b_cur;
    size_t nql = (size_t)n * m->ql, nkv = (size_t)n * m->kvl;
    const float *q_in = remat_in(m, l, ACT_Q_NORM_IN, nql), *k_in = remat_in(m, l, ACT_K_NORM_IN, nkv);
    const float *qs = remat_in(m, l, ACT_Q_NORM_STATS, (size_t)n * m->al);
    const float *ks = remat_in(m, l, ACT_K_NORM_STATS, (size_t)n * m->kvh);
    float *dq_in = work_slot(m, ACT_Q, l), *dk_in = work_slot(m, ACT_K, l);
    qk_norm_backward(m, w, g, dq_in, dk_in, *dq, *dk, q_in, k_in, qs, ks, n);
    *dq = dq_in;
    *dk = dk_in;
}

// q, k, v projections' backward from W_D_Q, W_D_K, W_D_V (RoPE's transpose first, then the per-head norms'):
// dL/dx into W_OUT.
static void qkv_backward(GPT *m, int l, const BlockTensors *w, const BlockTensors *g) {
    BlockActs *A = &m->act->blocks[l];
    int h = m->cfg.hidden, ql = m->ql, kvl = m->kvl, n = m->s_cur * m->b_cur, nr = m->s_rank * m->b_cur;
    size_t nrh = (size_t)nr * h, qh = (size_t)ql * h, kh = (size_t)kvl * h;
    float *dq = ws(m, W_D_Q), *dk = ws(m, W_D_K);
    if (rotary(m)) {
        int d = gpt_head_dim(&m->cfg), rot = gpt_rotary_dim(&m->cfg);
        m->be->rope_backward(m->be, dq, dq, ql, m->rope_cs, m->cfg.seq, n, m->b_cur, m->al, d, rot, 0);
        m->be->rope_backward(m->be, dk, dk, kvl, m->rope_cs, m->cfg.seq, n, m->b_cur, m->kvh, d, rot, 0);
    }
    if (m->cfg.qk_norm) qk_norm_grad(m, l, w, g, &dq, &dk);
    float *gb = g->qkv_b, *gw = g->qkv_w;
    int x_read = gw != NULL;
    for (int i = 0; i < LORA_QKV_SITE_COUNT; i++) x_read |= lora_a_trains(m, lora_qkv_site(i));
    GemmIn x = grad_input(m, A, ACT_QKV_IN, l, nrh, 1, x_read);
    int adapters = 0;
    for (int i = 0; i < LORA_QKV_SITE_COUNT; i++) adapters |= lora_on(m, lora_qkv_site(i));
    // dq, dk, dv rounded once each for the base's GEMMs and the adapters' (all three held in W_X16 at once)
    const float *d32[3] = {dq, dk, ws(m, W_D_V)};
    size_t dn[3] = {(size_t)n * ql, (size_t)n * kvl, (size_t)n * kvl};
    const uint16_t *d16[3] = {NULL, NULL, NULL};
    size_t at = 0;
    for (int i = 0; i < 3; at += dn[i], i++) d16[i] = grad_shared16(m, at, d32[i], dn[i], adapters, gb);
    const float *wk = w->qkv_w + qh, *wv = wk + kh;
    float *gwk = gw ? gw + qh : NULL, *gwv = gw ? gw + qh + kh : NULL;
    // No dL/dx where nothing reads it (layer 0 under LoRA: the base is frozen, so gw and gb are NULL too)
    float *dx = act_input_grad_dead(&m->shape, l) ? NULL : ws(m, W_OUT);
    if (dx && d16[0]) {
        linear_bwd_dy16(m, dx, h, 0, gw, d16[0], ql, x, h, w->qkv_w, n, h, ql);
        linear_bwd_dy16(m, dx, h, 1, gwk, d16[1], kvl, x, h, wk, n, h, kvl);
        linear_bwd_dy16(m, dx, h, 1, gwv, d16[2], kvl, x, h, wv, n, h, kvl);
    } else if (dx) {
        linear_bwd16(m, dx, h, 0, gw, gb, dq, ql, x, h, w->qkv_w, n, h, ql);
        linear_bwd16(m, dx, h, 1, gwk, gb ? gb + ql : NULL, dk, kvl, x, h, wk, n, h, kvl);
        linear_bwd16(m, dx, h, 1, gwv, gb ? gb + ql + kvl : NULL, ws(m, W_D_V), kvl, x, h, wv, n, h, kvl);
    }
    for (int i = 0; i < LORA_QKV_SITE_COUNT; i++) {   // the adapters' part of dL/dx, and their gradients
        LoraSite s = lora_qkv_site(i);
        if (!lora_on(m, s)) continue;
        LoraOut dy = lora_qkv_outs(m, s, dq, dk, ws(m, W_D_V));
        for (int k = 0; d16[0] && k < dy.blocks; k++)   // each block's place in its gradient's bf16 copy
            for (int b = 0; b < 3; b++)
                if (dy.y[k] >= d32[b] && dy.y[k] < d32[b] + dn[b]) dy.y16[k] = d16[b] + (dy.y[k] - d32[b]);
        int a = lora_a_trains(m, s);
        lora_column_backward(m, l, s, &dy, a ? x.f32 : NULL, a ? x.bf16 : NULL, h, dx, h);
    }
}

// The MLP half's backward: dy = dL/d(its output); dL/d(its norm's input) accumulates into dx (the
// standard block: dx = dy, the residual stream's gradient; a reversible block: dL/dy1).
void mlp_half_backward(GPT *m, int l, const float *dy, float *dx) {
    const GPTConfig *c = &m->cfg;
    int h = c->hidden, nr = m->s_rank * m->b_cur;
    size_t nrh = (size_t)nr * h;
    float p = c->dropout;
    int drop = p > 0.0f;
    BlockTensors w = gpt_block_weights(m, l), g = block_tensors(m, &m->g, l);
    remat_half(m, l, 1);   // ln2_in, the MLP's inner tensors again (RECOMPUTE_PROJ_OUT, _FC1_OUT) while W_OUT and
                           // W_GATHER are free

    // x2 = x1 + Dropout(FC2(GeLU(FC1(Norm2(x1)))))     (llama: Down(SiLU(Gate) ⊙ Up))
    const float *d_mlp_out = dy;
    if (drop) {
        m->be->dropout_backward(m->be, ws(m, W_D_TMP), dy, remat_mask_in(m, l, ACT_DROP2_MASK, nrh), p, nrh);
        d_mlp_out = ws(m, W_D_TMP);
    }
    if (g.fc2_b) m->be->bias_backward(m->be, g.fc2_b, d_mlp_out, h, nr, h);
    const float *d_fc2_out = tp_gather_rows(m, d_mlp_out, sp_buf(m, W_GATHER), h, TPC_BLOCK);   // ḡ backward
    if (swiglu(m)) mlp_backward_swiglu(m, l, &w, &g, d_fc2_out);
    else mlp_backward_gelu(m, l, &w, &g, d_fc2_out);
    const float *d_fc1_in = tp_reduce_rows(m, ws(m, W_OUT), ws(m, W_D_TMP), h, TPC_BLOCK);     // g backward
    norm_backward(m, l, ACT_LN2_IN, ACT_FC1_IN, ACT_LN2_STATS, d_fc1_in, dx, w.ln2_w, w.ln2_b, g.ln2_w, g.ln2_b);
}

// The attention half's backward: dy = dL/d(its output); dL/d(its norm's input) accumulates into dx (the
// standard block: dx = dy; a reversible block: dL/dx2).
void attn_half_backward(GPT *m, int l, const float *dy, float *dx) {
    const GPTConfig *c = &m->cfg;
    int h = c->hidden, ql = m->ql, n = m->s_cur * m->b_cur, nr = m->s_rank * m->b_cur;
    size_t nrh = (size_t)nr * h, nql = (size_t)n * ql;
    float p = c->dropout;
    int drop = p > 0.0f;
    BlockActs *A = &m->act->blocks[l];
    BlockTensors w = gpt_block_weights(m, l), g = block_tensors(m, &m->g, l);
    remat_half(m, l, 0);   // q, k, v again (RECOMPUTE_QKV_OUT), before W_GATHER holds a gradient

    // x1 = x + Dropout(Proj(Attn(Norm1(x))))
    const float *d_attn_out = dy;
    if (drop) {
        m->be->dropout_backward(m->be, ws(m, W_D_TMP), dy, remat_mask_in(m, l, ACT_DROP1_MASK, nrh), p, nrh);
        d_attn_out = ws(m, W_D_TMP);
    }
    if (g.proj_b) m->be->bias_backward(m->be, g.proj_b, d_attn_out, h, nr, h);
    const float *d_proj_out = tp_gather_rows(m, d_attn_out, sp_buf(m, W_GATHER), h, TPC_BLOCK);   // ḡ backward
    float *d_ctx = ws(m, W_D_4H);  // [s,b,h/t] slice of the MLP scratch
    LoraSite o_site = swiglu(m) ? LORA_O : LORA_PROJ;
    GemmIn ctx_in = grad_input(m, A, ACT_PROJ_IN, l, nql, 0, g.proj_w || lora_a_trains(m, o_site));
    const uint16_t *d16 = grad_shared16(m, 0, d_proj_out, (size_t)n * h, lora_on(m, o_site), NULL);
    if (d16) linear_bwd_dy16(m, d_ctx, ql, 0, g.proj_w, d16, h, ctx_in, ql, w.proj_w, n, ql, h);
    else linear_bwd16(m, d_ctx, ql, 0, g.proj_w, NULL, d_proj_out, h, ctx_in, ql, w.proj_w, n, ql, h);
    if (lora_on(m, o_site))
        lora_row_backward(m, l, o_site, d_proj_out, d16, ctx_in.f32, ctx_in.bf16, ql, d_ctx, h);
    attention_core_backward(m, l, d_ctx);
    qkv_backward(m, l, &w, &g);
    if (act_input_grad_dead(&m->shape, l)) {   // the frozen embedding reads no dL/d(layer 0's input)
        if (g.ln1_w || g.ln1_b) ctron_fatal("layer %d: its first norm trains, but its backward is skipped", l);
        return;
    }
    const float *d_qkv_in = tp_reduce_rows(m, ws(m, W_OUT), ws(m, W_D_TMP), h, TPC_BLOCK);      // g backward
    norm_backward(m, l, ACT_LN1_IN, ACT_QKV_IN, ACT_LN1_STATS, d_qkv_in, dx, w.ln1_w, w.ln1_b, g.ln1_w, g.ln1_b);
}

// d_res holds dL/d(block output) on entry and dL/d(block input) on return (the rank's rows). Block
// l's tensors are all held (kept by the forward, or recomputed just before); selective layers redo
// the attention core.
static void block_backward_pass(GPT *m, int l) {
    mlp_half_backward(m, l, ws(m, W_D_RES), ws(m, W_D_RES));
    attn_half_backward(m, l, ws(m, W_D_RES), ws(m, W_D_RES));
}

static void block_backward(GPT *m, int l) {
    scope_begin(m, l);
    block_backward_pass(m, l);
    scope_end(m, l);
}

// Runs the forward of layers g0..g1 again from g0's checkpoint, keeping everything, so that their
// backward can follow. The recomputation is the same code on the same inputs: bit-identical.
static void recompute_group(GPT *m, int g0, int g1) {
    const float *x = saved_in(m, &m->act->blocks[g0], ACT_LN1_IN, g0, rank_rows_h(m));
    for (int l = g0; l <= g1; l++) x = block_forward(m, l, x, PASS_RECOMPUTE, l < g1 ? OUT_NEXT_BLOCK : OUT_DISCARD);
}

void gpt_backward(GPT *m, const int32_t *tokens, StepCtx ctx) {
    if (!ctx.train || !m->act->ctx.train) ctron_fatal("gpt_backward after an evaluation forward");
    gpt_backward_chunk(m, 0, m->cfg.layers, tokens, NULL, NULL);
}

// logits = lm_in · wteᵀ (the logits buffer already holds dL/dlogits), then the final LN: dL/d(last
// block's output) into d_res.
static void head_backward(GPT *m) {
    const GPTConfig *c = &m->cfg;
    int h = c->hidden, vl = m->vl, n = m->s_cur * m->b_cur, nr = m->s_rank * m->b_cur;
    size_t nrh = rank_rows_h(m);
    BlockActs *M = &m->act->model_acts;
    scope_begin(m, scope_key(m, SCOPE_HEAD));
    const float *d_lm_in;
    if (m->policy.mini_seq > 1) {   // the forward did the output layer's backward; its dL/d lm_in was kept
        const float *lm_grad = saved_in(m, M, ACT_LM_GRAD, -1, (size_t)n * h);
        if (m->tp.t > 1) m->be->copy(m->be, ws(m, W_OUT), lm_grad, (size_t)n * h * sizeof(float), COPY_D2D);
        d_lm_in = m->tp.t > 1 ? tp_reduce_rows(m, ws(m, W_OUT), ws(m, W_D_TMP), h, TPC_VOCAB) : lm_grad;
    } else {
        GemmIn lm_in = grad_input(m, M, ACT_LM_IN, -1, nrh, 1, out_w(m, &m->g) != NULL);   // frozen (LoRA): none
        if (logits_grad16(m))   // the bf16 gradient the cross-entropy left, row r at 2·vl·r
            linear_bwd_dy16(m, ws(m, W_OUT), h, 0, out_w(m, &m->g), (const uint16_t *)m->act->logits, 2 * vl, lm_in, h,
                            out_w(m, &m->w), n, h, vl);
        else
            linear_bwd16(m, ws(m, W_OUT), h, 0, out_w(m, &m->g), NULL, m->act->logits, vl, lm_in, h, out_w(m, &m->w),
                         n, h, vl);
        d_lm_in = tp_reduce_rows(m, ws(m, W_OUT), ws(m, W_D_TMP), h, TPC_VOCAB);
    }
    const float *lnf_w, *lnf_b;
    gpt_head_norm_weights(m, &lnf_w, &lnf_b);
    const float *stats = saved_in(m, M, ACT_LNF_STATS, -1, norm_stats(m) * (size_t)nr);
    const uint16_t *x16 = norm_backward16(m) ? saved_in_bf16(m, M, ACT_LNF_IN, -1) : NULL;
    if (x16) norm_backward_rows16(m, ws(m, W_D_RES), 0, m->g.lnf_w, m->g.lnf_b, d_lm_in, x16, stats, lnf_w, nr);
    else norm_backward_rows(m, ws(m, W_D_RES), 0, m->g.lnf_w, m->g.lnf_b, d_lm_in, saved_in(m, M, ACT_LNF_IN, -1, nrh),
                            NULL, stats, lnf_w, lnf_b, nr);
    arena_pop_to(&m->act->arena, m->act->mark_head);
    scope_end(m, scope_key(m, SCOPE_HEAD));
}

// x = Dropout(wte[tokens] + wpe): d_res (dL/dx) into the embeddings' gradients.
static void embedding_backward(GPT *m, const int32_t *tokens) {
    const GPTConfig *c = &m->cfg;
    int s = m->s_cur, b = m->b_cur, h = c->hidden, n = s * b;
    size_t nrh = rank_rows_h(m);
    scope_begin(m, scope_key(m, SCOPE_EMB));
    if (c->dropout > 0.0f)
        m->be->dropout_apply(m->be, ws(m, W_D_RES), mask_in(m, &m->act->model_acts, ACT_EMB_MASK, -1, nrh), c->dropout, nrh);
    if (m->tp.t <= 1 && m->g.wpe) {
        m->be->embedding_backward(m->be, m->g.wte, m->g.wpe, ws(m, W_D_RES), tokens, s, b, h);
    } else if (m->tp.t <= 1) {
        m->be->embedding_vocab_backward(m->be, m->g.wte, ws(m, W_D_RES), tokens, 0, m->vl, n, h);
    } else {
        if (m->g.wpe) m->be->embedding_positions_backward(m->be, m->g.wpe, ws(m, W_D_RES), m->s0, m->s_rank, b, h);
        const float *d_x = tp_gather_rows(m, ws(m, W_D_RES), sp_buf(m, W_GATHER), h, TPC_VOCAB);
        m->be->embedding_vocab_backward(m->be, m->g.wte, d_x, tokens, m->v0, m->vl, n, h);
    }
    scope_end(m, scope_key(m, SCOPE_EMB));
}

void gpt_backward_chunk(GPT *m, int l0, int l1, const int32_t *tokens, const float *d_output, float *d_input) {
    int L = m->cfg.layers;
    if (!m->act->ctx.train) ctron_fatal("gpt_backward after an evaluation forward");
    size_t nrh = rank_rows_h(m);
    const MemoryPolicy *pol = plan_of(m);
    m->ws_memo[W_D_RES] = NULL;   // the running gradient: one temporary for the whole backward
    if (l1 == L) head_backward(m);
    else m->be->copy(m->be, ws(m, W_D_RES), d_output, nrh * sizeof(float), COPY_D2D);

    if (m->cfg.reversible) rev_backward(m);   // each block's inputs rebuilt from its outputs, then its backward
    for (int l = l1 - 1; l >= l0 && !m->cfg.reversible; l--) {
        offload_fetch(m, l);   // l's offloaded tensors in their slot; the next layer's on their way
        memo_fetch(m, l);      // likewise MEMO's swapped token slices
        if (pol->kind[l] == RECOMPUTE_FULL) {   // groups never straddle chunks (the stage policy cuts them)
            int g0 = pol->group_start[l];
            int last = l + 1 == l1 || pol->kind[l + 1] != RECOMPUTE_FULL || pol->group_start[l + 1] != g0;
            if (last) recompute_group(m, g0, l);
        }
        if (pol->kind[l] == RECOMPUTE_MEMO) memo_recompute(m, l);   // its later tokens again, every tensor whole
        block_backward(m, l);
        arena_pop_to(&m->act->arena, m->act->blocks[l].mark);
        offload_layer_released(m, l);
        memo_layer_released(m, l);
        memset(m->act->blocks[l].saved, 0, sizeof m->act->blocks[l].saved);
        // the layer's recomputed tensors and probabilities (model/remat.h) are spent
        m->remat_made = 0;
    }

    (void)tokens;   // the forward's, kept on the device in the context
    if (l0 == 0) {
        if (!gpt_lora(m)) embedding_backward(m, m->act->tokens);   // a frozen embedding has no backward
    } else {
        m->be->copy(m->be, d_input, ws(m, W_D_RES), nrh * sizeof(float), COPY_D2D);
    }
    scope_end(m, scope_key(m, SCOPE_BWD));
    offload_end_step(m);
    memo_end_step(m);
    arena_pop_to(&m->act->arena, 0);
    memset(m->act->model_acts.saved, 0, sizeof m->act->model_acts.saved);
}

void gpt_params_changed(GPT *m) { m->params16_stale = 1; }

void gpt_release(GPT *m) {
    offload_end_step(m);
    memo_end_step(m);
    arena_pop_to(&m->act->arena, 0);
    m->ledger.paused = 0;
}
