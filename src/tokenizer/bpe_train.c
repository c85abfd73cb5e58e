// Learning BPE merges. The corpus is reduced to its distinct pre-tokens ("words") with counts;
// pair counts are kept up to date incrementally, and a lazy max-heap finds the best pair.
//
// Why a lazy heap is exact: merging (a,b) into X only lowers the counts of existing pairs and
// creates pairs that contain X, which are new. So a heap entry's count is never below the pair's
// true count; when the top entry is out of date it is pushed back with the true count, and the
// first up-to-date top is the best pair (ties broken by the smallest (a, b), part of the order).
#include <string.h>
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "util/common.h"

typedef struct {
    int64_t count;            // occurrences in the corpus (word count x occurrences in the word)
    int32_t *words;           // words that contain or once contained the pair (checked on use)
    int32_t n_words, cap_words;
    int32_t touched;          // last merge step that created occurrences of it, -1 if none
} PairStat;

typedef struct { int64_t count; int32_t a, b, pair; } HeapEntry;

typedef struct {
    int32_t *sym;             // every word's symbols; a word shrinks in place as it merges
    size_t *woff;
    int32_t *wlen;
    int64_t *wcount;
    int32_t n_words;
    PairTable pairs;
    PairStat *ps;             // per pair id
    int32_t ps_cap;
    HeapEntry *heap;
    size_t n_heap, cap_heap;
} Trainer;

static void *grow(void *p, size_t bytes) {
    void *q = realloc(p, bytes);
    if (!q) ctron_fatal("out of memory while training the tokenizer (%zu bytes)", bytes);
    return q;
}

// x goes before y in the heap: more frequent, then the smaller pair.
static int better(const HeapEntry *x, const HeapEntry *y) {
    if (x->count != y->count) return x->count > y->count;
    if (x->a != y->a) return x->a < y->a;
    return x->b < y->b;
}

static void heap_push(Trainer *t, int32_t pair) {
    if (t->n_heap == t->cap_heap) {
        t->cap_heap = t->cap_heap ? 2 * t->cap_heap : 4096;
        t->heap = grow(t->heap, t->cap_heap * sizeof *t->heap);
    }
    HeapEntry e = {t->ps[pair].count, t->pairs.a[pair], t->pairs.b[pair], pair};
    size_t i = t->n_heap++;
    while (i > 0 && better(&e, &t->heap[(i - 1) / 2])) { t->heap[i] = t->heap[(i - 1) / 2]; i = (i - 1) / 2; }
    t->heap[i] = e;
}

static HeapEntry heap_pop(Trainer *t) {
    HeapEntry top = t->heap[0], last = t->heap[--t->n_heap];
    size_t i = 0, n = t->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && better(&t->heap[c + 1], &t->heap[c])) c++;
        if (!better(&t->heap[c], &last)) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (n) t->heap[i] = last;
    return top;
}

// Adds delta occurrences of (a, b); when w >= 0, records that word w contains the pair.
static int32_t pair_add(Trainer *t, int32_t a, int32_t b, int64_t delta, int32_t w) {
    int added;
    int32_t id = pairtab_intern(&t->pairs, a, b, &added);
    if (added) {
        if (id >= t->ps_cap) {
            t->ps_cap = t->ps_cap ? 2 * t->ps_cap : 4096;
            t->ps = grow(t->ps, (size_t)t->ps_cap * sizeof *t->ps);
        }
        memset(&t->ps[id], 0, sizeof t->ps[id]);
        t->ps[id].touched = -1;
    }
    PairStat *p = &t->ps[id];
    p->count += delta;
    if (w >= 0 && (p->n_words == 0 || p->words[p->n_words - 1] != w)) {   // words arrive in runs
        if (p->n_words == p->cap_words) {
            p->cap_words = p->cap_words ? 2 * p->cap_words : 4;
            p->words = grow(p->words, (size_t)p->cap_words * sizeof *p->words);
        }
        p->words[p->n_words++] = w;
    }
    return id;
}

// Distinct pre-tokens of the corpus with their counts, in order of first appearance.
static void count_words(Trainer *t, const uint8_t *text, size_t n, BpeTrainStats *st) {
    StrTable words;
    strtab_init(&words);
    int64_t *count = NULL;
    int32_t cap = 0;
    for (size_t i = 0, j; i < n; i = j, st->n_pretokens++) {
        j = pretok_next(text, n, i);
        int added;
        int32_t id = strtab_intern(&words, text + i, j - i, &added);
        if (added) {
            if (id >= cap) { cap = cap ? 2 * cap : 4096; count = grow(count, (size_t)cap * sizeof *count); }
            count[id] = 0;
        }
        count[id]++;
    }
    t->n_words = words.n;
    t->sym = xmalloc((words.pool_len ? words.pool_len : 1) * sizeof *t->sym);
    t->woff = xmalloc((size_t)(words.n ? words.n : 1) * sizeof *t->woff);
    t->wlen = xmalloc((size_t)(words.n ? words.n : 1) * sizeof *t->wlen);
    t->wcount = xmalloc((size_t)(words.n ? words.n : 1) * sizeof *t->wcount);
    for (size_t i = 0; i < words.pool_len; i++) t->sym[i] = words.pool[i];
    for (int32_t w = 0; w < words.n; w++) {
        t->woff[w] = words.off[w];
        t->wlen[w] = (int32_t)words.len[w];
        t->wcount[w] = count[w];
    }
    st->n_unique = (size_t)words.n;
    free(count);
    strtab_free(&words);
}

