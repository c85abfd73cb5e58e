// AdamW with decoupled weight decay (Loshchilov & Hutter), fp32 state.
#ifndef CTRON_ADAMW_H
#define CTRON_ADAMW_H
#include <stddef.h>
#include "model/gpt.h"

typedef struct {
    float beta1, beta2, eps, weight_decay;
    float *m, *v;       // [n] first and second moments (all parameters, or a ZeRO-1 rank's share)
    Backend *be;        // where m and v live (NULL: host memory, the whole-model copy of a checkpoint)
    size_t n;
    long t;             // steps taken
} AdamW;

void adamw_init(AdamW *opt, Backend *be, size_t n_params, float beta1, float beta2, float eps, float weight_decay);
// Frees m and v through opt->be: call it before freeing the model whose backend that is.
void adamw_free(AdamW *opt);
// One update of every parameter of m with its gradient times grad_scale (the clipping factor, applied
// here rather than in a separate pass over the gradients); decay only where ParamInfo.decay is set.
void adamw_step(AdamW *opt, GPT *m, float lr, float grad_scale);
// The same in pieces (ZeRO-1: a rank updates the parameters whose state it holds): adamw_tick once
// per step, then adamw_update_range for parameters [lo, hi) of m's flat buffer, whose moments are
// opt->m/v[state_off ..].
void adamw_tick(AdamW *opt);
void adamw_update_range(AdamW *opt, GPT *m, float lr, float grad_scale, size_t lo, size_t hi, size_t state_off);
// adamw_step with the clipping factor and the skip of the backend's last step_guard, decided on the
// device (train/run_step.c, one process): ticks; a step the device skipped is taken back by adamw_untick
// once the host has read the verdict.
void adamw_step_guarded(AdamW *opt, GPT *m, float lr);
void adamw_untick(AdamW *opt);
#endif
