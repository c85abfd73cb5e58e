// Text ↔ token ids for a model: BPE when a vocabulary is given, else one token per byte.
#ifndef CTRON_TEXT_H
#define CTRON_TEXT_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "tokenizer/bpe.h"

// bpe NULL: byte-level. Returns a malloc'ed array of *n ids (bpe_encode: no BOS/EOS, a prompt).
int32_t *text_encode(const Bpe *bpe, const char *text, size_t len, size_t *n);
// Writes one token's text inside a longer text (bpe_token_text: an added token's content, special
// ones included); ids with no text (past the tokenizer's, a hole in its ids, or past 255 without
// one: unused rows of a larger model vocabulary) are written as '?'.
void text_write_token(const Bpe *bpe, int32_t tok, FILE *out);
#endif
