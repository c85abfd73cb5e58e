// LoRA and LoRA-FA's ledger (issue 27): with the base frozen no linear keeps its input for a weight
// gradient, each adapted site keeps x·Aᵀ [s·b, r], and a linear input stays only while a backward
// consumer reads it (A's gradient under LoRA; Tempo's norm from its output; Tempo's GeLU; flash's O).
// Measured bytes == ctron's analytic model == the formula derived here, per name and layer, for GPT-2
// and llama, LoRA and LoRA-FA, target sets, every recompute policy, Tempo/flash and bf16; the step's
// peak equals the analytic one; the adapters' gradients are bitwise the same under every policy, B's
// equal under LoRA and LoRA-FA, and LoRA-FA has no A gradient at all (A is frozen, in m.frozen). Also
// peft's initialisation (A ~ U(±1/√in), B = 0, shapes [r, in] and [out, r]) and the base's draws unchanged.
// --lora-dropout's workspace: the largest [rows, in] of the targeted sites, by hand for 24 runs (issue 27).
#include <math.h>
#include <string.h>
#include "check.h"
#include "memory/memory_model.h"
#include "model/gpt.h"
#include "util/common.h"

// fused: llama with Phi-3's fused q|k|v and gate|up (--fused-proj), whose qkv and gate_up sites have one A each.
typedef struct { int arch; long s, b, h, a, kv, f, v; int dropout, e, r, fa; unsigned sites, tempo; int mini; float lp; int fused; } Shape;

#define SITE(s) (1u << (s))
static int on(const Shape *sh, unsigned sites) { return (sh->sites & sites) != 0; }

// Bytes of one name in one layer under recompute none, from the rule of docs/LORA.md.
static size_t none_bytes(const Shape *sh, ActName n) {
    size_t sb = (size_t)(sh->s * sh->b), sbh = sb * (size_t)sh->h, as2b = (size_t)(sh->a * sh->s) * sb;
    size_t e = (size_t)sh->e, k = sh->dropout ? 1 : 0, llama = sh->arch == ARCH_LLAMA;
    size_t flash = (sh->tempo & ATTN_FLASH) != 0, tln = (sh->tempo & TEMPO_LAYERNORM) != 0;
    size_t tgelu = (sh->tempo & TEMPO_GELU) != 0, a_trains = !sh->fa;
    size_t sbf = sb * (size_t)(llama ? sh->f : 4 * sh->h);
    if (act_is_lora(n)) return (sh->sites >> (n - ACT_LORA_Q) & 1u) ? e * sb * (size_t)sh->r : 0;
    if (sh->mini) {   // mini-seq: the MLP's inside made again per chunk from fc1_in, which stays for it
        if (n == ACT_GELU_IN || n == ACT_FC2_IN || n == ACT_GATE || n == ACT_UP || n == ACT_GELU_BRANCH) return 0;
        if (n == ACT_FC1_IN) return e * sbh;
    }
    switch (n) {
    case ACT_LN1_IN: case ACT_LN2_IN: return tln ? 0 : e * sbh;
    case ACT_QKV_IN:
        return (a_trains && on(sh, SITE(LORA_Q) | SITE(LORA_K) | SITE(LORA_V) | SITE(LORA_QKV))) || tln ? e * sbh : 0;
    case ACT_FC1_IN:
        return (a_trains && on(sh, SITE(LORA_GATE) | SITE(LORA_UP) | SITE(LORA_GATE_UP) | SITE(LORA_FC))) || tln ? e * sbh : 0;
    case ACT_PROJ_IN: return (a_trains && on(sh, SITE(LORA_O) | SITE(LORA_PROJ))) || flash ? e * sbh : 0;
    case ACT_FC2_IN: return llama ? 0 : (a_trains && on(sh, SITE(LORA_FC2))) || tgelu ? e * sbf : 0;
    case ACT_GELU_IN: return llama || tgelu ? 0 : e * sbf;
    case ACT_GELU_BRANCH: return !llama && tgelu ? (sbf + 7) / 8 : 0;
    case ACT_Q: return e * sbh;
    case ACT_K: case ACT_V: return e * sbh / (size_t)sh->a * (size_t)sh->kv;
    case ACT_ATTN_PROB: return flash ? 0 : e * as2b;
    case ACT_ATTN_MASK: return flash ? 0 : k * as2b;
    case ACT_ATTN_DROP: return flash || !k || (sh->tempo & TEMPO_SOFTMAX) ? 0 : e * as2b;
    case ACT_DROP1_MASK: case ACT_DROP2_MASK: return k * sbh;
    case ACT_LN1_STATS: case ACT_LN2_STATS: return (llama ? 4 : 8) * sb;
    case ACT_ATTN_LSE: return flash ? 4 * (size_t)sh->a * sb : 0;
    case ACT_GATE: case ACT_UP: return llama ? e * sbf : 0;
    default: return 0;
    }
}

