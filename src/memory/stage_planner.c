#include "memory/stage_planner.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memory/flops.h"
#include "memory/ledger_report.h"
#include "memory/pipe_memory.h"
#include "memory/planner.h"
#include "util/common.h"

// One option set shared by every stage, and the shape its bytes are counted with.
typedef struct {
    ActShape sh;
    MaskMode masks;
    unsigned tempo;
    int allow_sel;            // selective layers allowed (and so every rank holds selective's scratch)
    size_t scratch, gemm;     // per rank, inside the budget
    double per_layer_flops;   // mini-seq's FC1 and flash's score recompute: every layer, whatever its kind
} Options;

typedef struct { int nf, ns; size_t peak; double flops; } StageChoice;

// What the search walks: the working whole-model policy (only the stage being planned changes) and
// the stage's chunks for one micro-batch.
typedef struct {
    const PipeSpec *spec;
    MemoryPolicy work;
    PipeUnitBytes *chunk;   // [V]
    double sel_flops, full_flops;
} Search;

// Stage r's i-th layer in the order the plan fills it: local chunk 0's layers first.
static int stage_layer(const PipeSpec *s, int r, int i) {
    int n = pipe_layers_per_chunk(s);
    return pipe_chunk_first_layer(s, r, i / n) + i % n;
}

static void fill_stage(MemoryPolicy *pol, const PipeSpec *s, int r, int nf, int ns) {
    for (int i = 0; i < s->L / s->p; i++) {
        int l = stage_layer(s, r, i);
        pol->kind[l] = i < nf ? RECOMPUTE_FULL : i < nf + ns ? RECOMPUTE_SELECTIVE : RECOMPUTE_NONE;
        pol->group_start[l] = l;
    }
}

static PipeUnitBytes cached_chunk(int mb, int chunk, int slot, void *user) {
    (void)mb, (void)slot;   // no keep-all contexts: every micro-batch of a chunk holds the same
    return ((const PipeUnitBytes *)user)[chunk];
}

// pipe_rank_act_peak of stage r with its layers planned (nf, ns), each chunk's bytes counted once.
static size_t stage_peak(Search *q, const Options *o, int r, int nf, int ns) {
    const PipeSpec *s = q->spec;
    fill_stage(&q->work, s, r, nf, ns);
    int n = pipe_layers_per_chunk(s);
    for (int v = 0; v < s->V; v++) {
        int l0 = pipe_chunk_first_layer(s, r, v);
        act_chunk_bytes(&o->sh, &q->work, l0, l0 + n, &q->chunk[v].stored, &q->chunk[v].backward_peak);
    }
    return pipe_stage_peak(s, r, cached_chunk, q->chunk);
}

static double choice_flops(const Search *q, const Options *o, int nf, int ns) {
    return nf * q->full_flops + ns * q->sel_flops + q->spec->L / q->spec->p * o->per_layer_flops;
}

// Stage r under one option set: the fewest FLOPs whose peak is within `limit` (0 when none is), and
// the least peak any (nf, ns) reaches. Memory falls and FLOPs rise with each selective layer, so for
// each count of full layers a bisection finds the fewest selective ones that fit (as planner.c).
static int plan_stage(Search *q, const Options *o, int r, double limit, StageChoice *best, StageChoice *least) {
    int Ls = q->spec->L / q->spec->p, found = 0;
    for (int nf = 0; nf <= Ls; nf++) {
        int most = o->allow_sel ? Ls - nf : 0;
        StageChoice c = {nf, most, stage_peak(q, o, r, nf, most), choice_flops(q, o, nf, most)};
        if (nf == 0 || c.peak < least->peak || (c.peak == least->peak && c.flops < least->flops)) *least = c;
        if ((double)c.peak > limit) continue;
        int lo = 0, hi = most;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if ((double)stage_peak(q, o, r, nf, mid) <= limit) hi = mid;
            else lo = mid + 1;
        }
        c = (StageChoice){nf, lo, stage_peak(q, o, r, nf, lo), choice_flops(q, o, nf, lo)};
        if (!found || c.flops < best->flops || (c.flops == best->flops && c.peak < best->peak)) *best = c;
        found = 1;
    }
    return found;
}

static int passes_of(MaskMode masks, unsigned tempo) {   // as planner.c: the element-wise extras
    return (masks == MASKS_BITS ? 1 : masks == MASKS_REGEN ? 2 : 0) + !!(tempo & TEMPO_SOFTMAX) +
           !!(tempo & TEMPO_LAYERNORM) + 2 * !!(tempo & TEMPO_GELU);
}

// A whole plan under one option set: its stages' choices and how it ranks.
typedef struct {
    Options o;
    StageChoice st[STAGE_PLAN_MAX_STAGES];
    double max_flops, sum_flops;
    size_t max_bytes;   // the largest stage's peak + scratch
    int passes;
} Candidate;

