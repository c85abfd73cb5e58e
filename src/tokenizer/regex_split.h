// Pre-tokenizer regular expressions, compiled by PCRE2 (a library, not ours: its \p{L}, \p{N}, \s
// are the Unicode classes of the Unicode version PCRE2 was built with). Patterns are matched over
// UTF-8 with Unicode classes; invalid UTF-8 is allowed in the subject and matches nothing (not
// even [^...] or \S), so a run of invalid bytes always lies between two matches.
//
// preregex_each cuts a string as tokenizers' Split pre-tokenizer does (its find_matches and
// SplitDelimiterBehavior): the matches and the gaps between them, in order, then the behavior.
#ifndef CTRON_REGEX_SPLIT_H
#define CTRON_REGEX_SPLIT_H
#include <stddef.h>
#include <stdint.h>

// GPT-2's pattern (tokenizers' ByteLevel pre-tokenizer with use_regex).
#define PRETOK_GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
// Llama 3's (tiktoken's cl100k_base), as its tokenizer.json gives it to a Split pre-tokenizer.
#define PRETOK_LLAMA3_PATTERN                                                                                 \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|" \
    "\\s+(?!\\S)|\\s+"

extern const char PRETOK_PROBE[];   // PRETOK_PROBE_LEN bytes, a NUL among them
extern const size_t PRETOK_PROBE_LEN;

typedef enum {
    SPLIT_REMOVED,            // the matches are dropped
    SPLIT_ISOLATED,           // matches and gaps are pieces of their own
    SPLIT_MERGED_WITH_PREVIOUS,
    SPLIT_MERGED_WITH_NEXT,
    SPLIT_CONTIGUOUS          // consecutive matches form one piece
} SplitBehavior;

typedef struct PreRegex PreRegex;

// Compiles pattern[0..len) (literal: as a plain string, tokenizers' {"String": ...}). NULL with
// PCRE2's message and the offset in err when it does not compile, or when matching it against
// PRETOK_PROBE (a short text of every kind of character) from every offset exceeds PCRE2's match
// limit: a pattern that costly would stop the encoding of real text.
PreRegex *preregex_compile(const char *pattern, size_t len, int literal, char *err, size_t errlen);
void preregex_free(PreRegex *re);

// Hands the pieces of s[0..n) to fn as [start, end) byte offsets, non-empty, in order. invert:
// the gaps play the matches' part. It streams: memory does not grow with n.
typedef void (*PieceFn)(void *ctx, size_t start, size_t end);
void preregex_each(const PreRegex *re, SplitBehavior behavior, int invert, const uint8_t *s, size_t n, PieceFn fn,
                   void *ctx);

// 1 when code point cp is a word character as Rust's regex \w has it (Alphabetic, marks, decimal
// digits, connector punctuation, joiners): tokenizers' single_word added tokens test it.
int unicode_is_word(uint32_t cp);
#endif
