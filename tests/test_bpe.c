// BPE tokenizer: ctron's older byte scanner, merges learned on tiny corpora with known answers,
// determinism, exact round trips (KJV, all byte values, invalid UTF-8, NULs, edge cases), agreement
// with a naive GPT-2 encoder, tokenizer.json save/load, and rejected older vocabulary files.
// usage: test_bpe KJV_PATH
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "util/common.h"
#include "util/fileio.h"

// The pieces of s joined with '|' (s must not contain '|').
static void split(const char *s, char *out) {
    size_t n = strlen(s), k = 0;
    for (size_t i = 0, j; i < n; i = j) {
        j = pretok_next((const uint8_t *)s, n, i);
        if (i) out[k++] = '|';
        memcpy(out + k, s + i, j - i);
        k += j - i;
    }
    out[k] = '\0';
}

static void test_pretokenize(void) {
    static const char *cases[][2] = {
        {"Hello world", "Hello| world"},
        {"don't we'll I'm they're you've he'd it's", "don|'t| we|'ll| I|'m| they|'re| you|'ve| he|'d| it|'s"},
        {"abc123 456def", "abc|123| 456|def"},
        {"foo!!  bar", "foo|!!| | bar"},
        {"a\n\nb", "a|\n|\n|b"},
        {"end   ", "end|   "},
        {"  x", " | x"},
        {" ", " "},
        {"x 'quoted' 's", "x| '|quoted|'| '|s"},
        {"tab\tthen", "tab|\t|then"},
        {"caf\xc3\xa9 na\xc3\xafve", "caf\xc3\xa9| na\xc3\xafve"},
        {"a.b,c", "a|.|b|,|c"},
        {"x\r\n y", "x|\r\n| y"},
    };
    char got[256];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        split(cases[c][0], got);
        CHECK(strcmp(got, cases[c][1]) == 0, "pre-split of '%s': got '%s', want '%s'", cases[c][0], got, cases[c][1]);
    }
    // NUL and other control bytes are symbols; they do not end a piece early or get lost.
    const uint8_t nul[] = {'a', 0, 0, 'b', ' ', 0, 1};
    size_t ends[8], k = 0;
    for (size_t i = 0; i < sizeof nul; i = ends[k++]) ends[k] = pretok_next(nul, sizeof nul, i);
    CHECK(k == 4 && ends[0] == 1 && ends[1] == 3 && ends[2] == 4 && ends[3] == 7,
          "pre-split of a NUL string: %zu pieces", k);
}

static int merges_are(const Bpe *b, const int32_t (*want)[2], int n) {
    if (b->n_merges != n) return 0;
    for (int i = 0; i < n; i++)
        if (b->merges[i][0] != want[i][0] || b->merges[i][1] != want[i][1]) return 0;
    return 1;
}

static void train_text(Bpe *b, const char *text, int vocab) {
    char err[256];
    if (bpe_train(b, (const uint8_t *)text, strlen(text), vocab, NULL, 0, NULL, err, sizeof err) != 0)
        ctron_fatal("bpe_train: %s", err);
}