static size_t expected(const Shape *sh, const MemoryPolicy *p, int l, ActName n) {
    if (p->kind[l] == RECOMPUTE_FULL)
        return n == ACT_LN1_IN && p->group_start[l] == l ? (size_t)sh->e * sh->s * sh->b * sh->h : 0;
    if (p->kind[l] == RECOMPUTE_SELECTIVE && (n == ACT_ATTN_PROB || n == ACT_ATTN_MASK || n == ACT_ATTN_DROP)) return 0;
    // Layer 0 has no input gradient (the embedding is frozen): its Norm1 backward, the only reader of these, is not run
    if (l == 0 && (n == ACT_LN1_IN || n == ACT_LN1_STATS)) return 0;
    // nor Tempo's norm's qkv_in, where no adapter's dA reads it
    if (l == 0 && n == ACT_QKV_IN && !(!sh->fa && on(sh, SITE(LORA_Q) | SITE(LORA_K) | SITE(LORA_V) | SITE(LORA_QKV))))
        return 0;
    return none_bytes(sh, n);
}

// B (zero at initialisation, which makes A's gradient zero) set to small values, the same for every run.
static void set_b(GPT *m) {
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *pi = &m->info[i];
        if (!strstr(pi->name, "lora_B")) continue;
        for (size_t e = 0; e < pi->numel; e++) m->params[pi->offset + e] = 0.01f * sinf((float)(e * 7 + pi->full_index));
    }
    gpt_params_changed(m);
}

typedef struct { float *a_grad, *b_grad; size_t na, nb; } Grads;

