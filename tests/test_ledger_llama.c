// The Llama block's ledger (issue 25): measured bytes == ctron's analytic model == the per-layer
// formula of docs/MEMORY.md, derived here independently, for every recompute policy × stored
// precision × mask mode × Tempo/flash × grouped-query attention, on a one-process model. The formula
// (bytes per layer, recompute none, t = 1, e bytes per stored element, k per mask element; d the head
// width, h/a unless head_dim says otherwise: q and the attention output are a·d wide, k and v kv·d):
//     sbh·(4e + 2k) + 2e·sb·(a·d + kv·d) + as²b·(2e + k) + 2e·sbf + 8sb
// (k terms and attn_drop only with dropout; 8sb: two norms' 1/rms, fp32). With Qwen3's per-head q/k norms
// the layer keeps the norms' inputs (q_norm_in, k_norm_in) in place of q and k, which backward makes again
// with the norms' 1/rms: the same bytes. The backward's peak (the
// whole step, recomputation included) is checked against the analytic model, and a full step's
// gradients must not depend on the policy (bitwise: recompute is exact).
#include <math.h>
#include <string.h>
#include "check.h"
#include "memory/memory_model.h"
#include "model/gpt.h"
#include "util/common.h"

typedef struct { long s, b, h, a, kv, f, v; int dropout, e; MaskMode masks; unsigned tempo; int mini; long d; int qk, window, rot; } Shape;

// A head's width (d: head_dim; 0: h/a), q's and the attention output's width a·d, and k's and v's kv·d.
static size_t head_dim(const Shape *sh) { return sh->d > 0 ? (size_t)sh->d : (size_t)(sh->h / sh->a); }
static size_t q_width(const Shape *sh) { return (size_t)sh->a * head_dim(sh); }
static size_t kv_width(const Shape *sh) { return (size_t)sh->kv * head_dim(sh); }

// Bytes of one name in one layer under recompute none (0: the Llama block never keeps it so).
static size_t none_bytes(const Shape *sh, ActName n) {
    size_t sb = (size_t)(sh->s * sh->b), sbh = sb * (size_t)sh->h, as2b = (size_t)(sh->a * sh->s) * sb;
    size_t e = (size_t)sh->e, k = sh->masks == MASKS_BYTES ? 1 : 0, flash = (sh->tempo & ATTN_FLASH) != 0;
    size_t bits = sh->masks == MASKS_BITS;
    switch (n) {
    case ACT_LN1_IN: case ACT_LN2_IN: return (sh->tempo & TEMPO_LAYERNORM) ? 0 : e * sbh;
    case ACT_QKV_IN: case ACT_FC1_IN: return e * sbh;
    case ACT_Q: return sh->qk ? 0 : e * sb * q_width(sh);   // Qwen3: made again from q_norm_in
    case ACT_K: return sh->qk ? 0 : e * sb * kv_width(sh);
    case ACT_PROJ_IN: return e * sb * q_width(sh);
    case ACT_V: return e * sb * kv_width(sh);
    case ACT_ATTN_PROB: return flash ? 0 : e * as2b;
    case ACT_ATTN_MASK: return flash || !sh->dropout ? 0 : bits ? (as2b + 7) / 8 : k * as2b;
    case ACT_ATTN_DROP: return flash || !sh->dropout || (sh->tempo & TEMPO_SOFTMAX) ? 0 : e * as2b;
    case ACT_DROP1_MASK: case ACT_DROP2_MASK: return !sh->dropout ? 0 : bits ? (sbh + 7) / 8 : k * sbh;
    case ACT_LN1_STATS: case ACT_LN2_STATS: return 4 * sb;   // 1/rms per row
    case ACT_ATTN_LSE: return flash ? 4 * (size_t)sh->a * sb : 0;
    case ACT_GATE: case ACT_UP: return sh->mini ? 0 : e * sb * (size_t)sh->f;   // mini-seq: made again per chunk
    case ACT_Q_NORM_IN: return sh->qk ? e * sb * q_width(sh) : 0;
    case ACT_K_NORM_IN: return sh->qk ? e * sb * kv_width(sh) : 0;
    default: return 0;   // gelu_in, fc2_in, GeLU bits: not in this block
    }
}

