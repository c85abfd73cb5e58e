#include "model/memo.h"
#include <string.h>
#include "backend/cpu/dropout.h"
#include "memory/memo_model.h"
#include "model/base16.h"
#include "model/block.h"
#include "model/family.h"
#include "model/linear.h"
#include "model/lora_site.h"
#include "model/offload_sched.h"
#include "model/params.h"
#include "model/qk_norm.h"
#include "model/saved.h"
#include "model/tp_regions.h"
#include "model/workspace.h"
#include "util/common.h"

static size_t padded(size_t n) { return (n + 63) / 64 * 64; }

int memo_rows(const GPT *m, int l) { return (int)memo_swap_positions(m->s_cur, policy_memo_alpha(&m->policy, l)); }

static int stored_bf16(const GPT *m, ActName name) {
    return m->policy.act_dtype == ACT_BF16 && !act_is_fp32_always(name) && !act_is_mask(name);
}

// Why a run cannot have memo layers (NULL: it can).
static const char *unsupported(const GPT *m) {
    if (m->tp.t > 1 && m->tp.sp)   // a rank holds s/t positions of x: a token range spans the ranks' shards
        return "sequence parallelism";
    if (m->pp.p > 1) return "a pipeline";
    if (m->cfg.reversible) return "reversible blocks";
    if (m->policy.tempo & (TEMPO_GELU | TEMPO_LAYERNORM | TEMPO_SOFTMAX | GELU_FEWBIT | MINI_SEQ))
        return "Tempo, Few-Bit or mini-seq";
    if (m->policy.offload) return "--offload";
    if (!m->be->flash_attention_forward_rows) return "this backend (no flash_attention_forward_rows)";
    return NULL;
}

void memo_init(GPT *m) {
    if (!policy_has_memo(&m->policy)) return;
    const char *why = unsupported(m);
    if (why) ctron_fatal("--memo: not built with %s", why);
    for (int l = 0; l < m->cfg.layers; l++)
        if (m->policy.kind[l] == RECOMPUTE_MEMO && !(policy_memo_alpha(&m->policy, l) >= 0.0 && policy_memo_alpha(&m->policy, l) <= 1.0))
            ctron_fatal("--memo: layer %d's alpha %g is not in [0, 1]", l, policy_memo_alpha(&m->policy, l));
    MemoState *o = xcalloc(sizeof *o);
    m->memo = o;
    int L = m->cfg.layers;
    o->owner[0] = o->owner[1] = -1;
    ledger_init(&o->ledger, L);
    size_t at = pool_regions_plan(m, act_memo_span, &o->pool_at, &o->slot, &o->order, &o->n_order, o->span);
    if (at == 0) return;   // α rounds to no position: every memo layer recomputes all of its tokens
    char err[640];
    o->pool = offload_pool_open(m->be, at, m->policy.offload_dir, err, sizeof err);
    if (!o->pool) ctron_fatal("%s", err);
}

void memo_free(GPT *m) {
    MemoState *o = m->memo;
    if (!o) return;
    offload_pool_close(o->pool);   // NULL-safe
    ledger_free(&o->ledger);
    free(o->pool_at); free(o->order); free(o->slot);
    free(o);
    m->memo = NULL;
}

void memo_begin_forward(GPT *m) {
    MemoState *o = m->memo;
    if (!o || !o->pool) return;
    o->stage = arena_push(&m->act->arena, ACT_MEMO_STAGE, -1, act_memo_stage_bytes(&m->shape, &m->policy));
    o->owner[0] = o->owner[1] = -1;
    o->cursor = 0;
    o->snapped = 0;
}

// Slot 0 at the stage's start, slot 1 after slot 0's largest region (each slot as large as its layers need).
static uint8_t *slot_base(const MemoState *o, int l) { return o->stage + (o->slot[l] ? o->span[0] : 0); }

// Where `name`'s slice sits in layer l's region (names in enum order, each 64-byte aligned).
static size_t slice_offset(const GPT *m, int l, ActName name) {
    size_t off = 0;
    for (int n = 0; n < (int)name; n++) off += padded(act_memo_swap_name_bytes(&m->shape, &m->policy, l, (ActName)n));
    return off;
}

