// Finding added tokens in text, as tokenizers' AddedVocabulary does: leftmost-longest matches
// (its Aho-Corasick, MatchKind::LeftmostLongest), not overlapping; a single_word token only where
// no word character (Rust regex \w) touches it; lstrip/rstrip take the Unicode White_Space around
// it. Tokens with normalized false are found first on the raw text, those with normalized true
// then in the gaps once the normalizer has rewritten them (bpe_split).
#ifndef CTRON_ADDED_TOKENS_H
#define CTRON_ADDED_TOKENS_H
#include <stddef.h>
#include <stdint.h>
#include "tokenizer/bpe.h"

typedef struct BpeAddedIndex BpeAddedIndex;

// Indexes bpe->added (call after filling it). NULL when there are no added tokens.
BpeAddedIndex *added_index_build(const BpeAdded *added, int n);
void added_index_free(BpeAddedIndex *ix);

typedef struct { size_t start, end; int32_t id; } AddedSpan;   // id -1: text between added tokens

// Spans covering s[0..n) in order: the matches of the tokens whose normalized flag is `phase`,
// and the gaps. Returns the count (0 for empty s); *spans grows with realloc (*cap its capacity).
size_t added_find(const BpeAddedIndex *ix, const BpeAdded *added, int phase, const uint8_t *s, size_t n,
                  AddedSpan **spans, size_t *cap);

// Unicode White_Space (what Rust's regex \s matches).
int unicode_is_space(uint32_t cp);
#endif
