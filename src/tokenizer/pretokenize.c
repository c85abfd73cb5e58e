#include "tokenizer/pretokenize.h"

enum { C_SPACE, C_LETTER, C_DIGIT, C_OTHER };

static int byte_class(uint8_t c) {
    if (c == ' ' || (c >= '\t' && c <= '\r')) return C_SPACE;   // \t \n \v \f \r
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return C_LETTER;
    if (c >= '0' && c <= '9') return C_DIGIT;
    return C_OTHER;
}

// Length of the contraction ('s 't 're 've 'm 'll 'd) at s[i], or 0.
static size_t contraction(const uint8_t *s, size_t n, size_t i) {
    if (s[i] != '\'' || i + 1 >= n) return 0;
    uint8_t a = s[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= n) return 0;
    uint8_t b = s[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

size_t pretok_next(const uint8_t *s, size_t n, size_t i) {
    size_t c = contraction(s, n, i);
    if (c) return i + c;
    // " ?L+", " ?N+", " ?[^\sLN]+": an optional single space, then a run of one class.
    size_t j = i + (s[i] == ' ' && i + 1 < n);
    int cls = byte_class(s[j]);
    if (cls != C_SPACE) {
        while (j < n && byte_class(s[j]) == cls) j++;
        return j;
    }
    // Whitespace: the whole run when it ends the text or is one byte long; otherwise all but
    // its last byte, which then starts the next piece (a space joins the following word).
    size_t k = i;
    while (k < n && byte_class(s[k]) == C_SPACE) k++;
    if (k == n || k - i == 1) return k;
    return k - 1;
}