static Grads run_step(const Shape *sh, int L, const char *rc, const char *method, int num, const char *list) {
    Grads out = {0};
    MemoryPolicy pol = {0};
    char err[256];
    pol.act_dtype = sh->e == 2 ? ACT_BF16 : ACT_FP32;
    pol.masks = MASKS_BYTES;
    pol.tempo = sh->tempo | (sh->mini ? MINI_SEQ : 0);
    pol.mini_seq = sh->mini;
    if (policy_build(&pol, L, rc, method, num, list, err, sizeof err) != 0) {
        CHECK(0, "policy: %s", err);
        return out;
    }
    GPTConfig cfg = {.layers = L, .hidden = (int)sh->h, .heads = (int)sh->a, .seq = (int)sh->s, .batch = (int)sh->b,
                     .vocab = (int)sh->v, .dropout = sh->dropout ? 0.1f : 0.0f, .arch = sh->arch,
                     .kv_heads = sh->arch == ARCH_LLAMA ? (int)sh->kv : 0, .ffn = sh->arch == ARCH_LLAMA ? (int)sh->f : 0,
                     .lora_rank = sh->r, .lora_alpha = 16.0f, .lora_targets = sh->sites, .lora_fa = sh->fa,
                     .lora_dropout = sh->lp, .fused_proj = sh->fused};
    GPT m;
    gpt_init(&m, &cfg, &pol);
    pol.tempo = m.policy.tempo;   // the model adds LoRA's bits: the analytic model reads them from the policy
    gpt_init_weights(&m, 3);
    set_b(&m);
    size_t n = (size_t)sh->s * sh->b;
    int32_t *tok = xcalloc(n * 4), *tgt = xcalloc(n * 4);
    for (size_t i = 0; i < n; i++) { tok[i] = (int32_t)((i * 13) % (size_t)sh->v); tgt[i] = (int32_t)((i * 7) % (size_t)sh->v); }
    StepCtx ctx = {5, 1, 0, 1};
    gpt_zero_grad(&m);
    gpt_forward(&m, tok, tgt, (int)sh->s, (int)sh->b, ctx, 1.0f / (float)n);
    char what[200];
    snprintf(what, sizeof what, "%s r%d%s sites %#x %s/%s/%d/%s e%d p%d tempo %#x mini %d lora-dropout %g",
             sh->arch ? sh->fused ? "llama fused" : "llama" : "gpt2", sh->r, sh->fa ? " FA" : "", sh->sites, rc ? rc : "-", method ? method : "-",
             num, list ? list : "-", sh->e, sh->dropout, sh->tempo, sh->mini, (double)sh->lp);
    size_t fwd = 0;
    for (int l = 0; l < L; l++)
        for (int nm = 0; nm < ACT_N_LAYER; nm++) {
            size_t got = ledger_stored_bytes(&m.ledger, (ActName)nm, l), want = expected(sh, &pol, l, (ActName)nm);
            CHECK(got == want, "%s: layer %d %s measured %zu, formula %zu", what, l, act_name_str((ActName)nm), got, want);
            CHECK(act_layer_name_bytes(&m.shape, &pol, l, (ActName)nm) == want, "%s: analytic layer %d %s %zu, formula %zu",
                  what, l, act_name_str((ActName)nm), act_layer_name_bytes(&m.shape, &pol, l, (ActName)nm), want);
            fwd += want;
        }
    // Model level: lnf_in (e), its statistics and the logits (fp32); no emb_mask, no lm_in (frozen). Mini-seq:
    // the output layer's backward done in the forward, its dL/d lnf's output kept (fp32) instead of the logits.
    size_t sb = (size_t)(sh->s * sh->b), sbh = sb * (size_t)sh->h;
    fwd += (size_t)sh->e * sbh + (sh->arch == ARCH_LLAMA ? 4 : 8) * sb + (sh->mini ? 4 * sbh : 4 * sb * (size_t)sh->v);
    CHECK(m.ledger.total_fwd_end == fwd, "%s: end of forward %zu, formula %zu", what, m.ledger.total_fwd_end, fwd);
    CHECK(act_forward_end_bytes(&m.shape, &pol) == fwd, "%s: analytic end of forward", what);
    gpt_backward(&m, tok, ctx);
    CHECK(m.ledger.total_peak == act_peak_bytes(&m.shape, &pol), "%s: step peak measured %zu, analytic %zu", what,
          m.ledger.total_peak, act_peak_bytes(&m.shape, &pol));
    // The adapters' gradients: A's (none under LoRA-FA: A lives with the frozen base) and B's.
    for (int i = 0; i < m.n_info; i++) {
        const ParamInfo *pi = &m.info[i];
        int is_b = strstr(pi->name, "lora_B") != NULL;
        CHECK(is_b || !sh->fa, "%s: LoRA-FA trains %s", what, pi->name);
        float **dst = is_b ? &out.b_grad : &out.a_grad;
        size_t *cnt = is_b ? &out.nb : &out.na;
        *dst = realloc(*dst, (*cnt + pi->numel) * sizeof(float));
        memcpy(*dst + *cnt, m.grads + pi->offset, pi->numel * sizeof(float));
        *cnt += pi->numel;
    }
    gpt_free(&m);
    policy_free(&pol);
    free(tok);
    free(tgt);
    return out;
}

static int any_nonzero(const float *x, size_t n);

