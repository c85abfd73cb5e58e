// The KV-cache inference path for llama (RMSNorm, RoPE at the cache's offset, SwiGLU, no biases or
// a qkv bias, tied or untied head, kv heads) against the training forward in evaluation mode
// (gpt_forward, train = 0): every position's logits agree to 1e-5 relative (test_infer.c's GPT-2
// tolerance: max |Δ| over the row / max |ref| of the row) in fp32, prefilled at once, prefilled in
// part then decoded token by token, and in uneven chunks; 3e-2 under mixed bf16 (test_infer.c's
// bound and its reasoning). Generation with a fixed seed gives the tokens of a reference that runs
// the whole window through gpt_forward for every token.
//
// Grouped-query attention: the KV cache of a model with kv < heads is compared with the training
// forward of the MHA model whose k and v heads are the GQA model's repeated (HF's repeat_kv: query
// head j reads kv head j / (heads/kv)), which computes the same function (so the grouping is HF's),
// and with the GQA model's own training forward.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "model/generate.h"
#include "model/gpt.h"
#include "model/infer.h"
#include "model/sampler.h"
#include "util/common.h"

enum { S = 24, V = 300 };
static const double FP32_TOL = 1e-5, BF16_TOL = 3e-2;

static double row_rel_err(const float *a, const float *ref, int v) {
    double diff = 0.0, mag = 0.0;
    for (int c = 0; c < v; c++) {
        double d = fabs((double)a[c] - ref[c]);
        diff = d > diff ? d : diff;
        mag = fabs(ref[c]) > mag ? fabs(ref[c]) : mag;
    }
    return diff / (mag > 0 ? mag : 1.0);
}

static double worst_rows(const float *got, const float *ref, int rows, int v) {
    double worst = 0.0;
    for (int i = 0; i < rows; i++) {
        double e = row_rel_err(got + (size_t)i * v, ref + (size_t)i * v, v);
        worst = e > worst ? e : worst;
    }
    return worst;
}

// A tiny llama: h 48, 4 heads of d = 12, an FFN of 88 (no convenient multiple), RoPE base 500.
static GPTConfig llama_cfg(int kv, int tied, int qkv_bias) {
    GPTConfig c = {.layers = 3, .hidden = 48, .heads = 4, .seq = S, .batch = 1, .vocab = V, .dropout = 0.1f,
                   .arch = ARCH_LLAMA, .kv_heads = kv, .ffn = 88, .rope_theta = 500.0f, .norm_eps = 1e-5f,
                   .tie_embeddings = tied ? 1 : -1, .qkv_bias = qkv_bias};
    return c;
}

static int name_has(const ParamInfo *pi, const char *part) { return strstr(pi->name, part) != NULL; }

// Non-trivial norm weights and biases, and sharper attention than at initialisation (q and k × 8),
// so that positions (RoPE) and the cache's contents matter.
static void perturb(GPT *m) {
    for (int i = 0; i < m->n_info; i++) {
        ParamInfo *pi = &m->info[i];
        float *x = m->params + pi->offset;
        if (name_has(pi, "bias") || name_has(pi, "norm"))
            for (size_t e = 0; e < pi->numel; e++) x[e] += 0.1f * sinf((float)(e * 7 + (size_t)i));
        if (name_has(pi, "q_proj.weight") || name_has(pi, "k_proj.weight"))
            for (size_t e = 0; e < pi->numel; e++) x[e] *= 8.0f;
    }
    gpt_params_changed(m);
}

static void make_model(GPT *m, const GPTConfig *cfg, Precision prec) {
    MemoryPolicy pol;
    policy_default(&pol, cfg->layers);
    pol.precision = prec;   // bf16: mixed precision as --precision bf16 (activations kept in bf16)
    pol.act_dtype = prec == PRECISION_BF16 ? ACT_BF16 : ACT_FP32;
    gpt_init(m, cfg, &pol);
    policy_free(&pol);
    gpt_init_weights(m, 5);
    perturb(m);
}

static void tokens_of(int32_t *t, int n, uint32_t x) {
    for (int i = 0; i < n; i++) { x ^= x << 13; x ^= x >> 17; x ^= x << 5; t[i] = (int32_t)(x % (uint32_t)V); }
}

