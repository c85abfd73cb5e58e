// Two runs with the same seed and threads give bitwise identical losses and parameters; splitting
// a batch into micro-batches (same samples, same masks) changes only the summation order.
#include <math.h>
#include <string.h>
#include "check.h"
#include "model/gpt.h"
#include "train/adamw.h"
#include "train/grad_norm.h"
#include "util/common.h"

static const GPTConfig CFG = {.layers = 2, .hidden = 32, .heads = 4, .seq = 16, .batch = 4, .vocab = 256, .dropout = 0.1f};

static void batch(int32_t *tok, int32_t *tgt, int s, int b, int sample0, int step) {
    for (int si = 0; si < s; si++)
        for (int bi = 0; bi < b; bi++) {
            int g = sample0 + bi;
            tok[si * b + bi] = (si * 31 + g * 17 + step * 7) % 256;
            tgt[si * b + bi] = (si * 13 + g * 5 + step) % 256;
        }
}

// Trains `steps` steps with micro-batches of size mb_size; returns the final parameters (caller frees).
static float *train(uint64_t seed, int steps, int mb_size, double *losses) {
    GPTConfig cfg = CFG;
    cfg.batch = mb_size;
    int accum = CFG.batch / mb_size, s = cfg.seq;
    GPT m;
    gpt_init(&m, &cfg, NULL);
    gpt_init_weights(&m, seed);
    AdamW opt;
    adamw_init(&opt, m.be, m.n_params, 0.9f, 0.95f, 1e-8f, 0.1f);
    int32_t tok[256], tgt[256];
    for (int step = 1; step <= steps; step++) {
        gpt_zero_grad(&m);
        double sum = 0.0;
        for (int mb = 0; mb < accum; mb++) {
            StepCtx ctx = {seed, (uint32_t)step, (uint32_t)(mb * mb_size), 1};
            batch(tok, tgt, s, mb_size, mb * mb_size, step);
            sum += gpt_forward(&m, tok, tgt, s, mb_size, ctx, 1.0f / (float)(s * CFG.batch));
            gpt_backward(&m, tok, ctx);
        }
        losses[step - 1] = sum / (s * CFG.batch);
        double norm = grad_global_norm(m.be, m.grads, m.n_params);
        adamw_step(&opt, &m, 1e-3f, grad_clip_scale(norm, 1.0f));
    }
    float *out = xmalloc(m.n_params * sizeof(float));
    memcpy(out, m.params, m.n_params * sizeof(float));
    adamw_free(&opt);
    gpt_free(&m);
    return out;
}

int main(void) {
    enum { STEPS = 5 };
    size_t np = gpt_num_params(&CFG);
    double la[STEPS], lb[STEPS], lc[STEPS], ld[STEPS];
    float *pa = train(11, STEPS, 4, la), *pb = train(11, STEPS, 4, lb);
    CHECK(memcmp(la, lb, sizeof la) == 0, "same seed: losses differ");
    CHECK(memcmp(pa, pb, np * sizeof(float)) == 0, "same seed: parameters differ");
    float *pc = train(12, STEPS, 4, lc);
    CHECK(memcmp(la, lc, sizeof la) != 0, "different seed gave identical losses");

    // Two micro-batches of 2 (gradient accumulation) follow one batch of 4 within fp32 rounding.
    float *pd = train(11, STEPS, 2, ld);
    double worst = 0.0;
    for (int i = 0; i < STEPS; i++) worst = fmax(worst, fabs(la[i] - ld[i]) / fabs(la[i]));
    CHECK(worst < 1e-5, "grad-accum 2x2 vs 1x4: loss rel diff %.2e", worst);
    double maxdiff = 0.0;
    for (size_t i = 0; i < np; i++) maxdiff = fmax(maxdiff, fabs((double)pa[i] - pd[i]));
    CHECK(maxdiff < 1e-4, "grad-accum 2x2 vs 1x4: parameter max diff %.2e", maxdiff);
    printf("losses %.6f .. %.6f; accumulation loss rel diff %.1e, param max diff %.1e\n", la[0], la[STEPS - 1], worst,
           maxdiff);
    free(pa); free(pb); free(pc); free(pd);
    return check_summary();
}
