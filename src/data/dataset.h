// Training data as token ids: a token file, BPE-encoded text or byte-level text (dataset_load).
// Tokens [0, n_train) are the training split, the rest the held-out validation split.
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

// What the trainer calls (src/data/dataset_load.c). Loads path for a model of `vocab` tokens:
//  - a token file (data/tokenfile.h, recognised by its magic number) is read as stored;
//  - any other file is text, encoded with the BPE vocabulary at tokenizer_path
//    (tokenizer/bpe.h), or byte by byte (tokens 0..255) when tokenizer_path is NULL.
// The last val_frac of the tokens is the validation split. A tokenizer larger than vocab, or any
// token >= vocab, is an error. Returns 0, or -1 with a message in err (ds is then empty).
int dataset_load(Dataset *ds, const char *path, const char *tokenizer_path, double val_frac, int vocab,
                 char *err, size_t errlen);
// The same with an explicit validation file (same rules as path; val_frac is then ignored): all
// of train_path is the training split, all of val_path the validation split, stored back to back
// in ds->tokens. val_path NULL: exactly dataset_load.
int dataset_load_split(Dataset *ds, const char *train_path, const char *val_path, const char *tokenizer_path,
                       double val_frac, int vocab, char *err, size_t errlen);
// 0 when both splits hold a full window of seq+1 tokens; -1 with a message otherwise. Call it
// after loading: the token count of text is only known once it is encoded.
int dataset_check_windows(const Dataset *ds, int seq, char *err, size_t errlen);
void dataset_free(Dataset *ds);
static inline size_t dataset_n_val(const Dataset *ds) { return ds->n - ds->n_train; }

// The order of training windows. Both are pure functions of (seed, step, sample), so they do not
// depend on micro-batching or the layout, and a resumed run continues where it stopped.
typedef enum {
    DATA_RANDOM,       // each window starts at an offset drawn from Philox (sampling with replacement)
    DATA_SEQUENTIAL    // window k of the run (k = (step−1)·samples_per_step + sample) starts at k·s, wrapping
} DataOrder;

// Training batch [s,b] of step `step` (from 1): sequence bi is global sample sample0 + bi of the
// step's samples_per_step. Every window lies inside the training split (never past its end).
void dataset_train_batch(const Dataset *ds, int s, int b, DataOrder order, uint64_t seed, uint32_t step,
                         uint32_t sample0, uint32_t samples_per_step, int32_t *tokens, int32_t *targets);
// Validation batch k of n_batches: windows spread evenly over the validation split, always the same.
void dataset_val_batch(const Dataset *ds, int s, int b, int k, int n_batches, int32_t *tokens, int32_t *targets);
#endif
