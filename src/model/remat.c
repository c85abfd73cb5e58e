#include "model/remat.h"
#include "model/family.h"
#include "model/params.h"
#include "model/qk_norm.h"
#include "model/saved.h"
#include "model/base16.h"
#include "model/lora_site.h"
#include "model/tp_regions.h"
#include "model/workspace.h"
#include "backend/cpu/dropout.h"
#include "util/common.h"

// Is `name` a linear's input the layer does not keep (a frozen base's, which only A's gradient reads: LoRA-FA
// keeps none) while a GEMM part needs it (`part`)? Then the norm (or the attention) makes it again too.
static int gemm_input_dropped(unsigned t, ActName name, unsigned part) {
    return (t & part) && !act_kept(RECOMPUTE_NONE, 1, t, name);
}

int remat_makes(const GPT *m, ActName name) {
    unsigned t = m->policy.tempo;
    if (name == ACT_QKV_IN) return (t & RECOMPUTE_NORM_OUT) || gemm_input_dropped(t, name, RECOMPUTE_QKV_OUT);
    if (name == ACT_FC1_IN) return (t & RECOMPUTE_NORM_OUT) || gemm_input_dropped(t, name, RECOMPUTE_FC1_OUT);
    if (name == ACT_PROJ_IN && gemm_input_dropped(t, name, RECOMPUTE_PROJ_OUT)) return 1;
    if (name == ACT_FC2_IN) return (t & (RECOMPUTE_ACT_OUT | RECOMPUTE_FC1_OUT)) != 0;
    if (name == ACT_PROJ_IN) return (t & RECOMPUTE_ATTN_OUT) != 0;
    if (name == ACT_ATTN_LSE) return (t & RECOMPUTE_ATTN_OUT) && (t & ATTN_FLASH);   // flash's forward makes it with O
    if (act_is_qkv_out(name))   // Qwen3's q, k and 1/rms: from the kept norms' inputs unless q/k/v are remade whole
        return (t & RECOMPUTE_QKV_OUT) || ((t & QK_NORM_REBUILD) && !act_kept(RECOMPUTE_NONE, 1, t, name));
    if (name == ACT_GELU_IN || name == ACT_GATE || name == ACT_UP) return (t & RECOMPUTE_FC1_OUT) != 0;
    if (name == ACT_LN2_IN) return (t & RECOMPUTE_PROJ_OUT) != 0;
    return (t & act_mask_part(name)) != 0;
}

// Notes name as made again at p for the layer in backward (until the layer ends). Read it back from here,
// never from a second work_slot call: under --static-plan each call is a temporary of its own.
static void *made(GPT *m, ActName name, void *p) {
    m->remat_made |= 1u << name;
    m->remat_at[name] = p;
    return p;
}
static int have(const GPT *m, ActName name) { return (m->remat_made >> name & 1u) != 0; }

// y[n,out] = x[n,in] · Wᵀ (+ bias): the forward's GEMM call (gpt.c's linear_fwd16, without the kept bf16
// copy: the backend rounds x to the same bits).
static void linear_again(GPT *m, float *y, int ldy, const float *x, int ldx, const float *w, const float *bias, int n,
                         int in, int out) {
    m->be->linear_forward(m->be, y, ldy, x, NULL, ldx, gpt_base_key(m, w) ? NULL : w, gpt_w16(m, w), bias, n, in, out);
}

// The whole input of a column-parallel linear from its rank's rows: SP all-gathers them into W_GATHER
// (free here: the halves' backward call this before their own gathers).
static const float *gathered(GPT *m, const float *x) {
    return tp_gather_rows(m, x, m->tp.t > 1 && m->tp.sp ? ws(m, W_GATHER) : NULL, m->cfg.hidden, TPC_REGATHER);
}