static void test_known_merges(void) {
    Bpe b;
    // "aaab", " aaab" x2: (a,a) has 2+2x2 = 6 occurrences (overlaps count), then (a,b) and (256,a)
    // tie at 3 and the smaller pair wins, then "aa"+"ab", then " " + "aaab". Nothing is left after.
    train_text(&b, "aaab aaab aaab", 300);
    static const int32_t want1[][2] = {{'a', 'a'}, {'a', 'b'}, {256, 257}, {' ', 258}};
    CHECK(merges_are(&b, want1, 4), "merges of 'aaab aaab aaab': got %d merges", b.n_merges);
    CHECK(b.vocab_size == 260, "training stops when no pair is left: vocab %d, want 260", b.vocab_size);
    size_t n;
    int32_t *t = bpe_encode(&b, (const uint8_t *)"aaab aaab", 9, &n);
    CHECK(n == 2 && t[0] == 258 && t[1] == 259, "encode 'aaab aaab' -> %zu tokens [%d %d]", n, t[0], n > 1 ? t[1] : -1);
    free(t);
    bpe_free(&b);

    // All pairs tie at 1: the smallest pair goes first; merging (' ', c) destroys (c, d).
    train_text(&b, "ab cd", 1000);
    static const int32_t want2[][2] = {{' ', 'c'}, {'a', 'b'}, {256, 'd'}};
    CHECK(merges_are(&b, want2, 3), "merges of 'ab cd': got %d merges", b.n_merges);
    bpe_free(&b);

    // Merges never cross a pre-token boundary: "a a" never produces (a, ' ').
    train_text(&b, "a a a a", 1000);
    static const int32_t want3[][2] = {{' ', 'a'}};
    CHECK(merges_are(&b, want3, 1), "merges of 'a a a a': got %d merges", b.n_merges);
    bpe_free(&b);

    // vocab 256: no merges, pure bytes.
    train_text(&b, "hello hello", 256);
    CHECK(b.vocab_size == 256 && b.n_merges == 0, "vocab 256 learns nothing: %d", b.vocab_size);
    bpe_free(&b);

    char err[256];
    CHECK(bpe_train(&b, (const uint8_t *)"x", 1, 255, NULL, 0, NULL, err, sizeof err) == -1 && strstr(err, "255"),
          "vocab 255 rejected: %s", err);
    CHECK(bpe_train(&b, (const uint8_t *)"x", 1, BPE_MAX_VOCAB + 1, NULL, 0, NULL, err, sizeof err) == -1 &&
              strstr(err, "4194305"), "vocab 2^22+1 rejected: %s", err);
    const char *two[] = {"<a>", "<b>"};
    CHECK(bpe_train(&b, (const uint8_t *)"x", 1, 257, two, 2, NULL, err, sizeof err) == -1 && strstr(err, "258"),
          "vocab 257 has no room for 2 special tokens: %s", err);
    const char *twice[] = {"<a>", "<a>"};
    CHECK(bpe_train(&b, (const uint8_t *)"x", 1, 300, twice, 2, NULL, err, sizeof err) == -1 && strstr(err, "twice"),
          "a special token given twice is rejected: %s", err);

    // Special tokens: never learned from, never split, after the learned tokens; encoded as one id.
    const char *eot[] = {"<|endoftext|>"};
    const char *corpus = "ab ab<|endoftext|>ab ab<|endoftext|>";
    CHECK(bpe_train(&b, (const uint8_t *)corpus, strlen(corpus), 1000, eot, 1, NULL, err, sizeof err) == 0, "%s", err);
    static const int32_t want4[][2] = {{'a', 'b'}, {' ', 256}};
    CHECK(merges_are(&b, want4, 2) && b.vocab_size == 259 && b.n_added == 1 && b.added[0].id == 258,
          "merges around <|endoftext|>: %d merges, vocab %d", b.n_merges, b.vocab_size);
    t = bpe_encode(&b, (const uint8_t *)"ab<|endoftext|> ab", 18, &n);
    CHECK(n == 3 && t[0] == 256 && t[1] == 258 && t[2] == 257, "encode with a special token: %zu ids", n);
    free(t);
    bpe_free(&b);
}

// GPT-2's encoder, naively, on the pieces bpe_split gives: merge every occurrence of the
// lowest-ranked pair, repeat.
typedef struct { const Bpe *b; int32_t *out; size_t k; } Naive;

static void naive_piece(void *ctx, const uint8_t *p, size_t len, int32_t added) {
    Naive *nv = ctx;
    const Bpe *b = nv->b;
    if (added >= 0) { nv->out[nv->k++] = added; return; }
    int32_t *w = xmalloc(len * sizeof *w);
    for (size_t q = 0; q < len; q++) w[q] = b->byte_tok[p[q]];
    for (;;) {
        int32_t best = -1;
        for (size_t q = 0; q + 1 < len; q++) {
            int32_t r = bpe_pair_rank(b, w[q], w[q + 1]);
            if (r >= 0 && (best < 0 || r < best)) best = r;
        }
        if (best < 0) break;
        size_t m = 0;
        for (size_t q = 0; q < len;) {
            if (q + 1 < len && w[q] == b->merges[best][0] && w[q + 1] == b->merges[best][1]) {
                w[m++] = b->merge_out[best];
                q += 2;
            } else {
                w[m++] = w[q++];
            }
        }
        len = m;
    }
    memcpy(nv->out + nv->k, w, len * sizeof *w);
    nv->k += len;
    free(w);
}

