// Internal to the tokenizer.json reader (hf_tokenizer_read.c, hf_tokenizer_pipeline.c): the reader's
// state and its JSON helpers. Every refusal goes through hfr_fail, which names the file and the field.
#ifndef CTRON_HF_READER_H
#define CTRON_HF_READER_H
#include <cjson/cJSON.h>
#include <stddef.h>
#include "tokenizer/bpe.h"

typedef struct {
    const char *path;
    char *err;
    size_t errlen;
    Bpe *bpe;
    StrTable names;           // model.vocab's strings (as in the file) -> name id
    int32_t *name_tok;        // name id -> token id
} Reader;

// Writes "'PATH': FIELD MESSAGE" into the reader's err; returns -1.
int hfr_fail(Reader *r, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const cJSON *hfr_get(const cJSON *obj, const char *key);
int hfr_absent(const cJSON *x);   // missing or null
// An optional boolean field (absent or null: dflt); -1 (with the message) when it is something else.
int hfr_opt_bool(Reader *r, const cJSON *obj, const char *where, const char *key, int dflt, int *out);
const char *hfr_type(const cJSON *obj);   // its "type" string, or NULL
// The start of reading one pipeline step x (a normalizer, pre-tokenizer, post-processor or decoder,
// named `where` in messages): an object with a "type", whose name goes to *type and "WHERE.type" to
// field. A Sequence is read here, each item of its array `key` through one() as "WHERE.KEY[i]".
// Returns -1 when refused, 1 when x was a Sequence (read), 0 for the caller to read its *type.
typedef int (*HfrStepReader)(Reader *r, const cJSON *x, const char *where);
int hfr_step(Reader *r, const cJSON *x, const char *where, const char *key, HfrStepReader one, const char **type,
             char *field, size_t field_len);

// The pipeline around the model (hf_tokenizer_pipeline.c). read_normalizer and read_pre come first:
// whether the pre-tokenizer has a ByteLevel step decides how the vocabulary's strings are read.
int hfr_read_normalizer(Reader *r, const cJSON *norm);
int hfr_read_pre(Reader *r, const cJSON *pre);
int hfr_read_decoder(Reader *r, const cJSON *dec);
#endif