// y = Norm(x) again on the rank's rows from the kept input; the statistics come out again too (into
// their workspace slot: backward reads the kept ones, bitwise the same).
static const float *norm_again(GPT *m, int l, ActName in, ActName out, ActName stats) {
    BlockTensors w = gpt_block_weights(m, l);   // a bf16 base's norm weights widened (no fp32 copy behind m->w)
    int nr = m->s_rank * m->b_cur, first = out == ACT_QKV_IN;
    size_t nrh = (size_t)nr * m->cfg.hidden;
    const float *x = remat_in(m, l, in, nrh);
    float *y = made(m, out, work_slot(m, out, l)), *st = work_slot(m, stats, l);
    family_norm_forward(m->be, m, y, st, x, first ? w.ln1_w : w.ln2_w, first ? w.ln1_b : w.ln2_b, nr);
    if (m->policy.act_dtype == ACT_BF16) m->be->bf16_round(m->be, y, nrh);   // as saved_done rounds the forward's
    return y;
}

// q, k, v = qkv_in · W_{q,k,v}ᵀ + b (+ the adapters' term; the per-head norms (Qwen3) and RoPE on q and k), as
// qkv_forward makes them, rounded as storage rounds them, into their workspace slots (the norms' inputs and
// 1/rms too).
static void qkv_again(GPT *m, int l) {
    int h = m->cfg.hidden, ql = m->ql, kvl = m->kvl, n = m->s_cur * m->b_cur;
    BlockTensors w = gpt_block_weights(m, l);
    const float *x = gathered(m, remat_in(m, l, ACT_QKV_IN, (size_t)m->s_rank * m->b_cur * h));
    const float *wq = w.qkv_w, *wk = wq + (size_t)ql * h, *wv = wk + (size_t)kvl * h;
    const float *bq = w.qkv_b, *bk = bq ? bq + ql : NULL, *bv = bq ? bk + kvl : NULL;
    float *q = made(m, ACT_Q, work_slot(m, ACT_Q, l)), *k = made(m, ACT_K, work_slot(m, ACT_K, l)),
          *v = made(m, ACT_V, work_slot(m, ACT_V, l));
    float *q_in = q, *k_in = k;   // where the projections go (the per-head norms' inputs with them)
    if (m->cfg.qk_norm) {
        q_in = made(m, ACT_Q_NORM_IN, work_slot(m, ACT_Q_NORM_IN, l));
        k_in = made(m, ACT_K_NORM_IN, work_slot(m, ACT_K_NORM_IN, l));
    }
    linear_again(m, q_in, ql, x, h, wq, bq, n, h, ql);
    linear_again(m, k_in, kvl, x, h, wk, bk, n, h, kvl);
    linear_again(m, v, kvl, x, h, wv, bv, n, h, kvl);
    // the adapters' (α/r)·B(A x) from their kept x·Aᵀ, before the norms and RoPE, as qkv_forward adds them
    for (int i = 0; i < LORA_QKV_SITE_COUNT; i++) {
        LoraOut o = lora_qkv_outs(m, lora_qkv_site(i), q_in, k_in, v);
        if (lora_on(m, lora_qkv_site(i))) lora_column_add(m, l, lora_qkv_site(i), &o);
    }
    float *qs = NULL, *ks = NULL;
    if (m->cfg.qk_norm) {
        if (m->policy.act_dtype == ACT_BF16) {   // as saved_done rounds the forward's, before its norms read them
            m->be->bf16_round(m->be, q_in, (size_t)n * ql);
            m->be->bf16_round(m->be, k_in, (size_t)n * kvl);
        }
        qs = made(m, ACT_Q_NORM_STATS, work_slot(m, ACT_Q_NORM_STATS, l));
        ks = made(m, ACT_K_NORM_STATS, work_slot(m, ACT_K_NORM_STATS, l));
    }
    qk_rows(m, &w, q, k, qs, ks, q_in, k_in, 0, m->s_cur);
    if (m->policy.act_dtype == ACT_BF16) {   // as saved_done rounds the forward's
        m->be->bf16_round(m->be, q, (size_t)n * ql);
        m->be->bf16_round(m->be, k, (size_t)n * kvl);
        m->be->bf16_round(m->be, v, (size_t)n * kvl);
    }
}