static void rank_candidate(Candidate *c, int p) {
    c->max_flops = c->sum_flops = 0.0;
    c->max_bytes = 0;
    for (int r = 0; r < p; r++) {
        if (c->st[r].flops > c->max_flops) c->max_flops = c->st[r].flops;
        c->sum_flops += c->st[r].flops;
        size_t b = c->st[r].peak + c->o.scratch + c->o.gemm;
        if (b > c->max_bytes) c->max_bytes = b;
    }
    c->passes = passes_of(c->o.masks, c->o.tempo);
}

// a better than b: the slowest stage recomputes less, then all stages, then fewer passes, then bytes.
static int better(const Candidate *a, const Candidate *b) {
    if (a->max_flops != b->max_flops) return a->max_flops < b->max_flops;
    if (a->sum_flops != b->sum_flops) return a->sum_flops < b->sum_flops;
    if (a->passes != b->passes) return a->passes < b->passes;
    return a->max_bytes < b->max_bytes;
}

static void write_plan(const PipeSpec *s, const ActShape *base, Precision precision, const Candidate *c,
                       MemoryPolicy *out, StagePlan *rep, double budget) {
    int L = s->L, Ls = L / s->p;
    policy_default(out, L);
    out->act_dtype = base->elem_bytes == 2 ? ACT_BF16 : ACT_FP32;
    out->precision = precision;
    out->masks = c->o.masks;
    out->tempo = c->o.tempo;
    out->mini_seq = c->o.tempo & MINI_SEQ ? PLAN_MINI_SEQ : 0;
    for (int r = 0; r < s->p; r++) fill_stage(out, s, r, c->st[r].nf, c->st[r].ns);
    policy_cut_groups(out, pipe_layers_per_chunk(s));   // groups of one already: never straddle a chunk

    memset(rep, 0, sizeof *rep);
    rep->p = s->p;
    rep->n_layers = Ls;
    rep->shape = c->o.sh;
    rep->masks = c->o.masks;
    rep->tempo = c->o.tempo;
    rep->scratch_bytes = c->o.scratch;
    rep->gemm_scratch_bytes = c->o.gemm;
    rep->fits = 1;
    int t = base->t > 1 ? base->t : 1;
    double b = (double)base->b, sq = (double)base->s, h = (double)base->h;
    FlopBlock blk = flops_block_of(base);
    PipeMemory pm = {s, &rep->shape, out, NULL, 0};
    for (int r = 0; r < s->p; r++) {
        rep->n_full[r] = c->st[r].nf;
        rep->n_sel[r] = c->st[r].ns;
        rep->peak[r] = pipe_rank_act_peak(&pm, r);   // the ledger's figure (equal to the search's)
        rep->extra_flops[r] = c->st[r].flops;
        // Eq. 7 split by stage: its layers, and the output layer (6·B·s·h·v) on the last one
        rep->model_flops[r] = (flops_model_block(b, Ls, sq, h, 0.0, &blk) + (r == s->p - 1 ? 6.0 * b * sq * h * (double)base->v : 0.0)) / t;
        if ((double)(rep->peak[r] + rep->scratch_bytes + rep->gemm_scratch_bytes) > budget) rep->fits = 0;
    }
}