// ---- the layer's tensors over a token range: one fp32 view of each, every row (work slots in the
// forward; the arena's fp32 copy or a work slot in backward)

typedef struct {
    float *t[ACT_N_LAYER];        // fp32 [s·b, width] of each tensor (NULL: not one the layer has)
    uint8_t *drop1, *drop2;       // the residual dropout masks, every row (NULL without dropout)
    // LoRA: each adapted site's v = (α/r)·x·Aᵀ [s·b, r], every row. A memo layer keeps it whole (not
    // swapped): the forward makes each range's rows (make_v: into v_out) before adding v·Bᵀ; the
    // backward's recompute adds the kept rows.
    LoraV v[LORA_SITES];
    float *v_out[LORA_SITES];
    int make_v;
} LayerViews;

// Elements per row (position × sequence) of a swapped tensor; lse is laid out [b·a, s] instead.
static size_t row_width(const GPT *m, ActName name) {
    switch (name) {
    case ACT_QKV_IN: case ACT_LN2_IN: case ACT_FC1_IN: return (size_t)m->cfg.hidden;
    case ACT_LN1_STATS: case ACT_LN2_STATS: return norm_stats(m);
    case ACT_Q: case ACT_PROJ_IN: case ACT_Q_NORM_IN: return (size_t)m->ql;
    case ACT_K: case ACT_V: case ACT_K_NORM_IN: return (size_t)m->kvl;
    case ACT_Q_NORM_STATS: return (size_t)m->al;   // 1/rms per head
    case ACT_K_NORM_STATS: return (size_t)m->kvh;
    case ACT_GELU_IN: case ACT_FC2_IN: case ACT_GATE: case ACT_UP: return (size_t)m->fl;
    default:
        if (act_is_lora(name)) return (size_t)m->cfg.lora_rank;
        ctron_fatal("memo: %s has no row width", act_name_str(name));
    }
}

// The tensors layer_rows writes (the swapped ones, and the ones a LoRA layer's backward does not read:
// temporaries of the range, in their work slots).
static const ActName ROW_NAMES[] = {ACT_QKV_IN, ACT_LN1_STATS, ACT_Q, ACT_K, ACT_V, ACT_PROJ_IN, ACT_LN2_IN,
                                    ACT_LN2_STATS, ACT_FC1_IN, ACT_GELU_IN, ACT_FC2_IN, ACT_GATE, ACT_UP,
                                    ACT_Q_NORM_IN, ACT_K_NORM_IN, ACT_Q_NORM_STATS, ACT_K_NORM_STATS};

static DropoutSite site(const GPT *m, int l, int which) {
    DropoutSite d = {philox_key_from_seed(m->act->ctx.seed), m->act->ctx.step, (uint32_t)l, (uint32_t)which,
                     m->cfg.dropout};
    return d;
}

// Rounds rows [r0, r1) of a tensor to its stored precision (what saved_done does to a kept tensor).
static void round_rows(GPT *m, ActName name, float *t, int r0, int r1) {
    if (stored_bf16(m, name)) m->be->bf16_round(m->be, t + (size_t)r0 * row_width(m, name), (size_t)(r1 - r0) * row_width(m, name));
}

static void linear_rows(GPT *m, float *y, int ldy, const float *x, int ldx, const float *w, const float *bias, int r0,
                        int nr, int in, int out) {
    linear_fwd(m, y + (size_t)r0 * ldy, ldy, x + (size_t)r0 * ldx, ldx, w, bias, nr, in, out);   // a frozen bf16 base's too
}

// Under TP a row-parallel linear's rows [r0, r0+nr) are this rank's partial sums: Σ over the group
// before the bias and residual (the plain block's reduce, tp_regions.h, on the range's rows only).
static void reduce_rows(GPT *m, float *y, int r0, int nr) {
    tp_allreduce(m, y + (size_t)r0 * m->cfg.hidden, (size_t)nr * m->cfg.hidden, TPC_BLOCK);
}