// peft's initialisation (A ~ U(±1/√in): kaiming_uniform_(a=√5); B = 0) and the base's draws: the same bits as
// the model without adapters (the adapters draw from streams of their own full index).
static void check_init(int arch, int fused, unsigned sites, int fa) {
    GPTConfig base = {.layers = 2, .hidden = 64, .heads = 4, .seq = 16, .batch = 2, .vocab = 300, .arch = arch,
                      .fused_proj = fused};
    GPTConfig lora = base;
    lora.lora_rank = 8;
    lora.lora_targets = sites;
    lora.lora_fa = fa;
    GPT mb, ml;
    gpt_init(&mb, &base, NULL);
    gpt_init(&ml, &lora, NULL);
    gpt_init_weights(&mb, 11);
    gpt_init_weights(&ml, 11);
    CHECK(ml.n_frozen >= mb.n_params && memcmp(ml.frozen, mb.params, mb.n_params * sizeof(float)) == 0,
          "arch %d fa %d: the frozen base's draws differ from the model without adapters", arch, fa);
    int n_a = 0, n_b = 0;
    const ParamInfo *lists[2] = {ml.info, ml.frozen_info};
    const float *bufs[2] = {ml.params, ml.frozen};
    int counts[2] = {ml.n_info, ml.n_frozen_info};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < counts[k]; i++) {
            const ParamInfo *pi = &lists[k][i];
            const float *x = bufs[k] + pi->offset;
            if (strstr(pi->name, ".lora_B.")) {
                n_b++;
                CHECK(!any_nonzero(x, pi->numel), "%s is not zero at initialisation", pi->name);
                CHECK(pi->shape[1] == 8, "%s has shape [%d, %d], expected [out, r]", pi->name, pi->shape[0], pi->shape[1]);
            } else if (strstr(pi->name, ".lora_A.")) {
                n_a++;
                float bound = 1.0f / sqrtf((float)pi->shape[1]), mx = 0.0f;
                double mean = 0.0;
                for (size_t e = 0; e < pi->numel; e++) {
                    mx = fmaxf(mx, fabsf(x[e]));
                    mean += x[e];
                }
                mean /= (double)pi->numel;
                CHECK(pi->shape[0] == 8 && mx <= bound && mx >= 0.95f * bound && fabs(mean) < 0.2 * bound,
                      "%s: [%d, %d], max |a| %g, mean %g, expected U(±%g)", pi->name, pi->shape[0], pi->shape[1],
                      (double)mx, mean, (double)bound);
                CHECK((k == 1) == (fa != 0), "%s is %s", pi->name, k ? "frozen" : "trained");
            }
        }
    int per = 0;
    for (int s = 0; s < LORA_SITES; s++) per += sites >> s & 1u;
    CHECK(n_a == 2 * per && n_b == 2 * per, "arch %d: %d A and %d B for %d sites in 2 layers", arch, n_a, n_b, per);
    gpt_free(&mb);
    gpt_free(&ml);
}

// max |x − y| / max |y| (0 for two empty tensors).
static double max_rel(const float *x, const float *y, size_t n) {
    double d = 0.0, top = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)x[i] - (double)y[i]), t = fabs((double)y[i]);
        d = e > d ? e : d;
        top = t > top ? t : top;
    }
    return top > 0.0 ? d / top : d;
}

static int any_nonzero(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (x[i] != 0.0f) return 1;
    return 0;
}

// --lora-dropout's workspace of a model (s 32, b 2: n = 64 rows; h 64, a 4; llama kv 2 (k/v width 32); r 4)
// adapting `sites` (0: the family's every site, the default --lora-targets): W_LORA's bytes, W_LORA_MASK's, and
// the whole workspace's growth over the same model without dropout.
typedef struct { size_t lora, mask, added; } LoraWs;

static size_t workspace_of(int arch, int f, int t, int mini, unsigned sites, float p, size_t *lora, size_t *mask) {
    MemoryPolicy pol = {0};
    char err[256];
    pol.masks = MASKS_BYTES;
    pol.tempo = mini ? MINI_SEQ : 0;
    pol.mini_seq = mini;
    CHECK(policy_build(&pol, 2, "none", NULL, 1, NULL, err, sizeof err) == 0, "policy: %s", err);
    GPTConfig cfg = {.layers = 2, .hidden = 64, .heads = 4, .seq = 32, .batch = 2, .vocab = 300, .arch = arch,
                     .kv_heads = arch == ARCH_LLAMA ? 2 : 0, .ffn = f, .lora_rank = 4, .lora_alpha = 8.0f,
                     .lora_targets = sites, .lora_dropout = p};
    TPLayout tp = {t, 0, 0, NULL};
    GPT m;
    gpt_init_tp(&m, &cfg, &pol, &tp);
    size_t total = m.workspace_bytes;
    if (lora) *lora = m.ws_bytes[W_LORA], *mask = m.ws_bytes[W_LORA_MASK];
    gpt_free(&m);
    policy_free(&pol);
    return total;
}

