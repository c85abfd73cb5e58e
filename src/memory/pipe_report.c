#include "memory/pipe_report.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "memory/ledger_report.h"
#include "memory/pipe_stages.h"
#include "util/common.h"

// The rows of every stage, from the config's policy with its full-recompute groups cut at chunk starts
// (each chunk runs its backward on its own) and, with --recompute-microbatches, the keep-all policy.
typedef struct {
    MemoryPolicy plan, everything;
    PipeMemory pm;
    PipeStageRow *rows;
    int largest;
} Figures;

static void figures_build(Figures *g, const MemoryConfig *c, const PipeReport *pr) {
    policy_keep_everything(&g->plan, &c->policy);   // a copy of the fields; the per-layer plan below
    memcpy(g->plan.kind, c->policy.kind, (size_t)c->policy.layers * sizeof *g->plan.kind);
    memcpy(g->plan.group_start, c->policy.group_start, (size_t)c->policy.layers * sizeof *g->plan.group_start);
    policy_cut_groups(&g->plan, pipe_layers_per_chunk(&pr->spec));
    memset(&g->everything, 0, sizeof g->everything);
    if (pr->keep_all > 0) policy_keep_everything(&g->everything, &g->plan);
    g->pm = (PipeMemory){&pr->spec, &c->lay.sh, &g->plan, pr->keep_all > 0 ? &g->everything : NULL, pr->keep_all};
    g->rows = xmalloc((size_t)pr->spec.p * sizeof *g->rows);
    g->largest = pipe_stage_rows(&g->pm, g->rows);
}

static void figures_free(Figures *g) {
    policy_free(&g->plan);
    if (g->everything.kind) policy_free(&g->everything);
    free(g->rows);
}

// The first stage against the paper's Eq. 5: its layers' part and the rest of its peak.
typedef struct {
    const char *formula;   // the closed form of the layers' worth of one micro-batch
    int is_eq5;            // 1f1b and interleaved (Eq. 5); gpipe and layered hold all m
    long worth;            // layers' worth (an integer for every schedule here)
    double per_layer;      // the first stage's bytes per layer (their mean)
    int alike;             // every layer of the stage keeps the same bytes
    double closed;         // worth × per_layer
    size_t layers_part;    // the schedule's: the most of its layers' bytes held at once
    size_t rest;           // peak − layers_part: embedding masks, full recompute's rebuild
    double paper_extra;    // the paper's extra term for p > 1: sbhp/t (the embedding masks)
    size_t emb;            // one embedding mask, ctron's
    size_t paper_layer;    // Table 2's bytes per layer for this policy (0 when its accounting does not apply)
    size_t ln_stats;       // LN statistics per layer (the paper ignores them)
    int any_full;
} Eq5;