// Site s's adapter over rows [r0, r0 + nr): in the forward its v rows from the site's input rows x
// (rounded as the kept v is), then out's rows += v's rows·Bᵀ, as the whole-layer path adds them.
static void adapter_rows(GPT *m, int l, LayerViews *V, LoraSite s, const float *x, int in, const LoraOut *out, int r0,
                         int nr) {
    if (!lora_on(m, s)) return;
    if (V->make_v) {
        lora_v_rows(m, l, s, x + (size_t)r0 * in, in, V->v_out[s], r0, nr);
        round_rows(m, lora_act(s), V->v_out[s], r0, r0 + nr);
    }
    lora_rows_add_out(m, l, s, V->v[s], out, r0, nr);
}

// A row-parallel site's (one block, y [s·b, h] after the reduction).
static void row_adapter_rows(GPT *m, int l, LayerViews *V, LoraSite s, const float *x, int in, float *y, int r0,
                             int nr) {
    int h = m->cfg.hidden;
    LoraOut o = {1, {y}, {h}, {h}, {0}, {NULL}};
    adapter_rows(m, l, V, s, x, in, &o, r0, nr);
}

static void norm_rows(GPT *m, float *y, float *stats, const float *x, const float *w, const float *b, int r0, int nr) {
    size_t h = (size_t)m->cfg.hidden;
    family_norm_forward(m->be, m, y + (size_t)r0 * h, stats + (size_t)r0 * norm_stats(m), x + (size_t)r0 * h, w, b, nr);
}

// q and k of positions [p0, p1) as attention reads them (model/qk_norm.h: Qwen3's norms on the stored norms'
// inputs, then RoPE), rounded as storage rounds them.
static void range_qk(GPT *m, const BlockTensors *w, LayerViews *V, int p0, int p1) {
    float **t = V->t;
    int qk = m->cfg.qk_norm, r0 = p0 * m->b_cur, r1 = p1 * m->b_cur;
    qk_rows(m, w, t[ACT_Q], t[ACT_K], t[ACT_Q_NORM_STATS], t[ACT_K_NORM_STATS], qk ? t[ACT_Q_NORM_IN] : t[ACT_Q],
            qk ? t[ACT_K_NORM_IN] : t[ACT_K], p0, p1);
    round_rows(m, ACT_Q, t[ACT_Q], r0, r1);
    round_rows(m, ACT_K, t[ACT_K], r0, r1);
}

