#include "memory/ledger_report.h"
#include <string.h>
#include "memory/memo_model.h"

const char *format_bytes(double bytes, char *buf, size_t len) {
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) { bytes /= 1024.0; u++; }
    snprintf(buf, len, u == 0 ? "%.0f %s" : "%.2f %s", bytes, unit[u]);
    return buf;
}

typedef size_t (*NamePrediction)(const ActShape *sh, const MemoryPolicy *p, int l, ActName name);

// One name's row: layer 0 and all layers at the end of the forward, measured vs predicted; 1 when
// some layer differs.
static int print_name_row(FILE *f, const Ledger *lg, const ActShape *sh, const MemoryPolicy *p, ActName name,
                          NamePrediction predict) {
    char b1[32], b2[32];
    size_t got_all = 0, pred_all = 0;
    int ok = 1;
    for (int l = 0; l < lg->layers; l++) {
        size_t got = ledger_stored_bytes(lg, name, l), pred = predict(sh, p, l, name);
        got_all += got;
        pred_all += pred;
        ok &= got == pred;
    }
    fprintf(f, "  %-11s %14zu %14zu %12s %12s  %s\n", act_name_str(name), ledger_stored_bytes(lg, name, 0),
            predict(sh, p, 0, name), format_bytes((double)got_all, b1, sizeof b1),
            format_bytes((double)pred_all, b2, sizeof b2), ok ? "ok" : "MISMATCH");
    return !ok;
}

int ledger_print_report(FILE *f, const Ledger *lg, const ActShape *sh, const MemoryPolicy *p) {
    int bad = 0;
    char b1[32], b2[32], plan[256];
    policy_describe(p, plan, sizeof plan);
    char layout[96] = "", tempo[48];
    if (sh->swiglu || sh->rms_norm || (sh->kv > 0 && sh->kv != sh->a))   // the llama block's knobs
        snprintf(layout, sizeof layout, " kv=%ld ffn=%ld%s%s", sh->kv > 0 ? sh->kv : sh->a,
                 sh->ffn > 0 ? sh->ffn : 4 * sh->h, sh->swiglu ? " SwiGLU" : "", sh->rms_norm ? " RMSNorm" : "");
    if (sh->head_dim > 0) {   // heads of another width than h/a
        size_t k = strlen(layout);
        snprintf(layout + k, sizeof layout - k, " d=%ld", sh->head_dim);
    }
    if (sh->t > 1) {
        size_t k = strlen(layout);
        snprintf(layout + k, sizeof layout - k, "; one rank of t=%d%s", sh->t, sh->sp ? " with SP" : "");
    }
    if (p->tempo) {
        size_t k = strlen(layout);
        snprintf(layout + k, sizeof layout - k, "; tempo %s", tempo_describe(p->tempo, tempo, sizeof tempo));
    }
    fprintf(f, "activation ledger: measured vs predicted (s=%ld b=%ld h=%ld a=%ld L=%ld v=%ld%s; recompute %s; "
               "%s activations; masks %s)\n",
            sh->s, sh->b, sh->h, sh->a, sh->L, sh->v, layout, plan, act_dtype_name(p->act_dtype),
            sh->dropout ? mask_mode_name(sh->masks) : "none (dropout 0)");
    fprintf(f, "  %-11s %14s %14s %12s %12s\n", "kept by", "layer 0", "predicted", "all layers", "predicted");
    for (int n = 0; n < ACT_N_LAYER; n++) {
        if (n == ACT_N_CORE)
            fprintf(f, sh->swiglu ? "  -- norm statistics, flash's log-sum-exp, SwiGLU's inputs --\n"
                                  : "  -- LayerNorm statistics, Tempo's GeLU bits --\n");
        if (act_in_block(sh, (ActName)n)) bad += print_name_row(f, lg, sh, p, (ActName)n, act_layer_name_bytes);
    }
    fprintf(f, "  -- model extras --\n");
    for (int n = ACT_EMB_MASK; n < ACT_COUNT; n++) {
        ActName name = (ActName)n;
        size_t got = ledger_stored_bytes(lg, name, -1),
               pred = name == ACT_OFFLOAD_STAGE ? act_offload_stage_bytes(sh, p)
                      : name == ACT_MEMO_STAGE  ? act_memo_stage_bytes(sh, p)
                                                : act_tensor_bytes(sh, name);
        if (name == ACT_OFFLOAD_STAGE && !p->offload) continue;
        if (name == ACT_MEMO_STAGE && !policy_has_memo(p)) continue;
        if ((name == ACT_REV_X1 || name == ACT_REV_X2) && !sh->reversible) continue;
        bad += got != pred;
        fprintf(f, "  %-11s %14zu %14zu %12s %12s  %s\n", act_name_str(name), got, pred,
                format_bytes((double)got, b1, sizeof b1), format_bytes((double)pred, b2, sizeof b2),
                got == pred ? "ok" : "MISMATCH");
    }
    size_t fwd = act_forward_end_bytes(sh, p), peak = act_peak_bytes(sh, p);
    bad += (lg->total_fwd_end != fwd) + (lg->total_peak != peak);
    fprintf(f, "  end of forward: measured %zu (%s), predicted %zu  %s\n", lg->total_fwd_end,
            format_bytes((double)lg->total_fwd_end, b1, sizeof b1), fwd, lg->total_fwd_end == fwd ? "ok" : "MISMATCH");
    fprintf(f, "  peak of the step (recomputation included): measured %zu (%s), predicted %zu (%s)  %s\n",
            lg->total_peak, format_bytes((double)lg->total_peak, b1, sizeof b1), peak,
            format_bytes((double)peak, b2, sizeof b2), lg->total_peak == peak ? "ok" : "MISMATCH");
    return bad;
}

