// GPT-2-style pre-tokenizer: splits text into the pieces BPE may merge within, never across.
//
// It is a hand-written scanner equivalent to GPT-2's pattern
//     's|'t|'re|'ve|'m|'ll|'d| ?L+| ?N+| ?[^\sLN]+|\s+(?!\S)|\s+
// over bytes, with these classes: L = ASCII letters and every byte >= 0x80 (so UTF-8 words stay
// in one piece), N = ASCII digits, \s = space, \t, \n, \v, \f, \r; every other byte (NUL,
// control characters, punctuation) is a symbol. A run of whitespace followed by a word leaves
// its last space to the word (" the"), as GPT-2 does. Pieces cover the input exactly, in order.
#ifndef CTRON_PRETOKENIZE_H
#define CTRON_PRETOKENIZE_H
#include <stddef.h>
#include <stdint.h>

// End (exclusive) of the piece that starts at i; requires i < n, returns a value in (i, n].
size_t pretok_next(const uint8_t *s, size_t n, size_t i);
#endif