// Positions [p0, p1) of layer l: every tensor a selective layer keeps (their rows), from the input x;
// with out, the block's output rows too (forward). The attention reads k and v rows 0 .. p1·b.
static void layer_rows(GPT *m, int l, const float *x, LayerViews *V, int p0, int p1, float *out) {
    const GPTConfig *c = &m->cfg;
    int b = m->b_cur, h = c->hidden, ql = m->ql, kvl = m->kvl, fl = m->fl;
    int r0 = p0 * b, nr = (p1 - p0) * b;
    if (nr <= 0) return;
    float **t = V->t, p = c->dropout;
    BlockTensors w = gpt_block_weights(m, l);   // a bf16 base's norm vectors widened
    // x1 = x + Dropout(Proj(Attn(Norm1(x))))
    norm_rows(m, t[ACT_QKV_IN], t[ACT_LN1_STATS], x, w.ln1_w, w.ln1_b, r0, nr);
    round_rows(m, ACT_QKV_IN, t[ACT_QKV_IN], r0, r0 + nr);
    const float *wq = w.qkv_w, *wk = wq + (size_t)ql * h, *wv = wk + (size_t)kvl * h;
    const float *bq = w.qkv_b, *bk = bq ? bq + ql : NULL, *bv = bq ? bk + kvl : NULL;
    float *q_in = c->qk_norm ? t[ACT_Q_NORM_IN] : t[ACT_Q], *k_in = c->qk_norm ? t[ACT_K_NORM_IN] : t[ACT_K];
    linear_rows(m, q_in, ql, t[ACT_QKV_IN], h, wq, bq, r0, nr, h, ql);
    linear_rows(m, k_in, kvl, t[ACT_QKV_IN], h, wk, bk, r0, nr, h, kvl);
    linear_rows(m, t[ACT_V], kvl, t[ACT_QKV_IN], h, wv, bv, r0, nr, h, kvl);
    for (int i = 0; i < LORA_QKV_SITE_COUNT; i++) {   // before the norms and RoPE, as the whole layer adds them
        LoraOut o = lora_qkv_outs(m, lora_qkv_site(i), q_in, k_in, t[ACT_V]);
        adapter_rows(m, l, V, lora_qkv_site(i), t[ACT_QKV_IN], h, &o, r0, nr);
    }
    if (c->qk_norm) {   // Qwen3's per-head norms read the stored inputs
        round_rows(m, ACT_Q_NORM_IN, q_in, r0, r0 + nr);
        round_rows(m, ACT_K_NORM_IN, k_in, r0, r0 + nr);
    }
    range_qk(m, &w, V, p0, p1);
    round_rows(m, ACT_V, t[ACT_V], r0, r0 + nr);
    // the causal core of queries p0 .. p1−1 over keys 0 .. p1−1 (the earlier ones: the other range's)
    float *lse = t[ACT_ATTN_LSE] ? t[ACT_ATTN_LSE] : (float *)work_slot(m, ACT_ATTN_LSE, l);
    m->be->flash_attention_forward_rows(m->be, t[ACT_PROJ_IN], lse, t[ACT_Q], t[ACT_K], t[ACT_V], ws(m, W_ATTN_SCRATCH),
                                        m->s_cur, p0, p1 - p0, b, m->al, m->kvh, ql, gpt_layer_window(&m->cfg, l),
                                        m->head0, site(m, l, SITE_ATTN), m->act->ctx.sample0);
    round_rows(m, ACT_PROJ_IN, t[ACT_PROJ_IN], r0, r0 + nr);
    float *y = ws(m, W_OUT);
    linear_rows(m, y, h, t[ACT_PROJ_IN], ql, w.proj_w, NULL, r0, nr, ql, h);
    reduce_rows(m, y, r0, nr);
    row_adapter_rows(m, l, V, swiglu(m) ? LORA_O : LORA_PROJ, t[ACT_PROJ_IN], ql, y, r0, nr);
    size_t o = (size_t)r0 * h;
    m->be->dropout_residual_forward(m->be, t[ACT_LN2_IN] + o, x + o, y + o, w.proj_b, V->drop1 ? V->drop1 + o : NULL, p,
                                    nr, h);
    round_rows(m, ACT_LN2_IN, t[ACT_LN2_IN], r0, r0 + nr);
    // x2 = x1 + Dropout(FC2(GeLU(FC1(Norm2(x1)))))     (llama: Down(SiLU(Gate) ⊙ Up))
    norm_rows(m, t[ACT_FC1_IN], t[ACT_LN2_STATS], t[ACT_LN2_IN], w.ln2_w, w.ln2_b, r0, nr);
    round_rows(m, ACT_FC1_IN, t[ACT_FC1_IN], r0, r0 + nr);
    const float *down_in;
    LoraSite d_site = swiglu(m) ? LORA_DOWN : LORA_FC2;
    int down_v = V->make_v && lora_on(m, d_site);   // the forward makes the down adapter's v from its input
    if (swiglu(m)) {
        linear_rows(m, t[ACT_GATE], fl, t[ACT_FC1_IN], h, w.fc1_w, NULL, r0, nr, h, fl);
        linear_rows(m, t[ACT_UP], fl, t[ACT_FC1_IN], h, w.fc1_w + (size_t)fl * h, NULL, r0, nr, h, fl);
        for (int i = 0; i < LORA_GATE_UP_SITE_COUNT; i++) {
            LoraOut o = lora_gate_up_outs(m, lora_gate_up_site(i), t[ACT_GATE], t[ACT_UP]);
            adapter_rows(m, l, V, lora_gate_up_site(i), t[ACT_FC1_IN], h, &o, r0, nr);
        }
        round_rows(m, ACT_GATE, t[ACT_GATE], r0, r0 + nr);
        round_rows(m, ACT_UP, t[ACT_UP], r0, r0 + nr);
        if (!out && !down_v) return;
        float *ffn = ws(m, W_FFN);
        m->be->swiglu_forward(m->be, ffn + (size_t)r0 * fl, t[ACT_GATE] + (size_t)r0 * fl, t[ACT_UP] + (size_t)r0 * fl, fl,
                              nr, fl, 0);
        down_in = ffn;
    } else {
        linear_rows(m, t[ACT_GELU_IN], fl, t[ACT_FC1_IN], h, w.fc1_w, NULL, r0, nr, h, fl);
        LoraOut of = {1, {t[ACT_GELU_IN]}, {fl}, {fl}, {0}, {NULL}};
        adapter_rows(m, l, V, LORA_FC, t[ACT_FC1_IN], h, &of, r0, nr);
        m->be->bias_gelu_forward(m->be, t[ACT_FC2_IN] + (size_t)r0 * fl, t[ACT_GELU_IN] + (size_t)r0 * fl, w.fc1_b, nr, fl,
                                 m->policy.act_dtype == ACT_BF16);
        down_in = t[ACT_FC2_IN];
    }
    if (down_v) {   // v's rows only: the sum below adds them
        lora_v_rows(m, l, d_site, down_in + (size_t)r0 * fl, fl, V->v_out[d_site], r0, nr);
        round_rows(m, lora_act(d_site), V->v_out[d_site], r0, r0 + nr);
    }
    if (!out) return;   // backward reads what the MLP keeps, never the block's output: FC2 is not redone
    linear_rows(m, y, h, down_in, fl, w.fc2_w, NULL, r0, nr, fl, h);
    reduce_rows(m, y, r0, nr);
    if (lora_on(m, d_site)) {
        LoraOut od = {1, {y}, {h}, {h}, {0}, {NULL}};
        lora_rows_add_out(m, l, d_site, V->v[d_site], &od, r0, nr);
    }
    m->be->dropout_residual_forward(m->be, out + o, t[ACT_LN2_IN] + o, y + o, w.fc2_b, V->drop2 ? V->drop2 + o : NULL, p,
                                    nr, h);
}

