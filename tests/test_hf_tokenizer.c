// Hugging Face tokenizer.json support without the peer: GPT-2's byte-level alphabet; GPT-2's and
// Llama 3's pre-tokenizer patterns on the cases that tell them apart (Unicode classes, contractions,
// digit groups, newlines, U+3000, U+180E); Split's five behaviors with and without invert; three
// tokenizer.json files made by `tokenizers` 0.23.3 (tests/fuzz/corpus/hf_tokenizer/, see
// tokenizer_parity.py for the live comparison) encoding to the ids tokenizers gave: added tokens
// with lstrip/rstrip/single_word/normalized, special tokens in the text, ignore_merges, a BOS
// template, RobertaProcessing, unk with fuse_unk, add_prefix_space; and the files ctron refuses,
// each named with its field. Expected values were printed by tokenizers 0.23.3.
// usage: test_hf_tokenizer FIXTURE_DIR
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "tokenizer/bpe.h"
#include "tokenizer/bytelevel.h"
#include "tokenizer/regex_split.h"
#include "util/common.h"

static void test_bytelevel(void) {
    CHECK(bytelevel_char(' ') == 0x120 && bytelevel_char('\n') == 0x10A && bytelevel_char('\r') == 0x10D &&
              bytelevel_char(0) == 0x100 && bytelevel_char(0x7F) == 0x121 && bytelevel_char(0xA0) == 0x142 &&
              bytelevel_char(0xAD) == 0x143 && bytelevel_char('A') == 'A' && bytelevel_char(0xFF) == 0xFF,
          "GPT-2's bytes_to_unicode");
    uint8_t all[256], back[256];
    char s[512];
    for (int i = 0; i < 256; i++) all[i] = (uint8_t)i;
    size_t n = bytelevel_encode(all, 256, s);
    int mapped;
    size_t m = bytelevel_decode(s, n, back, &mapped);
    CHECK(mapped && m == 256 && memcmp(all, back, 256) == 0, "all 256 bytes through the alphabet and back");
    m = bytelevel_decode("<|x y|>", 7, back, &mapped);
    CHECK(!mapped && m == 7 && memcmp(back, "<|x y|>", 7) == 0, "a string outside the alphabet decodes as itself");
}

typedef struct { const uint8_t *s; char out[512]; size_t k; } Joined;

static void count_piece(void *ctx, size_t start, size_t end) {
    size_t *c = ctx;
    c[0]++;
    c[1] = end - start;
}

static void join_piece(void *ctx, size_t start, size_t end) {
    Joined *j = ctx;
    if (j->k) j->out[j->k++] = '|';
    memcpy(j->out + j->k, j->s + start, end - start);
    j->k += end - start;
    j->out[j->k] = '\0';
}

static const char *split_with(const PreRegex *re, SplitBehavior b, int invert, const char *text, Joined *j) {
    j->s = (const uint8_t *)text;
    j->k = 0;
    j->out[0] = '\0';
    preregex_each(re, b, invert, j->s, strlen(text), join_piece, j);
    return j->out;
}

