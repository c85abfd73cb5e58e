// The ledger measures exactly what the analytic model predicts, for every recompute policy ×
// stored precision × mask mode, on two shapes (one where 5as/h is large). The expected bytes are
// derived here from DESIGN.md §2's table and the policy rules, independently of ctron's own
// analytic model, which is checked against the same numbers; the paper's closed forms are checked
// where they apply (bf16 + byte masks: sbh(34 + 5as/h), selective 34sbh, full 2sbh).
#include <string.h>
#include "check.h"
#include "memory/memory_model.h"
#include "model/gpt.h"
#include "util/common.h"

typedef struct { long s, b, h, a, v; int dropout; int e; MaskMode masks; unsigned tempo; int gelu_bits; int mini; unsigned offload; } Shape;

// DESIGN.md §2: elements per name of one layer (0 when the configuration has no such tensor).
static size_t table_elements(const Shape *sh, ActName n) {
    size_t sbh = (size_t)(sh->s * sh->b * sh->h), as2b = (size_t)(sh->a * sh->s * sh->s * sh->b);
    switch (n) {
    case ACT_GELU_IN: case ACT_FC2_IN: case ACT_GELU_BRANCH: case ACT_GELU_CODE: return 4 * sbh;
    case ACT_ATTN_PROB: return as2b;
    case ACT_ATTN_MASK: case ACT_ATTN_DROP: return sh->dropout ? as2b : 0;
    case ACT_DROP1_MASK: case ACT_DROP2_MASK: return sh->dropout ? sbh : 0;
    case ACT_LN1_STATS: case ACT_LN2_STATS: return 2 * (size_t)(sh->s * sh->b);
    case ACT_ATTN_LSE: return (size_t)(sh->a * sh->s * sh->b);
    case ACT_GATE: case ACT_UP: return 0;   // SwiGLU's (test_ledger_llama.c)
    case ACT_Q_NORM_IN: case ACT_K_NORM_IN: case ACT_Q_NORM_STATS: case ACT_K_NORM_STATS: return 0;   // Qwen3's
    default: return act_is_lora(n) ? 0 : sbh;   // LoRA's x·Aᵀ: test_ledger_lora.c
    }
}

static size_t table_bytes(const Shape *sh, ActName n) {
    size_t el = table_elements(sh, n);
    if (n == ACT_ATTN_MASK || n == ACT_DROP1_MASK || n == ACT_DROP2_MASK)
        return sh->masks == MASKS_BYTES ? el : sh->masks == MASKS_BITS ? (el + 7) / 8 : 0;
    if (n == ACT_LN1_STATS || n == ACT_LN2_STATS || n == ACT_ATTN_LSE) return 4 * el;
    if (n == ACT_GELU_BRANCH) return (el + 7) / 8;   // one bit per GeLU input
    if (n == ACT_GELU_CODE) return (el * (size_t)sh->gelu_bits + 7) / 8;   // k bits per GeLU input
    return (size_t)sh->e * el;
}

// Tempo's rules: gelu keeps one bit per element instead of gelu_in, layernorm drops the LN inputs
// (the LN outputs are kept anyway), softmax drops attn_drop (the mask and attn_prob rebuild it).
static int tempo_drops(const Shape *sh, ActName n) {
    // mini-seq: the MLP keeps nothing of its own (FC1 and GeLU are recomputed in chunks)
    if ((n == ACT_GELU_IN || n == ACT_FC2_IN || n == ACT_GELU_BRANCH || n == ACT_GELU_CODE) && sh->mini) return 1;
    // flash attention: the log-sum-exp instead of the s×s tensors
    if (n == ACT_ATTN_LSE) return !(sh->tempo & ATTN_FLASH);
    if ((n == ACT_ATTN_PROB || n == ACT_ATTN_MASK || n == ACT_ATTN_DROP) && (sh->tempo & ATTN_FLASH)) return 1;
    if (n == ACT_GELU_BRANCH) return !(sh->tempo & TEMPO_GELU);
    if (n == ACT_GELU_CODE) return !(sh->tempo & GELU_FEWBIT);
    if (n == ACT_GELU_IN) return (sh->tempo & (TEMPO_GELU | GELU_FEWBIT)) != 0;
    if (n == ACT_LN1_IN || n == ACT_LN2_IN) return (sh->tempo & TEMPO_LAYERNORM) != 0;
    if (n == ACT_ATTN_DROP) return (sh->tempo & TEMPO_SOFTMAX) != 0;
    return 0;
}

