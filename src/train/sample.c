#include "train/sample.h"
#include <math.h>
#include "util/common.h"
#include "util/philox.h"

void sample_bytes(GPT *m, const int32_t *prompt, int n_prompt, int n_new, float temperature, uint64_t seed,
                  FILE *out) {
    int s_max = m->cfg.seq, v = m->cfg.vocab;
    int32_t *ctx = xmalloc((size_t)(n_prompt + n_new + 1) * sizeof(int32_t));
    for (int i = 0; i < n_prompt; i++) ctx[i] = prompt[i];
    int len = n_prompt;
    double *prob = xmalloc((size_t)v * sizeof(double));
    philox_key key = philox_key_from_seed(seed);
    StepCtx sc = {seed, 0, 0, 0};
    for (int t = 0; t < n_new; t++) {
        int start = len > s_max ? len - s_max : 0, s = len - start;
        gpt_forward(m, ctx + start, NULL, s, 1, sc, 0.0f);   // [s,1] is the same layout as [s]
        const float *z = m->logits + (size_t)(s - 1) * v;
        double mx = z[0], sum = 0.0;
        for (int c = 1; c < v; c++) mx = z[c] > mx ? z[c] : mx;
        for (int c = 0; c < v; c++) { prob[c] = exp((z[c] - mx) / temperature); sum += prob[c]; }
        gpt_release(m);
        philox_ctr ctr = {{(uint32_t)t, 0, 0, (uint32_t)PHILOX_SAMPLE << 24}};
        double u = philox_uniform(philox4x32_10(ctr, key).v[0]) * sum, acc = 0.0;
        int tok = v - 1;
        for (int c = 0; c < v; c++) { acc += prob[c]; if (u < acc) { tok = c; break; } }
        ctx[len++] = tok;
        fputc(tok < 256 ? tok : '?', out);
        fflush(out);
    }
    free(prob);
    free(ctx);
}
