// Encoding: added tokens, the pre-tokenizer pipeline, then the model's merges on each piece,
// exactly as tokenizers' Tokenizer.encode and its BPE model (word.rs merge_all) do.
#include <string.h>
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/bytelevel.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/regex_split.h"
#include "util/common.h"

// ---- splitting ---------------------------------------------------------------------------------

typedef struct {
    const Bpe *bpe;
    BpePieceFn fn;
    void *ctx;
    uint8_t *prefixed[BPE_MAX_PRE_STEPS];     // per step: " " + the piece (ByteLevel's add_prefix_space)
    size_t prefixed_cap[BPE_MAX_PRE_STEPS];
    AddedSpan *spans[2];
    size_t spans_cap[2];
    NormBuf norm, norm_tmp;   // the normalized text of the current stretch, and a step's between steps
    const uint8_t **seg_orig; // optional: where in the text the current stretch begins (progress)
} Splitter;

static void run_step(Splitter *sp, int step, const uint8_t *s, size_t n, int first);

// A piece [start, end) of the string that step `step` cut goes on to the next step; first: that
// string begins the text (Metaspace's prepend_scheme "first" looks at it).
typedef struct {
    Splitter *sp;
    int step, first;
    const uint8_t *s;
} NextStep;

static void next_step(void *ctx, size_t start, size_t end) {
    NextStep *x = ctx;
    run_step(x->sp, x->step + 1, x->s + start, end - start, x->first && start == 0);
}

// The step's own copy of a piece, cap bytes long at least.
static uint8_t *step_buffer(Splitter *sp, int step, size_t cap) {
    if (cap > sp->prefixed_cap[step]) {
        sp->prefixed_cap[step] = 2 * cap;
        free(sp->prefixed[step]);
        sp->prefixed[step] = xmalloc(sp->prefixed_cap[step]);
    }
    return sp->prefixed[step];
}

// tokenizers' Metaspace: every ' ' becomes the replacement, which is prepended where the scheme
// says (not before a piece already starting with it); with split, a piece begins at each
// replacement (MergedWithNext).
static void metaspace(Splitter *sp, int step, const uint8_t *s, size_t n, int first) {
    const PreStep *st = &sp->bpe->pre[step];
    size_t rl = (size_t)st->repl_len, spaces = 0;
    for (size_t i = 0; i < n; i++) spaces += s[i] == ' ';
    uint8_t *out = step_buffer(sp, step, n + (spaces + 1) * rl);
    size_t m = 0;
    int starts = n >= rl ? memcmp(s, st->repl, rl) == 0 : 0;
    if (!starts && s[0] == ' ') starts = 1;   // its space becomes the replacement
    if (!starts && (st->prepend == PREPEND_ALWAYS || (st->prepend == PREPEND_FIRST && first))) {
        memcpy(out, st->repl, rl);
        m = rl;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(out + m, st->repl, rl);
            m += rl;
        } else {
            out[m++] = s[i];
        }
    }
    if (!st->split) {
        run_step(sp, step + 1, out, m, first);
        return;
    }
    for (size_t start = 0, i = 1; i <= m; i++)   // a piece begins at each replacement but the first byte
        if (i == m || (m - i >= rl && memcmp(out + i, st->repl, rl) == 0)) {
            run_step(sp, step + 1, out + start, i - start, first && start == 0);
            start = i;
        }
}

