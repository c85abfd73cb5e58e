// dataset_load / dataset_load_split: token files, BPE-encoded text, byte-level text, JSONL, explicit
// validation files, and the vocabulary checks.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "data/dataset.h"
#include "data/tokenfile.h"
#include "tokenizer/bpe.h"

static char dir[] = "/tmp/ctron_test_dataset_XXXXXX";

static const char *path_of(const char *name) {
    static char p[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void write_text(const char *name, const char *text) {
    FILE *f = fopen(path_of(name), "wb");
    fputs(text, f);
    fclose(f);
}

int main(void) {
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    char err[512];
    const char *text = "In the beginning God created the heaven and the earth. And the earth was without form.\n";
    size_t len = strlen(text);
    write_text("t.txt", text);

    // Byte-level text: one token per byte, the last ⌊0.25·n⌋ held out.
    Dataset a;
    CHECK(dataset_load(&a, path_of("t.txt"), NULL, 0.25, 256, err, sizeof err) == 0, "bytes: %s", err);
    int same = a.n == len && a.n_train == len - (size_t)(0.25 * (double)len);
    for (size_t i = 0; same && i < len; i++) same = a.tokens[i] == (unsigned char)text[i];
    int max_byte = 0;
    for (size_t i = 0; i < len; i++) max_byte = (unsigned char)text[i] > max_byte ? (unsigned char)text[i] : max_byte;
    CHECK(same && a.max_token == max_byte, "byte-level dataset_load: tokens are not the file's bytes and split");
    dataset_free(&a);
    CHECK(dataset_load(&a, path_of("t.txt"), NULL, 0.25, 100, err, sizeof err) == -1 &&
          strstr(err, "byte 110 at position 1 is outside the model's vocabulary 0..99"), "bytes vs vocab 100: %s", err);
    CHECK(a.tokens == NULL && a.n == 0, "no partial dataset after an error");

    // Text through a tokenizer.
    Bpe bpe;
    CHECK(bpe_train(&bpe, (const uint8_t *)text, len, 300, NULL, 0, NULL, err, sizeof err) == 0, "train");
    CHECK(bpe_save(&bpe, path_of("tok.json"), err, sizeof err) == 0, "save: %s", err);
    size_t nt;
    int32_t *enc = bpe_encode(&bpe, (const uint8_t *)text, len, &nt);
    CHECK(dataset_load(&a, path_of("t.txt"), path_of("tok.json"), 0.1, 300, err, sizeof err) == 0, "bpe: %s", err);
    CHECK(a.n == nt && memcmp(a.tokens, enc, nt * sizeof *enc) == 0, "text + tokenizer: the BPE tokens");
    CHECK(a.n_train == nt - (size_t)((double)nt * 0.1), "val_frac splits the tokens: %zu of %zu", a.n_train, a.n);
    dataset_free(&a);
    char want[128];
    snprintf(want, sizeof want, "has %d tokens but the model's vocabulary is %d", bpe.vocab_size, bpe.vocab_size - 1);
    CHECK(dataset_load(&a, path_of("t.txt"), path_of("tok.json"), 0.1, bpe.vocab_size - 1, err, sizeof err) == -1 &&
          strstr(err, want), "tokenizer larger than the model: %s", err);
    CHECK(dataset_load(&a, path_of("t.txt"), path_of("nope.json"), 0.1, 300, err, sizeof err) == -1 &&
          strstr(err, "cannot open"), "missing tokenizer: %s", err);

    // Token files, alone and as a train/validation pair.
    CHECK(tokenfile_write(path_of("t.bin"), enc, nt, 0, err, sizeof err) == 0, "write tokens");
    CHECK(tokenfile_write(path_of("v.bin"), enc, 10, 0, err, sizeof err) == 0, "write val tokens");
    CHECK(dataset_load(&a, path_of("t.bin"), NULL, 0.5, 300, err, sizeof err) == 0, "token file: %s", err);
    CHECK(a.n == nt && memcmp(a.tokens, enc, nt * sizeof *enc) == 0 && a.n_train == nt - nt / 2,
          "token file loaded as stored, split by val_frac");
    int maxt = 0;
    for (size_t i = 0; i < nt; i++) maxt = enc[i] > maxt ? enc[i] : maxt;
    CHECK(a.max_token == maxt, "max_token %d, want %d", a.max_token, maxt);
    dataset_free(&a);
    CHECK(dataset_load_split(&a, path_of("t.bin"), path_of("v.bin"), NULL, 0.5, 300, err, sizeof err) == 0,
          "split: %s", err);
    CHECK(a.n == nt + 10 && a.n_train == nt && dataset_n_val(&a) == 10 && memcmp(a.tokens + nt, enc, 10 * sizeof *enc) == 0,
          "explicit validation file: train then val, back to back");
    CHECK(dataset_check_windows(&a, 9, err, sizeof err) == 0, "windows of 10 fit");
    CHECK(dataset_check_windows(&a, 10, err, sizeof err) == -1 && strstr(err, "sequence length 10") &&
          strstr(err, "10 validation tokens"), "windows of 11 do not: %s", err);
    dataset_free(&a);
    CHECK(dataset_load_split(&a, path_of("t.bin"), path_of("t.txt"), path_of("tok.json"), 0, 300, err, sizeof err) == 0 &&
          a.n == 2 * nt, "token file + text validation file through the tokenizer: %s", err);
    dataset_free(&a);
    CHECK(dataset_load(&a, path_of("t.bin"), NULL, 0.5, maxt, err, sizeof err) == -1 && strstr(err, "outside the vocabulary"),
          "token file vs a small vocabulary: %s", err);
    write_text("e.txt", "");
    CHECK(dataset_load(&a, path_of("e.txt"), NULL, 0.1, 256, err, sizeof err) == -1 && strstr(err, "is empty"),
          "empty file: %s", err);
    CHECK(dataset_load_split(&a, path_of("t.bin"), path_of("e.txt"), NULL, 0.1, 300, err, sizeof err) == -1 &&
          strstr(err, "validation file") && strstr(err, "is empty"), "empty validation file: %s", err);
    CHECK(dataset_load(&a, path_of("missing"), NULL, 0.1, 256, err, sizeof err) == -1 && strstr(err, "cannot open"),
          "missing file: %s", err);

    // JSONL (a name ending in .jsonl): each line's "text" one document, through the tokenizer or as
    // bytes; a bad line is named by number.
    write_text("d.jsonl", "{\"text\": \"In the beginning\"}\n\n{\"id\": 7, \"text\": \"God \\u00e9\"}\n");
    size_t n1, n2;
    int32_t *d1 = bpe_encode_doc(&bpe, (const uint8_t *)"In the beginning", 16, &n1);
    int32_t *d2 = bpe_encode_doc(&bpe, (const uint8_t *)"God \xc3\xa9", 6, &n2);
    CHECK(dataset_load(&a, path_of("d.jsonl"), path_of("tok.json"), 0, 300, err, sizeof err) == 0 && a.n == n1 + n2 &&
              memcmp(a.tokens, d1, n1 * sizeof *d1) == 0 && memcmp(a.tokens + n1, d2, n2 * sizeof *d2) == 0,
          "JSONL through the tokenizer: the two documents' ids: %s", err);
    dataset_free(&a);
    CHECK(dataset_load(&a, path_of("d.jsonl"), NULL, 0, 256, err, sizeof err) == 0 && a.n == 22 && a.tokens[16] == 'G' &&
              a.tokens[21] == 0xa9, "JSONL as bytes: %s", err);
    dataset_free(&a);
    free(d1);
    free(d2);
    write_text("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": [1]}\n");
    CHECK(dataset_load(&a, path_of("bad.jsonl"), path_of("tok.json"), 0, 300, err, sizeof err) == -1 &&
              strstr(err, "bad.jsonl' line 2: \"text\" is not a string"), "a bad JSONL line: %s", err);

    free(enc);
    bpe_free(&bpe);
    const char *names[] = {"t.txt", "tok.json", "t.bin", "v.bin", "e.txt", "d.jsonl", "bad.jsonl"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(path_of(names[i]));
    rmdir(dir);
    return check_summary();
}
