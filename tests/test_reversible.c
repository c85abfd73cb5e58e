// Reversible blocks (model/reversible.h, issue 29 part 2), GPT-2 and llama:
//  1. gradients: a central finite difference of the loss along a random direction of all parameters
//     equals the backward's directional derivative (the inversion, both streams and their sum are
//     differentiated correctly);
//  2. inverted vs stored (MemoryPolicy.rev_store, the same architecture keeping every layer): the loss
//     bitwise the same, the gradients within a stated tolerance (fp32 and bf16; printed);
//  3. the ledger: no layer keeps anything through the forward; the step's peak is the streams plus
//     the larger half-layer, whatever the depth (L = 2, 4, 12): measured == ctron's analytic model ==
//     the formula written out here by name.
#include <math.h>
#include <string.h>
#include "check.h"
#include "memory/memory_model.h"
#include "model/gpt.h"
#include "util/common.h"

typedef struct { int arch, L, h, a, kv, f, s, b, v; float dropout; } Cfg;

static GPTConfig config_of(const Cfg *c) {
    GPTConfig g = {.layers = c->L, .hidden = c->h, .heads = c->a, .seq = c->s, .batch = c->b, .vocab = c->v,
                   .dropout = c->dropout, .arch = c->arch, .kv_heads = c->kv, .ffn = c->f, .reversible = 1};
    return g;
}

static void tokens_of(const Cfg *c, int32_t *tok, int32_t *tgt) {
    for (int i = 0; i < c->s * c->b; i++) {
        tok[i] = (int32_t)((i * 13 + 5) % c->v);
        tgt[i] = (int32_t)((i * 7 + 3) % c->v);
    }
}

static void policy_of(MemoryPolicy *p, int L, int store, int bf16, unsigned tempo, MaskMode masks) {
    memset(p, 0, sizeof *p);
    policy_default(p, L);
    p->rev_store = store;
    p->act_dtype = bf16 ? ACT_BF16 : ACT_FP32;
    p->precision = bf16 ? 1 : 0;   // PRECISION_BF16: mixed precision
    p->tempo = tempo;
    p->masks = masks;
}

// One training step's mean loss and gradients.
static double step(GPT *m, const Cfg *c, float *grads) {
    int n = c->s * c->b;
    int32_t *tok = xmalloc((size_t)n * 4), *tgt = xmalloc((size_t)n * 4);
    tokens_of(c, tok, tgt);
    StepCtx ctx = {11, 2, 0, 1};
    gpt_zero_grad(m);
    double loss = gpt_forward(m, tok, tgt, c->s, c->b, ctx, 1.0f / (float)n) / n;
    gpt_backward(m, tok, ctx);
    if (grads) memcpy(grads, m->grads, m->n_params * sizeof(float));
    free(tok);
    free(tgt);
    return loss;
}

// The loss alone (a training forward: the same dropout masks), nothing kept after it.
static double loss_only(GPT *m, const Cfg *c) {
    int n = c->s * c->b;
    int32_t *tok = xmalloc((size_t)n * 4), *tgt = xmalloc((size_t)n * 4);
    tokens_of(c, tok, tgt);
    StepCtx ctx = {11, 2, 0, 1};
    double loss = gpt_forward(m, tok, tgt, c->s, c->b, ctx, 1.0f / (float)n) / n;
    gpt_release(m);
    free(tok);
    free(tgt);
    return loss;
}