// Runs pre-tokenizer steps step.. on s[0..n) (n > 0), handing the final pieces to the callback.
static void run_step(Splitter *sp, int step, const uint8_t *s, size_t n, int first) {
    const Bpe *bpe = sp->bpe;
    if (step == bpe->n_pre) {
        sp->fn(sp->ctx, s, n, -1);
        return;
    }
    const PreStep *st = &bpe->pre[step];
    if (st->kind == PRE_LEGACY_BYTES) {
        for (size_t i = 0, j; i < n; i = j) {
            j = pretok_next(s, n, i);
            run_step(sp, step + 1, s + i, j - i, first && i == 0);
        }
        return;
    }
    if (st->kind == PRE_METASPACE) {
        metaspace(sp, step, s, n, first);
        return;
    }
    if (st->kind == PRE_BYTE_LEVEL && st->add_prefix_space && s[0] != ' ') {
        uint8_t *p = step_buffer(sp, step, n + 1);
        p[0] = ' ';
        memcpy(p + 1, s, n);
        s = p;
        n++;
    }
    if (!st->re) {   // ByteLevel without its regex: the piece as it is
        run_step(sp, step + 1, s, n, first);
        return;
    }
    SplitBehavior b = st->kind == PRE_SPLIT ? (SplitBehavior)st->behavior : SPLIT_ISOLATED;
    NextStep next = {sp, step, first, s};
    preregex_each(st->re, b, st->kind == PRE_SPLIT && st->invert, s, n, next_step, &next);
}

static void split_text(const Bpe *bpe, const uint8_t *text, size_t n, BpePieceFn fn, void *ctx,
                       const uint8_t **seg_orig) {
    Splitter sp;
    memset(&sp, 0, sizeof sp);
    sp.bpe = bpe;
    sp.fn = fn;
    sp.ctx = ctx;
    sp.seg_orig = seg_orig;
    // Added tokens with normalized false on the text; the normalizer on each stretch between them;
    // then the added tokens with normalized true in the normalized stretches (tokenizers'
    // AddedVocabulary::extract_and_normalize).
    size_t n0 = added_find(bpe->added_index, bpe->added, 0, text, n, &sp.spans[0], &sp.spans_cap[0]);
    for (size_t i = 0; i < n0; i++) {
        AddedSpan a = sp.spans[0][i];
        if (a.id >= 0) {
            fn(ctx, text + a.start, a.end - a.start, a.id);
            continue;
        }
        if (seg_orig) *seg_orig = text + a.start;
        size_t len;
        const uint8_t *seg = normalize_apply(bpe->norm, bpe->n_norm, text + a.start, a.end - a.start, &sp.norm,
                                            &sp.norm_tmp, &len);
        size_t n1 = added_find(bpe->added_index, bpe->added, 1, seg, len, &sp.spans[1], &sp.spans_cap[1]);
        for (size_t j = 0; j < n1; j++) {
            AddedSpan b = sp.spans[1][j];
            if (b.id >= 0) fn(ctx, seg + b.start, b.end - b.start, b.id);
            else if (b.end > b.start) run_step(&sp, 0, seg + b.start, b.end - b.start, a.start == 0 && b.start == 0);
        }
    }
    for (int i = 0; i < BPE_MAX_PRE_STEPS; i++) free(sp.prefixed[i]);
    free(sp.spans[0]);
    free(sp.spans[1]);
    normbuf_free(&sp.norm);
    normbuf_free(&sp.norm_tmp);
}

void bpe_split(const Bpe *bpe, const uint8_t *text, size_t n, BpePieceFn fn, void *ctx) {
    split_text(bpe, text, n, fn, ctx, NULL);
}

// ---- the model on one piece ------------------------------------------------------------------

// Scratch space for one piece: a doubly linked list of symbols and a min-heap of candidate merges
// keyed by (rank, position).
typedef struct {
    int32_t *sym, *prev, *next;
    int64_t *heap;            // rank << 32 | position: ordering the keys orders by (rank, position)
    size_t cap, n_heap;
} Scratch;

static void scratch_reserve(Scratch *s, size_t len) {
    if (len <= s->cap) return;
    free(s->sym); free(s->prev); free(s->next); free(s->heap);
    s->cap = len < ((size_t)1 << 20) ? len * 2 : len;   // one huge piece (a text with no pre-tokenizer): exact
    s->sym = xmalloc(s->cap * sizeof *s->sym);
    s->prev = xmalloc(s->cap * sizeof *s->prev);
    s->next = xmalloc(s->cap * sizeof *s->next);
    s->heap = xmalloc(s->cap * 3 * sizeof *s->heap);   // len-1 initial entries + 2 per merge
}

