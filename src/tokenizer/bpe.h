// Byte-level BPE tokenizer (GPT-2 style): tokens 0..255 are the bytes; token 256+i is merge i,
// the concatenation of the two earlier tokens merges[i]. Text is first cut into pre-tokens
// (tokenizer/pretokenize.h) and merges never cross a pre-token boundary. Every byte string,
// invalid UTF-8 and NUL bytes included, encodes and decodes back to itself.
//
// Vocabulary file (JSON, written and read with cJSON):
//     {"type":"ctron-bpe","version":1,"vocab_size":N,"pretokenizer":"gpt2-bytes",
//      "merges":[[a,b],...]}
// with N = 256 + number of merges, N <= 65536 (token files store uint16), and for merge i
// (token 256+i) both a and b < 256+i. Loading rejects anything else, and repeated pairs.
#ifndef CTRON_BPE_H
#define CTRON_BPE_H
#include <stddef.h>
#include <stdint.h>
#include "tokenizer/hashtab.h"

#define BPE_MAX_VOCAB 65536

typedef struct {
    int vocab_size;           // 256 + n_merges
    int n_merges;
    int32_t (*merges)[2];     // merge i makes token 256+i from (merges[i][0], merges[i][1])
    PairTable rank;           // pair id == merge index (pairs are interned in merge order)
    uint8_t *bytes;           // every token's bytes, back to back
    size_t *tok_off;          // token -> offset in bytes
    uint32_t *tok_len;        // token -> length in bytes
} Bpe;

typedef struct {
    size_t n_bytes;           // corpus size
    size_t n_pretokens;       // pieces after the pre-split
    size_t n_unique;          // distinct pieces (the words merges are learned on)
    double seconds;           // wall time of the whole training
} BpeTrainStats;

// Learns up to vocab_size-256 merges from text: repeatedly merges the most frequent adjacent
// pair (ties: the smallest (a, b)), counting each pair once per occurrence, overlapping pairs
// like "aaa" included. Stops early when no pair is left (a tiny corpus); then
// bpe->vocab_size < the request. stats may be NULL. Returns 0, or -1 with a message in err
// (vocab_size outside 256..BPE_MAX_VOCAB).
int bpe_train(Bpe *bpe, const uint8_t *text, size_t n, int vocab_size, BpeTrainStats *stats, char *err,
              size_t errlen);

// Builds a tokenizer from merges (copied). Returns 0, or -1 with a message in err when a merge
// refers to a token not yet defined, repeats an earlier pair, or the vocabulary exceeds 65536.
int bpe_from_merges(Bpe *bpe, const int32_t (*merges)[2], int n_merges, char *err, size_t errlen);
void bpe_free(Bpe *bpe);

// Vocabulary file I/O (format above). Save is atomic (temp file + fsync + rename).
int bpe_save(const Bpe *bpe, const char *path, char *err, size_t errlen);
int bpe_load(Bpe *bpe, const char *path, char *err, size_t errlen);

// Encodes text into a fresh array of *n_tokens ids (free() it; never NULL). Pre-tokens are
// encoded once each and cached for the call, so repeated words cost one hash lookup.
int32_t *bpe_encode(const Bpe *bpe, const uint8_t *text, size_t n, size_t *n_tokens);

// The bytes of one token (not NUL-terminated); tok must be in 0..vocab_size-1.
static inline const uint8_t *bpe_token_bytes(const Bpe *bpe, int32_t tok, size_t *len) {
    *len = bpe->tok_len[tok];
    return bpe->bytes + bpe->tok_off[tok];
}

// Decodes tokens into a fresh byte array (*n_bytes long; free() it). Returns NULL with a
// message in err when a token is outside 0..vocab_size-1.
uint8_t *bpe_decode(const Bpe *bpe, const int32_t *tokens, size_t n, size_t *n_bytes, char *err, size_t errlen);
#endif