static void eq5_of(Eq5 *e, const MemoryConfig *c, const PipeReport *pr, const Figures *g) {
    const PipeSpec *s = &pr->spec;
    const ActShape *sh = &c->lay.sh;
    int Ls = s->L / s->p, n = pipe_layers_per_chunk(s);
    memset(e, 0, sizeof *e);
    e->is_eq5 = s->kind == PIPE_1F1B || s->kind == PIPE_INTERLEAVED;
    if (s->kind == PIPE_1F1B) e->formula = "L", e->worth = s->L;
    else if (s->kind == PIPE_INTERLEAVED) e->formula = "L(1 + (p-1)/(pV))", e->worth = s->L + (long)(s->p - 1) * n;
    else e->formula = "m·L/p", e->worth = (long)s->m * Ls;
    size_t sum = 0, first = act_layer_bytes(sh, &g->plan, 0);   // stage 0 starts at layer 0
    e->alike = 1;
    for (int v = 0; v < s->V; v++)
        for (int l = pipe_chunk_first_layer(s, 0, v); l < pipe_chunk_first_layer(s, 0, v) + n; l++) {
            size_t b = act_layer_bytes(sh, &g->plan, l);
            e->alike &= b == first;
            e->any_full |= g->plan.kind[l] == RECOMPUTE_FULL;
            sum += b;
        }
    e->per_layer = (double)sum / Ls;
    e->closed = e->per_layer * (double)e->worth;
    e->layers_part = g->rows[0].layers_peak;
    e->rest = g->rows[0].peak - g->rows[0].layers_peak;
    StageLayout lay = c->lay;
    lay.p = s->p;
    e->paper_extra = s->p > 1 ? stage_paper_extra_bytes(&lay) : 0.0;
    e->emb = act_tensor_bytes(sh, ACT_EMB_MASK);
    e->ln_stats = act_tensor_bytes(sh, ACT_LN1_STATS) + act_tensor_bytes(sh, ACT_LN2_STATS);
    // Table 2 counts e = 2, byte masks, dropout on, nothing but none or selective, alike layers
    const MemoryPolicy *p = &g->plan;
    LayerRecompute k = p->kind[0];
    if (e->alike && !e->any_full && sh->elem_bytes == 2 && sh->masks == MASKS_BYTES && sh->dropout && !p->tempo &&
        !p->offload && !sh->mini_seq && technique_applies(sh->s, sh->t, sh->sp ? TECH_TP_SP : TECH_TP)) {
        Technique t = k == RECOMPUTE_SELECTIVE ? (sh->sp ? TECH_TP_SP_SELECTIVE : TECH_TP_SELECTIVE)
                                               : (sh->sp ? TECH_TP_SP : TECH_TP);
        e->paper_layer = technique_layer_bytes_block(sh, t);
    }
}

static int eq5_layers_agree(const Eq5 *e) { return fabs(e->closed - (double)e->layers_part) < 0.5; }
static int eq5_rest_agrees(const Eq5 *e) { return fabs(e->paper_extra - (double)e->rest) < 0.5; }

// One line: why the schedule's layers differ from the closed form.
static const char *layers_reason(const Eq5 *e, const PipeReport *pr) {
    if (pr->keep_all > 0) return "--recompute-microbatches: the keep-all contexts hold every activation";
    if (!e->alike) return "the stage's layers keep different bytes; the closed form takes their mean";
    if (pr->spec.kind == PIPE_1F1B && pr->spec.m < pr->spec.p) return "m < p: only m micro-batches are ever in flight";
    return "the warm-up is cut short by m: fewer chunks are in flight than the closed form assumes";
}

static void print_eq5(FILE *f, const Eq5 *e, const MemoryConfig *c, const PipeReport *pr) {
    char b1[32], b2[32], b3[32];
    const PipeSpec *s = &pr->spec;
    if (e->is_eq5)
        fprintf(f, "\nThe first stage against the paper's Eq. 5 (%s: %s = %ld layers' worth of one micro-batch)\n",
                pipe_schedule_name(s->kind), e->formula, e->worth);
    else
        fprintf(f, "\nThe first stage (%s runs every forward first: %s = %ld layers' worth; Eq. 5 is 1F1B's)\n",
                pipe_schedule_name(s->kind), e->formula, e->worth);
    fprintf(f, "  %-38s %ld × %s = %s\n", "closed form, ctron's bytes per layer", e->worth,
            format_bytes(e->per_layer, b1, sizeof b1), format_bytes(e->closed, b2, sizeof b2));
    fprintf(f, "  %-38s %s — %s\n", "the schedule: its layers at the peak", format_bytes((double)e->layers_part, b1, sizeof b1),
            eq5_layers_agree(e) ? "agrees" : layers_reason(e, pr));
    if (s->p > 1) {
        fprintf(f, "  %-38s %s; the paper's extra term sbhp/t: %s — ", "the rest of the peak",
                format_bytes((double)e->rest, b1, sizeof b1), format_bytes(e->paper_extra, b2, sizeof b2));
        if (eq5_rest_agrees(e)) fprintf(f, "agrees\n");
        else if (e->any_full) fprintf(f, "it also holds one group that full recompute rebuilds in backward\n");
        else if (pr->keep_all > 0) fprintf(f, "with keep-all contexts the peak falls elsewhere\n");
        else if (e->emb == 0) fprintf(f, "no embedding mask is kept (dropout 0 or regenerated masks)\n");
        else if (e->rest % e->emb == 0 && (long)(e->rest / e->emb) != s->p)
            fprintf(f, "%zu contexts with an embedding mask at the peak, the paper counts p = %d\n", e->rest / e->emb, s->p);
        else
            fprintf(f, "ctron's mask is %s per micro-batch (%s), the paper's sbh/t\n", format_bytes((double)e->emb, b3, sizeof b3),
                    !c->lay.sh.sp ? "without SP each rank holds the whole sbh" : "its mask storage");
    }
    if (e->paper_layer)
        fprintf(f, "  ctron's %s per layer = the paper's Table 2 %s + LN statistics %s%s\n",
                format_bytes(e->per_layer, b1, sizeof b1), format_bytes((double)e->paper_layer, b2, sizeof b2),
                format_bytes((double)e->ln_stats, b3, sizeof b3),
                (size_t)e->per_layer == e->paper_layer + e->ln_stats ? " (mean and 1/std of both LayerNorms, fp32: the paper ignores them)"
                                                                      : " (and more: see the per-layer table above)");
}