static void heap_push(Scratch *s, int64_t key) {
    size_t i = s->n_heap++;
    while (i > 0 && s->heap[(i - 1) / 2] > key) { s->heap[i] = s->heap[(i - 1) / 2]; i = (i - 1) / 2; }
    s->heap[i] = key;
}

static int64_t heap_pop(Scratch *s) {
    int64_t top = s->heap[0], last = s->heap[--s->n_heap];
    size_t i = 0, n = s->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && s->heap[c + 1] < s->heap[c]) c++;
        if (s->heap[c] >= last) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

static void push_pair(const Bpe *bpe, Scratch *s, int32_t pos) {
    int32_t r = bpe_pair_rank(bpe, s->sym[pos], s->sym[s->next[pos]]);
    if (r >= 0) heap_push(s, (int64_t)r << 32 | pos);
}

// SentencePiece-style: each character's token (an invalid byte is a character of its own). One the
// vocabulary lacks becomes its bytes' <0xXX> tokens with byte_fallback when all exist, else unk
// (fused runs with fuse_unk) or nothing without unk. As in tokenizers' merge_word, a pending unk is
// written only before the next character found in the vocabulary, or at the end: byte tokens in
// between come first.
static size_t initial_chars(const Bpe *bpe, const uint8_t *p, size_t len, int32_t *sym) {
    size_t m = 0, clen;
    int pending_unk = 0;
    for (size_t i = 0; i < len; i += clen) {
        utf8_next(p, len, i, &clen);
        int32_t t = -1;
        if (clen == 1 && p[i] < 0x80) {
            t = bpe->byte_tok[p[i]];
        } else {
            int32_t w = strtab_find(&bpe->whole, p + i, clen);
            if (w >= 0) t = bpe->whole_id[w];
        }
        if (t >= 0) {
            if (pending_unk) sym[m++] = bpe->unk;
            pending_unk = 0;
            sym[m++] = t;
            continue;
        }
        int fallback = bpe->byte_fallback;
        for (size_t k = 0; k < clen && fallback; k++) fallback = bpe->byte_fb[p[i + k]] >= 0;
        if (fallback) {
            for (size_t k = 0; k < clen; k++) sym[m++] = bpe->byte_fb[p[i + k]];
        } else if (bpe->unk >= 0) {
            if (pending_unk && !bpe->fuse_unk) sym[m++] = bpe->unk;
            pending_unk = 1;
        }
    }
    if (pending_unk) sym[m++] = bpe->unk;
    return m;
}

// The piece's first symbols: each byte's token. A byte the vocabulary lacks becomes unk (a run of
// them one unk with fuse_unk), or is dropped when there is no unk (tokenizers' merge_word).
static size_t initial_symbols(const Bpe *bpe, const uint8_t *p, size_t len, int32_t *sym) {
    if (bpe->char_level) return initial_chars(bpe, p, len, sym);
    size_t m = 0;
    int pending_unk = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t t = bpe->byte_tok[p[i]];
        if (t >= 0) {
            if (pending_unk) sym[m++] = bpe->unk;
            pending_unk = 0;
            sym[m++] = t;
        } else if (bpe->unk >= 0) {
            if (pending_unk && !bpe->fuse_unk) sym[m++] = bpe->unk;
            pending_unk = 1;
        }
    }
    if (pending_unk) sym[m++] = bpe->unk;
    return m;
}

