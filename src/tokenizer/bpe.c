// The tokenizer's tables, encoding (merges applied by rank) and decoding.
#include "tokenizer/bpe.h"
#include <string.h>
#include "tokenizer/pretokenize.h"
#include "util/common.h"

// All token strings together may take at most this much: a hand-made vocabulary that doubles
// one token 60 times would otherwise ask for exabytes. Real vocabularies use kilobytes.
#define BPE_MAX_TOKEN_BYTES ((size_t)1 << 30)

int bpe_from_merges(Bpe *bpe, const int32_t (*merges)[2], int n_merges, char *err, size_t errlen) {
    memset(bpe, 0, sizeof *bpe);
    if (n_merges < 0 || n_merges > BPE_MAX_VOCAB - 256) {
        snprintf(err, errlen, "%d merges give a vocabulary of %d, expected at most %d", n_merges, 256 + n_merges,
                 BPE_MAX_VOCAB);
        return -1;
    }
    int v = 256 + n_merges;
    bpe->vocab_size = v;
    bpe->n_merges = n_merges;
    bpe->merges = xmalloc((size_t)(n_merges ? n_merges : 1) * sizeof *bpe->merges);
    bpe->tok_off = xmalloc((size_t)v * sizeof *bpe->tok_off);
    bpe->tok_len = xmalloc((size_t)v * sizeof *bpe->tok_len);
    pairtab_init(&bpe->rank);
    size_t total = 256;
    for (int t = 0; t < 256; t++) bpe->tok_len[t] = 1;
    for (int i = 0; i < n_merges; i++) {
        int32_t a = merges[i][0], b = merges[i][1];
        if (a < 0 || b < 0 || a >= 256 + i || b >= 256 + i) {
            snprintf(err, errlen, "merge %d (token %d) is [%d, %d]: both parts must be tokens 0..%d defined before it",
                     i, 256 + i, a, b, 255 + i);
            bpe_free(bpe);
            return -1;
        }
        int added;
        pairtab_intern(&bpe->rank, a, b, &added);
        if (!added) {
            snprintf(err, errlen, "merge %d (token %d) repeats the pair [%d, %d] of merge %d", i, 256 + i, a, b,
                     pairtab_find(&bpe->rank, a, b));
            bpe_free(bpe);
            return -1;
        }
        bpe->merges[i][0] = a;
        bpe->merges[i][1] = b;
        size_t len = (size_t)bpe->tok_len[a] + bpe->tok_len[b];
        total += len;
        if (len > BPE_MAX_TOKEN_BYTES || total > BPE_MAX_TOKEN_BYTES) {
            snprintf(err, errlen, "merge %d makes the token strings longer than %zu bytes in total", i,
                     BPE_MAX_TOKEN_BYTES);
            bpe_free(bpe);
            return -1;
        }
        bpe->tok_len[256 + i] = (uint32_t)len;
    }
    // Token strings: bytes first, then each merge as the concatenation of its parts.
    bpe->bytes = xmalloc(total);
    size_t off = 0;
    for (int t = 0; t < 256; t++) {
        bpe->bytes[off] = (uint8_t)t;
        bpe->tok_off[t] = off++;
    }
    for (int i = 0; i < n_merges; i++) {
        int32_t a = merges[i][0], b = merges[i][1];
        bpe->tok_off[256 + i] = off;
        memcpy(bpe->bytes + off, bpe->bytes + bpe->tok_off[a], bpe->tok_len[a]);
        off += bpe->tok_len[a];
        memcpy(bpe->bytes + off, bpe->bytes + bpe->tok_off[b], bpe->tok_len[b]);
        off += bpe->tok_len[b];
    }
    return 0;
}

void bpe_free(Bpe *bpe) {
    free(bpe->merges);
    free(bpe->bytes);
    free(bpe->tok_off);
    free(bpe->tok_len);
    if (bpe->rank.slot) pairtab_free(&bpe->rank);
    memset(bpe, 0, sizeof *bpe);
}

// Scratch space for encoding one pre-token: a doubly linked list of symbols and a min-heap of
// candidate merges keyed by (rank, position).
typedef struct {
    int32_t *sym, *prev, *next;
    int64_t *heap;            // rank << 32 | position: ordering the keys orders by (rank, position)
    size_t cap, n_heap;
} Scratch;