static void test_patterns(void) {
    // {text, GPT-2's pieces, Llama 3's pieces}, from tokenizers 0.23.3's ByteLevel and Split.
    static const char *cases[][3] = {
        {"caf\u00e9 na\u00efve", "caf\u00e9| na\u00efve", "caf\u00e9| na\u00efve"},
        {"\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440", "\u041f\u0440\u0438\u0432\u0435\u0442| \u043c\u0438\u0440",
         "\u041f\u0440\u0438\u0432\u0435\u0442| \u043c\u0438\u0440"},
        {"\u0661\u0662\u0663 abc", "\u0661\u0662\u0663| abc", "\u0661\u0662\u0663| abc"},
        {"a\u2014b", "a|\u2014|b", "a|\u2014b"},
        {"  double", " | double", " | double"},
        {"\r\nA", "\r|\n|A", "\r\n|A"},
        {"IT'S", "IT|'|S", "IT|'S"},
        {" 1234567", " 1234567", " |123|456|7"},
        {"\tand", "\t|and", "\tand"},
        {"_case", "_|case", "_case"},
        {"\u2019s", "\u2019|s", "\u2019s"},
        {"\n   indented", "\n  | indented", "\n|  | indented"},
        {"\r\n\r\nX", "\r\n\r|\n|X", "\r\n\r\n|X"},
        {"x!!\n\ny", "x|!!|\n|\n|y", "x|!!\n\n|y"},
        {"don't", "don|'t", "don|'t"},
        {"a\u3000\u3000b", "a|\u3000|\u3000|b", "a|\u3000|\u3000b"},
        {"x\u180ey", "x|\u180e|y", "x|\u180ey"},
        {"a\u180e'LL", "a|\u180e'|LL", "a|\u180e'|LL"},   // U+180E is not White_Space (PCRE2's own \s says it is)
        {"a \u180e b", "a| \u180e| b", "a| \u180e| b"},
        {"x\xc2\x85 y", "x|\xc2\x85| y", "x|\xc2\x85| y"},   // U+0085 (NEL) is White_Space
        {"\u00df\u00b2\u2167", "\u00df|\u00b2\u2167", "\u00df|\u00b2\u2167"},
        // Invalid UTF-8 (tokenizers cannot be given it): it matches nothing, so it lies between pieces.
        {"ab\xff\xfe" "cd \xc3(", "ab|\xff\xfe|cd| |\xc3|(", "ab|\xff\xfe|cd| |\xc3|("},
    };
    char err[512];
    PreRegex *gpt2 = preregex_compile(PRETOK_GPT2_PATTERN, strlen(PRETOK_GPT2_PATTERN), 0, err, sizeof err);
    PreRegex *llama3 = preregex_compile(PRETOK_LLAMA3_PATTERN, strlen(PRETOK_LLAMA3_PATTERN), 0, err, sizeof err);
    CHECK(gpt2 && llama3, "the patterns compile: %s", err);
    if (!gpt2 || !llama3) return;
    Joined j;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        CHECK(strcmp(split_with(gpt2, SPLIT_ISOLATED, 0, cases[c][0], &j), cases[c][1]) == 0,
              "GPT-2 split of '%s': '%s', want '%s'", cases[c][0], j.out, cases[c][1]);
        CHECK(strcmp(split_with(llama3, SPLIT_ISOLATED, 0, cases[c][0], &j), cases[c][2]) == 0,
              "Llama 3 split of '%s': '%s', want '%s'", cases[c][0], j.out, cases[c][2]);
    }
    // A 200,000-letter word and a 200,000-space run: one piece each, no stack trouble.
    size_t n = 200000, cnt[2];
    uint8_t *big = xmalloc(n);
    static const uint8_t fill[] = {'a', ' ', '7'};
    static const size_t want_pieces[][2] = {{1, 1}, {1, 1}, {1, 66667}};   // GPT-2, Llama 3 (digits in 3s)
    for (int f = 0; f < 3; f++) {
        memset(big, fill[f], n);
        for (int which = 0; which < 2; which++) {
            cnt[0] = cnt[1] = 0;
            preregex_each(which ? llama3 : gpt2, SPLIT_ISOLATED, 0, big, n, count_piece, cnt);
            CHECK(cnt[0] == want_pieces[f][which], "%s on 200000 x '%c': %zu pieces, want %zu",
                  which ? "Llama 3" : "GPT-2", fill[f], cnt[0], want_pieces[f][which]);
        }
    }
    free(big);
    preregex_free(gpt2);
    preregex_free(llama3);
}