// Applies merges to one piece, lowest rank first and left to right within a rank, which is GPT-2's
// "merge every occurrence of the best pair, repeat". A merge only creates pairs with its new
// token, so popping by (rank, position) and skipping stale entries visits merges in exactly that
// order (tokenizers' merge_all). Writes the tokens to out and returns how many.
static size_t encode_piece(const Bpe *bpe, Scratch *s, const uint8_t *p, size_t len, int32_t *out) {
    if (bpe->ignore_merges) {
        int32_t w = strtab_find(&bpe->whole, p, len);
        if (w >= 0) {
            out[0] = bpe->whole_id[w];
            return 1;
        }
    }
    scratch_reserve(s, len);
    size_t m = initial_symbols(bpe, p, len, s->sym);
    if (m == 0) return 0;
    for (size_t i = 0; i < m; i++) {
        s->prev[i] = (int32_t)i - 1;
        s->next[i] = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    s->n_heap = 0;
    for (size_t i = 0; i + 1 < m; i++) push_pair(bpe, s, (int32_t)i);
    while (s->n_heap) {
        int64_t key = heap_pop(s);
        int32_t r = (int32_t)(key >> 32), i = (int32_t)(key & 0xffffffff), j = s->next[i];
        // Stale entries: the left symbol was absorbed or either side has changed since.
        if (s->sym[i] < 0 || j < 0 || s->sym[i] != bpe->merges[r][0] || s->sym[j] != bpe->merges[r][1]) continue;
        s->sym[i] = bpe->merge_out[r];
        s->sym[j] = -1;
        s->next[i] = s->next[j];
        if (s->next[j] >= 0) s->prev[s->next[j]] = i;
        if (s->prev[i] >= 0) push_pair(bpe, s, s->prev[i]);
        if (s->next[i] >= 0) push_pair(bpe, s, i);
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = s->next[i]) out[k++] = s->sym[i];
    return k;
}

// ---- encoding ----------------------------------------------------------------------------------

struct BpeEncoder {
    const Bpe *bpe;
    int32_t *out;
    size_t n_out, cap_out;
    StrTable cache;           // distinct piece -> its tokens at cache_tok[cache_off[id]]
    int32_t *cache_tok;
    size_t *cache_off, cache_len, cache_cap, ids_cap;
    Scratch s;
    BpeProgressFn progress;   // optional: told how far it got about once a second
    void *progress_ctx;
    const uint8_t *text;
    const uint8_t *seg_orig;  // where the stretch being encoded begins in text (its pieces may be a
                              // normalized copy)
    size_t n_text, n_pieces;
    double last_report;
};
typedef struct BpeEncoder Encoder;

// The cache of encoded pieces is dropped when it grows past this many pieces (documents of a
// large JSONL file share it; memory stays bounded).
#define CACHE_MAX_PIECES (1 << 20)

static void report(Encoder *e, const uint8_t *p) {
    if (!e->progress || (++e->n_pieces & 0xFFFF) != 0) return;
    double now = now_seconds();
    if (now - e->last_report < 1.0) return;
    if (p < e->text || p > e->text + e->n_text) p = e->seg_orig;   // a prefixed or normalized copy
    if (!p || p < e->text || p > e->text + e->n_text) return;
    e->last_report = now;
    e->progress(e->progress_ctx, (size_t)(p - e->text), e->n_out);
}

static void out_reserve(Encoder *e, size_t more) {
    if (e->n_out + more <= e->cap_out) return;
    while (e->n_out + more > e->cap_out) e->cap_out = e->cap_out ? 2 * e->cap_out : 1024;
    e->out = realloc(e->out, e->cap_out * sizeof *e->out);
    if (!e->out) ctron_fatal("out of memory for %zu token ids", e->cap_out);
}

static void encode_cb(void *ctx, const uint8_t *p, size_t len, int32_t added) {
    Encoder *e = ctx;
    report(e, p);
    if (added >= 0) {
        out_reserve(e, 1);
        e->out[e->n_out++] = added;
        return;
    }
    if (len == 1 && !e->bpe->ignore_merges) {   // a lone byte: its token, no lookup
        out_reserve(e, 1);
        e->n_out += initial_symbols(e->bpe, p, 1, e->out + e->n_out);
        return;
    }
    if (e->cache.n >= CACHE_MAX_PIECES) {
        strtab_free(&e->cache);
        strtab_init(&e->cache);
        e->cache_len = 0;
    }
    int is_new;
    int32_t id = strtab_intern(&e->cache, p, len, &is_new);
    if (is_new) {
        if ((size_t)id >= e->ids_cap) {
            e->ids_cap = e->ids_cap ? 2 * e->ids_cap : 1024;
            e->cache_off = realloc(e->cache_off, (e->ids_cap + 1) * sizeof *e->cache_off);
            if (!e->cache_off) ctron_fatal("out of memory in the encoder cache");
        }
        if (e->cache_len + len > e->cache_cap) {
            while (e->cache_len + len > e->cache_cap) e->cache_cap = e->cache_cap ? 2 * e->cache_cap : 65536;
            e->cache_tok = realloc(e->cache_tok, e->cache_cap * sizeof *e->cache_tok);
            if (!e->cache_tok) ctron_fatal("out of memory in the encoder cache");
        }
        e->cache_off[id] = e->cache_len;
        e->cache_len += encode_piece(e->bpe, &e->s, p, len, e->cache_tok + e->cache_len);
        e->cache_off[id + 1] = e->cache_len;   // ids arrive in order, so the next start is our end
    }
    size_t m = e->cache_off[id + 1] - e->cache_off[id];
    out_reserve(e, m);
    memcpy(e->out + e->n_out, e->cache_tok + e->cache_off[id], m * sizeof *e->out);
    e->n_out += m;
}

BpeEncoder *bpe_encoder_new(const Bpe *bpe) {
    Encoder *e = xmalloc(sizeof *e);
    memset(e, 0, sizeof *e);
    e->bpe = bpe;
    strtab_init(&e->cache);
    out_reserve(e, 1);
    return e;
}

void bpe_encoder_free(BpeEncoder *e) {
    if (!e) return;
    free(e->s.sym); free(e->s.prev); free(e->s.next); free(e->s.heap);
    free(e->cache_tok);
    free(e->cache_off);
    strtab_free(&e->cache);
    free(e->out);
    free(e);
}

void bpe_encoder_push(BpeEncoder *e, const int32_t *ids, size_t n) {
    out_reserve(e, n);
    if (n) memcpy(e->out + e->n_out, ids, n * sizeof *ids);
    e->n_out += n;
}

void bpe_encoder_add(BpeEncoder *e, const uint8_t *text, size_t n, int add_special, BpeProgressFn progress, void *ctx) {
    const Bpe *bpe = e->bpe;
    e->progress = progress;
    e->progress_ctx = ctx;
    e->text = text;
    e->n_text = n;
    e->last_report = now_seconds();
    if (add_special) bpe_encoder_push(e, bpe->bos, (size_t)bpe->n_bos);
    e->seg_orig = NULL;
    split_text(bpe, text, n, encode_cb, e, &e->seg_orig);
    if (add_special) bpe_encoder_push(e, bpe->eos, (size_t)bpe->n_eos);
    e->progress = NULL;
}

size_t bpe_encoder_count(const BpeEncoder *e) { return e->n_out; }

int32_t *bpe_encoder_take(BpeEncoder *e, size_t *n_tokens) {
    int32_t *out = e->out;
    *n_tokens = e->n_out;
    e->out = NULL;
    e->n_out = e->cap_out = 0;
    out_reserve(e, 1);
    return out;
}

static int32_t *encode(const Bpe *bpe, const uint8_t *text, size_t n, int add_special, BpeProgressFn progress,
                       void *ctx, size_t *n_tokens) {
    Encoder *e = bpe_encoder_new(bpe);
    out_reserve(e, n + 1 + (add_special ? (size_t)(bpe->n_bos + bpe->n_eos) : 0));
    bpe_encoder_add(e, text, n, add_special, progress, ctx);
    int32_t *out = bpe_encoder_take(e, n_tokens);
    bpe_encoder_free(e);
    return out;
}

int32_t *bpe_encode(const Bpe *bpe, const uint8_t *text, size_t n, size_t *n_tokens) {
    return encode(bpe, text, n, 0, NULL, NULL, n_tokens);
}

int32_t *bpe_encode_doc(const Bpe *bpe, const uint8_t *text, size_t n, size_t *n_tokens) {
    return encode(bpe, text, n, 1, NULL, NULL, n_tokens);
}

int32_t *bpe_encode_doc_progress(const Bpe *bpe, const uint8_t *text, size_t n, BpeProgressFn progress, void *ctx,
                                 size_t *n_tokens) {
    return encode(bpe, text, n, 1, progress, ctx, n_tokens);
}
