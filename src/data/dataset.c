#include "data/dataset.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "util/common.h"
#include "util/philox.h"

int dataset_load_bytes(Dataset *ds, const char *path, double val_frac, char *err, size_t errlen) {
    memset(ds, 0, sizeof *ds);
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(err, errlen, "cannot open data file '%s': %s", path, strerror(errno)); return -1; }
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); snprintf(err, errlen, "cannot seek in '%s'", path); return -1; }
    long size = ftell(f);
    rewind(f);
    if (size <= 0) { fclose(f); snprintf(err, errlen, "data file '%s' is empty", path); return -1; }
    uint8_t *bytes = xmalloc((size_t)size);
    size_t got = fread(bytes, 1, (size_t)size, f);
    fclose(f);
    if (got != (size_t)size) {
        free(bytes);
        snprintf(err, errlen, "short read of '%s': %zu of %ld bytes", path, got, size);
        return -1;
    }
    ds->n = (size_t)size;
    ds->tokens = xmalloc(ds->n * sizeof(int32_t));
    int max_tok = 0;
    for (size_t i = 0; i < ds->n; i++) {
        ds->tokens[i] = bytes[i];
        if (bytes[i] > max_tok) max_tok = bytes[i];
    }
    free(bytes);
    ds->max_token = max_tok;
    ds->n_train = ds->n - (size_t)((double)ds->n * val_frac);
    return 0;
}

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