// Split's behaviors on "a-b--c-" with the literal "-", as tokenizers 0.23.3 gives them.
static void test_behaviors(void) {
    static const char *want[5][2] = {
        {"a|b|c", "-|-|-|-"},                      // Removed, inverted
        {"a|-|b|-|-|c|-", "a|-|b|-|-|c|-"},        // Isolated
        {"a-|b-|-|c-", "a|-b|-|-c|-"},             // MergedWithPrevious
        {"a|-b|-|-c|-", "a-|b-|-|c-"},             // MergedWithNext
        {"a|-|b|--|c|-", "a|-|b|--|c|-"},          // Contiguous
    };
    char err[256];
    PreRegex *dash = preregex_compile("-", 1, 1, err, sizeof err);
    PreRegex *none = preregex_compile("", 0, 1, err, sizeof err);
    Joined j;
    for (int b = 0; b < 5; b++)
        for (int inv = 0; inv < 2; inv++)
            CHECK(strcmp(split_with(dash, (SplitBehavior)b, inv, "a-b--c-", &j), want[b][inv]) == 0,
                  "behavior %d invert %d: '%s', want '%s'", b, inv, j.out, want[b][inv]);
    CHECK(strcmp(split_with(none, SPLIT_ISOLATED, 0, "a-b", &j), "a-b") == 0, "an empty literal splits nothing");
    preregex_free(dash);
    preregex_free(none);
    // PCRE2's message for a pattern that does not compile; a pattern too costly for the probe text.
    CHECK(!preregex_compile("(ab", 3, 0, err, sizeof err) && strstr(err, "missing closing parenthesis"),
          "a bad pattern: %s", err);
    const char *costly = "(*LIMIT_MATCH=50)(a|b|\\w)+\\d";
    CHECK(!preregex_compile(costly, strlen(costly), 0, err, sizeof err) && strstr(err, "too costly"),
          "a costly pattern: %s", err);
}

static const char *fixture_dir;

static void load_fixture(Bpe *b, const char *name) {
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/%s", fixture_dir, name);
    if (bpe_load(b, path, err, sizeof err) != 0) ctron_fatal("%s", err);
}

static void expect_ids(const Bpe *b, const char *what, const char *text, const int32_t *want, size_t n_want) {
    size_t n;
    int32_t *got = bpe_encode_doc(b, (const uint8_t *)text, strlen(text), &n);
    int same = n == n_want && (n == 0 || memcmp(got, want, n * sizeof *got) == 0);
    char list[256] = "";
    for (size_t i = 0, k = 0; i < n && k + 12 < sizeof list; i++) k += (size_t)snprintf(list + k, sizeof list - k, " %d", got[i]);
    CHECK(same, "%s: '%s' -> [%s ] (%zu ids, want %zu)", what, text, list, n, n_want);
    free(got);
}

#define IDS(...) (const int32_t[]){__VA_ARGS__}, sizeof((const int32_t[]){__VA_ARGS__}) / sizeof(int32_t)

