// Dropout whose keep/drop decision is a pure function of
// (seed, step, sample, layer, site, element index within the sample), from Philox4x32-10.
// The sample is the sequence's index in the step's global batch and the index is taken in the
// unsharded tensor, so a mask never depends on threads, micro-batching or the parallel layout.
#ifndef CTRON_DROPOUT_H
#define CTRON_DROPOUT_H
#include <stddef.h>
#include <stdint.h>
#include "util/hd.h"
#include "util/philox.h"

// SITE_LORA + s: LoRA site s's dropout on its adapter's input (--lora-dropout; arch/lora.h's LoraSite).
enum { SITE_EMB = 0, SITE_ATTN = 1, SITE_DROP1 = 2, SITE_DROP2 = 3, SITE_LORA = 4 };

typedef struct {
    philox_key key;    // from the run's seed
    uint32_t step;     // optimizer step
    uint32_t layer;    // block index (0 for the embedding site)
    uint32_t site;     // SITE_*
    float p;           // drop probability, 0 <= p < 1
} DropoutSite;

// Element idx of a sample is kept when word idx mod 4 of Philox block idx/4, counter
// (idx/4, sample, step, stream|layer|site), is at or above p·2³². Shared by both backends.
CT_HD uint32_t dropout_keep_threshold(float p) {
    double t = (double)p * 4294967296.0;
    return t >= 4294967295.0 ? 0xFFFFFFFFu : (uint32_t)t;
}
CT_HD uint32_t dropout_counter_word3(DropoutSite site) {
    return ((uint32_t)PHILOX_DROPOUT << 24) | ((site.layer & 0xFFFFu) << 8) | (site.site & 0xFFu);
}
// The decision for one element (the CPU draws 64 at a time with the same numbers).
CT_HD int dropout_keep_at(DropoutSite site, uint32_t thresh, uint32_t sample, uint64_t idx) {
    philox_ctr ctr = {{(uint32_t)(idx / 4), sample, site.step, dropout_counter_word3(site)}};
    philox_ctr r = philox4x32_10_inline(ctr, site.key);
    return r.v[idx % 4] >= thresh;
}

// keep[i] = 1/0 for per-sample element indices first .. first+count-1 of one sample.
void dropout_mask_run(uint8_t *keep, DropoutSite site, uint32_t sample, uint64_t first, size_t count);
// Mask of an [s, b, w] activation whose first row is sequence position s0 (s0 > 0 for a rank's
// shard under sequence parallelism): column c of row (si, bi) has index (s0+si)·w + c in sample
// sample0 + bi.
void dropout_mask_sbw(uint8_t *keep, DropoutSite site, int s0, int s, int b, int w, uint32_t sample0);

// Columns c0 .. c0+w−1 of rows r0 .. r0+rows−1 of an [s, b, W] activation (row si·b + bi): column c of row
// (si, bi) has index si·W + c0 + c in sample sample0 + bi (a row-parallel linear's input columns under TP; a
// row range: mini-seq's chunks). keep is [rows, w], the same bytes as those rows of the whole mask.
void dropout_mask_cols(uint8_t *keep, DropoutSite site, int r0, int rows, int b, int w, int W, int c0,
                       uint32_t sample0);

// out[r,c] = res[r,c] + keep·(y[r,c] + bias[c])/(1−p)  ([n, w]; keep NULL means p = 0; bias may be NULL)
void dropout_residual_forward(float *out, const float *res, const float *y, const float *bias,
                              const uint8_t *keep, float p, int n, int w);
// out[r,c] = res[r,c] − keep·(y[r,c] + bias[c])/(1−p): the forward undone (reversible blocks: x = y − F)
void dropout_residual_inverse(float *out, const float *res, const float *y, const float *bias,
                              const uint8_t *keep, float p, int n, int w);
// x[i] = x[i]·keep[i]/(1−p) in place — forward and backward of dropout are the same map.
void dropout_apply(float *x, const uint8_t *keep, float p, size_t count);
// dy[i] = dout[i]·keep[i]/(1−p)
void dropout_backward(float *dy, const float *dout, const uint8_t *keep, float p, size_t count);
#endif