// A host pool's totals (offload's or MEMO's) against the prediction, and what moved; 1 on a mismatch.
static int print_pool_totals(FILE *f, const Ledger *pool, size_t want, double stored, double loaded, double wait_s) {
    char b1[32], b2[32];
    int ok = pool->total_fwd_end == want && pool->total_peak == want;
    fprintf(f, "  in the pool at the end of forward: measured %zu (%s), predicted %zu  %s\n", pool->total_fwd_end,
            format_bytes((double)pool->total_fwd_end, b1, sizeof b1), want, ok ? "ok" : "MISMATCH");
    fprintf(f, "  moved this step: %s out, %s back; the step waited %.1f ms for the transfers\n",
            format_bytes(stored, b1, sizeof b1), format_bytes(loaded, b2, sizeof b2), wait_s * 1e3);
    return !ok;
}

int ledger_print_offload(FILE *f, const Ledger *pool, const ActShape *sh, const MemoryPolicy *p, const char *where,
                         double stored, double loaded, double wait_s) {
    int bad = 0;
    char what[256];
    fprintf(f, "offload pool (%s; --offload %s): measured vs predicted\n", where,
            offload_describe(p->offload, what, sizeof what));
    for (int n = 0; n < ACT_N_LAYER; n++) {
        if (act_offloaded(p, (ActName)n)) bad += print_name_row(f, pool, sh, p, (ActName)n, act_layer_offload_name_bytes);
    }
    size_t want = act_offload_pool_bytes(sh, p);
    return bad + print_pool_totals(f, pool, want, stored, loaded, wait_s);
}

// A mixed-α run: each memo layer's α, positions and pool bytes, measured (the ledger) vs predicted.
static int print_memo_layers(FILE *f, const Ledger *pool, const ActShape *sh, const MemoryPolicy *p) {
    int bad = 0;
    for (int l = 0; l < pool->layers && l < p->layers; l++) {
        if (p->kind[l] != RECOMPUTE_MEMO) continue;
        size_t got = 0, pred = act_memo_swap_bytes(sh, p, l);
        for (int n = 0; n < ACT_N_LAYER; n++) got += ledger_stored_bytes(pool, (ActName)n, l);
        fprintf(f, "  layer %-3d α %-8g %6ld positions %14zu %14zu  %s\n", l, policy_memo_alpha(p, l),
                memo_layer_positions(sh, p, l), got, pred, got == pred ? "ok" : "MISMATCH");
        bad += got != pred;
    }
    return bad;
}

int ledger_print_memo(FILE *f, const Ledger *pool, const ActShape *sh, const MemoryPolicy *p, const char *where,
                      double stored, double loaded, double wait_s) {
    int bad = 0;
    if (policy_memo_mixed(p)) {
        fprintf(f, "memo pool (%s; α per layer: the first r of %ld positions of each memo layer swapped, the rest "
                   "recomputed): measured vs predicted\n", where, sh->s);
    } else {
        long r = memo_swap_positions(sh->s, p->memo_alpha);
        fprintf(f, "memo pool (%s; --memo %g: the first %ld of %ld positions of each memo layer swapped, the rest "
                   "recomputed): measured vs predicted\n", where, (double)p->memo_alpha, r, sh->s);
    }
    for (int n = 0; n < ACT_N_LAYER; n++)
        if (memo_swaps(sh, p->tempo, (ActName)n)) bad += print_name_row(f, pool, sh, p, (ActName)n, act_memo_swap_name_bytes);
    if (policy_memo_mixed(p)) bad += print_memo_layers(f, pool, sh, p);
    size_t want = act_memo_pool_bytes(sh, p);
    return bad + print_pool_totals(f, pool, want, stored, loaded, wait_s);
}