static void finite_difference(const Cfg *c, const char *what) {
    GPTConfig g = config_of(c);
    MemoryPolicy p;
    policy_of(&p, c->L, 0, 0, 0, MASKS_BYTES);
    GPT m;
    gpt_init(&m, &g, &p);
    gpt_init_weights(&m, 7);
    float *grads = xmalloc(m.n_params * sizeof(float)), *theta = xmalloc(m.n_params * sizeof(float));
    float *dir = xmalloc(m.n_params * sizeof(float));
    step(&m, c, grads);
    memcpy(theta, m.params, m.n_params * sizeof(float));
    uint64_t x = 88172645463325252ull;
    double gv = 0.0;
    for (size_t i = 0; i < m.n_params; i++) {   // a direction of ±1 (xorshift), scaled to the parameter's size
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        dir[i] = (x & 1) ? 0.02f : -0.02f;
        gv += (double)grads[i] * dir[i];
    }
    const double eps = 2e-2;
    double f[2];
    for (int sgn = 0; sgn < 2; sgn++) {
        for (size_t i = 0; i < m.n_params; i++) m.params[i] = theta[i] + (float)((sgn ? -eps : eps) * dir[i]);
        gpt_params_changed(&m);
        f[sgn] = loss_only(&m, c);
    }
    double fd = (f[0] - f[1]) / (2 * eps), rel = fabs(fd - gv) / fabs(gv);
    printf("%s: directional derivative: backward %.6e, central difference %.6e, relative error %.2e\n", what, gv, fd, rel);
    CHECK(rel < 2e-3 && fabs(gv) > 1e-3, "%s: finite difference %.6e vs backward %.6e (rel %.2e)", what, fd, gv, rel);
    free(grads);
    free(theta);
    free(dir);
    gpt_free(&m);
    policy_free(&p);
}

// Inverted vs stored: the same loss (bitwise) and gradients within tol (relative L2).
static void invert_vs_store(const Cfg *c, int bf16, double tol, const char *what) {
    GPTConfig g = config_of(c);
    double loss[2];
    float *grads[2];
    size_t np = 0;
    for (int store = 0; store < 2; store++) {
        MemoryPolicy p;
        policy_of(&p, c->L, store, bf16, 0, MASKS_BYTES);
        GPT m;
        gpt_init(&m, &g, &p);
        gpt_init_weights(&m, 7);
        np = m.n_params;
        grads[store] = xmalloc(np * sizeof(float));
        loss[store] = step(&m, c, grads[store]);
        gpt_free(&m);
        policy_free(&p);
    }
    double d2 = 0.0, r2 = 0.0;
    for (size_t i = 0; i < np; i++) {
        double d = (double)grads[0][i] - grads[1][i];
        d2 += d * d;
        r2 += (double)grads[1][i] * grads[1][i];
    }
    double rel = sqrt(d2 / r2);
    printf("%s L%d %s: loss %.9f both; gradients inverted vs stored: relative L2 %.3e\n", what, c->L,
           bf16 ? "bf16" : "fp32", loss[0], rel);
    CHECK(memcmp(&loss[0], &loss[1], sizeof(double)) == 0, "%s: loss inverted %.17g, stored %.17g", what, loss[0], loss[1]);
    CHECK(rel < tol, "%s L%d: gradients inverted vs stored differ by %.3e (tolerance %.1e)", what, c->L, rel, tol);
    CHECK(rel > 0.0 || bf16, "%s: inversion bitwise exact: suspicious (was anything inverted?)", what);
    free(grads[0]);
    free(grads[1]);
}

// Bytes one name of a layer keeps under recompute none (the Llama or GPT-2 block), written out.
static size_t none_bytes(const Cfg *c, int e, ActName n) {
    size_t sb = (size_t)c->s * c->b, sbh = sb * c->h, as2b = (size_t)c->a * c->s * sb;
    size_t k = c->dropout > 0 ? 1 : 0, llama = c->arch == ARCH_LLAMA, stats = (llama ? 4 : 8) * sb;
    size_t kv = (size_t)(c->kv ? c->kv : c->a), f = (size_t)(c->f ? c->f : 4 * c->h);
    switch (n) {
    case ACT_LN1_IN: case ACT_QKV_IN: case ACT_Q: case ACT_PROJ_IN: case ACT_LN2_IN: case ACT_FC1_IN: return e * sbh;
    case ACT_K: case ACT_V: return e * sbh / (size_t)c->a * kv;
    case ACT_ATTN_PROB: return e * as2b;
    case ACT_ATTN_MASK: return k * as2b;
    case ACT_ATTN_DROP: return k * e * as2b;
    case ACT_DROP1_MASK: case ACT_DROP2_MASK: return k * sbh;
    case ACT_LN1_STATS: case ACT_LN2_STATS: return stats;
    case ACT_GELU_IN: case ACT_FC2_IN: return llama ? 0 : e * sb * f;
    case ACT_GATE: case ACT_UP: return llama ? e * sb * f : 0;
    default: return 0;
    }
}