// Qwen3: q = RoPE(Norm_q(q_norm_in)), k likewise, and the norms' 1/rms, from the kept (stored) inputs, as
// qkv_forward makes them (the same kernels on the same values: the forward's bits), rounded as storage rounds
// q and k, into their workspace slots.
static void qk_again(GPT *m, int l) {
    int ql = m->ql, kvl = m->kvl, n = m->s_cur * m->b_cur;
    BlockTensors w = gpt_block_weights(m, l);
    const float *q_in = remat_in(m, l, ACT_Q_NORM_IN, (size_t)n * ql), *k_in = remat_in(m, l, ACT_K_NORM_IN, (size_t)n * kvl);
    float *q = made(m, ACT_Q, work_slot(m, ACT_Q, l)), *k = made(m, ACT_K, work_slot(m, ACT_K, l));
    qk_rows(m, &w, q, k, made(m, ACT_Q_NORM_STATS, work_slot(m, ACT_Q_NORM_STATS, l)),
            made(m, ACT_K_NORM_STATS, work_slot(m, ACT_K_NORM_STATS, l)), q_in, k_in, 0, m->s_cur);
    if (m->policy.act_dtype == ACT_BF16) {   // as saved_done rounds the forward's
        m->be->bf16_round(m->be, q, (size_t)n * ql);
        m->be->bf16_round(m->be, k, (size_t)n * kvl);
    }
}

// y [s·b, cols] += the column site's (α/r)·B(A x) from its kept x·Aᵀ (nothing without an adapter there).
static void adapter_again(GPT *m, int l, LoraSite s, float *y, int cols) {
    if (!lora_on(m, s)) return;
    LoraOut o = {1, {y}, {cols}, {cols}, {0}, {NULL}};
    lora_column_add(m, l, s, &o);
}

// The MLP's inner tensors from fc1_in, as mlp_inner_gelu / mlp_inner_swiglu make them: GPT-2's
// gelu_in = FC1(x) + b (in place) and fc2_in = GeLU(gelu_in) in one bias_gelu_forward (which rounds both
// under bf16 storage); llama's gate and up GEMMs, rounded as storage rounds them.
static void mlp_again(GPT *m, int l) {
    int h = m->cfg.hidden, fl = m->fl, n = m->s_cur * m->b_cur, bf16 = m->policy.act_dtype == ACT_BF16;
    size_t nfl = (size_t)n * fl;
    BlockTensors w = gpt_block_weights(m, l);
    const float *x = gathered(m, remat_in(m, l, ACT_FC1_IN, (size_t)m->s_rank * m->b_cur * h));
    if (swiglu(m)) {
        float *gate = made(m, ACT_GATE, work_slot(m, ACT_GATE, l)), *up = made(m, ACT_UP, work_slot(m, ACT_UP, l));
        linear_again(m, gate, fl, x, h, w.fc1_w, NULL, n, h, fl);
        linear_again(m, up, fl, x, h, w.fc1_w + (size_t)fl * h, NULL, n, h, fl);
        for (int i = 0; i < LORA_GATE_UP_SITE_COUNT; i++) {
            LoraOut o = lora_gate_up_outs(m, lora_gate_up_site(i), gate, up);
            if (lora_on(m, lora_gate_up_site(i))) lora_column_add(m, l, lora_gate_up_site(i), &o);
        }
        if (bf16) {
            m->be->bf16_round(m->be, gate, nfl);
            m->be->bf16_round(m->be, up, nfl);
        }
        return;
    }
    float *gelu_in = made(m, ACT_GELU_IN, work_slot(m, ACT_GELU_IN, l));
    float *fc2_in = made(m, ACT_FC2_IN, work_slot(m, ACT_FC2_IN, l));
    linear_again(m, gelu_in, fl, x, h, w.fc1_w, NULL, n, h, fl);
    adapter_again(m, l, LORA_FC, gelu_in, fl);
    m->be->bias_gelu_forward(m->be, fc2_in, gelu_in, w.fc1_b, n, fl, bf16);
}

