#include "memory/cluster_search.h"
#include <stdlib.h>
#include <string.h>

void cluster_limits_default(ClusterLimits *lim) {
    lim->max_t = 1 << 20;
    lim->max_p = 1 << 20;
    lim->max_v = 8;
    lim->max_mb = 16;
    lim->sp = -1;
    lim->zero = -1;
    lim->recompute = (1u << CR_NONE) | (1u << CR_SELECTIVE) | (1u << CR_FULL) | (1u << CR_PLAN);
    memset(&lim->fix, 0, sizeof lim->fix);
    lim->fix_mask = 0;
}

int cluster_rank_cmp(const void *pa, const void *pb) {
    const ClusterPrediction *a = pa, *b = pb;
    if (a->fits != b->fits) return b->fits - a->fits;
    if (a->step_s != b->step_s) return a->step_s < b->step_s ? -1 : 1;
    return a->mem_max < b->mem_max ? -1 : a->mem_max > b->mem_max;
}

static int push(ClusterResults *out, int *cap, const ClusterPrediction *p) {
    if (out->n == *cap) {
        int nc = *cap ? 2 * *cap : 1024;
        ClusterPrediction *c = realloc(out->c, (size_t)nc * sizeof *c);
        if (!c) return -1;
        out->c = c;
        *cap = nc;
    }
    out->c[out->n++] = *p;
    return 0;
}

int cluster_uneven_split(long L, int p, int *first, int *last) {
    if (p < 2 || L < p) return -1;
    long m = (L + p - 1) / p, rest = L - (long)(p - 2) * m;
    if (rest < 2 || rest > 2 * m) return -1;
    *first = (int)(rest / 2);
    *last = (int)(rest - rest / 2);
    return 0;
}

// Does the layout keep the values --fix names?
static int kept(const ClusterLimits *lim, const ClusterLayout *l) {
    const ClusterLayout *f = &lim->fix;
    unsigned m = lim->fix_mask;
    return !((m & FIX_T && l->t != f->t) || (m & FIX_P && l->p != f->p) || (m & FIX_V && l->v != f->v) ||
             (m & FIX_D && l->d != f->d) || (m & FIX_MB && l->mb != f->mb) || (m & FIX_SP && l->sp != f->sp) ||
             (m & FIX_RC && l->rc != f->rc) || (m & FIX_ZERO && l->zero != f->zero) ||
             (m & FIX_FIRST && l->first != f->first) || (m & FIX_LAST && l->last != f->last));
}

// The stage split of p stages: the one --fix names, an even one, or the uneven one when p does not
// divide the layers. -1: none.
static int split_for(const ClusterJob *job, const ClusterLimits *lim, int p, int *first, int *last) {
    *first = lim->fix_mask & FIX_FIRST ? lim->fix.first : 0;
    *last = lim->fix_mask & FIX_LAST ? lim->fix.last : 0;
    if (*first || *last) return p > 1 ? 0 : -1;
    if (job->L % p == 0) return 0;
    return cluster_uneven_split(job->L, p, first, last);
}

typedef struct {
    const ClusterJob *job;
    const GpuSpec *gpu;
    const ClusterLimits *lim;
    ClusterResults *out;
    int cap;
} Search;

// Every micro-batch, interleave, SP, ZeRO and recompute choice of one t, p, d and stage split.
static int search_tp(Search *x, int t, int p, int d, int first, int last) {
    const ClusterLimits *lim = x->lim;
    for (int mb = 1; mb <= lim->max_mb && (long)mb * d <= x->job->B; mb *= 2)
        for (int v = 1; v <= lim->max_v; v++)
            for (int sp = 0; sp <= 1; sp++)
                for (int zero = 0; zero <= 1; zero++)
                    for (int rc = 0; rc < CR_COUNT; rc++) {
                        if (!(lim->recompute >> rc & 1u)) continue;
                        if ((lim->sp >= 0 && sp != lim->sp) || (lim->zero >= 0 && zero != lim->zero)) continue;
                        if ((sp && t == 1) || (zero && d == 1)) continue;   // the same layout as without
                        ClusterLayout lay = {t, p, v, d, mb, sp, zero, (ClusterRecompute)rc, first, last};
                        if (!kept(lim, &lay)) continue;
                        char why[160];
                        if (cluster_layout_check(x->job, x->gpu, &lay, why, sizeof why) != 0) {
                            x->out->invalid++;
                            continue;
                        }
                        ClusterPrediction pr;
                        cluster_predict(x->job, x->gpu, &lay, 0, &pr);
                        if (push(x->out, &x->cap, &pr) != 0) return -1;
                        x->out->n_fit += pr.fits;
                    }
    return 0;
}

int cluster_search(const ClusterJob *job, const GpuSpec *gpu, const ClusterLimits *lim, ClusterResults *out) {
    memset(out, 0, sizeof *out);
    Search x = {job, gpu, lim, out, 0};
    long gpus = (long)job->gpus_per_node * job->nodes;
    for (int t = 1; t <= job->gpus_per_node && t <= lim->max_t; t++) {
        if (job->gpus_per_node % t || gpus % t) continue;
        for (int p = 1; p <= job->L && p <= lim->max_p && p <= CLUSTER_MAX_STAGES; p++) {
            int first, last;
            if ((gpus / t) % p || split_for(job, lim, p, &first, &last) != 0) continue;
            if (search_tp(&x, t, p, (int)(gpus / ((long)t * p)), first, last) != 0) return -1;
        }
    }
    if (out->n > 0) qsort(out->c, (size_t)out->n, sizeof *out->c, cluster_rank_cmp);   // c is NULL when none
    return 0;
}

void cluster_results_free(ClusterResults *r) {
    for (int i = 0; i < r->n; i++) cluster_prediction_free(&r->c[i]);
    free(r->c);
    memset(r, 0, sizeof *r);
}
