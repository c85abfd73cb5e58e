#include "train/adamw.h"
#include <math.h>
#include <stdlib.h>
#include "util/common.h"

void adamw_init(AdamW *opt, Backend *be, size_t n_params, float beta1, float beta2, float eps, float weight_decay) {
    size_t bytes = (n_params ? n_params : 1) * sizeof(float);
    opt->be = be;
    opt->beta1 = beta1;
    opt->beta2 = beta2;
    opt->eps = eps;
    opt->weight_decay = weight_decay;
    opt->m = be ? be->alloc(be, bytes) : xcalloc(bytes);   // zero-filled either way
    opt->v = be ? be->alloc(be, bytes) : xcalloc(bytes);
    opt->n = n_params;
    opt->t = 0;
}

void adamw_free(AdamW *opt) {
    if (opt->be) {
        opt->be->free(opt->be, opt->m);
        opt->be->free(opt->be, opt->v);
    } else {
        free(opt->m);
        free(opt->v);
    }
    opt->m = opt->v = NULL;
}

void adamw_tick(AdamW *opt) { opt->t++; }

// Every tensor's part of [lo, hi) in one multi-tensor update (a few launches on a GPU, not one per tensor).
// Every tensor's part of [lo, hi) as a slice of a multi-tensor update (t: n_info of room); returns how many.
static int adamw_slices(const AdamW *opt, const GPT *m, size_t lo, size_t hi, size_t state_off, AdamWSlice *t) {
    int count = 0;
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *pi = &m->info[i];
        size_t a = pi->offset > lo ? pi->offset : lo, z = pi->offset + pi->numel < hi ? pi->offset + pi->numel : hi;
        if (a >= z) continue;
        // the bf16 copy is refreshed in the same sweep (mixed precision)
        t[count++] = (AdamWSlice){m->params + a, m->params16 ? m->params16 + a : NULL, m->grads + a,
                                  opt->m + state_off + (a - lo), opt->v + state_off + (a - lo), z - a,
                                  pi->decay ? opt->weight_decay : 0.0f};
    }
    return count;
}

void adamw_update_range(AdamW *opt, GPT *m, float lr, float grad_scale, size_t lo, size_t hi, size_t state_off) {
    float b1 = opt->beta1, b2 = opt->beta2;
    float c1 = 1.0f - powf(b1, (float)opt->t), c2 = 1.0f - powf(b2, (float)opt->t);
    AdamWSlice *t = xmalloc((size_t)(m->n_info ? m->n_info : 1) * sizeof *t);
    int count = adamw_slices(opt, m, lo, hi, state_off, t);
    if (count) m->be->adamw_update_multi(m->be, t, count, lr, b1, b2, opt->eps, c1, c2, grad_scale);
    free(t);
}

void adamw_step(AdamW *opt, GPT *m, float lr, float grad_scale) {
    adamw_tick(opt);
    adamw_update_range(opt, m, lr, grad_scale, 0, m->n_params, 0);
}

void adamw_untick(AdamW *opt) { opt->t--; }

void adamw_step_guarded(AdamW *opt, GPT *m, float lr) {
    adamw_tick(opt);
    float b1 = opt->beta1, b2 = opt->beta2;
    float c1 = 1.0f - powf(b1, (float)opt->t), c2 = 1.0f - powf(b2, (float)opt->t);
    AdamWSlice *t = xmalloc((size_t)(m->n_info ? m->n_info : 1) * sizeof *t);
    int count = adamw_slices(opt, m, 0, m->n_params, 0, t);
    if (count) m->be->adamw_update_guarded(m->be, t, count, lr, b1, b2, opt->eps, c1, c2);
    free(t);
}