// ln2_in = ln1_in + Dropout(Proj(proj_in) + b) on the rank's rows, as attn_half_forward makes it (Proj's
// partial sums reduced over TP ranks in W_OUT, reduce-scattered into W_GATHER under SP; the drop1 mask as
// the backward reads it), rounded as storage rounds it, into its workspace slot.
static void proj_again(GPT *m, int l) {
    BlockActs *A = &m->act->blocks[l];
    int h = m->cfg.hidden, ql = m->ql, n = m->s_cur * m->b_cur, nr = m->s_rank * m->b_cur;
    size_t nrh = (size_t)nr * h;
    BlockTensors w = gpt_block_weights(m, l);
    float p = m->cfg.dropout;
    const float *ctx = remat_in(m, l, ACT_PROJ_IN, (size_t)n * ql);
    linear_again(m, ws(m, W_OUT), h, ctx, ql, w.proj_w, NULL, n, ql, h);
    float *attn_out = tp_reduce_rows(m, ws(m, W_OUT), m->tp.t > 1 && m->tp.sp ? ws(m, W_GATHER) : NULL, h, TPC_BLOCK);
    LoraSite o_site = swiglu(m) ? LORA_O : LORA_PROJ;   // its adapter's term on the reduced rows, as the forward
    if (lora_on(m, o_site)) lora_row_add(m, l, o_site, lora_v_kept(m, l, o_site), attn_out, h);
    const uint8_t *drop1 = p > 0.0f ? remat_mask_in(m, l, ACT_DROP1_MASK, nrh) : NULL;
    float *x1 = made(m, ACT_LN2_IN, work_slot(m, ACT_LN2_IN, l));
    m->be->dropout_residual_forward(m->be, x1, saved_in(m, A, ACT_LN1_IN, l, nrh), attn_out, w.proj_b, drop1, p, nr, h);
    if (m->policy.act_dtype == ACT_BF16) m->be->bf16_round(m->be, x1, nrh);   // as saved_done rounds the forward's
}

void remat_half(GPT *m, int l, int mlp) {
    if (mlp && remat_makes(m, ACT_LN2_IN) && !have(m, ACT_LN2_IN)) proj_again(m, l);
    if (mlp && remat_makes(m, swiglu(m) ? ACT_GATE : ACT_GELU_IN) && !have(m, ACT_FC2_IN) && !have(m, ACT_GATE))
        mlp_again(m, l);
    if (!mlp && (m->policy.tempo & RECOMPUTE_QKV_OUT) && !have(m, ACT_Q)) qkv_again(m, l);
}

// fc2_in = GeLU(gelu_in): gelu_in already holds FC1's output plus its bias (bias_gelu_forward adds it in
// place, and rounds it under bf16 storage before GeLU reads it).
static const float *gelu_again(GPT *m, int l) {
    BlockActs *A = &m->act->blocks[l];
    size_t n = (size_t)m->s_cur * m->b_cur * (size_t)m->fl;
    const float *x = saved_in(m, A, ACT_GELU_IN, l, n);
    float *y = work_slot(m, ACT_FC2_IN, l);
    m->be->gelu_forward(m->be, y, x, n);
    if (m->policy.act_dtype == ACT_BF16) m->be->bf16_round(m->be, y, n);
    return y;
}