int stage_plan_memory(const PipeSpec *spec, const ActShape *base, Precision precision, Backend *be, int threads,
                      double budget, MemoryPolicy *out, StagePlan *report, char *err, size_t errlen) {
    int p = spec->p;
    if (p > STAGE_PLAN_MAX_STAGES)
        return snprintf(err, errlen, "the per-stage planner handles at most %d stages (got --pp %d)",
                        STAGE_PLAN_MAX_STAGES, p), -1;
    int t = base->t > 1 ? base->t : 1;
    double b = (double)base->b, s = (double)base->s, h = (double)base->h;
    FlopBlock blk = flops_block_of(base);
    Search q = {spec, {0}, xmalloc((size_t)spec->V * sizeof(PipeUnitBytes)), flops_recompute_selective(b, s, h) / t,
                flops_recompute_full_block(b, s, h, 1, &blk) / t};
    policy_default(&q.work, spec->L);
    Candidate *best = xcalloc(sizeof *best), *least = xcalloc(sizeof *least), *c = xcalloc(sizeof *c);
    int found = 0, have_least = 0;
    const MaskMode modes[3] = {MASKS_BYTES, MASKS_BITS, MASKS_REGEN};
    for (int mi = 0; mi < (base->dropout ? 3 : 1); mi++)
        for (unsigned opt = 0; opt < 32; opt++) {
            unsigned tempo = (opt & 7) | (opt & 8 ? MINI_SEQ : 0) | (opt & 16 ? ATTN_FLASH : 0) | act_keep_bits(base);
            if ((tempo & MINI_SEQ) && (tempo & TEMPO_GELU)) continue;      // no GeLU input to replace
            if ((tempo & ATTN_FLASH) && (tempo & TEMPO_SOFTMAX)) continue;  // no softmax output to fuse
            if (!act_tempo_applies(base, tempo)) continue;                  // SwiGLU: no GeLU
            // Mini-seq's recompute is priced for GeLU's MLP (FC1 again): not offered to SwiGLU's (gate and
            // up again), which a run still takes by hand (--mini-seq)
            if (base->swiglu && (tempo & MINI_SEQ)) continue;
            for (int allow_sel = 0; allow_sel < 2; allow_sel++) {
                // flash's scratch is the same either way: allowing selective only adds choices
                if ((tempo & ATTN_FLASH) && !allow_sel) continue;
                Options *o = &c->o;
                o->sh = *base;
                o->sh.masks = modes[mi];
                o->sh.gelu_bits = 0;
                o->sh.mini_seq = tempo & MINI_SEQ ? PLAN_MINI_SEQ : 0;
                o->masks = modes[mi];
                o->tempo = tempo;
                o->allow_sel = allow_sel;
                o->scratch = plan_attention_scratch_bytes(be, &o->sh, threads, tempo, allow_sel);
                o->gemm = plan_gemm_scratch_bytes(&o->sh, precision, tempo, threads);
                o->per_layer_flops = ((tempo & MINI_SEQ ? 8.0 * b * s * h * h : 0.0) +
                                      (tempo & ATTN_FLASH ? flops_recompute_selective(b, s, h) : 0.0)) / t;
                double limit = budget - (double)(o->scratch + o->gemm);
                Candidate small = *c;
                int all_fit = 1;
                for (int r = 0; r < p; r++)
                    all_fit &= plan_stage(&q, o, r, limit, &c->st[r], &small.st[r]);
                rank_candidate(&small, p);
                if (!have_least || small.max_bytes < least->max_bytes ||
                    (small.max_bytes == least->max_bytes && better(&small, least))) {
                    *least = small;
                    have_least = 1;
                }
                if (!all_fit) continue;
                rank_candidate(c, p);
                if (!found || better(c, best)) {
                    *best = *c;
                    found = 1;
                }
            }
        }
    write_plan(spec, base, precision, found ? best : least, out, report, budget);
    if (!found) {
        int worst = 0, over = 0;
        for (int r = 0; r < p; r++) {
            over += (double)(report->peak[r] + report->scratch_bytes + report->gemm_scratch_bytes) > budget;
            if (report->peak[r] > report->peak[worst]) worst = r;
        }
        char b1[32], b2[32], b3[32];
        snprintf(err, errlen, "stage %d does not fit %s: the least it needs is %s (%d full, %d selective of its %d "
                 "layers, with %s of scratch)%s", worst, format_bytes(budget, b1, sizeof b1),
                 format_bytes((double)(report->peak[worst] + report->scratch_bytes + report->gemm_scratch_bytes), b2,
                              sizeof b2), report->n_full[worst], report->n_sel[worst], report->n_layers,
                 format_bytes((double)(report->scratch_bytes + report->gemm_scratch_bytes), b3, sizeof b3),
                 over > 1 ? " (other stages do not fit either)" : "");
    }
    policy_free(&q.work);
    free(q.chunk);
    free(best);
    free(least);
    free(c);
    return found ? 0 : -1;
}

void stage_plan_layer_list(const MemoryPolicy *p, char *buf, size_t len) {
    size_t used = 0;
    buf[0] = '\0';
    for (int l = 0; l < p->layers && used < len;) {
        int r = l;
        while (r + 1 < p->layers && p->kind[r + 1] == p->kind[l]) r++;
        int n = l == r ? snprintf(buf + used, len - used, "%s%d:%s", used ? "," : "", l, recompute_name(p->kind[l]))
                       : snprintf(buf + used, len - used, "%s%d-%d:%s", used ? "," : "", l, r, recompute_name(p->kind[l]));
        if (n < 0) break;
        used += (size_t)n;
        l = r + 1;
    }
}

void stage_plan_flags(const PipeSpec *spec, const MemoryPolicy *p, char *buf, size_t len) {
    char list[4096], tempo[48], vs[32] = "", mini[32] = "";
    stage_plan_layer_list(p, list, sizeof list);
    if (spec->kind == PIPE_INTERLEAVED) snprintf(vs, sizeof vs, " --virtual-stages %d", spec->V);
    if (p->tempo & MINI_SEQ) snprintf(mini, sizeof mini, " --mini-seq %d", p->mini_seq);
    snprintf(buf, len, "--pp %d --pp-schedule %s%s --grad-accum %d --recompute-layers %s --dropout-masks %s --tempo %s%s%s",
             spec->p, pipe_schedule_name(spec->kind), vs, spec->m, list, mask_mode_name(p->masks),
             tempo_describe(p->tempo, tempo, sizeof tempo), mini,
             p->tempo & ATTN_FLASH ? " --attention flash" : "");
}