// The policy rules: none keeps all, selective drops the attention core, full keeps a group's input.
static size_t expected_kept(const Shape *sh, const MemoryPolicy *p, int l, ActName n) {
    if (p->kind[l] != RECOMPUTE_FULL && tempo_drops(sh, n)) return 0;
    switch (p->kind[l]) {
    case RECOMPUTE_SELECTIVE:
        return (n == ACT_ATTN_PROB || n == ACT_ATTN_MASK || n == ACT_ATTN_DROP) ? 0 : table_bytes(sh, n);
    case RECOMPUTE_FULL:
        return (n == ACT_LN1_IN && p->group_start[l] == l) ? table_bytes(sh, n) : 0;
    default:
        return table_bytes(sh, n);
    }
}

// In the arena: what is kept and not offloaded; in the offload pool: what is kept and offloaded.
// (Only the first ACT_N_OFFLOADABLE names have an offload bit: the LoRA and reversible ones come after 32.)
static int offloaded(const Shape *sh, ActName n) { return (int)n < (int)ACT_N_OFFLOADABLE && (sh->offload >> n & 1u); }

static size_t expected_layer(const Shape *sh, const MemoryPolicy *p, int l, ActName n) {
    return offloaded(sh, n) ? 0 : expected_kept(sh, p, l, n);
}

static size_t expected_offload(const Shape *sh, const MemoryPolicy *p, int l, ActName n) {
    return offloaded(sh, n) ? expected_kept(sh, p, l, n) : 0;
}

// The stage: two slots (one when a single layer offloads) of the largest layer's offloaded tensors,
// each 64-byte aligned.
static size_t expected_stage(const Shape *sh, const MemoryPolicy *p, int L) {
    size_t span = 0;
    int layers = 0;
    for (int l = 0; l < L; l++) {
        size_t x = 0;
        for (int n = 0; n < ACT_N_LAYER; n++) x += (expected_offload(sh, p, l, (ActName)n) + 63) / 64 * 64;
        layers += x > 0;
        span = x > span ? x : span;
    }
    return (size_t)(layers < 2 ? layers : 2) * span;
}

static size_t expected_layer_total(const Shape *sh, const MemoryPolicy *p, int l) {
    size_t sum = 0;
    for (int n = 0; n < ACT_N_LAYER; n++) sum += expected_layer(sh, p, l, (ActName)n);
    return sum;
}

// What a recomputed layer holds in its backward: a none layer's bill under Tempo, ln1_in aside.
static size_t full_layer_but_input(const Shape *sh) {
    size_t sum = 0;
    for (int n = 0; n < ACT_N_LAYER; n++)
        if (n != ACT_LN1_IN && !tempo_drops(sh, (ActName)n)) sum += table_bytes(sh, (ActName)n);
    return sum;
}

// Walks the step: the forward's end, then backward layer by layer with what each policy recomputes.
static size_t expected_peak(const Shape *sh, const MemoryPolicy *p, int L, size_t emb_mask, size_t head) {
    size_t stored = 0;
    for (int l = 0; l < L; l++) stored += expected_layer_total(sh, p, l);
    size_t peak = emb_mask + stored + head;
    size_t held = emb_mask + stored;          // the head is released before the first block's backward
    for (int l = L - 1; l >= 0; l--) {
        size_t extra = 0;
        // selective: the core is recomputed per head in workspace, nothing held for the layer
        if (p->kind[l] == RECOMPUTE_FULL && (l == L - 1 || p->kind[l + 1] != RECOMPUTE_FULL ||
                                             p->group_start[l + 1] != p->group_start[l]))
            // the group again on its checkpoint; the later layers' inputs too, unless Tempo drops them
            extra = (size_t)(l - p->group_start[l] + 1) * full_layer_but_input(sh) +
                    (size_t)(l - p->group_start[l]) * (tempo_drops(sh, ACT_LN1_IN) ? 0 : table_bytes(sh, ACT_LN1_IN));
        if (held + extra > peak) peak = held + extra;
        held -= expected_layer_total(sh, p, l);
    }
    return peak;
}