// The residual dropout masks of layer l, every row (a pure function of the Philox key).
static void draw_masks(GPT *m, int l, uint8_t *drop1, uint8_t *drop2) {
    int s = m->s_cur, b = m->b_cur, h = m->cfg.hidden;
    m->be->dropout_mask_sbw(m->be, drop1, site(m, l, SITE_DROP1), 0, s, b, h, m->act->ctx.sample0);
    m->be->dropout_mask_sbw(m->be, drop2, site(m, l, SITE_DROP2), 0, s, b, h, m->act->ctx.sample0);
}

// Copies the swapped slice of one tensor between its fp32 view (positions [0, r)) and the stage slot
// (the stored form: fp32, or bf16). lse ([b·a, s]) moves as b·a runs of r entries.
static void slice_move(GPT *m, int l, ActName name, float *view, int r, int to_slot) {
    uint8_t *slot = slot_base(m->memo, l) + slice_offset(m, l, name);
    Backend *be = m->be;
    if (name == ACT_ATTN_LSE) {
        int rows = m->b_cur * m->al, s = m->s_cur;
        for (int i = 0; i < rows; i++) {
            float *v = view + (size_t)i * s, *sl = (float *)slot + (size_t)i * r;
            be->copy(be, to_slot ? (void *)sl : (void *)v, to_slot ? (void *)v : (void *)sl, (size_t)r * sizeof(float), COPY_D2D);
        }
        return;
    }
    size_t count = (size_t)r * m->b_cur * row_width(m, name);
    if (stored_bf16(m, name)) {
        if (to_slot) be->bf16_pack(be, (uint16_t *)slot, view, count);   // exact: already rounded
        else be->bf16_unpack(be, view, (const uint16_t *)slot, count);
    } else {
        be->copy(be, to_slot ? (void *)slot : (void *)view, to_slot ? (void *)view : (void *)slot, count * sizeof(float),
                 COPY_D2D);
    }
}