// Records that pair q (which contains the new token x) gained occurrences at this step.
static void note_touched(Trainer *t, int32_t q, int32_t step, int32_t **touched, int32_t *n, int32_t *cap) {
    if (t->ps[q].touched == step) return;
    t->ps[q].touched = step;
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 256;
        *touched = grow(*touched, (size_t)*cap * sizeof **touched);
    }
    (*touched)[(*n)++] = q;
}

// Merges every occurrence of pair p = (a, b) into token x, left to right, in the words that hold
// it. Only the neighbours of an occurrence change: (l, a) becomes (l', x) and (b, r) becomes
// (x, r), where l' is the symbol already written on the left (x itself after "a b a b"). So the
// cost is one scan of each word plus a few hash lookups per occurrence. Pairs created with x are
// appended to *touched (each once).
static void apply_merge(Trainer *t, int32_t p, int32_t x, int32_t step, int32_t **touched, int32_t *n_touched,
                        int32_t *cap_touched) {
    int32_t a = t->pairs.a[p], b = t->pairs.b[p];
    int32_t *list = t->ps[p].words, n_list = t->ps[p].n_words;
    t->ps[p].words = NULL;
    t->ps[p].n_words = t->ps[p].cap_words = 0;
    for (int32_t li = 0; li < n_list; li++) {
        int32_t w = list[li], len = t->wlen[w], k = 0;
        int32_t *s = t->sym + t->woff[w];
        int64_t c = t->wcount[w];
        for (int32_t i = 0; i < len;) {
            if (i + 1 < len && s[i] == a && s[i + 1] == b) {
                if (k > 0) {
                    t->ps[pairtab_find(&t->pairs, s[k - 1], a)].count -= c;
                    note_touched(t, pair_add(t, s[k - 1], x, c, w), step, touched, n_touched, cap_touched);
                }
                if (i + 2 < len) {
                    t->ps[pairtab_find(&t->pairs, b, s[i + 2])].count -= c;
                    note_touched(t, pair_add(t, x, s[i + 2], c, w), step, touched, n_touched, cap_touched);
                }
                t->ps[p].count -= c;
                s[k++] = x;
                i += 2;
            } else {
                s[k++] = s[i++];
            }
        }
        t->wlen[w] = k;   // a word listed twice, or merged away earlier, is scanned and left as is
    }
    free(list);
}

int bpe_train(Bpe *bpe, const uint8_t *text, size_t n, int vocab_size, BpeTrainStats *stats, char *err,
              size_t errlen) {
    memset(bpe, 0, sizeof *bpe);
    if (vocab_size < 256 || vocab_size > BPE_MAX_VOCAB) {
        snprintf(err, errlen, "vocabulary size %d is out of range, expected 256..%d", vocab_size, BPE_MAX_VOCAB);
        return -1;
    }
    double t0 = now_seconds();
    BpeTrainStats st = {.n_bytes = n};
    Trainer t;
    memset(&t, 0, sizeof t);
    pairtab_init(&t.pairs);
    count_words(&t, text, n, &st);
    for (int32_t w = 0; w < t.n_words; w++) {
        const int32_t *s = t.sym + t.woff[w];
        for (int32_t i = 0; i + 1 < t.wlen[w]; i++) pair_add(&t, s[i], s[i + 1], t.wcount[w], w);
    }
    for (int32_t p = 0; p < t.pairs.n; p++) heap_push(&t, p);

    int want = vocab_size - 256, n_merges = 0;
    int32_t (*merges)[2] = xmalloc((size_t)(want ? want : 1) * sizeof *merges);
    int32_t *touched = NULL, n_touched = 0, cap_touched = 0;
    while (n_merges < want && t.n_heap > 0) {
        HeapEntry e = heap_pop(&t);
        int64_t now = t.ps[e.pair].count;
        if (now <= 0) continue;
        if (now != e.count) { heap_push(&t, e.pair); continue; }   // stale: back in with its true count
        merges[n_merges][0] = e.a;
        merges[n_merges][1] = e.b;
        n_touched = 0;
        apply_merge(&t, e.pair, 256 + n_merges, n_merges, &touched, &n_touched, &cap_touched);
        for (int32_t i = 0; i < n_touched; i++)
            if (t.ps[touched[i]].count > 0) heap_push(&t, touched[i]);
        n_merges++;
    }
    for (int32_t p = 0; p < t.pairs.n; p++) free(t.ps[p].words);
    free(t.ps);
    free(t.heap);
    free(touched);
    free(t.sym);
    free(t.woff);
    free(t.wlen);
    free(t.wcount);
    pairtab_free(&t.pairs);
    int rc = bpe_from_merges(bpe, (const int32_t(*)[2])merges, n_merges, err, errlen);
    free(merges);
    st.seconds = now_seconds() - t0;
    if (stats) *stats = st;
    return rc;
}
