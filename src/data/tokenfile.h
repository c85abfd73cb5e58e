// Token files in llm.c's format (dev/data/data_common.py): a header of 256 little-endian int32 -
// [0] magic, [1] version, [2] number of tokens, the rest 0 - followed by the tokens, little-endian:
//   magic 20240520, version 1: uint16 tokens (GPT-2's; a vocabulary of at most 65,536)
//   magic 20240801, version 7: uint32 tokens (llm.c's Llama 3 files; any vocabulary up to 2^31)
// A token file holds at most 2^31-1 tokens. ctron reads both and writes uint16 unless the
// vocabulary has more than 65,536 tokens.
#ifndef CTRON_TOKENFILE_H
#define CTRON_TOKENFILE_H
#include <stddef.h>
#include <stdint.h>

#define TOKENFILE_MAGIC 20240520
#define TOKENFILE_VERSION 1
#define TOKENFILE_MAGIC_U32 20240801
#define TOKENFILE_VERSION_U32 7
#define TOKENFILE_HEADER_BYTES (256 * 4)
#define TOKENFILE_MAX_VOCAB 65536   // of the uint16 version

// Writes tokens[0..n) atomically (temp file, fsync, rename): uint16 when vocab <= 65536, uint32
// when it is larger; vocab 0 decides by the largest token. Returns 0, or -1 with a message in err
// (a negative token, or one >= vocab, too many tokens, or an I/O error); nothing is left at path then.
int tokenfile_write(const char *path, const int32_t *tokens, size_t n, int vocab, char *err, size_t errlen);

// Reads a token file of either version into a fresh array (*tokens, free() it; never NULL on
// success) and checks everything: the magic and its version, that the count matches the file size,
// and, when vocab > 0, that every token is below vocab. Returns 0, or -1 with a message naming the
// bad value and what was expected; then *tokens is NULL and *n is 0.
int tokenfile_read(const char *path, int vocab, int32_t **tokens, size_t *n, char *err, size_t errlen);

// 1 when the file starts with a token-file magic, 0 when not (a text file), -1 with a message
// in err when it cannot be read.
int tokenfile_sniff(const char *path, char *err, size_t errlen);

// Bytes per token of the version tokenfile_write picks for a vocabulary (2 or 4).
int tokenfile_token_bytes(int vocab);
#endif
