#include "tokenizer/normalize.h"
#include <string.h>
#include <utf8proc.h>
#include "tokenizer/bytelevel.h"
#include "util/common.h"

void normbuf_put(NormBuf *b, const uint8_t *s, size_t n) {
    if (b->len + n > b->cap) {
        while (b->len + n > b->cap) b->cap = b->cap ? 2 * b->cap : 256;
        b->data = realloc(b->data, b->cap);
        if (!b->data) ctron_fatal("out of memory for %zu bytes of text", b->len + n);
    }
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
}

void normbuf_replace(NormBuf *b, const uint8_t *s, size_t n, const uint8_t *from, size_t fl, const uint8_t *to,
                     size_t tl) {
    size_t i = 0, copied = 0;
    while (fl && i + fl <= n) {
        const uint8_t *hit = memchr(s + i, from[0], n - fl + 1 - i);
        if (!hit) break;
        i = (size_t)(hit - s);
        if (memcmp(hit, from, fl) != 0) {
            i++;
            continue;
        }
        normbuf_put(b, s + copied, i - copied);
        normbuf_put(b, to, tl);
        copied = i += fl;
    }
    normbuf_put(b, s + copied, n - copied);
}

static int form_options(TextNormKind k) {
    switch (k) {
    case TNORM_NFC: return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    case TNORM_NFD: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    case TNORM_NFKC: return UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    default: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    }
}

// One valid UTF-8 stretch in normal form k, appended to out.
static void form_valid(TextNormKind k, const uint8_t *s, size_t n, NormBuf *out) {
    if (n == 0) return;
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t m = utf8proc_map(s, (utf8proc_ssize_t)n, &dst, (utf8proc_option_t)form_options(k));
    if (m < 0) ctron_fatal("utf8proc could not normalize %zu bytes of valid UTF-8: %s", n, utf8proc_errmsg(m));
    normbuf_put(out, dst, (size_t)m);
    free(dst);
}

static void apply_step(const NormStep *st, const uint8_t *s, size_t n, NormBuf *out) {
    out->len = 0;
    switch (st->kind) {
    case TNORM_PREPEND:
        if (n) normbuf_put(out, st->to, st->to_len);
        normbuf_put(out, s, n);
        return;
    case TNORM_REPLACE:
        normbuf_replace(out, s, n, st->from, st->from_len, st->to, st->to_len);
        return;
    default:
        for (size_t i = 0, start = 0;; ) {   // valid stretches normalized, invalid bytes kept
            if (i == n) { form_valid(st->kind, s + start, i - start, out); return; }
            size_t len;
            if (utf8_next(s, n, i, &len) == UINT32_MAX) {
                form_valid(st->kind, s + start, i - start, out);
                normbuf_put(out, s + i, 1);
                start = ++i;
            } else {
                i += len;
            }
        }
    }
}

const uint8_t *normalize_apply(const NormStep *steps, int n_steps, const uint8_t *s, size_t n, NormBuf *out,
                               NormBuf *tmp, size_t *len) {
    *len = n;
    if (n_steps == 0) return s;
    for (int i = 0; i < n_steps; i++) {
        // Each step reads the last one's output: ping-pong between out and tmp, ending in out.
        NormBuf *dst = (n_steps - i) % 2 ? out : tmp;
        apply_step(&steps[i], s, n, dst);
        s = dst->data;
        n = dst->len;
    }
    *len = n;
    return out->data ? out->data : (const uint8_t *)"";
}

void normbuf_free(NormBuf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

void normstep_free(NormStep *st) {
    free(st->from);
    free(st->to);
    memset(st, 0, sizeof *st);
}

int norm_form_from_name(const char *name) {
    static const char *const names[] = {"NFC", "NFD", "NFKC", "NFKD"};
    for (int i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0) return TNORM_NFC + i;
    return -1;
}
