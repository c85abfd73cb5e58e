// The tokenizer's tables: tokens and their bytes, ranked merges, decoding, comparison; ctron's
// older vocabulary built from its merges. Encoding is in bpe_encode.c.
#include "tokenizer/bpe.h"
#include <string.h>
#include "tokenizer/added_tokens.h"
#include "tokenizer/regex_split.h"
#include "util/common.h"

// All token strings together may take at most this much: a hand-made vocabulary that doubles
// one token 60 times would otherwise ask for exabytes. Real vocabularies use kilobytes to megabytes.
#define BPE_MAX_TOKEN_BYTES ((size_t)1 << 30)

void bpe_init_tables(Bpe *bpe, int vocab_size) {
    memset(bpe, 0, sizeof *bpe);
    size_t v = vocab_size > 0 ? (size_t)vocab_size : 1;
    bpe->vocab_size = vocab_size;
    bpe->tok_off = xmalloc(v * sizeof *bpe->tok_off);
    bpe->tok_len = xmalloc(v * sizeof *bpe->tok_len);
    bpe->tok_kind = xmalloc(v);
    memset(bpe->tok_off, 0, v * sizeof *bpe->tok_off);
    memset(bpe->tok_len, 0, v * sizeof *bpe->tok_len);
    memset(bpe->tok_kind, 0, v);
    for (int b = 0; b < 256; b++) bpe->byte_tok[b] = bpe->byte_fb[b] = -1;
    bpe->unk = -1;
    pairtab_init(&bpe->rank);
}

void bpe_set_token(Bpe *bpe, int32_t id, const uint8_t *bytes, size_t len, int kind) {
    if (bpe->bytes_len + len > bpe->bytes_cap) {
        size_t cap = bpe->bytes_cap ? bpe->bytes_cap : 4096;
        while (bpe->bytes_len + len > cap) cap *= 2;
        bpe->bytes = realloc(bpe->bytes, cap);
        if (!bpe->bytes) ctron_fatal("out of memory for the tokenizer's token strings (%zu bytes)", cap);
        bpe->bytes_cap = cap;
    }
    if (len) memcpy(bpe->bytes + bpe->bytes_len, bytes, len);
    bpe->tok_off[id] = bpe->bytes_len;
    bpe->tok_len[id] = (uint32_t)len;
    bpe->tok_kind[id] = (uint8_t)kind;
    bpe->bytes_len += len;
}

void bpe_add_merge(Bpe *bpe, int32_t a, int32_t b, int32_t out) {
    int r = bpe->n_merges++;
    if ((r & (r - 1)) == 0) {   // grow at powers of two
        size_t cap = r ? 2 * (size_t)r : 1;
        bpe->merges = realloc(bpe->merges, cap * sizeof *bpe->merges);
        bpe->merge_out = realloc(bpe->merge_out, cap * sizeof *bpe->merge_out);
        bpe->pair_rank = realloc(bpe->pair_rank, cap * sizeof *bpe->pair_rank);
        if (!bpe->merges || !bpe->merge_out || !bpe->pair_rank) ctron_fatal("out of memory for the merges");
    }
    bpe->merges[r][0] = a;
    bpe->merges[r][1] = b;
    bpe->merge_out[r] = out;
    bpe->pair_rank[pairtab_intern(&bpe->rank, a, b, NULL)] = r;   // pair ids never exceed ranks
}

int32_t bpe_pair_rank(const Bpe *bpe, int32_t a, int32_t b) {
    int32_t p = pairtab_find(&bpe->rank, a, b);
    return p < 0 ? -1 : bpe->pair_rank[p];
}