static int check_case(int L, const Shape *sh, const char *recompute, const char *method, int num, const char *list) {
    MemoryPolicy pol = {0};
    char err[256];
    pol.act_dtype = sh->e == 2 ? ACT_BF16 : ACT_FP32;
    pol.masks = sh->masks;
    pol.tempo = sh->tempo;
    pol.gelu_bits = sh->gelu_bits;
    pol.mini_seq = sh->mini;
    pol.offload = sh->offload;
    if (policy_build(&pol, L, recompute, method, num, list, err, sizeof err) != 0) {
        CHECK(0, "policy: %s", err);
        return 1;
    }
    GPTConfig cfg = {.layers = L, .hidden = (int)sh->h, .heads = (int)sh->a, .seq = (int)sh->s, .batch = (int)sh->b,
                     .vocab = (int)sh->v, .dropout = sh->dropout ? 0.1f : 0.0f};
    GPT m;
    gpt_init(&m, &cfg, &pol);
    gpt_init_weights(&m, 1);
    size_t n = (size_t)sh->s * sh->b, sbh = n * (size_t)sh->h, as2b = (size_t)sh->a * sh->s * sh->s * sh->b;
    int32_t *tok = xcalloc(n * 4), *tgt = xcalloc(n * 4);
    for (size_t i = 0; i < n; i++) { tok[i] = (int32_t)(i % 256); tgt[i] = (int32_t)((i * 7) % 256); }
    StepCtx ctx = {5, 1, 0, 1};
    gpt_forward(&m, tok, tgt, (int)sh->s, (int)sh->b, ctx, 1.0f / (float)n);
    int fails = check_failed;
    char what[160];
    snprintf(what, sizeof what, "L%d s%ld b%ld h%ld a%ld %s/%s/%d/%s %s masks %s p%d tempo %u offload %#x", L, sh->s,
             sh->b, sh->h, sh->a, recompute ? recompute : "-", method ? method : "-", num, list ? list : "-",
             sh->e == 2 ? "bf16" : "fp32", mask_mode_name(sh->masks), sh->dropout, sh->tempo, sh->offload);

    for (int l = 0; l < L; l++) {
        for (int nm = 0; nm < ACT_N_LAYER; nm++) {
            size_t got = ledger_stored_bytes(&m.ledger, (ActName)nm, l), want = expected_layer(sh, &pol, l, (ActName)nm);
            CHECK(got == want, "%s: layer %d %s measured %zu expected %zu", what, l, act_name_str((ActName)nm), got, want);
            CHECK(act_layer_name_bytes(&m.shape, &pol, l, (ActName)nm) == want, "%s: analytic layer %d %s", what, l,
                  act_name_str((ActName)nm));
            if (!sh->offload) continue;
            size_t off = expected_offload(sh, &pol, l, (ActName)nm);
            CHECK(ledger_stored_bytes(&m.off.ledger, (ActName)nm, l) == off, "%s: layer %d %s in the pool: %zu, expected %zu",
                  what, l, act_name_str((ActName)nm), ledger_stored_bytes(&m.off.ledger, (ActName)nm, l), off);
            CHECK(act_layer_offload_name_bytes(&m.shape, &pol, l, (ActName)nm) == off, "%s: analytic pool layer %d %s",
                  what, l, act_name_str((ActName)nm));
        }
    }
    size_t stage = expected_stage(sh, &pol, L), pool = 0;
    for (int l = 0; l < L; l++)
        for (int nm = 0; nm < ACT_N_LAYER; nm++) pool += expected_offload(sh, &pol, l, (ActName)nm);
    CHECK(ledger_stored_bytes(&m.ledger, ACT_OFFLOAD_STAGE, -1) == stage, "%s: stage %zu expected %zu", what,
          ledger_stored_bytes(&m.ledger, ACT_OFFLOAD_STAGE, -1), stage);
    CHECK(act_offload_stage_bytes(&m.shape, &pol) == stage && act_offload_pool_bytes(&m.shape, &pol) == pool,
          "%s: analytic stage/pool", what);
    if (sh->offload)
        CHECK(m.off.ledger.total_fwd_end == pool, "%s: pool at the end of forward %zu expected %zu", what,
              m.off.ledger.total_fwd_end, pool);
    // The paper's closed forms (per layer, table names only).
    size_t k = sh->masks == MASKS_BYTES ? 1 : 0;
    if (sh->dropout && sh->masks != MASKS_BITS && !sh->tempo && !sh->offload) {
        size_t e = (size_t)sh->e;
        size_t none = (16 * e + 2 * k) * sbh + (2 * e + k) * as2b, sel = (16 * e + 2 * k) * sbh;
        for (int l = 0; l < L; l++) {
            size_t got = ledger_layer_stored(&m.ledger, l, 1);
            if (pol.kind[l] == RECOMPUTE_NONE) CHECK(got == none, "%s: layer %d %zu != sbh(16e+2k)+as²b(2e+k) %zu", what, l, got, none);
            if (pol.kind[l] == RECOMPUTE_SELECTIVE) CHECK(got == sel, "%s: layer %d %zu != sbh(16e+2k) %zu", what, l, got, sel);
            if (pol.kind[l] == RECOMPUTE_FULL)
                CHECK(got == (pol.group_start[l] == l ? e * sbh : 0), "%s: full layer %d keeps %zu", what, l, got);
            if (e == 2 && k == 1 && pol.kind[l] == RECOMPUTE_NONE)   // the paper: sbh(34 + 5as/h)
                CHECK(got * (size_t)sh->h == 34 * sbh * (size_t)sh->h + 5 * (size_t)sh->a * sh->s * sbh,
                      "%s: layer %d is not sbh(34 + 5as/h)", what, l);
        }
    }
    size_t stats = 2 * n * 4, emb_mask = sh->dropout ? (sh->masks == MASKS_BYTES ? sbh : sh->masks == MASKS_BITS ? (sbh + 7) / 8 : 0) : 0;
    size_t head = (size_t)sh->e * sbh /*lnf_in*/ + stats /*lnf_stats*/ +
                  (sh->mini ? 4 * sbh /*lm_grad, fp32*/ : (size_t)sh->e * sbh /*lm_in*/ + 4 * n * (size_t)sh->v /*logits*/);
    size_t fwd = emb_mask + stage + head;
    for (int l = 0; l < L; l++) fwd += expected_layer_total(sh, &pol, l);
    CHECK(m.ledger.total_fwd_end == fwd, "%s: end of forward %zu expected %zu", what, m.ledger.total_fwd_end, fwd);
    CHECK(act_forward_end_bytes(&m.shape, &pol) == fwd, "%s: analytic end of forward", what);

    gpt_backward(&m, tok, ctx);
    size_t peak = expected_peak(sh, &pol, L, emb_mask + stage, head);   // the stage sits below every layer
    CHECK(m.ledger.total_peak == peak, "%s: peak %zu expected %zu", what, m.ledger.total_peak, peak);
    CHECK(act_peak_bytes(&m.shape, &pol) == peak, "%s: analytic peak %zu expected %zu", what,
          act_peak_bytes(&m.shape, &pol), peak);
    CHECK(m.ledger.total_cur == 0 && m.act->arena.n_entries == 0, "%s: %zu bytes still held after backward", what,
          m.ledger.total_cur);
    if (sh->offload)
        CHECK(m.off.ledger.total_cur == 0 && m.off.ledger.total_peak == pool, "%s: pool after backward %zu, peak %zu",
              what, m.off.ledger.total_cur, m.off.ledger.total_peak);
    // An evaluation forward keeps nothing and does not move the training peak.
    StepCtx eval = {5, 1, 0, 0};
    gpt_forward(&m, tok, tgt, (int)sh->s, (int)sh->b, eval, 0.0f);
    CHECK(m.act->arena.n_entries == 0 && m.ledger.total_peak == peak, "%s: evaluation used the arena", what);
    free(tok);
    free(tgt);
    gpt_free(&m);
    policy_free(&pol);
    return check_failed != fails;
}

