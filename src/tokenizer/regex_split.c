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
    re->code = pcre2_compile((PCRE2_SPTR)pattern, len, opts, &code, &at, NULL);
    if (!re->code) {
        PCRE2_UCHAR why[256];
        pcre2_get_error_message(code, why, sizeof why);
        snprintf(err, errlen, "the pattern does not compile (PCRE2: %s, at character offset %zu)", (const char *)why,
                 (size_t)at);
        free(re);
        return NULL;
    }
    re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE) == 0;
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
    static const char pat[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]";
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