static size_t naive_encode(const Bpe *b, const uint8_t *text, size_t n, int32_t *out) {
    Naive nv = {b, out, 0};
    bpe_split(b, text, n, naive_piece, &nv);
    return nv.k;
}

// Encodes, checks the ids, decodes and compares with the input; with check_naive also compares
// the tokens with the naive encoder. Returns the token count.
static size_t roundtrip(const Bpe *b, const uint8_t *text, size_t n, int check_naive, const char *what) {
    size_t nt, nb;
    int32_t *t = bpe_encode(b, text, n, &nt);
    int in_range = 1;
    for (size_t i = 0; i < nt; i++) in_range &= t[i] >= 0 && t[i] < b->vocab_size;
    CHECK(in_range, "%s: every token id is in the vocabulary", what);
    char err[256];
    uint8_t *back = bpe_decode(b, t, nt, 0, &nb, err, sizeof err);
    CHECK(back && nb == n && memcmp(back, text, n) == 0, "%s: decode(encode(x)) == x (%zu bytes -> %zu tokens -> %zu bytes)",
          what, n, nt, nb);
    if (check_naive) {
        int32_t *ref = xmalloc((n ? n : 1) * sizeof *ref);
        size_t nr = naive_encode(b, text, n, ref);
        CHECK(nr == nt && memcmp(ref, t, nt * sizeof *t) == 0, "%s: tokens equal the naive GPT-2 encoder's", what);
        free(ref);
    }
    free(back);
    free(t);
    return nt;
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

static void test_kjv(const char *path) {
    uint8_t *text;
    size_t n;
    char err[512];
    if (fileio_read_all(path, &text, &n, err, sizeof err) != 0) {
        CHECK(0, "%s", err);
        return;
    }
    Bpe a, b;
    BpeTrainStats st;
    double t0 = now_seconds();
    CHECK(bpe_train(&a, text, n, 8192, NULL, 0, &st, err, sizeof err) == 0, "train on KJV: %s", err);
    double t_train = now_seconds() - t0;
    CHECK(a.vocab_size == 8192, "KJV supports 8192 tokens: %d", a.vocab_size);
    // tokenizer.json keys tokens by their strings: a merge that makes an existing string reuses it.
    StrTable seen;
    strtab_init(&seen);
    int distinct = 1;
    for (int32_t t = 0; t < a.vocab_size; t++) {
        size_t len;
        const uint8_t *bytes = bpe_token_bytes(&a, t, &len);
        int added;
        strtab_intern(&seen, bytes, len, &added);
        distinct &= added;
    }
    strtab_free(&seen);
    CHECK(distinct && a.n_merges >= 8192 - 256, "every token is a distinct string (%d merges for %d tokens)",
          a.n_merges, a.vocab_size - 256);
    printf("KJV vocab 8192: %d merges, %d of them remake an existing token\n", a.n_merges, a.n_merges - (8192 - 256));
    CHECK(bpe_train(&b, text, n, 8192, NULL, 0, NULL, err, sizeof err) == 0, "train again");
    CHECK(b.n_merges == a.n_merges && memcmp(a.merges, b.merges, (size_t)a.n_merges * sizeof *a.merges) == 0,
          "training twice gives identical merges");
    bpe_free(&b);

    t0 = now_seconds();
    size_t nt = roundtrip(&a, text, n, 0, "KJV, vocab 8192");
    double t_enc = now_seconds() - t0;
    printf("KJV %zu bytes, vocab 8192: train %.2f s, encode+decode %.2f s, %zu tokens (%.3f tokens/byte)\n", n, t_train,
           t_enc, nt, (double)nt / (double)n);
    CHECK((double)nt / (double)n < 0.3, "vocab 8192 compresses KJV below 0.3 tokens/byte: %.3f", (double)nt / (double)n);
    roundtrip(&a, text, 300000, 1, "KJV prefix vs naive encoder");

    // Text unlike the corpus: random bytes (all 256 values, invalid UTF-8 everywhere).
    size_t rn = 200000;
    uint8_t *rnd = xmalloc(rn);
    uint64_t s = 42;
    for (size_t i = 0; i < rn; i++) rnd[i] = (uint8_t)lcg(&s);
    roundtrip(&a, rnd, rn, 1, "random bytes with the KJV vocabulary");
    // A vocabulary learned on random bytes, used on KJV and on the random bytes.
    CHECK(bpe_train(&b, rnd, rn, 2000, NULL, 0, NULL, err, sizeof err) == 0, "train on random bytes");
    roundtrip(&b, rnd, rn, 1, "random bytes with their own vocabulary");
    roundtrip(&b, text, 100000, 1, "KJV with the random-byte vocabulary");
    bpe_free(&b);

    // Save and load: the same merges and the same encoding.
    char dir[] = "/tmp/ctron_test_bpe_XXXXXX", file[64];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(file, sizeof file, "%s/tok.json", dir);
    CHECK(bpe_save(&a, file, err, sizeof err) == 0, "save: %s", err);
    CHECK(bpe_load(&b, file, err, sizeof err) == 0, "load: %s", err);
    char what[128];
    CHECK(b.vocab_size == a.vocab_size && b.n_merges == a.n_merges &&
              memcmp(a.merges, b.merges, (size_t)a.n_merges * sizeof *a.merges) == 0 && bpe_same(&a, &b, what, sizeof what),
          "loaded tokenizer.json equals the saved tokenizer");
    size_t n1, n2;
    int32_t *t1 = bpe_encode(&a, text, 100000, &n1), *t2 = bpe_encode(&b, text, 100000, &n2);
    CHECK(n1 == n2 && memcmp(t1, t2, n1 * sizeof *t1) == 0, "loaded vocabulary encodes identically");
    free(t1);
    free(t2);
    bpe_free(&b);
    unlink(file);
    rmdir(dir);
    free(rnd);
    bpe_free(&a);
    free(text);
}

static void test_edge_cases(void) {
    Bpe b;
    train_text(&b, "the cat sat on the mat, the end.  aaaa    \n\n", 300);
    roundtrip(&b, (const uint8_t *)"", 0, 1, "empty input");
    roundtrip(&b, (const uint8_t *)"a", 1, 1, "one byte");
    const uint8_t nul[] = {0, 0, 0, 'a', 0, ' ', 0};
    roundtrip(&b, nul, sizeof nul, 1, "NUL bytes");
    const uint8_t bad_utf8[] = {0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x28, 0xa1, 0xf0, 0x28, 0x8c, 0xbc, 0xff, 0xfe,
                                0xc0, 0xaf, ' ', 0x80, 'x', 0xed, 0xa0, 0x80};
    roundtrip(&b, bad_utf8, sizeof bad_utf8, 1, "invalid UTF-8");
    uint8_t all[512];
    for (int i = 0; i < 512; i++) all[i] = (uint8_t)(i < 256 ? i : 511 - i);
    roundtrip(&b, all, sizeof all, 1, "all 256 byte values");
    size_t big = 100000;
    uint8_t *run = xmalloc(big);
    const uint8_t fill[] = {'a', ' ', '\n', 0, 0xff};
    for (size_t f = 0; f < sizeof fill; f++) {
        memset(run, fill[f], big);
        char what[64];
        snprintf(what, sizeof what, "a run of 100000 x byte %d", fill[f]);
        roundtrip(&b, run, big, 1, what);
    }
    bpe_free(&b);
    // A vocabulary that merges long runs: the heap encoder on one 100000-byte piece.
    memset(run, 'a', big);
    char err[256];
    CHECK(bpe_train(&b, run, 1000, 300, NULL, 0, NULL, err, sizeof err) == 0, "train on a run");
    roundtrip(&b, run, big, 1, "a long run with run merges");
    roundtrip(&b, run, 999, 1, "an odd run with run merges");
    bpe_free(&b);
    free(run);

    int32_t t = 300;
    size_t nb;
    train_text(&b, "abc", 257);
    uint8_t *out = bpe_decode(&b, &t, 1, 0, &nb, err, sizeof err);
    CHECK(out == NULL && strstr(err, "token 300") && strstr(err, "0..256"), "decode rejects token 300: %s", err);
    bpe_free(&b);
}

static void test_bad_vocabularies(void) {
    Bpe b;
    char err[256];
    const int32_t future[][2] = {{'a', 'b'}, {256, 258}};
    CHECK(bpe_from_merges(&b, future, 2, err, sizeof err) == -1 && strstr(err, "merge 1") && strstr(err, "258"),
          "a merge using a later token is rejected: %s", err);
    const int32_t dup[][2] = {{'a', 'b'}, {'c', 'd'}, {'a', 'b'}};
    CHECK(bpe_from_merges(&b, dup, 3, err, sizeof err) == -1 && strstr(err, "repeats"), "a repeated pair is rejected: %s",
          err);
    const int32_t neg[][2] = {{-1, 'b'}};
    CHECK(bpe_from_merges(&b, neg, 1, err, sizeof err) == -1, "a negative id is rejected: %s", err);

    char dir[] = "/tmp/ctron_test_bpe_XXXXXX", file[64];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(file, sizeof file, "%s/v.json", dir);
    static const char *bad[][2] = {
        {"not json", "not a JSON object"},
        {"{\"type\":\"gpt2\",\"version\":1,\"vocab_size\":256,\"merges\":[]}", "\"type\" is gpt2"},
        {"{\"type\":\"ctron-bpe\",\"version\":2,\"vocab_size\":256,\"merges\":[]}", "unsupported \"version\" 2"},
        {"{\"type\":\"ctron-bpe\",\"version\":1,\"vocab_size\":70000,\"merges\":[]}", "\"vocab_size\" is 70000"},
        {"{\"type\":\"ctron-bpe\",\"version\":1,\"vocab_size\":258,\"merges\":[[97,98]]}", "it has 1"},
        {"{\"type\":\"ctron-bpe\",\"version\":1,\"vocab_size\":257,\"merges\":[[97]]}", "merge 0 is not a pair"},
        {"{\"type\":\"ctron-bpe\",\"version\":1,\"vocab_size\":257,\"merges\":[[97,1.5]]}", "merge 0 is not a pair"},
        {"{\"type\":\"ctron-bpe\",\"version\":1,\"vocab_size\":257,\"merges\":[[97,256]]}", "defined before it"},
        {"{\"type\":\"ctron-bpe\",\"version\":1,\"vocab_size\":257,\"pretokenizer\":\"none\",\"merges\":[[97,98]]}",
         "\"pretokenizer\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *f = fopen(file, "w");
        fputs(bad[i][0], f);
        fclose(f);
        err[0] = '\0';
        CHECK(bpe_load(&b, file, err, sizeof err) == -1 && strstr(err, bad[i][1]), "bad vocabulary %zu: got '%s', want '%s'",
              i, err, bad[i][1]);
    }
    FILE *f = fopen(file, "w");
    fputs("{\"type\":\"ctron-bpe\",\"version\":1,\"vocab_size\":257,\"merges\":[[97,98]]}", f);
    fclose(f);
    CHECK(bpe_load(&b, file, err, sizeof err) == 0 && b.vocab_size == 257, "a hand-written vocabulary loads: %s", err);
    if (b.vocab_size) bpe_free(&b);
    unlink(file);
    rmdir(dir);
    CHECK(bpe_load(&b, file, err, sizeof err) == -1 && strstr(err, "cannot open"), "missing file: %s", err);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_bpe KJV_PATH\n");
        return 2;
    }
    test_pretokenize();
    test_known_merges();
    test_edge_cases();
    test_bad_vocabularies();
    test_kjv(argv[1]);
    return check_summary();
}