// The training forward's logits [n, V] (evaluation: dropout off, nothing kept).
static void forward_logits(GPT *m, const int32_t *tokens, int n, float *out) {
    StepCtx eval = {99, 1, 0, 0};
    gpt_forward(m, tokens, NULL, n, 1, eval, 0.0f);
    memcpy(out, m->logits, (size_t)n * V * sizeof(float));
    gpt_release(m);
}

// The cache on `model` against ref [S, V]: one prefill of every position; prefill 7, then one token at
// a time; uneven chunks (last position only). Returns the worst relative error of the three.
static double cache_vs(GPT *model, const int32_t *tokens, const float *ref, const char *what, double tol) {
    KVCache c;
    infer_init(&c, model);
    float *got = xmalloc((size_t)S * V * sizeof(float));
    infer_forward(&c, tokens, S, got, 1);
    double all = worst_rows(got, ref, S, V);
    CHECK(c.pos == S, "%s: the cache holds %d tokens, expected %d", what, c.pos, S);
    infer_reset(&c);
    infer_forward(&c, tokens, 7, got, 1);
    double dec = worst_rows(got, ref, 7, V);
    for (int i = 7; i < S; i++) {
        infer_forward(&c, tokens + i, 1, got, 0);
        double e = row_rel_err(got, ref + (size_t)i * V, V);
        dec = e > dec ? e : dec;
    }
    infer_reset(&c);
    double chunks = 0.0;
    static const int cuts[] = {0, 3, 4, 11, 20, S};
    for (int k = 0; k + 1 < 6; k++) {
        infer_forward(&c, tokens + cuts[k], cuts[k + 1] - cuts[k], got, 0);
        double e = row_rel_err(got, ref + (size_t)(cuts[k + 1] - 1) * V, V);
        chunks = e > chunks ? e : chunks;
    }
    CHECK(all <= tol, "%s: one prefill of %d: worst relative error %.3g (bound %g)", what, S, all, tol);
    CHECK(dec <= tol, "%s: prefill 7 + decode: worst relative error %.3g (bound %g)", what, dec, tol);
    CHECK(chunks <= tol, "%s: chunked prefill: worst relative error %.3g (bound %g)", what, chunks, tol);
    printf("  %-34s: prefill %.3g, prefill 7 + %d decode steps %.3g, chunks %.3g\n", what, all, S - 7, dec, chunks);
    free(got);
    infer_free(&c);
    return fmax(all, fmax(dec, chunks));
}

// MHA llama, fp32: untied, tied, with a qkv bias.
static void check_mha(int tied, int bias) {
    GPTConfig cfg = llama_cfg(4, tied, bias);
    GPT m;
    make_model(&m, &cfg, PRECISION_FP32);
    CHECK(m.w.wpe == NULL && m.w.ln1_b == NULL && (m.w.lm_head != NULL) == !tied && (m.w.qkv_b != NULL) == bias,
          "the llama model's tensors are not the family's (wpe, norm bias, lm_head, qkv bias)");
    int32_t tokens[S];
    tokens_of(tokens, S, 777);
    float *ref = xmalloc((size_t)S * V * sizeof(float));
    forward_logits(&m, tokens, S, ref);
    char what[64];
    snprintf(what, sizeof what, "MHA %s%s", tied ? "tied" : "untied", bias ? " qkv-bias" : "");
    cache_vs(&m, tokens, ref, what, FP32_TOL);
    free(ref);
    gpt_free(&m);
}

// Tensor `name` of src copied into dst (same shape).
static void copy_tensor(GPT *dst, const GPT *src, const char *name) {
    const ParamInfo *d = gpt_find_param(dst, name), *s = gpt_find_param(src, name);
    if (!d || !s || d->numel != s->numel) ctron_fatal("copy_tensor: '%s' differs", name);
    memcpy(dst->params + d->offset, src->params + s->offset, s->numel * sizeof(float));
}

