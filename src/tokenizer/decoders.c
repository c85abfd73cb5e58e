#include "tokenizer/decoders.h"
#include <string.h>
#include "tokenizer/bytelevel.h"
#include "util/common.h"

// A list of strings in one pool.
typedef struct {
    NormBuf pool;
    size_t *off, *len, n, cap;
} StrList;

// Starts a new string in the list; normbuf_put() then appends to it (end_str closes it).
static void begin_str(StrList *l) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->off = realloc(l->off, l->cap * sizeof *l->off);
        l->len = realloc(l->len, l->cap * sizeof *l->len);
        if (!l->off || !l->len) ctron_fatal("out of memory decoding %zu tokens", l->cap);
    }
    l->off[l->n] = l->pool.len;
    l->len[l->n++] = 0;
}
static void end_str(StrList *l) { l->len[l->n - 1] = l->pool.len - l->off[l->n - 1]; }

static void add_str(StrList *l, const uint8_t *s, size_t n) {
    begin_str(l);
    normbuf_put(&l->pool, s, n);
    end_str(l);
}

static void strlist_free(StrList *l) {
    normbuf_free(&l->pool);
    free(l->off);
    free(l->len);
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// "<0xXX>" (Rust's u8::from_str_radix on the two characters: hex digits, or '+' and one digit): its
// byte, or -1.
static int byte_token(const uint8_t *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    if (s[3] == '+') return hexval(s[4]);
    int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

static int valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0, len; i < n; i += len)
        if (utf8_next(s, n, i, &len) == UINT32_MAX) return 0;
    return 1;
}

static const uint8_t REPLACEMENT[3] = {0xEF, 0xBF, 0xBD};   // U+FFFD

static void flush_bytes(StrList *out, NormBuf *bytes, int stream) {
    if (bytes->len == 0) return;
    if (stream || valid_utf8(bytes->data, bytes->len)) {
        add_str(out, bytes->data, bytes->len);
    } else {
        for (size_t i = 0; i < bytes->len; i++) add_str(out, REPLACEMENT, 3);
    }
    bytes->len = 0;
}

static int char_is(const uint8_t *s, size_t n, size_t i, const uint8_t *ch, size_t ch_len, size_t *len) {
    utf8_next(s, n, i, len);
    return *len == ch_len && memcmp(s + i, ch, ch_len) == 0;
}

// Strip's cut of one token: up to start leading and stop trailing characters ch.
static void strip(const DecStep *st, const uint8_t *s, size_t n, size_t *from, size_t *to) {
    size_t a = 0, b = n, len;
    for (int k = 0; k < st->start && a < n && char_is(s, n, a, st->ch, st->ch_len, &len); k++) a += len;
    for (int k = 0; k < st->stop && b > a; k++) {
        size_t back = b - 1;   // the last character's start: back over continuation bytes
        while (back > a && (s[back] & 0xC0) == 0x80 && b - back < 4) back--;
        if (!char_is(s, b, back, st->ch, st->ch_len, &len) || back + len != b) break;
        b = back;
    }
    *from = a;
    *to = b;
}

static void apply(const DecStep *st, const StrList *in, StrList *out, int stream) {
    NormBuf bytes = {0};
    for (size_t t = 0; t < in->n; t++) {
        const uint8_t *s = in->pool.data + in->off[t];
        size_t n = in->len[t], len;
        switch (st->kind) {
        case DEC_REPLACE:
            begin_str(out);
            normbuf_replace(&out->pool, s, n, st->from, st->from_len, st->to, st->to_len);
            end_str(out);
            break;
        case DEC_BYTE_FALLBACK: {
            int b = byte_token(s, n);
            if (b >= 0) {
                uint8_t c = (uint8_t)b;
                normbuf_put(&bytes, &c, 1);
            } else {
                flush_bytes(out, &bytes, stream);
                add_str(out, s, n);
            }
            break;
        }
        case DEC_FUSE:
            if (t == 0) begin_str(out);
            normbuf_put(&out->pool, s, n);
            if (t + 1 == in->n) end_str(out);
            break;
        case DEC_STRIP: {
            size_t a = 0, b = n;
            if (!stream) strip(st, s, n, &a, &b);
            add_str(out, s + a, b - a);
            break;
        }
        case DEC_METASPACE: {
            int drop = t == 0 && !stream && !st->prepend_never;
            begin_str(out);
            for (size_t i = 0; i < n; i += len) {
                if (char_is(s, n, i, st->ch, st->ch_len, &len)) {
                    if (!drop) normbuf_put(&out->pool, (const uint8_t *)" ", 1);
                } else {
                    normbuf_put(&out->pool, s + i, len);
                }
            }
            end_str(out);
            break;
        }
        }
    }
    if (st->kind == DEC_BYTE_FALLBACK) flush_bytes(out, &bytes, stream);
    normbuf_free(&bytes);
}

void decode_chain(const DecStep *steps, int n_steps, const uint8_t *const *strs, const size_t *lens, size_t n,
                  int stream, NormBuf *out) {
    StrList a = {0}, b = {0};
    for (size_t i = 0; i < n; i++) add_str(&a, strs[i], lens[i]);
    for (int k = 0; k < n_steps; k++) {
        b.n = 0;
        b.pool.len = 0;
        apply(&steps[k], &a, &b, stream);
        StrList t = a;
        a = b;
        b = t;
    }
    for (size_t i = 0; i < a.n; i++) normbuf_put(out, a.pool.data + a.off[i], a.len[i]);
    strlist_free(&a);
    strlist_free(&b);
}

void decstep_free(DecStep *st) {
    free(st->from);
    free(st->to);
    memset(st, 0, sizeof *st);
}
