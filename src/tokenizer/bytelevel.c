#include "tokenizer/bytelevel.h"

static int printable(unsigned b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

// The 68 others, in byte order: 0x00..0x20 (33), 0x7F..0xA0 (34), 0xAD (1).
uint32_t bytelevel_char(uint8_t b) {
    if (printable(b)) return b;
    if (b <= 0x20) return 256u + b;
    if (b <= 0xA0) return 256u + 33u + (b - 0x7Fu);
    return 256u + 67u;   // 0xAD
}

// The byte of code point cp, or -1 when cp is not in the alphabet.
static int char_byte(uint32_t cp) {
    if (cp < 256) return printable(cp) ? (int)cp : -1;
    if (cp < 256 + 33) return (int)(cp - 256);
    if (cp < 256 + 67) return (int)(0x7F + cp - 256 - 33);
    return cp == 256 + 67 ? 0xAD : -1;
}

size_t bytelevel_encode(const uint8_t *in, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = bytelevel_char(in[i]);
        if (cp < 0x80) {
            out[k++] = (char)cp;
        } else {   // all code points of the alphabet are below U+0800: two bytes
            out[k++] = (char)(0xC0 | (cp >> 6));
            out[k++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    return k;
}

uint32_t utf8_next(const uint8_t *s, size_t n, size_t i, size_t *len) {
    uint8_t c = s[i];
    *len = 1;
    if (c < 0x80) return c;
    size_t need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (c >= 0xF5 || need == 0 || i + need > n) return UINT32_MAX;
    uint32_t cp = c & (0x7F >> need);
    for (size_t k = 1; k < need; k++) {
        if ((s[i + k] & 0xC0) != 0x80) return UINT32_MAX;
        cp = cp << 6 | (s[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((need == 3 && cp < 0x800) || (need == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
        return UINT32_MAX;
    *len = need;
    return cp;
}

size_t bytelevel_decode(const char *s, size_t n, uint8_t *out, int *mapped) {
    const uint8_t *u = (const uint8_t *)s;
    size_t k = 0;
    for (size_t i = 0, len; i < n; i += len) {
        int b = char_byte(utf8_next(u, n, i, &len));
        if (b < 0) {   // not the alphabet: the string's own bytes
            for (size_t j = 0; j < n; j++) out[j] = u[j];
            if (mapped) *mapped = 0;
            return n;
        }
        out[k++] = (uint8_t)b;
    }
    if (mapped) *mapped = 1;
    return k;
}