// gqa (kv heads < heads, a model of gpt_init_params) takes mha's weights, its k and v heads the first
// of each group's; then mha's k and v heads become gqa's repeated (repeat_kv): the two compute the
// same function.
static void tie_gqa_to_mha(GPT *gqa, GPT *mha) {
    int a = mha->cfg.heads, kv = gqa->cfg.kv_heads, d = gpt_head_dim(&mha->cfg), h = mha->cfg.hidden;
    size_t cols;
    for (int i = 0; i < gqa->n_info; i++) {
        const ParamInfo *g = &gqa->info[i];
        const ParamInfo *m = gpt_find_param(mha, g->name);
        if (!name_has(g, "k_proj") && !name_has(g, "v_proj")) {
            copy_tensor(gqa, mha, g->name);
            continue;
        }
        cols = g->ndim == 2 ? (size_t)h : 1;   // a weight [kv·d, h] or a bias [kv·d]
        float *gp = gqa->params + g->offset, *mp = mha->params + m->offset;
        for (int k = 0; k < kv; k++)   // kv head k <- the first query head of its group
            memcpy(gp + (size_t)k * d * cols, mp + (size_t)k * (a / kv) * d * cols, (size_t)d * cols * sizeof(float));
        for (int j = 0; j < a; j++)    // query head j's k/v <- kv head j / (a/kv)
            memcpy(mp + (size_t)j * d * cols, gp + (size_t)(j / (a / kv)) * d * cols, (size_t)d * cols * sizeof(float));
    }
    gpt_params_changed(mha);
}

// GQA (kv = 2) and MQA (kv = 1), untied and tied, fp32.
static void check_gqa(int kv, int tied, int bias) {
    char what[64];
    snprintf(what, sizeof what, "%s kv %d %s%s", kv == 1 ? "MQA" : "GQA", kv, tied ? "tied" : "untied",
             bias ? " qkv-bias" : "");
    GPTConfig mcfg = llama_cfg(4, tied, bias), gcfg = llama_cfg(kv, tied, bias);
    GPT mha, gqa;
    make_model(&mha, &mcfg, PRECISION_FP32);
    gpt_init_params(&gqa, &gcfg);
    tie_gqa_to_mha(&gqa, &mha);
    int32_t tokens[S];
    tokens_of(tokens, S, 4242);
    float *ref = xmalloc((size_t)S * V * sizeof(float));
    forward_logits(&mha, tokens, S, ref);
    cache_vs(&gqa, tokens, ref, what, FP32_TOL);
    // The cache holds kv·d columns per position: MHA's minus 2·L·s·(h − kv·d) floats (k and v), and
    // the q|k|v scratch 2·s·(h − kv·d) fewer.
    KVCache cm, cg;
    infer_init(&cm, &mha);
    infer_init(&cg, &gqa);
    size_t less = (2 * (size_t)mcfg.layers + 2) * S * (size_t)(mcfg.hidden - kv * gpt_head_dim(&mcfg)) * sizeof(float);
    CHECK(cm.bytes - cg.bytes == less, "%s: the cache is %zu bytes smaller than MHA's, expected %zu", what,
          cm.bytes - cg.bytes, less);
    infer_free(&cm);
    infer_free(&cg);
    // The GQA training forward itself, on the same weights.
    GPT direct;
    MemoryPolicy pol;
    policy_default(&pol, gcfg.layers);
    gpt_init(&direct, &gcfg, &pol);
    policy_free(&pol);
    memcpy(direct.params, gqa.params, gqa.n_params * sizeof(float));
    gpt_params_changed(&direct);
    float *own = xmalloc((size_t)S * V * sizeof(float));
    forward_logits(&direct, tokens, S, own);
    char own_what[96];
    snprintf(own_what, sizeof own_what, "%s, its own forward", what);
    cache_vs(&direct, tokens, own, own_what, FP32_TOL);
    free(own);
    gpt_free(&direct);
    free(ref);
    gpt_free(&gqa);
    gpt_free(&mha);
}

// Mixed precision: the bf16 cache (GEMMs on the bf16 weight copy) against the bf16 training forward.
static void check_bf16(void) {
    GPTConfig cfg = llama_cfg(2, 0, 1);
    GPT m, m32;
    make_model(&m, &cfg, PRECISION_BF16);
    make_model(&m32, &cfg, PRECISION_FP32);
    int32_t tokens[S];
    tokens_of(tokens, S, 31337);
    float *ref = xmalloc((size_t)S * V * sizeof(float)), *a = xmalloc((size_t)S * V * sizeof(float));
    float *b = xmalloc((size_t)S * V * sizeof(float));
    forward_logits(&m, tokens, S, ref);
    cache_vs(&m, tokens, ref, "bf16 GQA kv 2 untied qkv-bias", BF16_TOL);
    KVCache c, c32;
    infer_init(&c, &m);
    infer_init(&c32, &m32);
    CHECK(c.out_w16 == m.params16 + (m.w.lm_head - m.params) && c.layer[1].fc1_w16 != NULL,
          "the bf16 cache does not bind the weight copy (lm_head's, the layers')");
    infer_forward(&c, tokens, S, a, 1);
    infer_forward(&c32, tokens, S, b, 1);
    double apart = worst_rows(a, b, S, V);
    CHECK(apart > 1e-4, "bf16 and fp32 inference agree to %.3g: the weight copy is not used", apart);
    printf("  bf16 vs fp32 cache on the same weights: %.3g apart\n", apart);
    infer_free(&c);
    infer_free(&c32);
    free(ref); free(a); free(b);
    gpt_free(&m);
    gpt_free(&m32);
}