static size_t expected(const Shape *sh, const MemoryPolicy *p, int l, ActName n) {
    if (p->kind[l] == RECOMPUTE_FULL)   // only a group's input, the checkpoint (Tempo or not)
        return n == ACT_LN1_IN && p->group_start[l] == l ? (size_t)sh->e * sh->s * sh->b * sh->h : 0;
    if (p->kind[l] == RECOMPUTE_SELECTIVE && (n == ACT_ATTN_PROB || n == ACT_ATTN_MASK || n == ACT_ATTN_DROP)) return 0;
    return none_bytes(sh, n);
}

static float *run_step(const Shape *sh, int L, const char *recompute, const char *method, int num, const char *list,
                       int *fails_out) {
    MemoryPolicy pol = {0};
    char err[256];
    pol.act_dtype = sh->e == 2 ? ACT_BF16 : ACT_FP32;
    pol.masks = sh->masks;
    pol.tempo = sh->tempo | (sh->mini ? MINI_SEQ : 0) | (sh->qk ? QK_NORM_REBUILD : 0);   // the model's bit
    pol.mini_seq = sh->mini;
    if (policy_build(&pol, L, recompute, method, num, list, err, sizeof err) != 0) {
        CHECK(0, "policy: %s", err);
        return NULL;
    }
    GPTConfig cfg = {.layers = L, .hidden = (int)sh->h, .heads = (int)sh->a, .seq = (int)sh->s, .batch = (int)sh->b,
                     .vocab = (int)sh->v, .dropout = sh->dropout ? 0.1f : 0.0f, .arch = ARCH_LLAMA,
                     .kv_heads = (int)sh->kv, .head_dim = (int)sh->d, .ffn = (int)sh->f, .rope_theta = 5e5f,
                     .qk_norm = sh->qk, .sliding_window = sh->window,
                     .rotary_dim = sh->rot};
    GPT m;
    gpt_init(&m, &cfg, &pol);
    gpt_init_weights(&m, 3);
    size_t n = (size_t)sh->s * sh->b;
    int32_t *tok = xcalloc(n * 4), *tgt = xcalloc(n * 4);
    for (size_t i = 0; i < n; i++) { tok[i] = (int32_t)((i * 13) % (size_t)sh->v); tgt[i] = (int32_t)((i * 7) % (size_t)sh->v); }
    StepCtx ctx = {5, 1, 0, 1};
    gpt_zero_grad(&m);
    gpt_forward(&m, tok, tgt, (int)sh->s, (int)sh->b, ctx, 1.0f / (float)n);
    int before = check_failed;
    char what[200];
    snprintf(what, sizeof what, "llama L%d s%ld b%ld h%ld a%ld kv%ld d%zu f%ld%s %s/%s/%d/%s %s masks %s p%d tempo %#x mini %d", L,
             sh->s, sh->b, sh->h, sh->a, sh->kv, head_dim(sh), sh->f, sh->qk ? " qk-norm" : "", recompute ? recompute : "-",
             method ? method : "-", num, list ? list : "-", sh->e == 2 ? "bf16" : "fp32", mask_mode_name(sh->masks),
             sh->dropout, sh->tempo, sh->mini);
    size_t fwd = 0;
    for (int l = 0; l < L; l++)
        for (int nm = 0; nm < ACT_N_LAYER; nm++) {
            size_t got = ledger_stored_bytes(&m.ledger, (ActName)nm, l), want = expected(sh, &pol, l, (ActName)nm);
            CHECK(got == want, "%s: layer %d %s measured %zu, formula %zu", what, l, act_name_str((ActName)nm), got, want);
            CHECK(act_layer_name_bytes(&m.shape, &pol, l, (ActName)nm) == want, "%s: analytic layer %d %s %zu, formula %zu",
                  what, l, act_name_str((ActName)nm), act_layer_name_bytes(&m.shape, &pol, l, (ActName)nm), want);
            fwd += want;
        }
    // The closed form of a none layer (docs/MEMORY.md), from the name sums above.
    if (!sh->tempo && sh->masks == MASKS_BYTES)   // (mini-seq: without gate and up)
        for (int l = 0; l < L; l++) {
            if (pol.kind[l] != RECOMPUTE_NONE) continue;
            size_t sb = (size_t)(sh->s * sh->b), sbh = sb * (size_t)sh->h, as2b = (size_t)(sh->a * sh->s) * sb;
            size_t e = (size_t)sh->e, k = sh->dropout ? 1 : 0, drop_e = sh->dropout ? e : 0;
            size_t form = sbh * (4 * e + 2 * k) + 2 * e * sb * (q_width(sh) + kv_width(sh)) + as2b * (e + drop_e + k) +
                          (sh->mini ? 0 : 2 * e * sb * (size_t)sh->f) + 8 * sb;
            CHECK(ledger_layer_stored(&m.ledger, l, 0) == form, "%s: layer %d holds %zu, the closed form %zu", what, l,
                  ledger_layer_stored(&m.ledger, l, 0), form);
        }
    // Model level: lnf_in (e), its 1/rms (fp32), lm_in (e), logits (fp32) — with mini-seq instead the
    // output layer's input gradient (fp32), its backward done chunk by chunk in the forward; the
    // embedding mask with dropout.
    size_t sb = (size_t)(sh->s * sh->b), sbh = sb * (size_t)sh->h;
    size_t emb = !sh->dropout ? 0 : sh->masks == MASKS_BYTES ? sbh : sh->masks == MASKS_BITS ? (sbh + 7) / 8 : 0;
    size_t head = sh->mini ? 4 * sbh : (size_t)sh->e * sbh + 4 * sb * (size_t)sh->v;
    fwd += emb + (size_t)sh->e * sbh + 4 * sb + head;
    CHECK(m.ledger.total_fwd_end == fwd, "%s: end of forward %zu, formula %zu", what, m.ledger.total_fwd_end, fwd);
    CHECK(act_forward_end_bytes(&m.shape, &pol) == fwd, "%s: analytic end of forward", what);
    gpt_backward(&m, tok, ctx);
    CHECK(m.ledger.total_peak == act_peak_bytes(&m.shape, &pol), "%s: step peak measured %zu, analytic %zu", what,
          m.ledger.total_peak, act_peak_bytes(&m.shape, &pol));
    float *grads = xmalloc(m.n_params * sizeof(float));
    memcpy(grads, m.grads, m.n_params * sizeof(float));
    *fails_out = check_failed - before;
    gpt_free(&m);
    policy_free(&pol);
    free(tok);
    free(tgt);
    return grads;
}

