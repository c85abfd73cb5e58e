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

int cluster_search(const ClusterJob *job, const GpuSpec *gpu, const ClusterLimits *lim, ClusterResults *out) {
    memset(out, 0, sizeof *out);
    int cap = 0;
    long gpus = (long)job->gpus_per_node * job->nodes;
    for (int t = 1; t <= job->gpus_per_node && t <= lim->max_t; t++) {
        if (job->gpus_per_node % t || gpus % t) continue;
        for (int p = 1; p <= job->L && p <= lim->max_p && p <= CLUSTER_MAX_STAGES; p++) {
            if (job->L % p || (gpus / t) % p) continue;
            int d = (int)(gpus / ((long)t * p));
            for (int mb = 1; mb <= lim->max_mb && (long)mb * d <= job->B; mb *= 2)
                for (int v = 1; v <= lim->max_v; v++)
                    for (int sp = 0; sp <= 1; sp++)
                        for (int zero = 0; zero <= 1; zero++)
                            for (int rc = 0; rc < CR_COUNT; rc++) {
                                if (!(lim->recompute >> rc & 1u)) continue;
                                if ((lim->sp >= 0 && sp != lim->sp) || (lim->zero >= 0 && zero != lim->zero)) continue;
                                if ((sp && t == 1) || (zero && d == 1)) continue;   // the same layout as without
                                ClusterLayout lay = {t, p, v, d, mb, sp, zero, (ClusterRecompute)rc, 0, 0};
                                char why[160];
                                if (cluster_layout_check(job, gpu, &lay, why, sizeof why) != 0) {
                                    out->invalid++;
                                    continue;
                                }
                                ClusterPrediction pr;
                                cluster_predict(job, gpu, &lay, 0, &pr);
                                if (push(out, &cap, &pr) != 0) return -1;
                                out->n_fit += pr.fits;
                            }
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
