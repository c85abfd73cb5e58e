// JSONL training data (one JSON object per line, the common export format of Hugging Face
// `datasets`): each line's text field is one document. Read with cJSON, line by line.
#ifndef CTRON_JSONL_H
#define CTRON_JSONL_H
#include <stddef.h>
#include <stdint.h>
#include "tokenizer/bpe.h"

// Called now and then while encoding: bytes of the file read so far of total, documents, tokens.
typedef void (*JsonlProgressFn)(void *ctx, size_t bytes_done, size_t bytes_total, size_t docs, size_t tokens);

// Encodes the string `field` of every line of path as one document: bpe_encode_doc (the
// tokenizer's BOS/EOS around it), or its bytes when bpe is NULL; doc_sep >= 0 goes before each
// document. Blank lines are skipped. Returns 0 with a fresh array in *tokens (free() it; never NULL)
// of *n ids and *n_docs documents, or -1 with a message naming the file and the line: a line that
// is not a JSON object, has no such field, or whose field is not a string (or holds \u0000, which
// cJSON cannot carry). progress may be NULL.
int jsonl_encode(const char *path, const char *field, const Bpe *bpe, int32_t doc_sep, JsonlProgressFn progress,
                 void *ctx, int32_t **tokens, size_t *n, size_t *n_docs, char *err, size_t errlen);

// 1 when path names a JSONL file (it ends in ".jsonl").
int jsonl_is_name(const char *path);
#endif
