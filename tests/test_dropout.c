// Dropout masks are a pure function of (seed, step, sample, layer, site, element index): the same
// for every thread count and every way of splitting the batch into micro-batches.
#include <omp.h>
#include <string.h>
#include "check.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/dropout.h"
#include "util/common.h"

int main(void) {
    int s = 33, b = 8, w = 70;
    size_t n = (size_t)s * b * w;
    DropoutSite site = {philox_key_from_seed(99), 12, 3, SITE_DROP1, 0.25f};
    uint8_t *m1 = xmalloc(n), *m2 = xmalloc(n), *half0 = xmalloc(n / 2), *half1 = xmalloc(n / 2);

    omp_set_num_threads(1);
    dropout_mask_sbw(m1, site, 0, s, b, w, 0);
    omp_set_num_threads(2);
    dropout_mask_sbw(m2, site, 0, s, b, w, 0);
    CHECK(memcmp(m1, m2, n) == 0, "mask differs between 1 and 2 threads");

    // Two micro-batches of 4 sequences (samples 0-3 and 4-7) give the rows of one batch of 8.
    dropout_mask_sbw(half0, site, 0, s, 4, w, 0);
    dropout_mask_sbw(half1, site, 0, s, 4, w, 4);
    int same = 1;
    for (int si = 0; si < s; si++)
        for (int bi = 0; bi < b; bi++) {
            const uint8_t *part = bi < 4 ? half0 + ((size_t)si * 4 + bi) * w : half1 + ((size_t)si * 4 + bi - 4) * w;
            if (memcmp(part, m1 + ((size_t)si * b + bi) * w, (size_t)w) != 0) same = 0;
        }
    CHECK(same, "micro-batched masks differ from the whole-batch mask");

    // Sequence parallelism: t = 3 ranks' shards of 11 positions from s0 = 0, 11, 22 are the rows
    // of the whole mask.
    same = 1;
    for (int r = 0; r < 3; r++) {
        dropout_mask_sbw(m2, site, 11 * r, 11, b, w, 0);
        if (memcmp(m2, m1 + (size_t)11 * r * b * w, (size_t)11 * b * w) != 0) same = 0;
    }
    CHECK(same, "an SP shard's mask differs from its rows of the whole mask");

    // Tensor parallelism: heads split over 2 ranks (head0 = 0, 3) draw the whole mask's heads.
    {
        int sa = 16, ba = 2, a = 6;
        size_t ss = (size_t)sa * sa, na = (size_t)ba * a * ss;
        uint8_t *full = xmalloc(na), *part = xmalloc(na / 2);
        attention_mask(full, sa, ba, a, 0, site, 7);
        int heads_ok = 1;
        for (int r = 0; r < 2; r++) {
            attention_mask(part, sa, ba, a / 2, 3 * r, site, 7);
            for (int bi = 0; bi < ba; bi++)
                for (int j = 0; j < a / 2; j++)
                    if (memcmp(part + ((size_t)bi * (a / 2) + j) * ss, full + ((size_t)bi * a + 3 * r + j) * ss, ss))
                        heads_ok = 0;
        }
        CHECK(heads_ok, "a TP rank's attention mask differs from its heads of the whole mask");
        free(full);
        free(part);
    }

    // Keep fraction close to 1 - p (n = 18480: 4 sigma ~ 0.013).
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) kept += m1[i];
    double frac = (double)kept / (double)n;
    CHECK(frac > 0.75 - 0.013 && frac < 0.75 + 0.013, "keep fraction %.4f, expected 0.75", frac);

    // A run that starts mid-sample (the sharded case) draws the same bits as the whole sample.
    uint8_t run[100], whole[300];
    dropout_mask_run(whole, site, 5, 0, 300);
    dropout_mask_run(run, site, 5, 101, 100);
    CHECK(memcmp(run, whole + 101, 100) == 0, "an offset run differs from the same span of the whole sample");

    // The batched generator draws exactly what philox4x32_10 gives element by element.
    {
        uint8_t fast[1000];
        dropout_mask_run(fast, site, 7, 3, 1000);
        uint32_t thresh = (uint32_t)((double)site.p * 4294967296.0);
        int agree = 1;
        for (uint64_t i = 3; i < 1003; i++) {
            philox_ctr ctr = {{(uint32_t)(i / 4), 7, site.step, ((site.layer & 0xFFFFu) << 8) | site.site}};
            philox_ctr r = philox4x32_10(ctr, site.key);
            if (fast[i - 3] != (r.v[i % 4] >= thresh)) agree = 0;
        }
        CHECK(agree, "dropout_mask_run differs from philox4x32_10 element by element");
    }

    // Every key component changes the mask.
    DropoutSite other[4] = {site, site, site, site};
    other[0].step++;
    other[1].layer++;
    other[2].site = SITE_DROP2;
    other[3].key = philox_key_from_seed(100);
    for (int i = 0; i < 4; i++) {
        dropout_mask_sbw(m2, other[i], 0, s, b, w, 0);
        CHECK(memcmp(m1, m2, n) != 0, "changing key component %d left the mask unchanged", i);
    }
    dropout_mask_sbw(m2, site, 0, s, b, w, 8);
    CHECK(memcmp(m1, m2, n) != 0, "changing the sample index left the mask unchanged");

    // p = 0 keeps everything.
    DropoutSite none = site;
    none.p = 0.0f;
    dropout_mask_sbw(m2, none, 0, s, b, w, 0);
    size_t all = 0;
    for (size_t i = 0; i < n; i++) all += m2[i];
    CHECK(all == n, "p = 0 dropped %zu elements", n - all);

    // The one-element decision the CUDA kernels draw with (dropout_keep_at) equals the CPU's batched
    // mask everywhere, ragged starts and ends included.
    uint32_t thresh = dropout_keep_threshold(site.p);
    size_t differ = 0;
    for (int row = 0; row < s * b; row++) {
        int si = row / b, bi = row % b;
        for (int c = 0; c < w; c++)
            differ += m1[(size_t)row * w + c] !=
                      dropout_keep_at(site, thresh, (uint32_t)bi, (uint64_t)si * (uint64_t)w + (uint64_t)c);
    }
    CHECK(differ == 0, "dropout_keep_at differs from dropout_mask_sbw at %zu of %zu elements", differ, n);

    // --lora-dropout's row ranges (mini-seq's chunks, which start anywhere in the [s·b] rows, mid-sequence
    // and mid-batch): dropout_mask_cols over rows [r0, r0 + rows) and columns [c0, c0 + cw) of [s, b, w] is
    // exactly those rows and columns of the whole mask, and only its [rows, cw] bytes are written.
    const int ranges[][4] = {{0, 264, 0, 70}, {67, 67, 0, 70}, {1, 5, 35, 35}, {259, 5, 3, 17}, {100, 1, 69, 1}};
    for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
        int r0 = ranges[k][0], rows = ranges[k][1], c0 = ranges[k][2], cw = ranges[k][3];
        size_t cnt = (size_t)rows * (size_t)cw;
        memset(m2, 0xA5, n);
        dropout_mask_cols(m2, site, r0, rows, b, cw, w, c0, 0);
        size_t bad = 0;
        for (int r = 0; r < rows; r++)
            bad += memcmp(m2 + (size_t)r * cw, m1 + (size_t)(r0 + r) * w + c0, (size_t)cw) != 0;
        size_t past = 0;
        for (size_t i = cnt; i < n; i++) past += m2[i] != 0xA5;
        CHECK(bad == 0 && past == 0, "dropout_mask_cols rows [%d, %d) cols [%d, %d): %zu rows differ from the whole "
              "mask's, %zu bytes written past [rows, w]", r0, r0 + rows, c0, c0 + cw, bad, past);
    }
    free(m1); free(m2); free(half0); free(half1);
    return check_summary();
}
