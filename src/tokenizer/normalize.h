// tokenizers' normalizers, the ones Llama-family tokenizer.json files use: Prepend and Replace
// (Llama 2, Mistral and TinyLlama in their "legacy" form: "▁" before the text, every ' ' as "▁"),
// the four Unicode normal forms (Qwen2: NFC; through utf8proc) and a Sequence of them. A normalizer
// rewrites each stretch of text between the added tokens that are not normalized, before the
// pre-tokenizer sees it (tokenizers' AddedVocabulary::extract_and_normalize).
#ifndef CTRON_NORMALIZE_H
#define CTRON_NORMALIZE_H
#include <stddef.h>
#include <stdint.h>

typedef enum {
    TNORM_PREPEND,             // from before a non-empty text
    TNORM_REPLACE,             // every occurrence of from (non-overlapping, left to right) becomes to
    TNORM_NFC, TNORM_NFD, TNORM_NFKC, TNORM_NFKD
} TextNormKind;

typedef struct {
    TextNormKind kind;
    uint8_t *from, *to;       // PREPEND: to; REPLACE: from -> to (from non-empty)
    size_t from_len, to_len;
} NormStep;
#define BPE_MAX_NORM_STEPS 8

// A growing byte buffer that normalization writes into (reused across calls; free data when done).
typedef struct {
    uint8_t *data;
    size_t len, cap;
} NormBuf;

// Applies the steps in order to s[0..n) and returns the result (in out or, with no steps, s
// itself) with its length in *len; tmp holds a step's output between steps (both kept for reuse).
// Invalid UTF-8 passes through the normal forms unchanged (each valid stretch between invalid bytes
// is normalized on its own): tokenizers takes only valid text.
const uint8_t *normalize_apply(const NormStep *steps, int n_steps, const uint8_t *s, size_t n, NormBuf *out,
                               NormBuf *tmp, size_t *len);
void normbuf_put(NormBuf *b, const uint8_t *s, size_t n);   // appends s[0..n)
// Appends s[0..n) with every occurrence of from (fl > 0 bytes; left to right, not overlapping) as to:
// tokenizers' Replace with a String pattern, as a normalizer and as a decoder.
void normbuf_replace(NormBuf *b, const uint8_t *s, size_t n, const uint8_t *from, size_t fl, const uint8_t *to,
                     size_t tl);
void normbuf_free(NormBuf *b);
void normstep_free(NormStep *st);

// The name tokenizer.json gives a normal form ("NFC", ...) to its kind; -1 for other names.
int norm_form_from_name(const char *name);
#endif
