// The ledger measures exactly what DESIGN.md §2 predicts. The expected bytes are written out here
// from the table (e = 4 bytes per fp32 element, k = 1 byte per mask element), not taken from
// ctron's own analytic model, and the analytic model is checked against the same numbers.
#include <string.h>
#include "check.h"
#include "memory/memory_model.h"
#include "model/gpt.h"
#include "util/common.h"

static void check_shape(int L, int h, int a, int s, int b, int v, float p) {
    GPTConfig cfg = {.layers = L, .hidden = h, .heads = a, .seq = s, .batch = b, .vocab = v, .dropout = p};
    GPT m;
    gpt_init(&m, &cfg, NULL);
    gpt_init_weights(&m, 1);
    size_t n = (size_t)s * b;
    int32_t *tok = xcalloc(n * 4), *tgt = xcalloc(n * 4);
    for (size_t i = 0; i < n; i++) { tok[i] = (int32_t)(i % 256); tgt[i] = (int32_t)((i * 7) % 256); }
    StepCtx ctx = {5, 1, 0, 1};
    gpt_forward(&m, tok, tgt, s, b, ctx, 1.0f / (float)n);

    // DESIGN.md §2 table, e = 4, k = 1 (no masks and no dropped copy when p = 0).
    size_t sbh = (size_t)s * b * h, as2b = (size_t)a * s * s * b, e = 4, k = p > 0 ? 1 : 0, d = p > 0 ? 1 : 0;
    size_t expect[ACT_N_CORE] = {
        [ACT_LN1_IN] = e * sbh,     [ACT_QKV_IN] = e * sbh,     [ACT_Q] = e * sbh,      [ACT_K] = e * sbh,
        [ACT_ATTN_PROB] = e * as2b, [ACT_ATTN_MASK] = k * as2b, [ACT_ATTN_DROP] = d * e * as2b,
        [ACT_V] = e * sbh,          [ACT_PROJ_IN] = e * sbh,    [ACT_DROP1_MASK] = k * sbh,
        [ACT_LN2_IN] = e * sbh,     [ACT_FC1_IN] = e * sbh,     [ACT_GELU_IN] = 4 * e * sbh,
        [ACT_FC2_IN] = 4 * e * sbh, [ACT_DROP2_MASK] = k * sbh};
    size_t per_layer = p > 0 ? 66 * sbh + 9 * as2b : 64 * sbh + 4 * as2b;   // sbh(16e + 2k) + as²b(2e + k)
    size_t stats = 2 * (size_t)s * b * 4;
    size_t extras = k * sbh /*emb_mask*/ + e * sbh /*lnf_in*/ + stats /*lnf_stats*/ + e * sbh /*lm_in*/ +
                    4 * (size_t)s * b * v /*logits*/;

    size_t sum = 0;
    for (int nm = 0; nm < ACT_N_CORE; nm++) sum += expect[nm];
    CHECK(sum == per_layer, "table sum %zu != closed form %zu", sum, per_layer);
    ActShape sh = m.shape;
    CHECK(act_layer_core_bytes(&sh) == per_layer, "analytic per layer %zu, expected %zu", act_layer_core_bytes(&sh),
          per_layer);
    for (int l = 0; l < L; l++) {
        for (int nm = 0; nm < ACT_N_CORE; nm++) {
            size_t got = ledger_peak_bytes(&m.ledger, (ActName)nm, l);
            CHECK(got == expect[nm], "L%d h%d a%d s%d b%d p%g: layer %d %s measured %zu expected %zu", L, h, a, s, b,
                  (double)p, l, act_name_str((ActName)nm), got, expect[nm]);
        }
        CHECK(ledger_layer_peak(&m.ledger, l, 1) == per_layer, "layer %d total %zu expected %zu", l,
              ledger_layer_peak(&m.ledger, l, 1), per_layer);
        CHECK(ledger_peak_bytes(&m.ledger, ACT_LN1_STATS, l) == stats && ledger_peak_bytes(&m.ledger, ACT_LN2_STATS, l) == stats,
              "layer %d LN statistics", l);
    }
    size_t total = (size_t)L * (per_layer + 2 * stats) + extras;
    CHECK(m.ledger.total_peak == total, "total at peak measured %zu expected %zu", m.ledger.total_peak, total);
    CHECK(act_total_bytes(&sh) == total, "analytic total %zu expected %zu", act_total_bytes(&sh), total);
    printf("L%d h%d a%d s%d b%d v%d p%g: %zu bytes per layer (%s), %zu total: measured == predicted\n", L, h, a, s, b,
           v, (double)p, per_layer, p > 0 ? "66sbh + 9as^2b" : "64sbh + 4as^2b", total);

    // Backward releases every saved tensor, layer by layer.
    gpt_backward(&m, tok, ctx);
    CHECK(m.ledger.total_cur == 0 && m.arena.n_entries == 0 && m.arena.top == 0,
          "after backward %zu bytes still held in %d entries", m.ledger.total_cur, m.arena.n_entries);
    // An evaluation forward does not move the training peak.
    size_t peak = m.ledger.total_peak;
    StepCtx eval = {5, 1, 0, 0};
    gpt_forward(&m, tok, tgt, s, b, eval, 0.0f);
    gpt_release(&m);
    CHECK(m.ledger.total_peak == peak, "evaluation changed the training peak");
    free(tok);
    free(tgt);
    gpt_free(&m);
}

int main(void) {
    check_shape(2, 64, 4, 64, 8, 256, 0.1f);    // the tiny training config
    check_shape(2, 64, 4, 64, 8, 256, 0.0f);    // no dropout: no masks, no dropped copy
    check_shape(3, 32, 8, 128, 2, 300, 0.2f);   // 5as/h = 160: the s² terms dominate
    return check_summary();
}
