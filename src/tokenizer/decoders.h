// tokenizers' decoders for SentencePiece-style BPE (Llama 2, Mistral, TinyLlama): a chain of steps,
// each turning the list of token strings into another list, then joined (tokenizers' Decoder::
// decode_chain). Byte-level tokenizers decode their own way (bpe_decode's fast path).
#ifndef CTRON_DECODERS_H
#define CTRON_DECODERS_H
#include <stddef.h>
#include <stdint.h>
#include "tokenizer/normalize.h"

typedef enum {
    DEC_REPLACE,              // every `from` in a token becomes `to`
    DEC_BYTE_FALLBACK,        // runs of "<0xXX>" tokens become their bytes (U+FFFD per byte when not UTF-8)
    DEC_FUSE,                 // all tokens joined into one
    DEC_STRIP,                // up to `start` leading and `stop` trailing characters `ch` removed from each token
    DEC_METASPACE             // the replacement character becomes ' ' (dropped in the first token unless
                              // prepend_scheme is never)
} DecKind;

typedef struct {
    DecKind kind;
    uint8_t *from, *to;       // REPLACE
    size_t from_len, to_len;
    uint8_t ch[4];            // STRIP: its character; METASPACE: the replacement (UTF-8)
    size_t ch_len;
    int start, stop;          // STRIP
    int prepend_never;        // METASPACE: prepend_scheme "never"
} DecStep;
#define BPE_MAX_DEC_STEPS 8

// The strings of n tokens (strs[i], lens[i]) through the chain, joined, appended to out. stream:
// the tokens sit inside a longer text being written piece by piece (ctron generate): Strip steps
// and the first token's Metaspace rule do not apply, and byte tokens stay raw bytes (a character's
// bytes may arrive in separate calls).
void decode_chain(const DecStep *steps, int n_steps, const uint8_t *const *strs, const size_t *lens, size_t n,
                  int stream, NormBuf *out);
void decstep_free(DecStep *st);
#endif