static int swapped(const GPT *m, ActName name) { return memo_swaps(&m->shape, m->policy.tempo, name); }

// A tensor of the layer's family that no kept tensor stands for: a work slot for the range's rows (LoRA's
// frozen base keeps no linear input its backward does not read).
static void temporaries(GPT *m, int l, LayerViews *V) {
    for (size_t i = 0; i < sizeof ROW_NAMES / sizeof ROW_NAMES[0]; i++) {
        ActName n = ROW_NAMES[i];
        if (!V->t[n] && act_in_block(&m->shape, n) && act_elements(&m->shape, n) > 0) V->t[n] = work_slot(m, n, l);
    }
}

static size_t lora_v_count(const GPT *m) { return (size_t)m->s_cur * m->b_cur * (size_t)m->cfg.lora_rank; }

// The adapters' v of layer l, kept whole in the arena: made range by range (the forward), their places
// taken before the block's output (the next layer's input, where its arena mark is).
static void adapters_begin(GPT *m, int l, LayerViews *V) {
    for (int s = 0; s < LORA_SITES; s++) {
        if (!lora_on(m, (LoraSite)s)) continue;
        V->v_out[s] = saved_out_placed(m, &m->act->blocks[l], lora_act((LoraSite)s), l, lora_v_count(m));
        V->v[s] = (LoraV){V->v_out[s], NULL};
    }
    V->make_v = 1;
}

static void adapters_done(GPT *m, int l, LayerViews *V) {
    for (int s = 0; s < LORA_SITES; s++)
        if (V->v_out[s]) saved_done_placed(m, &m->act->blocks[l], lora_act((LoraSite)s), V->v_out[s], lora_v_count(m));
}

float *memo_block_forward(GPT *m, int l, const float *x, int where) {
    MemoState *o = m->memo;
    int s = m->s_cur, r = memo_rows(m, l);
    LayerViews V = {{0}, NULL, NULL, {{0}}, {0}, 0};
    for (int n = 0; n < ACT_N_LAYER; n++)
        if (swapped(m, (ActName)n)) V.t[n] = work_slot(m, (ActName)n, l);
    temporaries(m, l, &V);
    adapters_begin(m, l, &V);
    if (m->cfg.dropout > 0.0f) {
        V.drop1 = work_slot(m, ACT_DROP1_MASK, l);
        V.drop2 = work_slot(m, ACT_DROP2_MASK, l);
        draw_masks(m, l, V.drop1, V.drop2);
    }
    float *out = where == OUT_DISCARD ? NULL : block_output_of(m, l, PASS_FORWARD, where);
    layer_rows(m, l, x, &V, 0, r, out);
    if (o->pool && o->slot[l] >= 0 && r > 0) {   // the swapped range to the pool, while the rest computes
        int sl = o->slot[l];
        if (o->owner[sl] != l) {   // the slot's previous layer must be in the pool before it is overwritten
            offload_pool_wait(o->pool, o->ticket[sl]);
            o->owner[sl] = l;
        }
        for (int n = 0; n < ACT_N_LAYER; n++) {
            if (!V.t[n] || !swapped(m, (ActName)n)) continue;
            slice_move(m, l, (ActName)n, V.t[n], r, 1);
            ledger_add(&o->ledger, (ActName)n, l, act_memo_swap_name_bytes(&m->shape, &m->policy, l, (ActName)n));
        }
        o->ticket[sl] = offload_pool_store(o->pool, o->pool_at[l], slot_base(o, l), act_memo_span(&m->shape, &m->policy, l));
    }
    layer_rows(m, l, x, &V, r, s, out);
    adapters_done(m, l, &V);
    if (out) block_output_done(m, l, PASS_FORWARD, where, out);
    return out;
}

static void bring(GPT *m, int l) {
    MemoState *o = m->memo;
    int sl = o->slot[l];
    if (o->owner[sl] == l) return;
    o->ticket[sl] = offload_pool_load(o->pool, o->pool_at[l], slot_base(o, l), act_memo_span(&m->shape, &m->policy, l));
    o->owner[sl] = l;
}

