// Test inputs from Philox: n floats uniform in [−1, 1), element i from counter (i, stream) under the seed's
// key, so any test's inputs are the same on every machine and thread count.
#ifndef CTRON_TEST_PHILOX_FILL_H
#define CTRON_TEST_PHILOX_FILL_H
#include <stddef.h>
#include <stdint.h>
#include "util/common.h"
#include "util/philox.h"

static inline float *philox_filled(size_t n, uint32_t seed, uint32_t stream) {
    float *x = xmalloc(n * sizeof(float));
    philox_key key = philox_key_from_seed(seed);
    for (size_t i = 0; i < n; i++) {
        philox_ctr c = {{(uint32_t)i, stream, 0, 0}};
        x[i] = (float)philox4x32_10(c, key).v[0] / 4294967296.0f * 2.0f - 1.0f;
    }
    return x;
}
#endif