void pipe_report_text(FILE *f, const MemoryConfig *c, const PipeReport *pr) {
    Figures g;
    figures_build(&g, c, pr);
    const PipeSpec *s = &pr->spec;
    char b1[32], b2[32], vs[32] = "", keep[64] = "", per[72];
    if (s->kind == PIPE_INTERLEAVED) snprintf(vs, sizeof vs, ", V=%d", s->V);
    if (pr->keep_all > 0) snprintf(keep, sizeof keep, ", %d keep-all context%s", pr->keep_all, pr->keep_all > 1 ? "s" : "");
    fprintf(f, "\nEvery pipeline stage, per rank (%s, p=%d%s, m=%d micro-batches%s%s%s%s; the schedule walked exactly: "
            "each rank's ledger measures its peak)\n", pipe_schedule_name(s->kind), s->p, vs, s->m,
            pr->m_from[0] ? " (" : "", pr->m_from, pr->m_from[0] ? ")" : "", keep);
    int pw = pr->keep_all > 0 ? 40 : 22;   // the per-context column: with the keep-all contexts' bytes beside
    fprintf(f, "  %5s  %-18s %8s %*s  %-24s %12s\n", "stage", "layers", "contexts", pw, "per context (layers)", "+ extras",
            "peak");
    for (int r = 0; r < s->p; r++) {
        const PipeStageRow *w = &g.rows[r];
        char extras[64] = "";
        if (w->chunk_min == w->chunk_max) format_bytes((double)w->chunk_max, per, sizeof per);
        else snprintf(per, sizeof per, "%s–%s", format_bytes((double)w->chunk_min, b1, sizeof b1),
                      format_bytes((double)w->chunk_max, b2, sizeof b2));
        if (pr->keep_all > 0) {
            size_t k = strlen(per);
            snprintf(per + k, sizeof per - k, " (keep-all %s)", format_bytes((double)w->chunk_keep_all, b1, sizeof b1));
        }
        if (w->embedding && w->head) snprintf(extras, sizeof extras, "+ embedding %s, head %s",
                                              format_bytes((double)w->embedding, b1, sizeof b1),
                                              format_bytes((double)w->head, b2, sizeof b2));
        else if (w->embedding) snprintf(extras, sizeof extras, "+ embedding %s", format_bytes((double)w->embedding, b1, sizeof b1));
        else if (w->head) snprintf(extras, sizeof extras, "+ head %s", format_bytes((double)w->head, b1, sizeof b1));
        fprintf(f, "  %5d  %-18s %8d %*s  %-24s %12s%s\n", r, w->layers, w->contexts, pw, per, extras,
                format_bytes((double)w->peak, b1, sizeof b1), r == g.largest ? "  <- largest" : "");
    }
    if (c->policy.offload)   // act_chunk_bytes counts the arena only
        fprintf(f, "  (--offload: the offloaded tensors are off the device and the offload stage slots are not counted "
                "per stage)\n");
    Eq5 e;
    eq5_of(&e, c, pr, &g);
    print_eq5(f, &e, c, pr);
    figures_free(&g);
}