// The step's peak, written out: inverting, the embedding mask + two fp32 streams + the larger half
// (attention: ln1_in … drop1_mask and LN1's statistics; MLP: ln2_in … drop2_mask), or the end of the
// forward; stored, the end of the forward.
static size_t peak_formula(const Cfg *c, int e, int store, size_t fwd_end) {
    size_t sbh = (size_t)c->s * c->b * c->h, k = c->dropout > 0 ? 1 : 0;
    static const ActName attn[] = {ACT_LN1_IN, ACT_QKV_IN, ACT_Q, ACT_K, ACT_V, ACT_ATTN_PROB, ACT_ATTN_MASK,
                                   ACT_ATTN_DROP, ACT_PROJ_IN, ACT_DROP1_MASK, ACT_LN1_STATS};
    static const ActName mlp[] = {ACT_LN2_IN, ACT_FC1_IN, ACT_GELU_IN, ACT_FC2_IN, ACT_GATE, ACT_UP, ACT_DROP2_MASK,
                                  ACT_LN2_STATS};
    size_t a = 0, g = 0;
    for (size_t i = 0; i < sizeof attn / sizeof attn[0]; i++) a += none_bytes(c, e, attn[i]);
    for (size_t i = 0; i < sizeof mlp / sizeof mlp[0]; i++) g += none_bytes(c, e, mlp[i]);
    size_t held = k * sbh + 8 * sbh + (a > g ? a : g);
    return store || fwd_end > held ? fwd_end : held;
}

// Measured == analytic == formula; returns the measured peak.
static size_t ledger_case(const Cfg *c, int store, int bf16, const char *what) {
    GPTConfig g = config_of(c);
    MemoryPolicy p;
    policy_of(&p, c->L, store, bf16, 0, MASKS_BYTES);
    GPT m;
    gpt_init(&m, &g, &p);
    gpt_init_weights(&m, 7);
    int e = bf16 ? 2 : 4, before = check_failed;
    size_t sb = (size_t)c->s * c->b, sbh = sb * c->h, k = c->dropout > 0 ? 1 : 0, layers = 0;
    int n = c->s * c->b;
    int32_t *tok = xmalloc((size_t)n * 4), *tgt = xmalloc((size_t)n * 4);
    tokens_of(c, tok, tgt);
    StepCtx ctx = {11, 2, 0, 1};
    gpt_zero_grad(&m);
    gpt_forward(&m, tok, tgt, c->s, c->b, ctx, 1.0f / (float)n);
    for (int l = 0; l < c->L; l++)
        for (int nm = 0; nm < ACT_N_LAYER; nm++) {
            size_t want = store ? none_bytes(c, e, (ActName)nm) : 0, got = ledger_stored_bytes(&m.ledger, (ActName)nm, l);
            CHECK(got == want, "%s L%d: layer %d keeps %zu of %s, expected %zu", what, c->L, l, got,
                  act_name_str((ActName)nm), want);
            layers += want;
        }
    CHECK(ledger_stored_bytes(&m.ledger, ACT_REV_X1, -1) == 4 * sbh && ledger_stored_bytes(&m.ledger, ACT_REV_X2, -1) == 4 * sbh,
          "%s: the streams hold %zu + %zu, expected 2 × %zu (fp32)", what, ledger_stored_bytes(&m.ledger, ACT_REV_X1, -1),
          ledger_stored_bytes(&m.ledger, ACT_REV_X2, -1), 4 * sbh);
    // model level: emb_mask, two streams, lnf_in (e), its statistics, lm_in (e), logits (fp32)
    size_t fwd = layers + k * sbh + 8 * sbh + 2 * (size_t)e * sbh + (c->arch == ARCH_LLAMA ? 4 : 8) * sb + 4 * sb * c->v;
    CHECK(m.ledger.total_fwd_end == fwd && act_forward_end_bytes(&m.shape, &p) == fwd,
          "%s L%d: end of forward measured %zu, analytic %zu, formula %zu", what, c->L, m.ledger.total_fwd_end,
          act_forward_end_bytes(&m.shape, &p), fwd);
    gpt_backward(&m, tok, ctx);
    size_t want = peak_formula(c, e, store, fwd);
    CHECK(m.ledger.total_peak == want && act_peak_bytes(&m.shape, &p) == want,
          "%s L%d: step peak measured %zu, analytic %zu, formula %zu", what, c->L, m.ledger.total_peak,
          act_peak_bytes(&m.shape, &p), want);
    CHECK(m.ledger.total_cur == 0, "%s: %zu bytes still held after the backward", what, m.ledger.total_cur);
    if (check_failed == before)
        printf("%s L%2d %s %s: end of forward %zu, step peak %zu bytes (measured == predicted)\n", what, c->L,
               store ? "stored  " : "inverted", bf16 ? "bf16" : "fp32", fwd, m.ledger.total_peak);
    size_t peak = m.ledger.total_peak;
    free(tok);
    free(tgt);
    gpt_free(&m);
    policy_free(&p);
    return peak;
}