static void test_fixtures(void) {
    Bpe b;
    load_fixture(&b, "gpt2_tiny.json");
    expect_ids(&b, "gpt2 special", "In the beginning<|endoftext|>God", IDS(288, 259, 278, 71, 269, 78, 269, 71, 0, 287, 68));
    expect_ids(&b, "gpt2 lstrip+rstrip", "Hi <mask> there\t<mask>\t<mask>\u2000x", IDS(40, 73, 300, 257, 69, 272, 300, 300, 88));
    expect_ids(&b, "gpt2 single_word", "a<sw>b <sw> c<sw>", IDS(65, 28, 83, 87, 30, 66, 221, 301, 221, 67, 28, 83, 87, 30));
    expect_ids(&b, "gpt2 normalized", "say hello world hello worlds", IDS(83, 65, 89, 302, 302, 83));
    expect_ids(&b, "gpt2 text", "IT'S 1234567 caf\u00e9", IDS(41, 52, 7, 51, 221, 284, 285, 21, 22, 23, 221, 67, 65, 70, 128, 103));
    size_t n;
    int32_t *none = bpe_encode_doc(&b, (const uint8_t *)"", 0, &n);
    CHECK(n == 0, "gpt2: empty text, no ids (%zu)", n);
    free(none);
    // Decoding: special tokens are their text, or left out with skip_special.
    int32_t ids[] = {288, 259, 0, 300, 302};
    char err[256];
    size_t nb;
    uint8_t *text = bpe_decode(&b, ids, 5, 0, &nb, err, sizeof err);
    CHECK(text && nb == 37 && memcmp(text, "In the<|endoftext|><mask> hello world", nb) == 0, "gpt2 decode: '%.*s'", (int)nb,
          text ? (const char *)text : "");
    free(text);
    text = bpe_decode(&b, ids, 5, 1, &nb, err, sizeof err);
    CHECK(text && nb == 18 && memcmp(text, "In the hello world", nb) == 0, "gpt2 decode skipping special tokens: '%.*s'",
          (int)nb, text ? (const char *)text : "");
    free(text);
    bpe_free(&b);

    load_fixture(&b, "llama3_tiny.json");
    CHECK(b.n_bos == 1 && b.bos[0] == 0 && b.n_eos == 0 && b.ignore_merges && b.n_pre == 2, "llama3: BOS 0, ignore_merges");
    expect_ids(&b, "llama3", "In the beginning", IDS(0, 289, 260, 279, 72, 270, 79, 270, 72));
    expect_ids(&b, "llama3 ignore_merges", " beginningsx beginnings", IDS(0, 302, 279, 72, 270, 79, 270, 72, 84));
    expect_ids(&b, "llama3 split", "IT'S 1234567", IDS(0, 42, 53, 8, 52, 222, 286, 20, 21, 22, 23, 24));
    expect_ids(&b, "llama3 specials", "<|begin_of_text|>x<|end_of_text|>", IDS(0, 0, 89, 1));
    expect_ids(&b, "llama3 empty", "", IDS(0));
    bpe_free(&b);

    load_fixture(&b, "unk_tiny.json");
    CHECK(b.unk == 0 && b.fuse_unk && b.byte_tok['z'] < 0 && b.byte_tok[0xC3] < 0, "unk: <unk> is 0, fused; no 'z', no 0xC3");
    expect_ids(&b, "unk fused", "caf\u00e9\u00e9 zz z the", IDS(1, 220, 69, 67, 72, 0, 220, 0, 220, 0, 258, 2));
    expect_ids(&b, "unk", "zebra", IDS(1, 220, 0, 71, 68, 84, 67, 2));
    expect_ids(&b, "unk empty", "", IDS(1, 2));
    bpe_free(&b);
}

static void expect_decode(const Bpe *b, const char *what, const int32_t *ids, size_t n, int skip, const char *want) {
    char err[256];
    size_t nb;
    uint8_t *text = bpe_decode(b, ids, n, skip, &nb, err, sizeof err);
    CHECK(text && nb == strlen(want) && memcmp(text, want, nb) == 0, "%s: decoded '%.*s', want '%s'", what, (int)nb,
          text ? (const char *)text : "", want);
    free(text);
}

static void expect_token_text(const Bpe *b, int32_t tok, const char *want, size_t want_len) {
    NormBuf buf = {0};
    size_t len;
    const uint8_t *t = bpe_token_text(b, tok, &buf, &len);
    CHECK(len == want_len && memcmp(t, want, len) == 0, "token %d's text inside a text: %zu bytes, want %zu", tok, len,
          want_len);
    normbuf_free(&buf);
}