static LoraWs lora_workspace(int arch, int f, int t, int mini, unsigned sites) {
    LoraWs w;
    w.added = workspace_of(arch, f, t, mini, sites, 0.1f, &w.lora, &w.mask) -
              workspace_of(arch, f, t, mini, sites, 0.0f, NULL, NULL);
    return w;
}

// W_LORA holds one site's [rows, in] input at a time, so it is the largest [rows, in] among the sites this rank
// adapts (issue 27: no buffer the backward does not read), W_LORA_MASK as many bytes (allocated in whole floats;
// every count below is a multiple of 4, so its bytes are the elements). On a rank of t, n = 64 rows:
//   q, k, v, gate, up, GPT-2's qkv and fc (column-parallel: the whole input on every rank)  n·h = 4096
//   o, proj (row-parallel: the rank's h/t columns)                                          n·h/t
//   down, fc2 (row-parallel: f/t columns; with mini-seq M one chunk's ⌈n/M⌉ rows)            n·f/t, ⌈n/M⌉·f/t
// W_LORA is 4 bytes an element, so the workspace grows by 5 bytes an element. Worked by hand (main: max(n·h,
// rows·f/t) whatever the targets, in the last column):
//   llama f 176, all sites, M 0:   max(4096, 4096, 64·176 = 11264) = 11264 → 45056 + 11264     (main 11264)
//   llama f 176, all, M 2:         max(4096, 4096, 32·176 = 5632) = 5632 → 22528 + 5632        (main 5632)
//   llama f 176, all, M 4:         max(4096, 4096, 16·176 = 2816) = 4096 → 16384 + 4096        (main 4096)
//   llama f 176, all, t 2, M 2:    max(4096, 64·32 = 2048, 32·88 = 2816) = 4096                 (main 4096)
//   llama f 176, all, t 2, M 0:    max(4096, 2048, 64·88 = 5632) = 5632                         (main 5632)
//   llama down, M 0: 64·176 = 11264 (main 11264); M 4: 16·176 = 2816 (main 4096);
//               t 2, M 0: 64·88 = 5632 (main 5632); t 2, M 2: 32·88 = 2816 (main 4096)
//   llama q,v, M 0: 4096 (main 11264); M 2: 4096 (main 5632); t 2, M 0: 4096 (main 5632)
//   llama o, t 2, M 0: 64·32 = 2048 (main 5632)
//   GPT-2 (f 4h = 256), all sites, M 0: max(4096, 4096, 64·256 = 16384) = 16384                (main 16384)
//   GPT-2 all, M 2: 32·256 = 8192 (main 8192); M 8: max(4096, 8·256 = 2048) = 4096 (main 4096);
//               t 2, M 0: max(4096, 2048, 64·128 = 8192) = 8192 (main 8192)
//   GPT-2 fc2, M 0: 16384 (main 16384); M 8: 8·256 = 2048 (main 4096); t 2, M 4: 16·128 = 2048 (main 4096)
//   GPT-2 qkv (its q, k, v), M 0: 4096 (main 16384); M 2: 4096 (main 8192); t 2, M 0: 4096 (main 8192)
//   GPT-2 proj, t 2, M 0: 64·32 = 2048 (main 8192)
static void check_lora_workspace(void) {
    const unsigned ALL = 0, DOWN = SITE(LORA_DOWN), QV = SITE(LORA_Q) | SITE(LORA_V), O = SITE(LORA_O);
    const unsigned FC2 = SITE(LORA_FC2), QKV = SITE(LORA_QKV), PROJ = SITE(LORA_PROJ);
    const struct { int arch, f, t, mini; unsigned sites; size_t elems, main_elems; } cases[] = {
        {ARCH_LLAMA, 176, 1, 0, ALL, 11264, 11264}, {ARCH_LLAMA, 176, 1, 2, ALL, 5632, 5632},
        {ARCH_LLAMA, 176, 1, 4, ALL, 4096, 4096},   {ARCH_LLAMA, 176, 2, 2, ALL, 4096, 4096},
        {ARCH_LLAMA, 176, 2, 0, ALL, 5632, 5632},   {ARCH_LLAMA, 176, 1, 0, DOWN, 11264, 11264},
        {ARCH_LLAMA, 176, 1, 4, DOWN, 2816, 4096},  {ARCH_LLAMA, 176, 2, 0, DOWN, 5632, 5632},
        {ARCH_LLAMA, 176, 2, 2, DOWN, 2816, 4096},  {ARCH_LLAMA, 176, 1, 0, QV, 4096, 11264},
        {ARCH_LLAMA, 176, 1, 2, QV, 4096, 5632},    {ARCH_LLAMA, 176, 2, 0, QV, 4096, 5632},
        {ARCH_LLAMA, 176, 2, 0, O, 2048, 5632},     {ARCH_GPT2, 0, 1, 0, ALL, 16384, 16384},
        {ARCH_GPT2, 0, 1, 2, ALL, 8192, 8192},      {ARCH_GPT2, 0, 1, 8, ALL, 4096, 4096},
        {ARCH_GPT2, 0, 2, 0, ALL, 8192, 8192},      {ARCH_GPT2, 0, 1, 0, FC2, 16384, 16384},
        {ARCH_GPT2, 0, 1, 8, FC2, 2048, 4096},      {ARCH_GPT2, 0, 2, 4, FC2, 2048, 4096},
        {ARCH_GPT2, 0, 1, 0, QKV, 4096, 16384},     {ARCH_GPT2, 0, 1, 2, QKV, 4096, 8192},
        {ARCH_GPT2, 0, 2, 0, QKV, 4096, 8192},      {ARCH_GPT2, 0, 2, 0, PROJ, 2048, 8192},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        LoraWs w = lora_workspace(cases[i].arch, cases[i].f, cases[i].t, cases[i].mini, cases[i].sites);
        size_t e = cases[i].elems;
        char targets[64];
        lora_describe_targets(cases[i].sites ? cases[i].sites : lora_family_sites(lora_family(cases[i].arch, 0)), targets,
                              sizeof targets);
        CHECK(w.lora == 4 * e && w.mask == e && w.added == 5 * e,
              "%s f %d tp %d mini-seq %d targets %s: W_LORA %zu B (expected %zu), W_LORA_MASK %zu B (expected %zu), "
              "the workspace grows by %zu B with --lora-dropout (expected %zu; %zu on main)",
              cases[i].arch == ARCH_LLAMA ? "llama" : "gpt2", cases[i].f, cases[i].t, cases[i].mini, targets, w.lora,
              4 * e, w.mask, e, w.added, 5 * e, 5 * cases[i].main_elems);
    }
}

