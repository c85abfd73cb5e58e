#include "train/grads_dist.h"
#include "parallel/comm_device.h"
#include <math.h>
#include <stdlib.h>
#include "train/grad_norm.h"
#include "util/common.h"

void grads_reduce_sp(GPT *m) {
    if (m->tp.t <= 1) return;   // (without SP only LoRA's A of a column-parallel site is a partial sum)
    // Runs of consecutive sp_partial tensors (the parameters are stacked per kind).
    for (int i = 0; i < m->n_info;) {
        if (!m->info[i].sp_partial) { i++; continue; }
        size_t lo = m->info[i].offset, hi = lo + m->info[i].numel;
        int j = i + 1;
        while (j < m->n_info && m->info[j].sp_partial && m->info[j].offset == hi) hi += m->info[j++].numel;
        comm_device_allreduce_sum(m->tp.group, m->grads + lo, m->grads + lo, hi - lo);
        i = j;
    }
}

void grads_allreduce_dp(CommGroup *dp, float *g, size_t n) {
    if (dp->size == 1) return;
    enum { BUCKET = 1 << 22 };   // 16 MiB of fp32 per call
    for (size_t off = 0; off < n; off += BUCKET) comm_device_allreduce_sum(dp, g + off, g + off, n - off < BUCKET ? n - off : BUCKET);
}

// Σ g² over [lo, hi) ∩ the tensors this rank counts: one multi-tensor pass (one read-back on a GPU),
// the tensors' sums added in order.
static double range_squares(const GPT *m, size_t lo, size_t hi, int count_replicated) {
    size_t cap = (size_t)(m->n_info ? m->n_info : 1);
    const float **x = xmalloc(cap * sizeof *x);
    size_t *n = xmalloc(cap * sizeof *n);
    double *sq = xmalloc(cap * sizeof *sq);
    int count = 0;
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *pi = &m->info[i];
        if ((pi->split == TP_REPLICATED && !count_replicated) || pi->pp_mirror) continue;
        size_t a = pi->offset > lo ? pi->offset : lo, z = pi->offset + pi->numel < hi ? pi->offset + pi->numel : hi;
        if (a < z) {
            x[count] = m->grads + a;
            n[count++] = z - a;
        }
    }
    if (count) m->be->tensor_stats_multi(m->be, x, n, count, sq, NULL);
    double acc = 0.0;
    for (int i = 0; i < count; i++) acc += sq[i];
    free(x);
    free(n);
    free(sq);
    return acc;
}

double grads_global_norm(const GPT *m, const Zero *zero, CommGroup *tp, CommGroup *dp, CommGroup *pp) {
    int stages = pp && pp->size > 1;
    if (m->tp.t <= 1 && !zero && !stages) return grad_global_norm(m->be, m->grads, m->n_params);
    int count_replicated = m->tp.t <= 1 || m->tp.rank == 0;
    double sq = 0.0;
    if (!zero) {
        sq = range_squares(m, 0, m->n_params, count_replicated);
    } else {
        size_t lo, hi;
        for (size_t k = 0; zero_piece(zero, k, &lo, &hi); k++) sq += range_squares(m, lo, hi, count_replicated);
    }
    // The interface moves fp32: send the double as a float pair (high part and remainder).
    float pair[2] = {(float)sq, (float)(sq - (double)(float)sq)};
    if (tp->size > 1) comm_allreduce_sum(tp, pair, pair, 2);
    if (zero && dp->size > 1) comm_allreduce_sum(dp, pair, pair, 2);
    if (stages) comm_allreduce_sum(pp, pair, pair, 2);   // each stage its own layers; wte counted once
    return sqrt((double)pair[0] + (double)pair[1]);
}
