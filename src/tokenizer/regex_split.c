// PCRE2 behind the pre-tokenizer's Split: matching as the onig crate's find_iter does (the engine
// tokenizers uses), then tokenizers' find_matches and split behaviors. See regex_split.h.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex_split.h"
#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tokenizer/bytelevel.h"
#include "util/common.h"

struct PreRegex {
    pcre2_code *code;
    int jit;                  // JIT-compiled (PCRE2 has a JIT on x86-64 and arm64)
    int empty_literal;        // {"String": ""}: tokenizers matches nothing, the input is one gap
};

// Oniguruma's classes (the engine tokenizers runs) where PCRE2's differ: its \s is Unicode
// White_Space, PCRE2's also takes U+180E (in its \h); its \w is Alphabetic, marks, decimal digits,
// connector punctuation and the joiners, PCRE2 10.42's letters, numbers and '_'. So \s \S \w \W
// are spelled out as properties (\W inside a [...] class stays PCRE2's: a class cannot hold a
// negated class). A fresh string of *out_len bytes.
#define WORD_ITEMS "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}"
static char *onig_classes(const char *p, size_t len, size_t *out_len) {
    char *out = xmalloc(len * 26 + 1);   // the longest replacement, [^WORD_ITEMS], is 25x its two characters
    size_t k = 0;
    int in_class = 0;
#define PUT(str) (memcpy(out + k, str, strlen(str)), k += strlen(str))
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < len) {
            char e = p[++i];
            if (e == 'Q') {   // \Q...\E: a literal run, copied as it is
                size_t j = i + 1;
                while (j + 1 < len && !(p[j] == '\\' && p[j + 1] == 'E')) j++;
                j = j + 1 < len ? j + 2 : len;
                memcpy(out + k, p + i - 1, j - (i - 1));
                k += j - (i - 1);
                i = j - 1;
            } else if (e == 's') PUT("\\p{White_Space}");
            else if (e == 'S') PUT("\\P{White_Space}");
            else if (e == 'w') PUT(in_class ? WORD_ITEMS : "[" WORD_ITEMS "]");
            else if (e == 'W' && !in_class) PUT("[^" WORD_ITEMS "]");
            else { out[k++] = c; out[k++] = e; }
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            out[k++] = c;
            if (i + 1 < len && p[i + 1] == '^') out[k++] = p[++i];
            if (i + 1 < len && p[i + 1] == ']') out[k++] = p[++i];   // a leading ']' is literal
            continue;
        }
        if (in_class && c == '[' && i + 1 < len && p[i + 1] == ':') {   // [:alpha:] inside a class
            const char *end = NULL;
            for (size_t j = i + 2; j + 1 < len; j++)
                if (p[j] == ':' && p[j + 1] == ']') { end = p + j + 2; break; }
            if (end) {
                memcpy(out + k, p + i, (size_t)(end - (p + i)));
                k += (size_t)(end - (p + i));
                i = (size_t)(end - p) - 1;
                continue;
            }
        }
        if (in_class && c == ']') in_class = 0;
        out[k++] = c;
    }
#undef PUT
    out[k] = '\0';
    *out_len = k;
    return out;
}

const char PRETOK_PROBE[] =
    "In the beginning God created the heaven and the earth. IT'S 1234567 o'clock, isn't it?!  \t\n\r\n"
    "    indented\n\xc3\x9c" "n\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xd9\xa1\xd9\xa2 "
    "\xf0\x9f\x91\x8b\xf0\x9f\x8f\xbd aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "
    "------------------------------------------------ 00000000000000000000000000000000 \xff\xfe\x00 end";
const size_t PRETOK_PROBE_LEN = sizeof PRETOK_PROBE - 1;