int main(void) {
    check_lora_workspace();
    const unsigned llama_all = SITE(LORA_Q) | SITE(LORA_K) | SITE(LORA_V) | SITE(LORA_O) | SITE(LORA_GATE) |
                               SITE(LORA_UP) | SITE(LORA_DOWN);
    const unsigned gpt2_all = SITE(LORA_QKV) | SITE(LORA_PROJ) | SITE(LORA_FC) | SITE(LORA_FC2);
    const unsigned fused_all = SITE(LORA_QKV) | SITE(LORA_O) | SITE(LORA_GATE_UP) | SITE(LORA_DOWN);
    const Shape shapes[] = {
        {ARCH_LLAMA, 16, 2, 64, 4, 2, 96, 300, 1, 4, 4, 0, llama_all, 0, 0, 0, 0},
        {ARCH_LLAMA, 16, 2, 64, 4, 2, 96, 300, 0, 4, 8, 0, SITE(LORA_Q) | SITE(LORA_V), 0, 0, 0, 0},
        {ARCH_LLAMA, 16, 2, 64, 4, 4, 96, 300, 1, 4, 4, 0, SITE(LORA_O) | SITE(LORA_DOWN), 0, 0, 0, 0},
        {ARCH_GPT2, 16, 2, 64, 4, 4, 0, 280, 1, 4, 4, 0, gpt2_all, 0, 0, 0, 0},
        {ARCH_GPT2, 16, 2, 48, 4, 4, 0, 280, 1, 4, 2, 0, SITE(LORA_QKV) | SITE(LORA_FC2), 0, 0, 0, 0},
        {ARCH_LLAMA, 16, 2, 64, 4, 2, 96, 300, 1, 4, 4, 0, fused_all, 0, 0, 0, 1},
        {ARCH_LLAMA, 16, 2, 64, 4, 2, 96, 300, 0, 4, 8, 0, SITE(LORA_QKV) | SITE(LORA_DOWN), 0, 0, 0, 1},
    };
    struct { const char *rc, *method; int num; const char *list; } policies[] = {
        {"none", NULL, 1, NULL},      {"selective", NULL, 1, NULL}, {"full", "uniform", 1, NULL},
        {"full", "uniform", 2, NULL}, {"full", "block", 2, NULL},   {NULL, NULL, 1, "0:full,1:selective,2:none,3:full"},
    };
    const int L = 4;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        Grads lora_ref = {0};
        for (int fa = 0; fa <= 1; fa++) {
            Shape sh = shapes[i];
            sh.fa = fa;
            Grads ref = {0};
            for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++) {
                Grads g = run_step(&sh, L, policies[p].rc, policies[p].method, policies[p].num, policies[p].list);
                if (!ref.b_grad) { ref = g; continue; }
                CHECK(g.nb == ref.nb && memcmp(g.b_grad, ref.b_grad, g.nb * sizeof(float)) == 0,
                      "shape %zu fa %d policy %zu: B gradients differ from recompute none", i, fa, p);
                CHECK(g.na == ref.na && (!g.na || memcmp(g.a_grad, ref.a_grad, g.na * sizeof(float)) == 0),
                      "shape %zu fa %d policy %zu: A gradients differ from recompute none", i, fa, p);
                free(g.a_grad);
                free(g.b_grad);
            }
            CHECK(any_nonzero(ref.b_grad, ref.nb), "shape %zu fa %d: B's gradient is zero", i, fa);
            CHECK(fa || any_nonzero(ref.a_grad, ref.na), "shape %zu: A's gradient is zero (B was set non-zero)", i);
            CHECK(!fa || ref.na == 0, "shape %zu: LoRA-FA has %zu A gradients", i, ref.na);
            if (!fa) {
                lora_ref = ref;
                continue;
            }
            // LoRA-FA's B gradients are LoRA's: the same forward, A frozen changes only what is kept.
            CHECK(ref.nb == lora_ref.nb && memcmp(ref.b_grad, lora_ref.b_grad, ref.nb * sizeof(float)) == 0,
                  "shape %zu: LoRA-FA's B gradients differ from LoRA's", i);
            free(ref.b_grad);
            free(lora_ref.a_grad);
            free(lora_ref.b_grad);
        }
    }
    // Tempo's norm (qkv_in, fc1_in read again), Tempo's GeLU (fc2_in read again), flash (O read again), bf16.
    const unsigned tempos[] = {TEMPO_LAYERNORM, ATTN_FLASH, TEMPO_SOFTMAX};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i += 2)
        for (size_t t = 0; t < sizeof tempos / sizeof tempos[0]; t++)
            for (int fa = 0; fa <= 1; fa++) {
                Shape sh = shapes[i];
                sh.tempo = tempos[t];
                sh.fa = fa;
                sh.e = t == 0 ? 2 : 4;
                Grads g = run_step(&sh, L, "selective", NULL, 1, NULL);
                free(g.a_grad);
                free(g.b_grad);
            }
    // One layer under full recompute: the step's peak is layer 0's rebuild, which keeps no ln1_stats (nor, with
    // Tempo's norm and no adapter reading it, qkv_in) for the first norm's backward it skips
    for (size_t i = 0; i < 4; i += 3)
        for (int t = 0; t < 2; t++)
            for (int fa = 0; fa <= 1; fa++) {
                Shape sh = shapes[i];
                sh.tempo = t ? TEMPO_LAYERNORM : 0;
                sh.fa = fa;
                Grads g = run_step(&sh, 1, "full", "uniform", 1, NULL);
                free(g.a_grad);
                free(g.b_grad);
            }
    Shape g2 = shapes[3];
    g2.tempo = TEMPO_GELU;
    for (g2.fa = 0; g2.fa <= 1; g2.fa++) {
        Grads g = run_step(&g2, L, "none", NULL, 1, NULL);
        free(g.a_grad);
        free(g.b_grad);
    }
    // Mini-seq (the MLP a chunk at a time, its adapters inside the chunks): the same bytes rule with the
    // MLP's inside not kept, the adapters' gradients bitwise the same under every policy, and within
    // fp32 reordering of the whole-sequence run's (a chunk's GEMMs sum fewer rows at a time); with dropout
    // on the adapters' input too (--lora-dropout 0.1, shapes 0 and 3, fp32: a chunk draws its rows' mask alone,
    // into a workspace of max(n·h, ⌈n/M⌉·f/t) that the sanitizer build sees no access past, the whole's bits).
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int fa = 0; fa <= 1; fa++)
            for (int e = 4; e >= (i % 3 == 0 ? 0 : 2); e -= 2) {
                Shape sh = shapes[i];
                sh.fa = fa;
                sh.e = e ? e : 4;
                sh.lp = e ? 0.0f : 0.1f;
                Grads whole = run_step(&sh, L, "none", NULL, 1, NULL);
                sh.mini = i % 2 ? 3 : 2;
                Grads ref = {0};
                for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++) {
                    Grads g = run_step(&sh, L, policies[p].rc, policies[p].method, policies[p].num, policies[p].list);
                    if (!ref.b_grad) { ref = g; continue; }
                    CHECK(g.nb == ref.nb && memcmp(g.b_grad, ref.b_grad, g.nb * sizeof(float)) == 0,
                          "mini shape %zu fa %d e%d lp %g policy %zu: B gradients differ from recompute none", i, fa, sh.e,
                          (double)sh.lp, p);
                    CHECK(g.na == ref.na && (!g.na || memcmp(g.a_grad, ref.a_grad, g.na * sizeof(float)) == 0),
                          "mini shape %zu fa %d e%d lp %g policy %zu: A gradients differ from recompute none", i, fa, sh.e,
                          (double)sh.lp, p);
                    free(g.a_grad);
                    free(g.b_grad);
                }
                // bf16 activations: the whole-sequence run keeps llama's gate and up rounded to bf16, the
                // chunks use them unrounded (nothing is kept), a difference of bf16's 2^-8 per element
                double tol = sh.e == 4 ? 2e-5 : 1e-2;
                double db = max_rel(ref.b_grad, whole.b_grad, ref.nb), da = max_rel(ref.a_grad, whole.a_grad, ref.na);
                CHECK(ref.nb == whole.nb && db < tol,
                      "mini shape %zu fa %d e%d lp %g: B gradients %.3g from the whole sequence's", i, fa, sh.e,
                      (double)sh.lp, db);
                CHECK(ref.na == whole.na && da < tol,
                      "mini shape %zu fa %d e%d lp %g: A gradients %.3g from the whole sequence's", i, fa, sh.e,
                      (double)sh.lp, da);
                CHECK(any_nonzero(ref.b_grad, ref.nb), "mini shape %zu fa %d: B's gradient is zero", i, fa);
                free(ref.a_grad);
                free(ref.b_grad);
                free(whole.a_grad);
                free(whole.b_grad);
            }
    check_init(ARCH_LLAMA, 0, llama_all, 0);
    check_init(ARCH_LLAMA, 0, SITE(LORA_K) | SITE(LORA_DOWN), 1);
    check_init(ARCH_LLAMA, 1, fused_all, 0);
    check_init(ARCH_LLAMA, 1, SITE(LORA_GATE_UP), 1);
    check_init(ARCH_GPT2, 0, gpt2_all, 0);
    check_init(ARCH_GPT2, 0, SITE(LORA_PROJ), 1);
    return check_summary();
}