// ctx = Attention(q, k, v) with the forward's kernel, site and rounding; its probabilities, mask and dropped
// probabilities into their workspace slots (where a selective layer's forward wrote them), for the
// standard attention backward that follows; under flash, O and the log-sum-exp by flash's forward (the
// same tiles in the same order: the forward's bits), for flash's backward.
static const float *attention_again(GPT *m, int l) {
    int s = m->s_cur, b = m->b_cur, bf16 = m->policy.act_dtype == ACT_BF16, window = gpt_layer_window(&m->cfg, l);
    size_t n = (size_t)s * b, nql = n * (size_t)m->ql, nkv = n * (size_t)m->kvl;
    DropoutSite site = {philox_key_from_seed(m->act->ctx.seed), m->act->ctx.step, (uint32_t)l, SITE_ATTN,
                        m->act->ctx.train ? m->cfg.dropout : 0.0f};   // as gpt.c's site_of
    int drop = site.p > 0.0f;
    float *ctx = made(m, ACT_PROJ_IN, work_slot(m, ACT_PROJ_IN, l));
    if (m->policy.tempo & ATTN_FLASH) {
        FlashIn16 in = {remat_flash16(m, l, ACT_Q), remat_flash16(m, l, ACT_K), remat_flash16(m, l, ACT_V), NULL};
        const float *q = in.q ? NULL : remat_in(m, l, ACT_Q, nql), *k = in.k ? NULL : remat_in(m, l, ACT_K, nkv);
        const float *v = in.v ? NULL : remat_in(m, l, ACT_V, nkv);
        float *lse = made(m, ACT_ATTN_LSE, work_slot(m, ACT_ATTN_LSE, l));
        if (in.q || in.k || in.v)
            m->be->flash_attention_forward16(m->be, ctx, lse, &in, q, k, v, ws(m, W_ATTN_SCRATCH), s, 0, s, b, m->al,
                                             m->kvh, m->ql, window, m->head0, site, m->act->ctx.sample0);
        else
            m->be->flash_attention_forward(m->be, ctx, lse, q, k, v, ws(m, W_ATTN_SCRATCH), s, b, m->al, m->kvh,
                                           m->ql, window, m->head0, site, m->act->ctx.sample0);
        if (bf16) m->be->bf16_round(m->be, ctx, nql);   // as saved_done rounds the forward's
        return ctx;
    }
    const float *q = remat_in(m, l, ACT_Q, nql), *k = remat_in(m, l, ACT_K, nkv), *v = remat_in(m, l, ACT_V, nkv);
    float *prob = made(m, ACT_ATTN_PROB, work_slot(m, ACT_ATTN_PROB, l));
    uint8_t *mask = drop ? made(m, ACT_ATTN_MASK, work_slot(m, ACT_ATTN_MASK, l)) : NULL;
    float *dropped = drop ? made(m, ACT_ATTN_DROP, work_slot(m, ACT_ATTN_DROP, l)) : NULL;
    m->be->attention_forward(m->be, ctx, prob, mask, dropped, q, k, v, s, b, m->al, m->kvh, m->ql, window, m->head0,
                             site, m->act->ctx.sample0, bf16);
    if (bf16) m->be->bf16_round(m->be, ctx, nql);   // as saved_done rounds the forward's
    return ctx;
}

void *remat_probs(GPT *m, int l, ActName name) {
    if (!have(m, ACT_ATTN_PROB)) attention_again(m, l);   // Proj's weight gradient did not ask first
    return m->remat_at[name];
}