// SentencePiece-style files (ids from tokenizers 0.23.3 on the same files): characters as symbols,
// byte fallback, the legacy normalizer and Metaspace's prepend schemes, NFKC, unk, the decoder chain.
static void test_sentencepiece_fixtures(void) {
    Bpe b;
    load_fixture(&b, "llama2_legacy_tiny.json");
    CHECK(b.char_level && b.byte_fallback && b.n_norm == 2 && b.n_pre == 0 && b.n_dec == 4 && b.byte_fb[0x0A] == 13,
          "llama2 legacy: characters, byte fallback, 2 normalizers, 4 decoders, <0x0A> = 13");
    expect_ids(&b, "llama2 legacy", "In the beginning", IDS(1, 259, 286, 273, 292, 259, 261, 264, 266, 293, 273, 293, 266));
    // A character outside the vocabulary is its UTF-8 bytes' tokens; each stretch between added
    // tokens gets the normalizer's "▁" (the legacy form's "<s>the" -> "<s>", "▁the").
    expect_ids(&b, "llama2 legacy byte fallback", "the\n\xe4\xb8\xad z<s>the", IDS(1, 292, 13, 231, 187, 176, 259, 285, 1, 292));
    expect_ids(&b, "llama2 legacy empty", "", IDS(1));
    int32_t ids[] = {1, 292, 13, 231, 187, 176, 259, 285, 1, 292};
    expect_decode(&b, "llama2 legacy", ids, 10, 0, "<s> the\n\xe4\xb8\xad z<s> the");
    expect_decode(&b, "llama2 legacy skipping specials", ids, 10, 1, "the\n\xe4\xb8\xad z the");
    // Byte tokens that are not UTF-8 decode to U+FFFD each, as tokenizers' ByteFallback decoder.
    int32_t bad[] = {231, 187, 292};
    expect_decode(&b, "llama2 legacy invalid bytes", bad, 3, 0, "\xef\xbf\xbd\xef\xbf\xbd the");
    expect_token_text(&b, 292, " the", 4);
    expect_token_text(&b, 13, "\n", 1);
    expect_token_text(&b, 231, "\xe4", 1);   // a character's byte as it streams
    bpe_free(&b);

    load_fixture(&b, "llama2_metaspace_tiny.json");
    CHECK(b.char_level && b.n_norm == 0 && b.n_pre == 1 && b.pre[0].kind == PRE_METASPACE && b.pre[0].prepend == PREPEND_FIRST &&
          !b.pre[0].split, "llama2 metaspace: Metaspace, prepend_scheme first, no split");
    expect_ids(&b, "llama2 metaspace", "In the beginning", IDS(1, 259, 286, 273, 292, 259, 261, 264, 266, 293, 273, 293, 266));
    // prepend_scheme "first": text after an added token at the start gets no "▁".
    expect_ids(&b, "llama2 metaspace first", "<s>the  in", IDS(1, 1, 279, 291, 259, 294));
    int32_t ids2[] = {1, 1, 279, 291, 259, 294};
    expect_decode(&b, "llama2 metaspace", ids2, 6, 0, "<s><s>the  in");
    bpe_free(&b);

    load_fixture(&b, "metaspace_split_tiny.json");
    CHECK(b.char_level && !b.byte_fallback && b.unk == 0 && !b.fuse_unk && b.n_norm == 1 && b.norm[0].kind == TNORM_NFKC,
          "metaspace split: NFKC, unk 0 not fused");
    expect_ids(&b, "metaspace split", "In the  beginning \xce\xa9", IDS(46, 24, 19, 61, 19, 0));
    expect_ids(&b, "metaspace split NFKC", "\xef\xbd\x94\xef\xbd\x88\xef\xbd\x85 \xef\xac\x81", IDS(24, 19, 0, 11));
    int32_t ids3[] = {46, 24, 19, 61, 19, 0};
    expect_decode(&b, "metaspace decoder", ids3, 6, 0, "In the  beginning <unk>");
    expect_decode(&b, "metaspace decoder skipping specials", ids3, 6, 1, "In the  beginning ");
    bpe_free(&b);

    load_fixture(&b, "qwen2_nfc_tiny.json");
    CHECK(!b.char_level && b.n_norm == 1 && b.norm[0].kind == TNORM_NFC, "qwen2: byte-level with NFC");
    expect_ids(&b, "qwen2 NFC", "e\xcc\x81t the", IDS(274, 83, 220, 257));
    bpe_free(&b);
}