void memo_fetch(GPT *m, int l) {
    MemoState *o = m->memo;
    if (!o || !o->pool) return;
    if (!o->snapped) {   // what the pool holds at the end of the forward
        ledger_snapshot_forward_end(&o->ledger);
        o->snapped = 1;
    }
    while (o->cursor < o->n_order && o->order[o->cursor] >= l) {
        int layer = o->order[o->cursor++];
        bring(m, layer);
        offload_pool_wait(o->pool, o->ticket[o->slot[layer]]);
        if (o->cursor < o->n_order) bring(m, o->order[o->cursor]);   // the next one, into the other slot
    }
}

// Positions [r, s) of layer l again, and every swapped tensor laid out whole in the arena.
static void recompute_rows(GPT *m, int l) {
    BlockActs *A = &m->act->blocks[l];
    int s = m->s_cur, b = m->b_cur, r = memo_rows(m, l);
    size_t rows = (size_t)s * b, nrh = rows * (size_t)m->cfg.hidden;
    const float *x = saved_in(m, A, ACT_LN1_IN, l, nrh);
    LayerViews V = {{0}, NULL, NULL, {{0}}, {0}, 0};
    size_t count[ACT_N_LAYER] = {0};
    for (int n = 0; n < ACT_N_LAYER; n++) {
        if (!swapped(m, (ActName)n)) continue;
        count[n] = n == ACT_ATTN_LSE ? rows * (size_t)m->al : rows * row_width(m, (ActName)n);
        V.t[n] = saved_out(m, A, (ActName)n, l, count[n], KEEP_ARENA);
        if (r > 0) slice_move(m, l, (ActName)n, V.t[n], r, 0);
    }
    float *kept[ACT_N_LAYER];   // the swapped tensors (the rest are the range's temporaries)
    memcpy(kept, V.t, sizeof kept);
    temporaries(m, l, &V);
    for (int s = 0; s < LORA_SITES; s++)   // the forward's v, kept whole
        if (lora_on(m, (LoraSite)s)) V.v[s] = lora_v_kept(m, l, (LoraSite)s);
    if (m->cfg.dropout > 0.0f) {   // kept as the mask mode says (regen: drawn again by the backward)
        size_t n = nrh;
        V.drop1 = mask_out(m, A, ACT_DROP1_MASK, l, n, KEEP_ARENA);
        V.drop2 = mask_out(m, A, ACT_DROP2_MASK, l, n, KEEP_ARENA);
        draw_masks(m, l, V.drop1, V.drop2);
        mask_done(m, A, ACT_DROP1_MASK, l, V.drop1, n, KEEP_ARENA);
        mask_done(m, A, ACT_DROP2_MASK, l, V.drop2, n, KEEP_ARENA);
    }
    if (r > 0 && !swapped(m, ACT_K)) {   // Qwen3 keeps the norms' inputs, not k: the swapped range's keys again
        BlockTensors w = gpt_block_weights(m, l);
        range_qk(m, &w, &V, 0, r);
    }
    layer_rows(m, l, x, &V, r, s, NULL);
    for (int n = 0; n < ACT_N_LAYER; n++)
        if (kept[n]) saved_done(m, A, (ActName)n, l, kept[n], count[n], KEEP_ARENA, 1);
}

void memo_recompute(GPT *m, int l) {
    scope_begin(m, l);   // its temporaries (working copies, workspace) end with it: --static-plan's intervals
    recompute_rows(m, l);
    scope_end(m, l);
}

void memo_layer_released(GPT *m, int l) {
    MemoState *o = m->memo;
    if (!o) return;
    for (int n = 0; n < ACT_N_LAYER; n++) {
        size_t bytes = ledger_cur_bytes(&o->ledger, (ActName)n, l);
        if (bytes) ledger_sub(&o->ledger, (ActName)n, l, bytes);
    }
}

void memo_end_step(GPT *m) {
    MemoState *o = m->memo;
    if (!o || !o->pool) return;
    offload_pool_drain(o->pool);
    for (int l = 0; l < m->cfg.layers; l++) memo_layer_released(m, l);
}