const float *remat_tensor(GPT *m, int l, ActName name) {
    if (have(m, name)) return m->remat_at[name];   // made once per layer
    switch (name) {
    case ACT_QKV_IN: norm_again(m, l, ACT_LN1_IN, ACT_QKV_IN, ACT_LN1_STATS); break;
    case ACT_FC1_IN: norm_again(m, l, ACT_LN2_IN, ACT_FC1_IN, ACT_LN2_STATS); break;
    case ACT_FC2_IN:
        if (m->policy.tempo & RECOMPUTE_FC1_OUT) mlp_again(m, l);
        else return gelu_again(m, l);   // once: only FC2's weight gradient reads it
        break;
    case ACT_PROJ_IN: case ACT_ATTN_LSE: attention_again(m, l); break;
    case ACT_Q: case ACT_K: case ACT_Q_NORM_STATS: case ACT_K_NORM_STATS:   // Qwen3's: from the norms' inputs
        if (m->policy.tempo & RECOMPUTE_QKV_OUT) qkv_again(m, l);
        else qk_again(m, l);
        break;
    case ACT_V: case ACT_Q_NORM_IN: case ACT_K_NORM_IN: qkv_again(m, l); break;
    case ACT_GELU_IN: case ACT_GATE: case ACT_UP: mlp_again(m, l); break;
    case ACT_LN2_IN: proj_again(m, l); break;
    default: ctron_fatal("remat_tensor: %s is not made again by the fusion search's parts", act_name_str(name));
    }
    return m->remat_at[name];
}

const float *remat_in(GPT *m, int l, ActName name, size_t n) {
    if (remat_makes(m, name)) return remat_tensor(m, l, name);
    return saved_in(m, &m->act->blocks[l], name, l, n);
}

const uint16_t *remat_copy16(GPT *m, int l, ActName name) {
    return remat_makes(m, name) ? NULL : saved_in_bf16(m, &m->act->blocks[l], name, l);
}

const uint16_t *remat_flash16(GPT *m, int l, ActName name) {
    return m->be->flash_attention_forward16 ? remat_copy16(m, l, name) : NULL;
}

const uint8_t *remat_mask_in(GPT *m, int l, ActName name, size_t n) {
    if (!remat_makes(m, name)) return mask_in(m, &m->act->blocks[l], name, l, n);
    if (!have(m, name)) mask_regenerate(m, name, l, made(m, name, work_slot(m, name, l)));
    return m->remat_at[name];
}

void remat_check(const MemoryPolicy *p) {
    unsigned t = p->tempo;
    for (int l = 0; (t & RECOMPUTE_ATTN_OUT) && l < p->layers; l++)
        if (p->kind[l] != RECOMPUTE_SELECTIVE)
            ctron_fatal("gpt_init: recomputing the attention's output in layer %d, which is %s (selective layers only: "
                        "their probabilities are not kept)", l, recompute_name(p->kind[l]));
    if ((t & RECOMPUTE_NORM_OUT) && (t & (TEMPO_LAYERNORM | MINI_SEQ)))
        ctron_fatal("gpt_init: recomputing the norms' outputs with %s, which reads them in backward",
                    t & MINI_SEQ ? "mini-seq" : "Tempo's norm-from-output");
    unsigned gemm = t & (RECOMPUTE_QKV_OUT | RECOMPUTE_FC1_OUT | RECOMPUTE_PROJ_OUT);
    if (gemm && (t & (MINI_SEQ | TEMPO_GELU | TEMPO_LAYERNORM | GELU_FEWBIT)))
        ctron_fatal("gpt_init: recomputing %s with %s, whose backward reads what it drops or adds to the GEMMs",
                    gemm & RECOMPUTE_QKV_OUT ? "q, k and v" : gemm & RECOMPUTE_FC1_OUT ? "the MLP's inner tensors" : "ln2_in",
                    t & MINI_SEQ ? "mini-seq" : "Tempo/Few-Bit");
    for (int l = 0; gemm && l < p->layers; l++)
        if (p->kind[l] == RECOMPUTE_MEMO)
            ctron_fatal("gpt_init: recomputing GEMM outputs in layer %d, a memo layer (its own token-wise recompute)", l);
    if ((t & RECOMPUTE_ACT_OUT) && (t & (TEMPO_GELU | GELU_FEWBIT | MINI_SEQ)))
        ctron_fatal("gpt_init: recomputing GeLU's output with %s, which keeps no GeLU input",
                    t & MINI_SEQ ? "mini-seq" : t & TEMPO_GELU ? "Tempo's GeLU" : "Few-Bit GeLU");
}