// Files ctron refuses: the message names the file and the field.
static void test_refusals(void) {
    char dir[] = "/tmp/ctron_test_hf_XXXXXX", file[96], err[640];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(file, sizeof file, "%s/tokenizer.json", dir);
#define BL "\"pre_tokenizer\":{\"type\":\"ByteLevel\"}"
#define M(rest) "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2}," rest
    static const char *bad[][2] = {
        {"{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", "model.type is \"WordPiece\", expected \"BPE\""},
        {"{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", "model.type is \"Unigram\""},
        {"{\"model\":{\"vocab\":{}}}", "model.type is missing"},
        {"{\"model\":3}", "model is not an object"},
        {M("\"merges\":[\"a c\"]}," BL "}"), "model.merges[0] makes \"ac\" from \"a\" and \"c\", but \"c\" is not in model.vocab"},
        {M("\"merges\":[\"a b c\"]}," BL "}"), "model.merges[0] is not \"a b\""},
        {M("\"merges\":[[\"a\"]]}," BL "}"), "model.merges[0] is not"},
        {M("\"merges\":{}}," BL "}"), "model.merges is not an array"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}}", "model.vocab entry 0 (\"a\") is not a token id"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":4194304},\"merges\":[]}}", "is not a token id in 0..4194303"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}," BL "}", "model.vocab gives id 0 to \"b\" and to another token"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"a\":1},\"merges\":[]}," BL "}", "model.vocab has \"a\" twice"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", "model.vocab is empty"},
        {M("\"merges\":[],\"dropout\":0.1}," BL "}"), "model.dropout is 0.1"},
        {M("\"merges\":[],\"continuing_subword_prefix\":\"##\"}," BL "}"), "model.continuing_subword_prefix is set"},
        {M("\"merges\":[],\"unk_token\":\"<unk>\"}," BL "}"), "model.unk_token \"<unk>\" is not in model.vocab"},
        {M("\"merges\":[],\"byte_fallback\":true}," BL "}"), "model.byte_fallback is true and the vocabulary lacks byte 0x00"},
        {M("\"merges\":[],\"fuse_unk\":1}," BL "}"), "model \"fuse_unk\" is not true or false"},
        {M("\"merges\":[]},\"normalizer\":{\"type\":\"Lowercase\"}," BL "}"), "normalizer.type is \"Lowercase\""},
        {M("\"merges\":[]},\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Replace\",\"pattern\":"
           "{\"Regex\":\" +\"},\"content\":\"_\"}]}," BL "}"), "normalizer.normalizers[0].pattern is a Regex"},
        {M("\"merges\":[]},\"normalizer\":{\"type\":\"Prepend\"}," BL "}"), "normalizer.prepend is not a string"},
        // No ByteLevel step: SentencePiece-style, which needs its decoder.
        {M("\"merges\":[]},\"pre_tokenizer\":null}"), "decoder is null: a tokenizer without a ByteLevel pre-tokenizer"},
        {M("\"merges\":[]}}"), "decoder is null"},
        {M("\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Metaspace\"}}"), "pre_tokenizer.replacement is not a string, "
         "expected one character"},
        {M("\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"ab\"}}"),
         "pre_tokenizer.replacement is \"ab\", expected one character"},
        {M("\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"_\",\"prepend_scheme\":\"often\"}}"),
         "pre_tokenizer.prepend_scheme is not \"always\", \"first\" or \"never\""},
        {M("\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"_\",\"add_prefix_space\":false}}"),
         "pre_tokenizer.add_prefix_space is false and prepend_scheme is not \"never\""},
        {M("\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Metaspace\","
           "\"replacement\":\"_\"},{\"type\":\"ByteLevel\"}]}}"), "pre_tokenizer has both ByteLevel and Metaspace steps"},
        {M("\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"_\"},\"decoder\":{\"type\":"
           "\"ByteLevel\"}}"), "decoder.type is \"ByteLevel\": a SentencePiece-style tokenizer's decoder is read from"},
        {M("\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"_\"},\"decoder\":{\"type\":"
           "\"Strip\",\"content\":\" \",\"start\":-1,\"stop\":0}}"), "decoder.start is not a count of characters"},
        {M("\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"_\"},\"decoder\":{\"type\":"
           "\"Sequence\",\"decoders\":[{\"type\":\"Fuse\"},{\"type\":\"CTC\"}]}}"), "decoder.decoders[1].type is \"CTC\""},
        {M("\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},"
           "{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"Isolated\"}]}}"),
         "pre_tokenizer.pretokenizers[1] follows the ByteLevel step"},
        {M("\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":\"Isolated\"}}"),
         "decoder is null"},
        {M("\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
           "{\"Regex\":\"(ab\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\"}]}}"),
         "pre_tokenizer.pretokenizers[0].pattern \"(ab\": the pattern does not compile (PCRE2: missing closing parenthesis"},
        {M("\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
           "{\"Regex\":\"a\"},\"behavior\":\"Sideways\"},{\"type\":\"ByteLevel\"}]}}"),
         "pre_tokenizer.pretokenizers[0].behavior is \"Sideways\""},
        {M("\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
           "{\"Rgx\":\"a\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\"}]}}"),
         "pre_tokenizer.pretokenizers[0].pattern is not {\"Regex\": ...} or {\"String\": ...}"},
        {M("\"merges\":[]},\"decoder\":{\"type\":\"WordPiece\"}," BL "}"), "decoder.type is \"WordPiece\": a byte-level tokenizer decodes with ByteLevel"},
        {M("\"merges\":[]},\"post_processor\":{\"type\":\"Magic\"}," BL "}"), "post_processor.type is \"Magic\""},
        {M("\"merges\":[]},\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}},"
           "{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{}}," BL "}"),
         "post_processor.single uses \"<s>\", which post_processor.special_tokens does not define"},
        {M("\"merges\":[]},\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}},"
           "{\"Sequence\":{\"id\":\"A\"}}],\"special_tokens\":{\"<s>\":{\"ids\":[7]}}}," BL "}"),
         "post_processor.single \"<s>\" has an id outside the vocabulary 0..2"},
        {M("\"merges\":[]},\"added_tokens\":[{\"id\":3,\"content\":\"<x>\"},{\"id\":4,\"content\":\"<x>\"}]," BL "}"),
         "added_tokens[1] repeats the content \"<x>\""},
        {M("\"merges\":[]},\"added_tokens\":[{\"id\":3}]," BL "}"), "added_tokens[0] \"content\" is not a string"},
        {M("\"merges\":[]},\"added_tokens\":{}," BL "}"), "added_tokens is not an array"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *f = fopen(file, "w");
        fputs(bad[i][0], f);
        fclose(f);
        Bpe b;
        err[0] = '\0';
        int rc = bpe_load(&b, file, err, sizeof err);
        CHECK(rc == -1 && strstr(err, file) && strstr(err, bad[i][1]), "refusal %zu: got '%s', want '%s'", i, err, bad[i][1]);
        if (rc == 0) bpe_free(&b);
    }
    // RobertaProcessing's sep is checked too (cls above is fine at 0).
    FILE *f = fopen(file, "w");
    fputs(M("\"merges\":[]},\"post_processor\":{\"type\":\"RobertaProcessing\",\"sep\":[\"</s>\",9],\"cls\":[\"<s>\",0]}," BL "}"), f);
    fclose(f);
    Bpe b;
    CHECK(bpe_load(&b, file, err, sizeof err) == -1 && strstr(err, "post_processor.sep uses id 9"), "Roberta sep: %s", err);
    unlink(file);
    rmdir(dir);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_hf_tokenizer FIXTURE_DIR\n");
        return 2;
    }
    fixture_dir = argv[1];
    test_bytelevel();
    test_patterns();
    test_behaviors();
    test_fixtures();
    test_sentencepiece_fixtures();
    test_refusals();
    return check_summary();
}