// generate()'s window by recomputation: the logits of the last token of hist[start, len) from
// gpt_forward over the whole window, sliding (start = len − seq/2) when the window was full, as
// model/generate.h says. ref_model is the training model (for GQA: the repeat_kv MHA one).
static void generate_reference(GPT *ref_model, const int32_t *prompt, int n_prompt, const GenOptions *o, int32_t *out) {
    int s = ref_model->cfg.seq, keep = s / 2 > 0 ? s / 2 : 1;
    int32_t *hist = xmalloc((size_t)(n_prompt + o->max_new) * sizeof(int32_t));
    float *all = xmalloc((size_t)s * V * sizeof(float));
    memcpy(hist, prompt, (size_t)n_prompt * sizeof(int32_t));
    int len = n_prompt, start = n_prompt > s ? n_prompt - s : 0;
    Sampler smp;
    sampler_init(&smp, V, o->temperature, o->top_k, o->seed);
    for (int i = 0; i < o->max_new; i++) {
        forward_logits(ref_model, hist + start, len - start, all);
        int32_t tok = sampler_draw(&smp, all + (size_t)(len - start - 1) * V, (uint32_t)i);
        out[i] = tok;
        hist[len++] = tok;
        if (len - 1 - start == s) start = len - keep;   // the window was full: it slides
    }
    sampler_free(&smp);
    free(all);
    free(hist);
}

static void check_generate_vs(GPT *model, GPT *ref_model, const char *what) {
    enum { N = 50 };
    int32_t prompt[5] = {17, 250, 3, 99, 140}, got[N], want[N];
    GenOptions o = {N, 1.0f, 0, 11, NULL, 0};
    GenStats st;
    generate(model, prompt, 5, &o, got, NULL, NULL, &st);
    generate_reference(ref_model, prompt, 5, &o, want);
    int first = -1;
    for (int i = 0; i < N && first < 0; i++)
        if (got[i] != want[i]) first = i;
    CHECK(first < 0, "%s: generate() and the recomputing reference part at token %d (%d vs %d)", what, first,
          first >= 0 ? got[first] : 0, first >= 0 ? want[first] : 0);
    // 5 prompt tokens + 50 in a window of 24 that keeps 12: full when tokens 19, 32 and 45 are drawn.
    CHECK(st.slides == 3, "%s: the window slid %d times, expected 3", what, st.slides);
    int distinct = 0;
    for (int i = 1; i < N; i++) distinct += got[i] != got[0];
    CHECK(distinct > 0, "%s: %d times the same token: the comparison would prove little", what, N);
    printf("  generate %s: %d tokens (seed 11, temperature 1, %d slides) %s the recomputing reference's\n", what, N,
           st.slides, first < 0 ? "equal" : "differ from");
}

