// Token files in llm.c's format: a header of 256 little-endian int32 - [0] magic 20240520,
// [1] version 1, [2] number of tokens, the rest 0 - followed by the tokens as little-endian
// uint16. So a token file holds at most 2^31-1 tokens of a vocabulary of at most 65536.
#ifndef CTRON_TOKENFILE_H
#define CTRON_TOKENFILE_H
#include <stddef.h>
#include <stdint.h>

#define TOKENFILE_MAGIC 20240520
#define TOKENFILE_VERSION 1
#define TOKENFILE_HEADER_BYTES (256 * 4)
#define TOKENFILE_MAX_VOCAB 65536

// Writes tokens[0..n) atomically (temp file, fsync, rename). Returns 0, or -1 with a message in
// err (a token outside 0..65535, too many tokens, or an I/O error); nothing is left at path then.
int tokenfile_write(const char *path, const int32_t *tokens, size_t n, char *err, size_t errlen);

// Reads a token file into a fresh array (*tokens, free() it; never NULL on success) and checks
// everything: the magic, the version, that the count matches the file size, and, when vocab > 0,
// that every token is below vocab. Returns 0, or -1 with a message naming the bad value and what
// was expected; then *tokens is NULL and *n is 0.
int tokenfile_read(const char *path, int vocab, int32_t **tokens, size_t *n, char *err, size_t errlen);

// 1 when the file starts with the token-file magic, 0 when not (a text file), -1 with a message
// in err when it cannot be read.
int tokenfile_sniff(const char *path, char *err, size_t errlen);
#endif