int main(void) {
    // The tiny training config, and one where 5as/h = 160 dominates the bill.
    const long shapes[2][5] = {{64, 8, 64, 4, 256}, {128, 2, 32, 8, 300}};
    const int L = 4;
    struct { const char *rc, *method; int num; const char *list; } policies[] = {
        {"none", NULL, 0, NULL}, {"selective", NULL, 0, NULL}, {"full", "uniform", 1, NULL},
        {"full", "uniform", 2, NULL}, {"full", "block", 2, NULL}, {NULL, NULL, 0, "0:full,1-2:selective,3:none"}};
    int cases = 0, bad = 0;
    for (int si = 0; si < 2; si++)
        for (int pi = 0; pi < 6; pi++)
            for (int e = 2; e <= 4; e += 2)
                for (int mm = 0; mm < 3; mm++)
                    for (int d = 0; d < 2; d++) {
                        if (!d && mm) continue;   // masks only exist with dropout
                        Shape sh = {shapes[si][0], shapes[si][1], shapes[si][2], shapes[si][3], shapes[si][4], d, e,
                                    (MaskMode)mm, 0, 0, 0, 0};
                        bad += check_case(L, &sh, policies[pi].rc, policies[pi].method, policies[pi].num,
                                          policies[pi].list);
                        cases++;
                    }
    // Tempo: each part and all of them, under every policy, fp32 and bf16, byte masks and regenerated.
    // Few-Bit GeLU with k = 1 and 3 (3 does not divide a byte), alone and with Tempo's other parts.
    unsigned tempos[] = {TEMPO_GELU, TEMPO_LAYERNORM, TEMPO_SOFTMAX, TEMPO_GELU | TEMPO_LAYERNORM | TEMPO_SOFTMAX,
                         GELU_FEWBIT, GELU_FEWBIT | TEMPO_LAYERNORM | TEMPO_SOFTMAX, MINI_SEQ,
                         MINI_SEQ | TEMPO_LAYERNORM | TEMPO_SOFTMAX, ATTN_FLASH, ATTN_FLASH | MINI_SEQ | TEMPO_GELU};
    int tempo_cases = 0;
    for (int ti = 0; ti < 10; ti++)
        for (int pi = 0; pi < 6; pi++)
            for (int e = 2; e <= 4; e += 2)
                for (int mm = 0; mm < 3; mm += 2) {
                    Shape sh = {shapes[1][0], shapes[1][1], shapes[1][2], shapes[1][3], shapes[1][4], 1, e, (MaskMode)mm,
                                tempos[ti], tempos[ti] & GELU_FEWBIT ? 1 + 2 * (pi % 2) : 0,
                                tempos[ti] & MINI_SEQ ? 3 + pi : 0, 0};
                    bad += check_case(L, &sh, policies[pi].rc, policies[pi].method, policies[pi].num, policies[pi].list);
                    tempo_cases++;
                }
    // Offload: a few tensor sets (the checkpoint ln1_in, the MLP, masks and bits, everything) under
    // every policy, both precisions and all mask modes, with some of the other options.
    unsigned offloads[] = {1u << ACT_LN1_IN, 1u << ACT_FC1_IN | 1u << ACT_GELU_IN | 1u << ACT_FC2_IN,
                           1u << ACT_ATTN_MASK | 1u << ACT_DROP1_MASK | 1u << ACT_GELU_BRANCH | 1u << ACT_LN2_STATS,
                           (1u << ACT_N_OFFLOADABLE) - 1};
    unsigned off_tempo[] = {0, TEMPO_GELU | TEMPO_SOFTMAX, ATTN_FLASH | MINI_SEQ};
    int offload_cases = 0;
    for (int oi = 0; oi < 4; oi++)
        for (int ti = 0; ti < 3; ti++)
            for (int pi = 0; pi < 6; pi++)
                for (int mm = 0; mm < 3; mm++) {
                    Shape sh = {shapes[0][0], shapes[0][1], shapes[0][2], shapes[0][3], shapes[0][4], 1, mm == 1 ? 2 : 4,
                                (MaskMode)mm, off_tempo[ti], 0, off_tempo[ti] & MINI_SEQ ? 3 : 0, offloads[oi]};
                    bad += check_case(L, &sh, policies[pi].rc, policies[pi].method, policies[pi].num, policies[pi].list);
                    offload_cases++;
                }
    printf("%d with --offload (4 tensor sets x 3 option sets x 6 policies x 3 mask modes)\n", offload_cases);
    printf("%d configurations (2 shapes x 6 policies x fp32/bf16 x bytes/bits/regen masks, and no dropout) and %d with "
           "Tempo / Few-Bit / mini-seq / flash (10 option sets x 6 policies x fp32/bf16 x bytes/regen), %d with a mismatch\n", cases,
           tempo_cases, bad);
    return check_summary();
}
