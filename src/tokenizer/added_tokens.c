// Added-token matching (see added_tokens.h); tokenizers' added_vocabulary.rs find_matches.
#include "tokenizer/added_tokens.h"
#include <stdlib.h>
#include <string.h>
#include "tokenizer/bytelevel.h"
#include "tokenizer/regex_split.h"
#include "util/common.h"

// Per phase, the tokens grouped by their first byte: order[first[b] .. first[b+1]).
struct BpeAddedIndex {
    int32_t *order[2];
    int32_t first[2][257];
};

BpeAddedIndex *added_index_build(const BpeAdded *added, int n) {
    if (n == 0) return NULL;
    BpeAddedIndex *ix = xmalloc(sizeof *ix);
    memset(ix, 0, sizeof *ix);
    for (int p = 0; p < 2; p++) {
        int32_t count[257] = {0};
        for (int i = 0; i < n; i++)
            if (added[i].normalized == p && added[i].len > 0) count[added[i].content[0] + 1]++;
        for (int b = 0; b < 256; b++) count[b + 1] += count[b];
        memcpy(ix->first[p], count, sizeof count);
        ix->order[p] = xmalloc((size_t)(count[256] ? count[256] : 1) * sizeof(int32_t));
        for (int i = 0; i < n; i++)
            if (added[i].normalized == p && added[i].len > 0) ix->order[p][count[added[i].content[0]]++] = i;
    }
    return ix;
}

void added_index_free(BpeAddedIndex *ix) {
    if (!ix) return;
    free(ix->order[0]);
    free(ix->order[1]);
    free(ix);
}

int unicode_is_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

// The code point of the character that ends at s[end) (end > 0), and where it starts.
static uint32_t char_before(const uint8_t *s, size_t end, size_t *start) {
    for (size_t back = 1; back <= 4 && back <= end; back++) {
        size_t i = end - back, len;
        if (back < 4 && i > 0 && (s[i] & 0xC0) == 0x80) continue;   // a continuation byte: look further back
        uint32_t cp = utf8_next(s, end, i, &len);
        if (i + len == end) { *start = i; return cp; }
        break;
    }
    *start = end - 1;   // invalid UTF-8: one byte, no character
    return UINT32_MAX;
}

// The longest token of the phase that matches at s[i], or -1.
static int longest_at(const BpeAddedIndex *ix, const BpeAdded *added, int phase, const uint8_t *s, size_t n,
                      size_t i) {
    int best = -1;
    for (int32_t k = ix->first[phase][s[i]]; k < ix->first[phase][s[i] + 1]; k++) {
        const BpeAdded *a = &added[ix->order[phase][k]];
        if (a->len <= n - i && (best < 0 || a->len > added[best].len) && memcmp(s + i, a->content, a->len) == 0)
            best = ix->order[phase][k];
    }
    return best;
}

static int word_before(const uint8_t *s, size_t at) {
    size_t st;
    return at > 0 && unicode_is_word(char_before(s, at, &st));
}

static int word_after(const uint8_t *s, size_t n, size_t at) {
    size_t len;
    return at < n && unicode_is_word(utf8_next(s, n, at, &len));
}

static void push(AddedSpan **spans, size_t *cap, size_t *k, size_t start, size_t end, int32_t id) {
    if (*k == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        *spans = realloc(*spans, *cap * sizeof **spans);
        if (!*spans) ctron_fatal("out of memory splitting on added tokens");
    }
    (*spans)[(*k)++] = (AddedSpan){start, end, id};
}

size_t added_find(const BpeAddedIndex *ix, const BpeAdded *added, int phase, const uint8_t *s, size_t n,
                  AddedSpan **spans, size_t *cap) {
    size_t k = 0;
    if (n == 0) return 0;
    if (!ix || ix->first[phase][256] == 0) {
        push(spans, cap, &k, 0, n, -1);
        return 1;
    }
    size_t done = 0;   // everything before it is in a span
    for (size_t i = 0; i < n;) {
        int t = longest_at(ix, added, phase, s, n, i);
        if (t < 0) { i++; continue; }
        const BpeAdded *a = &added[t];
        size_t start = i, stop = i + a->len;
        i = stop;   // the search goes on after the match, kept or not
        if (a->single_word && (word_before(s, start) || word_after(s, n, stop))) continue;
        if (a->lstrip) {
            size_t st;
            while (start > done) {
                uint32_t cp = char_before(s, start, &st);
                if (!unicode_is_space(cp) || st < done) break;
                start = st;
            }
        }
        if (a->rstrip) {
            size_t len;
            while (stop < n && unicode_is_space(utf8_next(s, n, stop, &len))) stop += len;
            i = stop;
        }
        if (done < start) push(spans, cap, &k, done, start, -1);
        push(spans, cap, &k, start, stop, a->id);
        done = stop;
    }
    if (done < n) push(spans, cap, &k, done, n, -1);
    return k;
}