int bpe_from_merges(Bpe *bpe, const int32_t (*merges)[2], int n_merges, char *err, size_t errlen) {
    if (n_merges < 0 || n_merges > BPE_LEGACY_MAX_VOCAB - 256) {
        memset(bpe, 0, sizeof *bpe);
        snprintf(err, errlen, "%d merges give a vocabulary of %d, expected at most %d", n_merges, 256 + n_merges,
                 BPE_LEGACY_MAX_VOCAB);
        return -1;
    }
    bpe_init_tables(bpe, 256 + n_merges);
    snprintf(bpe->source, sizeof bpe->source, "ctron-bpe");
    bpe->pre[bpe->n_pre++].kind = PRE_LEGACY_BYTES;
    for (int t = 0; t < 256; t++) {
        uint8_t byte = (uint8_t)t;
        bpe_set_token(bpe, t, &byte, 1, TOK_MODEL);
        bpe->byte_tok[t] = t;
    }
    size_t total = 256;
    for (int i = 0; i < n_merges; i++) {
        int32_t a = merges[i][0], b = merges[i][1];
        if (a < 0 || b < 0 || a >= 256 + i || b >= 256 + i) {
            snprintf(err, errlen, "merge %d (token %d) is [%d, %d]: both parts must be tokens 0..%d defined before it",
                     i, 256 + i, a, b, 255 + i);
            bpe_free(bpe);
            return -1;
        }
        int32_t seen = bpe_pair_rank(bpe, a, b);
        if (seen >= 0) {
            snprintf(err, errlen, "merge %d (token %d) repeats the pair [%d, %d] of merge %d", i, 256 + i, a, b, seen);
            bpe_free(bpe);
            return -1;
        }
        size_t la = bpe->tok_len[a], lb = bpe->tok_len[b];
        total += la + lb;
        if (total > BPE_MAX_TOKEN_BYTES) {
            snprintf(err, errlen, "merge %d makes the token strings longer than %zu bytes in total", i,
                     BPE_MAX_TOKEN_BYTES);
            bpe_free(bpe);
            return -1;
        }
        // Token 256+i is a followed by b; the pool may move while it grows, so copy through a buffer.
        uint8_t *joined = xmalloc(la + lb);
        memcpy(joined, bpe->bytes + bpe->tok_off[a], la);
        memcpy(joined + la, bpe->bytes + bpe->tok_off[b], lb);
        bpe_set_token(bpe, 256 + i, joined, la + lb, TOK_MODEL);
        free(joined);
        bpe_add_merge(bpe, a, b, 256 + i);
    }
    return 0;
}

void bpe_free(Bpe *bpe) {
    free(bpe->merges);
    free(bpe->merge_out);
    free(bpe->pair_rank);
    free(bpe->bytes);
    free(bpe->tok_off);
    free(bpe->tok_len);
    free(bpe->tok_kind);
    if (bpe->rank.slot) pairtab_free(&bpe->rank);
    if (bpe->whole.slot) strtab_free(&bpe->whole);
    free(bpe->whole_id);
    for (int i = 0; i < bpe->n_pre; i++) preregex_free(bpe->pre[i].re);
    for (int i = 0; i < bpe->n_norm; i++) normstep_free(&bpe->norm[i]);
    for (int i = 0; i < bpe->n_dec; i++) decstep_free(&bpe->dec[i]);
    for (int i = 0; i < bpe->n_added; i++) free(bpe->added[i].content);
    free(bpe->added);
    added_index_free(bpe->added_index);
    free(bpe->bos);
    free(bpe->eos);
    memset(bpe, 0, sizeof *bpe);
}

// SentencePiece-style: the token strings through the decoder chain (tokenizers' decode).
static uint8_t *decode_chars(const Bpe *bpe, const int32_t *tokens, size_t n, int skip_special, size_t *n_bytes) {
    const uint8_t **strs = xmalloc((n ? n : 1) * sizeof *strs);
    size_t *lens = xmalloc((n ? n : 1) * sizeof *lens), m = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t t = tokens[i];
        if ((skip_special && (bpe->tok_kind[t] & TOK_SPECIAL)) || bpe->tok_kind[t] == TOK_NONE) continue;
        strs[m] = bpe->bytes + bpe->tok_off[t];
        lens[m++] = bpe->tok_len[t];
    }
    NormBuf out = {0};
    decode_chain(bpe->dec, bpe->n_dec, strs, lens, m, 0, &out);
    free(strs);
    free(lens);
    *n_bytes = out.len;
    return out.data ? out.data : xmalloc(1);
}

uint8_t *bpe_decode(const Bpe *bpe, const int32_t *tokens, size_t n, int skip_special, size_t *n_bytes, char *err,
                    size_t errlen) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= bpe->vocab_size) {
            snprintf(err, errlen, "token %d at position %zu is outside the vocabulary 0..%d", tokens[i], i,
                     bpe->vocab_size - 1);
            return NULL;
        }
        total += bpe->tok_len[tokens[i]];
    }
    if (bpe->char_level) return decode_chars(bpe, tokens, n, skip_special, n_bytes);
    uint8_t *out = xmalloc(total ? total : 1);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t t = tokens[i];
        if ((skip_special && (bpe->tok_kind[t] & TOK_SPECIAL)) || bpe->tok_len[t] == 0) continue;
        memcpy(out + off, bpe->bytes + bpe->tok_off[t], bpe->tok_len[t]);
        off += bpe->tok_len[t];
    }
    *n_bytes = off;
    return out;
}

