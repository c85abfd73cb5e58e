// Loading training data from token files or text (BPE or byte-level); see dataset.h.
#include <string.h>
#include "data/dataset.h"
#include "data/jsonl.h"
#include "data/tokenfile.h"
#include "tokenizer/bpe.h"
#include "tokenizer/text.h"
#include "util/common.h"
#include "util/fileio.h"

// The tokens of one file: a token file as stored; JSONL (a name ending in .jsonl) one document per
// line's "text"; any other file one document of text. Documents go through bpe (with its BOS/EOS),
// or are their bytes when bpe is NULL. Every token must be below vocab.
static int load_tokens(const char *path, const Bpe *bpe, int vocab, int32_t **tokens, size_t *n, char *err,
                       size_t errlen) {
    *tokens = NULL;
    *n = 0;
    int is_tokens = tokenfile_sniff(path, err, errlen);
    if (is_tokens < 0) return -1;
    if (is_tokens) return tokenfile_read(path, vocab, tokens, n, err, errlen);
    int32_t *t;
    if (jsonl_is_name(path)) {
        size_t docs;
        if (jsonl_encode(path, "text", bpe, -1, NULL, NULL, &t, n, &docs, err, errlen) != 0) return -1;
    } else {
        uint8_t *text;
        size_t len;
        if (fileio_read_all(path, &text, &len, err, errlen) != 0) return -1;
        t = bpe ? bpe_encode_doc(bpe, text, len, n) : text_encode(NULL, (const char *)text, len, n);
        free(text);
    }
    for (size_t i = 0; i < *n; i++)
        if (t[i] >= vocab) {
            snprintf(err, errlen, "'%s': %s %d at position %zu is outside the model's vocabulary 0..%d", path,
                     bpe ? "token" : "byte", t[i], i, vocab - 1);
            free(t);
            *n = 0;
            return -1;
        }
    *tokens = t;
    return 0;
}

int dataset_load_split(Dataset *ds, const char *train_path, const char *val_path, const char *tokenizer_path,
                       double val_frac, int vocab, char *err, size_t errlen) {
    memset(ds, 0, sizeof *ds);
    Bpe bpe, *tok = NULL;
    if (tokenizer_path) {
        if (bpe_load(&bpe, tokenizer_path, err, errlen) != 0) return -1;
        tok = &bpe;
        if (bpe.vocab_size > vocab) {
            snprintf(err, errlen, "tokenizer '%s' has %d tokens but the model's vocabulary is %d", tokenizer_path,
                     bpe.vocab_size, vocab);
            bpe_free(&bpe);
            return -1;
        }
    }
    int32_t *tr = NULL, *va = NULL;
    size_t n_tr = 0, n_va = 0;
    int rc = load_tokens(train_path, tok, vocab, &tr, &n_tr, err, errlen);
    if (rc == 0 && n_tr == 0) {
        snprintf(err, errlen, "data file '%s' is empty (no tokens)", train_path);
        rc = -1;
    }
    if (rc == 0 && val_path) {
        rc = load_tokens(val_path, tok, vocab, &va, &n_va, err, errlen);
        if (rc == 0 && n_va == 0) {
            snprintf(err, errlen, "validation file '%s' is empty (no tokens)", val_path);
            rc = -1;
        }
    }
    if (tok) bpe_free(tok);
    if (rc != 0) {
        free(tr);
        free(va);
        return -1;
    }
    if (val_path) {   // train then validation, back to back: the layout the batch functions expect
        ds->tokens = xmalloc((n_tr + n_va) * sizeof *ds->tokens);
        memcpy(ds->tokens, tr, n_tr * sizeof *tr);
        memcpy(ds->tokens + n_tr, va, n_va * sizeof *va);
        free(tr);
        free(va);
        ds->n = n_tr + n_va;
        ds->n_train = n_tr;
    } else {
        ds->tokens = tr;
        ds->n = n_tr;
        ds->n_train = n_tr - (size_t)((double)n_tr * val_frac);
    }
    for (size_t i = 0; i < ds->n; i++)
        if (ds->tokens[i] > ds->max_token) ds->max_token = ds->tokens[i];
    return 0;
}

int dataset_load(Dataset *ds, const char *path, const char *tokenizer_path, double val_frac, int vocab, char *err,
                 size_t errlen) {
    return dataset_load_split(ds, path, NULL, tokenizer_path, val_frac, vocab, err, errlen);
}

int dataset_check_windows(const Dataset *ds, int seq, char *err, size_t errlen) {
    size_t need = (size_t)seq + 1;
    if (ds->n_train < need || dataset_n_val(ds) < need) {
        snprintf(err, errlen, "sequence length %d is longer than the data: %zu train and %zu validation tokens, "
                 "each split needs at least %zu", seq, ds->n_train, dataset_n_val(ds), need);
        return -1;
    }
    return 0;
}