void pipe_report_json(cJSON *o, const MemoryConfig *c, const PipeReport *pr) {
    Figures g;
    figures_build(&g, c, pr);
    const PipeSpec *s = &pr->spec;
    cJSON *pj = cJSON_AddObjectToObject(o, "pipeline");
    cJSON_AddStringToObject(pj, "schedule", pipe_schedule_name(s->kind));
    cJSON_AddNumberToObject(pj, "p", s->p);
    cJSON_AddNumberToObject(pj, "virtual_stages", s->V);
    cJSON_AddNumberToObject(pj, "micro_batches", s->m);
    cJSON_AddNumberToObject(pj, "recompute_microbatches", pr->keep_all);
    cJSON_AddNumberToObject(pj, "largest_stage", g.largest);
    Eq5 e;
    eq5_of(&e, c, pr, &g);
    cJSON *ej = cJSON_AddObjectToObject(pj, "first_stage_closed_form");
    cJSON_AddStringToObject(ej, "formula", e.formula);
    cJSON_AddBoolToObject(ej, "eq5", e.is_eq5);
    cJSON_AddNumberToObject(ej, "layers_worth", (double)e.worth);
    cJSON_AddNumberToObject(ej, "per_layer_bytes", e.per_layer);
    cJSON_AddNumberToObject(ej, "closed_form_bytes", e.closed);
    cJSON_AddNumberToObject(ej, "schedule_layers_bytes", (double)e.layers_part);
    cJSON_AddBoolToObject(ej, "layers_agree", eq5_layers_agree(&e));
    cJSON_AddNumberToObject(ej, "rest_bytes", (double)e.rest);
    cJSON_AddNumberToObject(ej, "paper_extra_bytes", e.paper_extra);
    cJSON_AddBoolToObject(ej, "rest_agrees", s->p > 1 && eq5_rest_agrees(&e));
    cJSON_AddNumberToObject(ej, "paper_table2_per_layer_bytes", (double)e.paper_layer);
    cJSON *arr = cJSON_AddArrayToObject(o, "stages");
    for (int r = 0; r < s->p; r++) {
        const PipeStageRow *w = &g.rows[r];
        cJSON *st = cJSON_CreateObject();
        cJSON_AddNumberToObject(st, "stage", r);
        cJSON_AddStringToObject(st, "layers", w->layers);
        cJSON_AddNumberToObject(st, "n_layers", w->n_layers);
        cJSON_AddNumberToObject(st, "contexts", w->contexts);
        cJSON_AddNumberToObject(st, "context_layers_bytes_min", (double)w->chunk_min);
        cJSON_AddNumberToObject(st, "context_layers_bytes_max", (double)w->chunk_max);
        cJSON_AddNumberToObject(st, "keep_all_context_layers_bytes", (double)w->chunk_keep_all);
        cJSON_AddNumberToObject(st, "embedding_bytes", (double)w->embedding);
        cJSON_AddNumberToObject(st, "head_bytes", (double)w->head);
        cJSON_AddNumberToObject(st, "layers_peak_bytes", (double)w->layers_peak);
        cJSON_AddNumberToObject(st, "peak_bytes", (double)w->peak);
        cJSON_AddBoolToObject(st, "largest", r == g.largest);
        cJSON_AddItemToArray(arr, st);
    }
    figures_free(&g);
}