int main(void) {
    // GQA (kv 2 of a 4), MQA, MHA; an FFN of 176; dropout on and off (llama's default is off); the
    // first shape again with mini-seq in 5 chunks of 32 rows (uneven: 7, 7, 6, 6, 6 at b 2... s·b = 32).
    const Shape shapes[] = {
        {16, 2, 64, 4, 2, 176, 300, 1, 4, MASKS_BYTES, 0, 0, 0, 0, 0, 0},
        {24, 2, 48, 6, 1, 96, 280, 0, 4, MASKS_BYTES, 0, 0, 0, 0, 0, 0},
        {16, 3, 64, 4, 4, 176, 260, 1, 2, MASKS_BYTES, 0, 0, 0, 0, 0, 0},
        {16, 2, 64, 4, 2, 176, 300, 1, 4, MASKS_BYTES, 0, 5, 0, 0, 0, 0},
        // head_dim other than h/a: heads wider (24 of h 64 / 4: q and the attention output 96 wide) and
        // narrower (8, with MQA: 32 wide)
        {16, 2, 64, 4, 2, 176, 300, 1, 4, MASKS_BYTES, 0, 0, 24, 0, 0, 0},
        {16, 2, 64, 4, 1, 176, 300, 0, 2, MASKS_BYTES, 0, 0, 8, 0, 0, 0},
        // Qwen3's per-head q/k norms: with heads of h/a, wider ones (24; GQA, dropout) and narrower (8, MQA, bf16)
        {16, 2, 64, 4, 2, 176, 300, 0, 4, MASKS_BYTES, 0, 0, 0, 1, 0, 0},
        {16, 2, 64, 4, 2, 176, 300, 1, 4, MASKS_BYTES, 0, 0, 24, 1, 0, 0},
        {16, 2, 64, 4, 1, 176, 300, 0, 2, MASKS_BYTES, 0, 0, 8, 1, 0, 0},
        // a sliding window of 5 (Mistral's kind): the same bytes, recompute as exact
        {16, 2, 64, 4, 2, 176, 300, 1, 4, MASKS_BYTES, 0, 0, 0, 0, 5, 0},
        // partial rotary: RoPE on 8 of each head's 16 dims (Phi-4-mini's kind)
        {16, 2, 64, 4, 2, 176, 300, 1, 4, MASKS_BYTES, 0, 0, 0, 0, 0, 8},
    };
    float *first = NULL;   // shape 0's gradients, which mini-seq (shape 3) computes in another order
    struct { const char *rc, *method; int num; const char *list; } policies[] = {
        {"none", NULL, 1, NULL},          {"selective", NULL, 1, NULL}, {"full", "uniform", 1, NULL},
        {"full", "uniform", 2, NULL},     {"full", "block", 2, NULL},   {NULL, NULL, 1, "0:full,1:selective,2:none,3:full"},
    };
    const int L = 4;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        float *ref = NULL;
        size_t np = 0;
        {   // the parameter count of this shape, for the bitwise gradient comparison
            GPTConfig c = {.layers = L, .hidden = (int)shapes[i].h, .heads = (int)shapes[i].a, .seq = (int)shapes[i].s,
                           .batch = (int)shapes[i].b, .vocab = (int)shapes[i].v, .arch = ARCH_LLAMA,
                           .kv_heads = (int)shapes[i].kv, .head_dim = (int)shapes[i].d, .ffn = (int)shapes[i].f,
                           .qk_norm = shapes[i].qk};
            np = gpt_num_params(&c);
        }
        for (size_t p = 0; p < sizeof policies / sizeof policies[0]; p++) {
            int fails = 0;
            float *g = run_step(&shapes[i], L, policies[p].rc, policies[p].method, policies[p].num, policies[p].list, &fails);
            if (!g) continue;
            if (!ref) {
                ref = g;
                if (i == 3) {   // the same model and batch as shape 0: the same gradients up to summation order
                    double worst = 0.0, scale = 0.0;
                    for (size_t j = 0; j < np; j++) {
                        double d = fabs((double)g[j] - first[j]);
                        if (d > worst) worst = d;
                        if (fabs(first[j]) > scale) scale = fabs(first[j]);
                    }
                    CHECK(worst <= 1e-5 * scale && worst > 0.0, "mini-seq gradients vs whole-sequence: max |diff| %.3g of "
                          "max |g| %.3g (expected a reordering's few ulps)", worst, scale);
                }
            } else {
                CHECK(memcmp(ref, g, np * sizeof(float)) == 0, "shape %zu policy %zu: gradients differ from recompute none",
                      i, p);
                free(g);
            }
        }
        if (i == 9 || i == 10)   // shape 0 with a window, with partial rotary: they reach the gradients
            CHECK(memcmp(ref, first, np * sizeof(float)) != 0, "shape %zu's %s leaves shape 0's gradients unchanged", i,
                  i == 9 ? "sliding window" : "partial rotary");
        if (i == 0) first = ref;
        else free(ref);
    }
    free(first);
    // Mask modes, Tempo's LayerNorm analogue (RMSNorm from its output) and softmax, flash; bf16.
    const unsigned tempos[] = {TEMPO_LAYERNORM, TEMPO_SOFTMAX, ATTN_FLASH, TEMPO_LAYERNORM | ATTN_FLASH};
    const MaskMode modes[] = {MASKS_BITS, MASKS_REGEN};
    for (size_t t = 0; t < sizeof tempos / sizeof tempos[0]; t++)
        for (int e = 4; e >= 2; e -= 2) {
            Shape sh = shapes[0];
            sh.tempo = tempos[t];
            sh.e = e;
            int fails = 0;
            free(run_step(&sh, L, "none", NULL, 1, NULL, &fails));
            free(run_step(&sh, L, "selective", NULL, 1, NULL, &fails));
        }
    for (size_t k = 0; k < sizeof modes / sizeof modes[0]; k++) {
        Shape sh = shapes[0];
        sh.masks = modes[k];
        int fails = 0;
        free(run_step(&sh, L, "none", NULL, 1, NULL, &fails));
        free(run_step(&sh, L, NULL, NULL, 1, "0-1:full,2:selective,3:none", &fails));
    }
    for (int wide = 4; wide <= 5; wide++) {   // other head widths under Tempo's softmax, flash, bf16, mini-seq
        Shape sh = shapes[wide];
        int fails = 0;
        sh.tempo = TEMPO_SOFTMAX;
        free(run_step(&sh, L, "none", NULL, 1, NULL, &fails));
        sh.tempo = ATTN_FLASH | TEMPO_LAYERNORM;
        sh.e = 2;
        free(run_step(&sh, L, "selective", NULL, 1, NULL, &fails));
        sh.mini = 4;
        free(run_step(&sh, L, "full", "block", 2, NULL, &fails));
    }
    {   // the window under flash (its tiles skipped left of it), Tempo's softmax and norms, bf16, mini-seq
        Shape sh = shapes[9];
        int fails = 0;
        sh.tempo = ATTN_FLASH;
        free(run_step(&sh, L, "none", NULL, 1, NULL, &fails));
        free(run_step(&sh, L, "selective", NULL, 1, NULL, &fails));
        sh.tempo = TEMPO_SOFTMAX | TEMPO_LAYERNORM;
        sh.e = 2;
        free(run_step(&sh, L, NULL, NULL, 1, "0:full,1:selective,2-3:none", &fails));
        sh.mini = 4;
        free(run_step(&sh, L, "full", "block", 2, NULL, &fails));
    }
    for (int qk = 6; qk <= 8; qk++) {   // the per-head q/k norms under flash, Tempo's norms, bf16, mini-seq, masks
        Shape sh = shapes[qk];
        int fails = 0;
        sh.tempo = ATTN_FLASH;
        free(run_step(&sh, L, "none", NULL, 1, NULL, &fails));
        free(run_step(&sh, L, "selective", NULL, 1, NULL, &fails));
        sh.tempo = TEMPO_LAYERNORM | TEMPO_SOFTMAX;
        sh.e = 2;
        sh.masks = MASKS_BITS;
        free(run_step(&sh, L, NULL, NULL, 1, "0:full,1:selective,2-3:none", &fails));
        sh.mini = 4;
        free(run_step(&sh, L, "full", "block", 2, NULL, &fails));
    }
    {   // mini-seq with RMSNorm from its output, flash and bf16 activations; under selective and full recompute
        Shape sh = shapes[0];
        sh.mini = 4;
        sh.tempo = TEMPO_LAYERNORM | ATTN_FLASH;
        sh.e = 2;
        int fails = 0;
        free(run_step(&sh, L, "selective", NULL, 1, NULL, &fails));
        free(run_step(&sh, L, "full", "block", 2, NULL, &fails));
    }
    return check_summary();
}
