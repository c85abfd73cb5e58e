// Learning BPE merges. The corpus is reduced to its distinct pre-tokens ("words") with counts;
// pair counts are kept up to date incrementally, and a lazy max-heap finds the best pair.
//
// Why a lazy heap is exact: merging (a,b) into X only lowers the counts of existing pairs and
// creates pairs that contain X, which are new. So a heap entry's count is never below the pair's
// true count; when the top entry is out of date it is pushed back with the true count, and the
// first up-to-date top is the best pair (ties broken by the smallest (a, b), part of the order).
#include <string.h>
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/bytelevel.h"
#include "tokenizer/regex_split.h"
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

// Word counting: the distinct pieces and how often each occurs.
typedef struct {
    StrTable words;
    int64_t *count;
    int32_t cap;
    const uint8_t *text;
    BpeTrainStats *st;
} WordCount;

static void count_piece(void *ctx, size_t start, size_t end) {
    WordCount *wc = ctx;
    int added;
    int32_t id = strtab_intern(&wc->words, wc->text + start, end - start, &added);
    if (added) {
        if (id >= wc->cap) {
            wc->cap = wc->cap ? 2 * wc->cap : 4096;
            wc->count = grow(wc->count, (size_t)wc->cap * sizeof *wc->count);
        }
        wc->count[id] = 0;
    }
    wc->count[id]++;
    wc->st->n_pretokens++;
}

