// Byte-level text data (256 symbols): the file's bytes are the tokens. The last val_frac of the
// file is the held-out validation split.
#ifndef CTRON_DATASET_H
#define CTRON_DATASET_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int32_t *tokens;        // the whole file
    size_t n;               // tokens in the file
    size_t n_train;         // tokens [0, n_train) train, [n_train, n) validation
    int max_token;          // largest token id present
} Dataset;

// Returns 0, or -1 with a message in err (missing, unreadable or empty file).
int dataset_load_bytes(Dataset *ds, const char *path, double val_frac, char *err, size_t errlen);
void dataset_free(Dataset *ds);
static inline size_t dataset_n_val(const Dataset *ds) { return ds->n - ds->n_train; }

// Training batch [s,b]: sequence bi starts at an offset drawn from Philox keyed by
// (seed, step, global sample sample0 + bi), so the data order does not depend on micro-batching.
void dataset_train_batch(const Dataset *ds, int s, int b, uint64_t seed, uint32_t step, uint32_t sample0,
                         int32_t *tokens, int32_t *targets);
// Validation batch k of n_batches: windows spread evenly over the validation split, always the same.
void dataset_val_batch(const Dataset *ds, int s, int b, int k, int n_batches, int32_t *tokens, int32_t *targets);
#endif