// The options that change what a layer keeps compose: measured == analytic (end of forward and peak),
// inverted and stored, and the gradients inverted vs stored within 1e-5.
// With lora_rank > 0 the base is frozen and the adapters' gradients are compared (LoRA-FA: B's only); the
// adapters' x·Aᵀ are kept per half like any other tensor the half's backward reads.
static void combo_case(const Cfg *c, unsigned tempo, int mini, MaskMode masks, int lora_rank, int lora_fa,
                       const char *what) {
    GPTConfig g = config_of(c);
    g.lora_rank = lora_rank;
    g.lora_alpha = 16.0f;
    g.lora_fa = lora_fa;
    float *grads[2];
    size_t np = 0;
    for (int store = 0; store < 2; store++) {
        MemoryPolicy p;
        policy_of(&p, c->L, store, 0, tempo | (mini ? MINI_SEQ : 0), masks);
        p.mini_seq = mini;
        GPT m;
        gpt_init(&m, &g, &p);
        p.tempo = m.policy.tempo;   // the model adds LoRA's keep bits: the analytic model reads them from the policy
        gpt_init_weights(&m, 7);
        for (int i = 0; i < m.n_info && lora_rank; i++)   // B non-zero, so that A's gradient is not
            if (strstr(m.info[i].name, "lora_B"))
                for (size_t e = 0; e < m.info[i].numel; e++)
                    m.params[m.info[i].offset + e] = 0.02f * sinf((float)(e * 5 + m.info[i].full_index));
        gpt_params_changed(&m);
        np = m.n_params;
        grads[store] = xmalloc(np * sizeof(float));
        int n = c->s * c->b;
        int32_t *tok = xmalloc((size_t)n * 4), *tgt = xmalloc((size_t)n * 4);
        tokens_of(c, tok, tgt);
        StepCtx ctx = {11, 2, 0, 1};
        gpt_zero_grad(&m);
        gpt_forward(&m, tok, tgt, c->s, c->b, ctx, 1.0f / (float)n);
        CHECK(m.ledger.total_fwd_end == act_forward_end_bytes(&m.shape, &p), "%s %s: end of forward %zu, analytic %zu",
              what, store ? "stored" : "inverted", m.ledger.total_fwd_end, act_forward_end_bytes(&m.shape, &p));
        gpt_backward(&m, tok, ctx);
        CHECK(m.ledger.total_peak == act_peak_bytes(&m.shape, &p), "%s %s: peak %zu, analytic %zu", what,
              store ? "stored" : "inverted", m.ledger.total_peak, act_peak_bytes(&m.shape, &p));
        memcpy(grads[store], m.grads, np * sizeof(float));
        free(tok);
        free(tgt);
        gpt_free(&m);
        policy_free(&p);
    }
    double d2 = 0.0, r2 = 0.0;
    for (size_t i = 0; i < np; i++) {
        double d = (double)grads[0][i] - grads[1][i];
        d2 += d * d;
        r2 += (double)grads[1][i] * grads[1][i];
    }
    CHECK(r2 > 0.0 && sqrt(d2 / r2) < 1e-5, "%s: gradients inverted vs stored %.3e (norm² %.3g)", what,
          sqrt(d2 / r2), r2);
    free(grads[0]);
    free(grads[1]);
}