static void scratch_reserve(Scratch *s, size_t len) {
    if (len <= s->cap) return;
    free(s->sym); free(s->prev); free(s->next); free(s->heap);
    s->cap = len * 2;
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
    int32_t r = pairtab_find(&bpe->rank, s->sym[pos], s->sym[s->next[pos]]);
    if (r >= 0) heap_push(s, (int64_t)r << 32 | pos);
}

// Applies merges to one pre-token, lowest rank first and left to right within a rank, which is
// GPT-2's "merge every occurrence of the best pair, repeat". A merge only creates pairs with
// its new token, whose ranks are higher, so popping by (rank, position) visits merges in exactly
// that order. Writes the tokens to out and returns how many.
static size_t encode_piece(const Bpe *bpe, Scratch *s, const uint8_t *p, size_t len, int32_t *out) {
    scratch_reserve(s, len);
    for (size_t i = 0; i < len; i++) {
        s->sym[i] = p[i];
        s->prev[i] = (int32_t)i - 1;
        s->next[i] = i + 1 < len ? (int32_t)i + 1 : -1;
    }
    s->n_heap = 0;
    for (size_t i = 0; i + 1 < len; i++) push_pair(bpe, s, (int32_t)i);
    while (s->n_heap) {
        int64_t key = heap_pop(s);
        int32_t r = (int32_t)(key >> 32), i = (int32_t)(key & 0xffffffff), j = s->next[i];
        // Stale entries: the left symbol was absorbed or either side has changed since.
        if (s->sym[i] != bpe->merges[r][0] || j < 0 || s->sym[j] != bpe->merges[r][1]) continue;
        s->sym[i] = 256 + r;
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

int32_t *bpe_encode(const Bpe *bpe, const uint8_t *text, size_t n, size_t *n_tokens) {
    int32_t *out = xmalloc((n ? n : 1) * sizeof *out);   // every token covers at least one byte
    size_t k = 0;
    StrTable cache;                   // distinct pre-token -> its tokens at cache_tok[cache_off[id]]
    strtab_init(&cache);
    int32_t *cache_tok = NULL;
    size_t *cache_off = NULL, cache_len = 0, cache_cap = 0, ids_cap = 0;
    Scratch s = {0};
    for (size_t i = 0, j; i < n; i = j) {
        j = pretok_next(text, n, i);
        if (j - i == 1) { out[k++] = text[i]; continue; }   // a lone byte is its own token
        int added;
        int32_t id = strtab_intern(&cache, text + i, j - i, &added);
        if (added) {
            if ((size_t)id >= ids_cap) {
                ids_cap = ids_cap ? 2 * ids_cap : 1024;
                cache_off = realloc(cache_off, (ids_cap + 1) * sizeof *cache_off);
                if (!cache_off) ctron_fatal("out of memory in the encoder cache");
            }
            if (cache_len + (j - i) > cache_cap) {
                while (cache_len + (j - i) > cache_cap) cache_cap = cache_cap ? 2 * cache_cap : 65536;
                cache_tok = realloc(cache_tok, cache_cap * sizeof *cache_tok);
                if (!cache_tok) ctron_fatal("out of memory in the encoder cache");
            }
            cache_off[id] = cache_len;
            cache_len += encode_piece(bpe, &s, text + i, j - i, cache_tok + cache_len);
            cache_off[id + 1] = cache_len;   // ids arrive in order, so the next start is our end
        }
        size_t m = cache_off[id + 1] - cache_off[id];
        memcpy(out + k, cache_tok + cache_off[id], m * sizeof *out);
        k += m;
    }
    free(s.sym); free(s.prev); free(s.next); free(s.heap);
    free(cache_tok);
    free(cache_off);
    strtab_free(&cache);
    *n_tokens = k;
    return out;
}

uint8_t *bpe_decode(const Bpe *bpe, const int32_t *tokens, size_t n, size_t *n_bytes, char *err, size_t errlen) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= bpe->vocab_size) {
            snprintf(err, errlen, "token %d at position %zu is outside the vocabulary 0..%d", tokens[i], i,
                     bpe->vocab_size - 1);
            return NULL;
        }
        total += bpe->tok_len[tokens[i]];
    }
    uint8_t *out = xmalloc(total ? total : 1);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(out + off, bpe->bytes + bpe->tok_off[tokens[i]], bpe->tok_len[tokens[i]]);
        off += bpe->tok_len[tokens[i]];
    }
    *n_bytes = total;
    return out;
}