// A pattern PCRE2 gives up on (its match limit, or the JIT stack) for this short text would stop
// the encoding of real text with an error: such a tokenizer is refused when it is read.
static int probe(const PreRegex *re, char *err, size_t errlen) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re->code, NULL);
    pcre2_match_context *mc = pcre2_match_context_create(NULL);
    pcre2_jit_stack *stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, NULL);
    if (!md || !mc || !stack) ctron_fatal("out of memory for regex match data");
    pcre2_jit_stack_assign(mc, NULL, stack);
    pcre2_set_match_limit(mc, 1000000);
    const uint8_t *s = (const uint8_t *)PRETOK_PROBE;
    size_t n = sizeof PRETOK_PROBE - 1;
    int rc = 0;
    for (size_t from = 0; from <= n && (rc >= 0 || rc == PCRE2_ERROR_NOMATCH); from++)
        rc = pcre2_match(re->code, s, n, from, 0, md, mc);
    pcre2_match_context_free(mc);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(md);
    if (rc >= 0 || rc == PCRE2_ERROR_NOMATCH) return 0;
    PCRE2_UCHAR why[256];
    pcre2_get_error_message(rc, why, sizeof why);
    snprintf(err, errlen, "the pattern is too costly: PCRE2 gives up on a %zu-byte probe text (%s)", n,
             (const char *)why);
    return -1;
}

PreRegex *preregex_compile(const char *pattern, size_t len, int literal, char *err, size_t errlen) {
    PreRegex *re = xmalloc(sizeof *re);
    memset(re, 0, sizeof *re);
    if (literal && len == 0) {
        re->empty_literal = 1;
        return re;
    }
    // Unicode classes (UCP) over UTF-8; invalid UTF-8 in a subject is allowed and matches nothing.
    // PCRE2 takes no UCP with LITERAL (a literal has no classes).
    uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    int code;
    PCRE2_SIZE at;
    size_t n = len;
    char *spelled = literal ? NULL : onig_classes(pattern, len, &n);
    re->code = pcre2_compile((PCRE2_SPTR)(spelled ? spelled : pattern), n, opts, &code, &at, NULL);
    free(spelled);
    if (!re->code) {
        PCRE2_UCHAR why[256];
        pcre2_get_error_message(code, why, sizeof why);
        snprintf(err, errlen, "the pattern does not compile (PCRE2: %s, at character offset %zu)", (const char *)why,
                 (size_t)at);
        free(re);
        return NULL;
    }
    re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE) == 0;
    if (probe(re, err, errlen) != 0) {
        preregex_free(re);
        return NULL;
    }
    return re;
}

void preregex_free(PreRegex *re) {
    if (!re) return;
    pcre2_code_free(re->code);
    free(re);
}

// A span of the subject: a match or the gap before one.
typedef struct { size_t start, end; int is_match; } Span;

// tokenizers' SplitDelimiterBehavior, one span at a time: at most one piece waits for the next
// span (to be joined or sent), then goes to fn unless it is removed or empty.
typedef struct {
    SplitBehavior behavior;
    int invert;
    PieceFn fn;
    void *ctx;
    Span pending;
    int has_pending, prev_match;
} Shaper;

static void emit(Shaper *sh, Span x) {
    if (!x.is_match && x.end > x.start) sh->fn(sh->ctx, x.start, x.end);
}

static void flush(Shaper *sh) {
    if (sh->has_pending) emit(sh, sh->pending);
    sh->has_pending = 0;
}

static void shape(Shaper *sh, size_t start, size_t end, int is_match) {
    Span x = {start, end, is_match ^ sh->invert};
    int joins = 0;
    switch (sh->behavior) {
    case SPLIT_REMOVED: emit(sh, x); return;   // a match (is_match) is dropped by emit
    case SPLIT_ISOLATED: x.is_match = 0; emit(sh, x); return;
    case SPLIT_CONTIGUOUS: joins = x.is_match == sh->prev_match; break;   // same kind as the span before
    case SPLIT_MERGED_WITH_PREVIOUS: joins = x.is_match && !sh->prev_match; break;   // a match after a gap
    case SPLIT_MERGED_WITH_NEXT: joins = !x.is_match && sh->prev_match; break;   // a gap after a match
    }
    sh->prev_match = x.is_match;
    x.is_match = 0;
    if (joins && sh->has_pending) {
        sh->pending.end = x.end;
        if (sh->behavior == SPLIT_MERGED_WITH_NEXT) flush(sh);   // the match took its gap; nothing more joins
        return;
    }
    flush(sh);
    sh->pending = x;
    sh->has_pending = 1;
}