const uint8_t *bpe_token_text(const Bpe *bpe, int32_t tok, NormBuf *buf, size_t *len) {
    const uint8_t *s = bpe_token_bytes(bpe, tok, len);
    if (!bpe->char_level) return s;
    buf->len = 0;
    decode_chain(bpe->dec, bpe->n_dec, &s, len, 1, 1, buf);
    *len = buf->len;
    return buf->data ? buf->data : (const uint8_t *)"";
}

// The pre-tokenizer steps agree (patterns are compared by what they were compiled from in the
// file, which bpe_same cannot see: it compares kinds and options, and the merges and tokens).
static int same_pre(const Bpe *a, const Bpe *b) {
    if (a->n_pre != b->n_pre) return 0;
    for (int i = 0; i < a->n_pre; i++) {
        const PreStep *x = &a->pre[i], *y = &b->pre[i];
        if (x->kind != y->kind || x->behavior != y->behavior || x->invert != y->invert ||
            x->add_prefix_space != y->add_prefix_space || !x->re != !y->re || x->prepend != y->prepend ||
            x->split != y->split || x->repl_len != y->repl_len || memcmp(x->repl, y->repl, sizeof x->repl) != 0)
            return 0;
    }
    return 1;
}

static int same_bytes(const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na) == 0);
}

// The normalizers and decoders agree, step by step.
static int same_norm_dec(const Bpe *a, const Bpe *b) {
    if (a->char_level != b->char_level || a->byte_fallback != b->byte_fallback || a->n_norm != b->n_norm ||
        a->n_dec != b->n_dec)
        return 0;
    for (int i = 0; i < a->n_norm; i++) {
        const NormStep *x = &a->norm[i], *y = &b->norm[i];
        if (x->kind != y->kind || !same_bytes(x->from, x->from_len, y->from, y->from_len) ||
            !same_bytes(x->to, x->to_len, y->to, y->to_len))
            return 0;
    }
    for (int i = 0; i < a->n_dec; i++) {
        const DecStep *x = &a->dec[i], *y = &b->dec[i];
        if (x->kind != y->kind || !same_bytes(x->from, x->from_len, y->from, y->from_len) ||
            !same_bytes(x->to, x->to_len, y->to, y->to_len) || !same_bytes(x->ch, x->ch_len, y->ch, y->ch_len) ||
            x->start != y->start || x->stop != y->stop || x->prepend_never != y->prepend_never)
            return 0;
    }
    return 1;
}

int bpe_same(const Bpe *a, const Bpe *b, char *what, size_t wlen) {
    if (a->vocab_size != b->vocab_size) {
        snprintf(what, wlen, "%d tokens against %d", a->vocab_size, b->vocab_size);
        return 0;
    }
    for (int t = 0; t < a->vocab_size; t++)
        if (a->tok_kind[t] != b->tok_kind[t] || a->tok_len[t] != b->tok_len[t] ||
            (a->tok_len[t] && memcmp(a->bytes + a->tok_off[t], b->bytes + b->tok_off[t], a->tok_len[t]) != 0)) {
            snprintf(what, wlen, "token %d differs", t);
            return 0;
        }
    if (a->n_merges != b->n_merges) {
        snprintf(what, wlen, "%d merges against %d", a->n_merges, b->n_merges);
        return 0;
    }
    for (int r = 0; r < a->n_merges; r++)
        if (a->merges[r][0] != b->merges[r][0] || a->merges[r][1] != b->merges[r][1] ||
            a->merge_out[r] != b->merge_out[r]) {
            snprintf(what, wlen, "merge %d differs", r);
            return 0;
        }
    if (!same_norm_dec(a, b)) {
        snprintf(what, wlen, "the normalizer, the decoder or the model's character handling differ");
        return 0;
    }
    if (!same_pre(a, b) || a->unk != b->unk || a->fuse_unk != b->fuse_unk || a->ignore_merges != b->ignore_merges ||
        a->n_bos != b->n_bos || a->n_eos != b->n_eos ||
        (a->n_bos && memcmp(a->bos, b->bos, (size_t)a->n_bos * sizeof *a->bos) != 0) ||
        (a->n_eos && memcmp(a->eos, b->eos, (size_t)a->n_eos * sizeof *a->eos) != 0)) {
        snprintf(what, wlen, "the pre-tokenizer, model options or post-processor differ");
        return 0;
    }
    return 1;
}
