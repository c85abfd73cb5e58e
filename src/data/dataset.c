#include "data/dataset.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "util/common.h"
#include "util/philox.h"

void dataset_free(Dataset *ds) {
    free(ds->tokens);
    memset(ds, 0, sizeof *ds);
}

static void fill_window(const int32_t *src, size_t off, int s, int b, int bi, int32_t *tokens, int32_t *targets) {
    for (int si = 0; si < s; si++) {
        tokens[(size_t)si * b + bi] = src[off + (size_t)si];
        targets[(size_t)si * b + bi] = src[off + (size_t)si + 1];
    }
}

void dataset_train_batch(const Dataset *ds, int s, int b, DataOrder order, uint64_t seed, uint32_t step,
                         uint32_t sample0, uint32_t samples_per_step, int32_t *tokens, int32_t *targets) {
    size_t span = ds->n_train - (size_t)s;   // offsets 0 .. span-1 keep s+1 tokens inside the split
    philox_key key = philox_key_from_seed(seed);
    for (int bi = 0; bi < b; bi++) {
        uint32_t sample = sample0 + (uint32_t)bi;
        size_t off;
        if (order == DATA_SEQUENTIAL) {
            uint64_t k = (uint64_t)(step - 1) * samples_per_step + sample;
            off = (size_t)((k * (uint64_t)s) % span);
        } else {
            philox_ctr ctr = {{sample, step, 0, (uint32_t)PHILOX_DATA << 24}};
            philox_ctr r = philox4x32_10(ctr, key);
            off = (size_t)((((uint64_t)r.v[0] << 32) | r.v[1]) % span);
        }
        fill_window(ds->tokens, off, s, b, bi, tokens, targets);
    }
}

void dataset_val_batch(const Dataset *ds, int s, int b, int k, int n_batches, int32_t *tokens, int32_t *targets) {
    size_t span = dataset_n_val(ds) - (size_t)s;  // number of valid start offsets
    size_t windows = (size_t)n_batches * (size_t)b;
    for (int bi = 0; bi < b; bi++) {
        size_t w = (size_t)k * b + (size_t)bi;
        size_t off = windows > 1 ? w * (span - 1) / (windows - 1) : 0;
        fill_window(ds->tokens, ds->n_train + off, s, b, bi, tokens, targets);
    }
}