int main(void) {
    // GPT-2 with dropout (the masks are drawn again in every recompute), llama with GQA and no dropout.
    const Cfg gpt2 = {ARCH_GPT2, 2, 32, 4, 0, 0, 8, 2, 64, 0.1f};
    const Cfg llama = {ARCH_LLAMA, 2, 32, 4, 2, 88, 8, 2, 64, 0.0f};
    finite_difference(&gpt2, "gpt2");
    finite_difference(&llama, "llama");

    Cfg g4 = gpt2, l4 = llama;
    g4.L = l4.L = 4;
    invert_vs_store(&g4, 0, 1e-5, "gpt2");
    invert_vs_store(&l4, 0, 1e-5, "llama");
    invert_vs_store(&g4, 1, 3e-2, "gpt2");
    invert_vs_store(&l4, 1, 3e-2, "llama");

    combo_case(&g4, TEMPO_LAYERNORM | TEMPO_GELU | TEMPO_SOFTMAX, 0, MASKS_BITS, 0, 0, "gpt2 tempo all, bit masks");
    combo_case(&g4, ATTN_FLASH, 0, MASKS_REGEN, 0, 0, "gpt2 flash, regenerated masks");
    combo_case(&g4, 0, 3, MASKS_BYTES, 0, 0, "gpt2 mini-seq 3");
    combo_case(&l4, ATTN_FLASH | TEMPO_LAYERNORM, 2, MASKS_BYTES, 0, 0, "llama flash, RMSNorm from its output, mini-seq 2");
    // Adapters in reversible blocks: LoRA and LoRA-FA on every site, with dropout, flash and mini-seq
    combo_case(&g4, 0, 0, MASKS_BYTES, 4, 0, "gpt2 LoRA");
    combo_case(&g4, ATTN_FLASH, 2, MASKS_BITS, 4, 1, "gpt2 LoRA-FA, flash, mini-seq 2");
    combo_case(&l4, 0, 0, MASKS_BYTES, 4, 0, "llama LoRA");
    combo_case(&l4, ATTN_FLASH, 0, MASKS_BYTES, 4, 1, "llama LoRA-FA, flash");

    // Depth: the inverted step's peak does not grow with L; the stored one does.
    const Cfg shapes[] = {{ARCH_GPT2, 0, 64, 4, 0, 0, 16, 2, 256, 0.1f}, {ARCH_LLAMA, 0, 64, 4, 2, 176, 16, 2, 256, 0.0f}};
    const int depths[] = {2, 4, 12};
    for (size_t i = 0; i < 2; i++) {
        const char *what = i ? "llama" : "gpt2";
        size_t first = 0, stored_prev = 0;
        for (size_t d = 0; d < 3; d++) {
            Cfg c = shapes[i];
            c.L = depths[d];
            size_t peak = ledger_case(&c, 0, 0, what);
            if (d == 0) first = peak;
            CHECK(peak == first, "%s: the inverted peak at L %d is %zu, at L 2 %zu", what, c.L, peak, first);
            size_t stored = ledger_case(&c, 1, 0, what);
            CHECK(stored > stored_prev && stored > peak, "%s L%d: stored peak %zu", what, c.L, stored);
            stored_prev = stored;
            ledger_case(&c, 0, 1, what);
        }
    }
    return check_summary();
}