// A JIT stack larger than PCRE2's default 32 KiB, made when a match needs it.
typedef struct {
    pcre2_match_context *mc;
    pcre2_jit_stack *stack;
} BigStack;

// One search from offset `from`: 1 with the match in [*ms, *me), 0 when there is none.
static int search(const PreRegex *re, pcre2_match_data *md, BigStack *big, const uint8_t *s, size_t n, size_t from,
                  size_t *ms, size_t *me) {
    int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, from, 0, md, big->mc);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !big->mc) {   // retry with up to 64 MiB
        big->mc = pcre2_match_context_create(NULL);
        big->stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, NULL);
        if (!big->mc || !big->stack) ctron_fatal("out of memory for the pre-tokenizer's regex stack");
        pcre2_jit_stack_assign(big->mc, NULL, big->stack);
        rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, from, 0, md, big->mc);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) {
        PCRE2_UCHAR why[256];
        pcre2_get_error_message(rc, why, sizeof why);
        ctron_fatal("the pre-tokenizer's regex failed at byte %zu of a %zu-byte piece: %s", from, n, (const char *)why);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *ms = ov[0];
    *me = ov[1];
    return 1;
}

// Matches and the gaps between them, covering s in order, to the shaper (tokenizers' find_matches
// over the onig crate's find_iter: an empty match right where the previous match ended is skipped
// by moving one character on).
static void find_matches(const PreRegex *re, const uint8_t *s, size_t n, Shaper *sh) {
    if (n == 0 || re->empty_literal) {
        shape(sh, 0, n, 0);
        return;
    }
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re->code, NULL);
    BigStack big = {NULL, NULL};
    if (!md) ctron_fatal("out of memory for regex match data");
    size_t last_end = 0, prev = 0, ms, me, last_match_end = 0;
    int have_last = 0;
    while (last_end <= n && search(re, md, &big, s, n, last_end, &ms, &me)) {
        if (me == ms && have_last && last_match_end == me) {
            size_t len = 1;
            if (last_end < n) utf8_next(s, n, last_end, &len);
            last_end += len;
            continue;
        }
        last_end = me;
        last_match_end = me;
        have_last = 1;
        if (prev != ms) shape(sh, prev, ms, 0);
        shape(sh, ms, me, 1);
        prev = me;
    }
    if (prev != n) shape(sh, prev, n, 0);
    if (big.mc) {
        pcre2_match_context_free(big.mc);
        pcre2_jit_stack_free(big.stack);
    }
    pcre2_match_data_free(md);
}

void preregex_each(const PreRegex *re, SplitBehavior behavior, int invert, const uint8_t *s, size_t n, PieceFn fn,
                   void *ctx) {
    Shaper sh = {behavior, invert != 0, fn, ctx, {0, 0, 0}, 0, 0};
    find_matches(re, s, n, &sh);
    flush(&sh);
}

// Rust's regex \w: Alphabetic, Mark, Decimal_Number, Connector_Punctuation, Join_Control.
static pcre2_code *word_re;
static void compile_word_re(void) {
    static const char pat[] = "[" WORD_ITEMS "]";
    int code;
    PCRE2_SIZE at;
    word_re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &code,
                            &at, NULL);
    if (!word_re) ctron_fatal("PCRE2 cannot compile the word class %s (error %d)", pat, code);
}

int unicode_is_word(uint32_t cp) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, compile_word_re);
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    uint8_t u[4];
    size_t n;
    if (cp < 0x80) { u[0] = (uint8_t)cp; n = 1; }
    else if (cp < 0x800) { u[0] = (uint8_t)(0xC0 | cp >> 6); u[1] = (uint8_t)(0x80 | (cp & 0x3F)); n = 2; }
    else if (cp < 0x10000) {
        u[0] = (uint8_t)(0xE0 | cp >> 12); u[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)); u[2] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (uint8_t)(0xF0 | cp >> 18); u[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
        u[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)); u[3] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 4;
    }
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md) ctron_fatal("out of memory for regex match data");
    int rc = pcre2_match(word_re, u, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}