// Distinct pieces of the corpus with their counts, in order of first appearance: the text between
// the special tokens, cut by GPT-2's pattern.
static void count_words(Trainer *t, const PreRegex *re, const BpeAdded *special, int n_special, const uint8_t *text,
                        size_t n, BpeTrainStats *st) {
    WordCount wc = {.text = text, .st = st};
    strtab_init(&wc.words);
    BpeAddedIndex *ix = added_index_build(special, n_special);
    AddedSpan *spans = NULL;
    size_t cap = 0, k = added_find(ix, special, 0, text, n, &spans, &cap);
    for (size_t i = 0; i < k; i++)
        if (spans[i].id < 0) {
            wc.text = text + spans[i].start;
            preregex_each(re, SPLIT_ISOLATED, 0, wc.text, spans[i].end - spans[i].start, count_piece, &wc);
        }
    free(spans);
    added_index_free(ix);
    StrTable *words = &wc.words;
    t->n_words = words->n;
    t->sym = xmalloc((words->pool_len ? words->pool_len : 1) * sizeof *t->sym);
    t->woff = xmalloc((size_t)(words->n ? words->n : 1) * sizeof *t->woff);
    t->wlen = xmalloc((size_t)(words->n ? words->n : 1) * sizeof *t->wlen);
    t->wcount = xmalloc((size_t)(words->n ? words->n : 1) * sizeof *t->wcount);
    for (size_t i = 0; i < words->pool_len; i++) t->sym[i] = words->pool[i];
    for (int32_t w = 0; w < words->n; w++) {
        t->woff[w] = words->off[w];
        t->wlen[w] = (int32_t)words->len[w];
        t->wcount[w] = wc.count[w];
    }
    st->n_unique = (size_t)words->n;
    free(wc.count);
    strtab_free(words);
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

// The special tokens as added tokens (content as given; ids set later). -1 with a message when one
// is empty or repeated.
static int make_specials(const char *const *special, int n_special, BpeAdded *out, char *err, size_t errlen) {
    for (int i = 0; i < n_special; i++) {
        size_t len = strlen(special[i]);
        if (len == 0) {
            snprintf(err, errlen, "special token %d is empty", i + 1);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(special[i], special[j]) == 0) {
                snprintf(err, errlen, "special token '%s' is given twice", special[i]);
                return -1;
            }
        out[i] = (BpeAdded){.content = (uint8_t *)special[i], .len = (uint32_t)len, .special = 1};
    }
    return 0;
}

// The tokenizer of the learned tokens (ids in toks), merges and special tokens.
static void build(Bpe *bpe, const StrTable *toks, const int32_t (*merges)[3], int n_merges, const BpeAdded *special,
                  int n_special, PreRegex *re) {
    // A special token whose text is a learned token's byte-level string is that token, as tokenizers
    // resolves added tokens by their string; the others follow the learned tokens.
    int32_t *ids = xmalloc((size_t)(n_special ? n_special : 1) * sizeof *ids);
    int32_t next = toks->n;
    for (int i = 0; i < n_special; i++) {
        uint8_t *b = xmalloc(special[i].len);
        int mapped;
        size_t len = bytelevel_decode((const char *)special[i].content, special[i].len, b, &mapped);
        int32_t same = mapped ? strtab_find(toks, b, len) : -1;
        ids[i] = same >= 0 ? same : next++;
        free(b);
    }
    bpe_init_tables(bpe, next);
    snprintf(bpe->source, sizeof bpe->source, "ctron train");
    for (int32_t id = 0; id < toks->n; id++) bpe_set_token(bpe, id, strtab_str(toks, id), toks->len[id], TOK_MODEL);
    for (int b = 0; b < 256; b++) bpe->byte_tok[b] = b;
    for (int r = 0; r < n_merges; r++) bpe_add_merge(bpe, merges[r][0], merges[r][1], merges[r][2]);
    bpe->added = xmalloc((size_t)(n_special ? n_special : 1) * sizeof *bpe->added);
    bpe->n_added = n_special;
    for (int i = 0; i < n_special; i++) {
        BpeAdded *a = &bpe->added[i];
        *a = special[i];
        a->id = ids[i];
        a->content = xmalloc(a->len);
        memcpy(a->content, special[i].content, a->len);
        bpe_set_token(bpe, a->id, a->content, a->len, (bpe->tok_kind[a->id] & TOK_MODEL) | TOK_ADDED | TOK_SPECIAL);
    }
    free(ids);
    bpe->added_index = added_index_build(bpe->added, bpe->n_added);
    bpe->pre[0] = (PreStep){.kind = PRE_BYTE_LEVEL, .re = re};
    bpe->n_pre = 1;
}

int bpe_train(Bpe *bpe, const uint8_t *text, size_t n, int vocab_size, const char *const *special, int n_special,
              BpeTrainStats *stats, char *err, size_t errlen) {
    memset(bpe, 0, sizeof *bpe);
    if (n_special < 0 || vocab_size < 256 + n_special || vocab_size > BPE_MAX_VOCAB) {
        snprintf(err, errlen, "vocabulary size %d is out of range, expected %d..%d (256 bytes%s)", vocab_size,
                 256 + (n_special > 0 ? n_special : 0), BPE_MAX_VOCAB, n_special > 0 ? " + the special tokens" : "");
        return -1;
    }
    BpeAdded *specials = xmalloc((size_t)(n_special ? n_special : 1) * sizeof *specials);
    if (make_specials(special, n_special, specials, err, errlen) != 0) {
        free(specials);
        return -1;
    }
    char why[320];
    PreRegex *re = preregex_compile(PRETOK_GPT2_PATTERN, strlen(PRETOK_GPT2_PATTERN), 0, why, sizeof why);
    if (!re) ctron_fatal("GPT-2's pattern does not compile: %s", why);
    double t0 = now_seconds();
    BpeTrainStats st = {.n_bytes = n};
    Trainer t;
    memset(&t, 0, sizeof t);
    pairtab_init(&t.pairs);
    count_words(&t, re, specials, n_special, text, n, &st);
    for (int32_t w = 0; w < t.n_words; w++) {
        const int32_t *s = t.sym + t.woff[w];
        for (int32_t i = 0; i + 1 < t.wlen[w]; i++) pair_add(&t, s[i], s[i + 1], t.wcount[w], w);
    }
    for (int32_t p = 0; p < t.pairs.n; p++) heap_push(&t, p);

    // Tokens by their bytes: ids 0..255 the bytes, then each new string in the order it is made.
    StrTable toks;
    strtab_init(&toks);
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        strtab_intern(&toks, &byte, 1, NULL);
    }
    int want = vocab_size - n_special, n_merges = 0, cap_merges = 0;
    int32_t (*merges)[3] = NULL;   // a, b, the token they make
    int32_t *touched = NULL, n_touched = 0, cap_touched = 0;
    uint8_t *joined = NULL;
    size_t cap_joined = 0;
    while (toks.n < want && t.n_heap > 0) {
        HeapEntry e = heap_pop(&t);
        int64_t now = t.ps[e.pair].count;
        if (now <= 0) continue;
        if (now != e.count) { heap_push(&t, e.pair); continue; }   // stale: back in with its true count
        size_t la = toks.len[e.a], lb = toks.len[e.b];
        if (la + lb > cap_joined) {
            cap_joined = 2 * (la + lb);
            joined = grow(joined, cap_joined);
        }
        memcpy(joined, strtab_str(&toks, e.a), la);
        memcpy(joined + la, strtab_str(&toks, e.b), lb);
        int32_t x = strtab_intern(&toks, joined, la + lb, NULL);   // an existing string keeps its token
        if (n_merges == cap_merges) {
            cap_merges = cap_merges ? 2 * cap_merges : 1024;
            merges = grow(merges, (size_t)cap_merges * sizeof *merges);
        }
        merges[n_merges][0] = e.a;
        merges[n_merges][1] = e.b;
        merges[n_merges][2] = x;
        n_touched = 0;
        apply_merge(&t, e.pair, x, n_merges, &touched, &n_touched, &cap_touched);
        for (int32_t i = 0; i < n_touched; i++)
            if (t.ps[touched[i]].count > 0) heap_push(&t, touched[i]);
        n_merges++;
    }
    for (int32_t p = 0; p < t.pairs.n; p++) free(t.ps[p].words);
    free(t.ps);
    free(t.heap);
    free(touched);
    free(joined);
    free(t.sym);
    free(t.woff);
    free(t.wlen);
    free(t.wcount);
    pairtab_free(&t.pairs);
    build(bpe, &toks, (const int32_t(*)[3])merges, n_merges, specials, n_special, re);
    strtab_free(&toks);
    free(merges);
    free(specials);
    st.seconds = now_seconds() - t0;
    if (stats) *stats = st;
    return 0;
}