// Qwen3's per-head q/k norms (weights away from 1: perturb's "norm"), with heads of h/a, wider (d 16: q 64
// wide) and narrower (d 8, MQA): the cache normalises each new row's heads before RoPE, as the training forward.
static void check_qk_norm(int kv, int head_dim) {
    char what[64];
    snprintf(what, sizeof what, "q/k norms kv %d d %d", kv, head_dim ? head_dim : 12);
    GPTConfig cfg = llama_cfg(kv, 0, 0);
    cfg.qk_norm = 1;
    cfg.head_dim = head_dim;
    GPT m;
    make_model(&m, &cfg, PRECISION_FP32);
    CHECK(m.w.qk_norm_w != NULL, "%s: the model has no q/k norm weights", what);
    int32_t tokens[S];
    tokens_of(tokens, S, 99);
    float *ref = xmalloc((size_t)S * V * sizeof(float));
    forward_logits(&m, tokens, S, ref);
    cache_vs(&m, tokens, ref, what, FP32_TOL);
    // Without the norms the same weights give other logits: the check above sees them.
    GPTConfig plain = cfg;
    plain.qk_norm = 0;
    GPT p;
    make_model(&p, &plain, PRECISION_FP32);
    float *other = xmalloc((size_t)S * V * sizeof(float));
    forward_logits(&p, tokens, S, other);
    double diff = worst_rows(other, ref, S, V);
    CHECK(diff > 1e-2, "%s: the norms move the logits by only %.3g", what, diff);
    free(other);
    free(ref);
    gpt_free(&p);
    gpt_free(&m);
}

// A knob of the attention (a sliding window, partial rotary) on cfg: the cache's rows follow the training
// forward's in one prefill, decoding and chunks; and the knob matters: `plain` (cfg without it) gives other
// logits, the first `same_rows` positions (those it cannot reach) bitwise the same.
static void check_knob(const char *what, const GPTConfig *cfg, const GPTConfig *plain, uint32_t seed, int same_rows) {
    GPT m, w;
    make_model(&m, cfg, PRECISION_FP32);
    int32_t tokens[S];
    tokens_of(tokens, S, seed);
    float *ref = xmalloc((size_t)S * V * sizeof(float)), *other = xmalloc((size_t)S * V * sizeof(float));
    forward_logits(&m, tokens, S, ref);
    cache_vs(&m, tokens, ref, what, FP32_TOL);
    make_model(&w, plain, PRECISION_FP32);
    forward_logits(&w, tokens, S, other);
    double first = worst_rows(other, ref, same_rows, V), diff = worst_rows(other, ref, S, V);
    CHECK(first == 0.0, "%s: the first %d positions differ from the model without it by %.3g", what, same_rows, first);
    CHECK(diff > 1e-2, "%s: it moves the logits by only %.3g", what, diff);
    free(other);
    free(ref);
    gpt_free(&w);
    gpt_free(&m);
}

// A sliding window shorter than the sequence (Mistral's kind): rows attend to their last `window` positions;
// those within the window see what the whole causal prefix gives.
static void check_window(int kv, int window) {
    char what[64];
    snprintf(what, sizeof what, "sliding window %d kv %d", window, kv);
    GPTConfig cfg = llama_cfg(kv, 0, 0), whole;
    cfg.sliding_window = window;
    whole = cfg;
    whole.sliding_window = 0;
    check_knob(what, &cfg, &whole, 4242, window);
}

// Partial rotary (Phi-4-mini's kind): the first rotary_dim dims of each head rotated at the row's position, the
// rest passed; position 0 (no rotation) as with every dim rotated.
static void check_partial_rotary(int kv, int rotary) {
    char what[64];
    snprintf(what, sizeof what, "partial rotary %d of 12 kv %d", rotary, kv);
    GPTConfig cfg = llama_cfg(kv, 1, 0), all;
    cfg.rotary_dim = rotary;
    all = cfg;
    all.rotary_dim = 0;
    check_knob(what, &cfg, &all, 515, 1);
}

static void check_generate(void) {
    GPTConfig cfg = llama_cfg(4, 0, 0);
    GPT m;
    make_model(&m, &cfg, PRECISION_FP32);
    check_generate_vs(&m, &m, "MHA");
    GPTConfig gcfg = llama_cfg(2, 0, 0);
    GPT gqa;
    gpt_init_params(&gqa, &gcfg);
    tie_gqa_to_mha(&gqa, &m);
    check_generate_vs(&gqa, &m, "GQA kv 2");
    gpt_free(&gqa);
    gpt_free(&m);
}

int main(void) {
    check_mha(0, 0);
    check_mha(1, 0);
    check_mha(0, 1);
    check_gqa(2, 0, 0);
    check_gqa(1, 1, 0);
    check_gqa(2, 0, 1);
    check_bf16();
    check_qk_norm(2, 0);
    check_qk_norm(2, 16);
    check_qk_norm(1, 8);
    check_window(2, 5);
    check_window(1, 11);
    check_partial_rotary(2, 8);
    check_partial_rotary(1, 4);
    check_generate();
    return check_summary();
}
