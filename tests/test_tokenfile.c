// Token files (llm.c format, uint16 version 1 and uint32 version 7): write/read round trips, the
// width chosen by the vocabulary, and hand-made bad files rejected with a message that names the
// bad value and what was expected.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "data/tokenfile.h"

static char dir[] = "/tmp/ctron_test_tokenfile_XXXXXX";

static const char *path_of(const char *name) {
    static char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

// A file with the given header fields and n_body tokens 0, 1, 2, ... of `width` bytes (the last
// one `last` when width is 4).
static void write_raw_w(const char *name, int32_t magic, int32_t version, int32_t count, size_t header_bytes,
                        size_t n_body, int width, uint32_t last) {
    FILE *f = fopen(path_of(name), "wb");
    int32_t hdr[256] = {0};
    hdr[0] = magic;   // the test machine is little-endian, as the format is
    hdr[1] = version;
    hdr[2] = count;
    fwrite(hdr, 1, header_bytes, f);
    for (size_t i = 0; i < n_body; i++) {
        uint16_t t = (uint16_t)i;
        uint32_t u = i + 1 == n_body ? last : (uint32_t)i;
        if (width == 2) fwrite(&t, 2, 1, f);
        else fwrite(&u, 4, 1, f);
    }
    fclose(f);
}

static void write_raw(const char *name, int32_t magic, int32_t version, int32_t count, size_t header_bytes,
                      size_t n_body) {
    write_raw_w(name, magic, version, count, header_bytes, n_body, 2, 0);
}

static void expect_reject(const char *name, int vocab, const char *needle);

static long file_size(const char *name) {
    FILE *f = fopen(path_of(name), "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    return size;
}

static int32_t header_word(const char *name, int k) {
    int32_t hdr[3] = {0};
    FILE *f = fopen(path_of(name), "rb");
    if (fread(hdr, 4, 3, f) != 3) hdr[k] = -1;
    fclose(f);
    return hdr[k];
}

// Vocabularies above 65,536 (Llama 3's 128,256): uint32 tokens, llm.c's magic 20240801 version 7.
static void test_uint32(void) {
    char err[512];
    size_t n = 50000;
    int32_t *tok = malloc(n * sizeof *tok), *back;
    size_t nb;
    for (size_t i = 0; i < n; i++) tok[i] = (int32_t)((i * 2654435761u) % 128256);
    tok[0] = 128255;
    tok[1] = 65536;
    CHECK(tokenfile_write(path_of("u32.bin"), tok, n, 128256, err, sizeof err) == 0, "write uint32: %s", err);
    CHECK(file_size("u32.bin") == 1024 + 4 * (long)n && header_word("u32.bin", 0) == 20240801 &&
              header_word("u32.bin", 1) == 7 && header_word("u32.bin", 2) == (int32_t)n,
          "vocab 128256 writes uint32 tokens under magic 20240801, version 7: %ld bytes", file_size("u32.bin"));
    CHECK(tokenfile_read(path_of("u32.bin"), 128256, &back, &nb, err, sizeof err) == 0 && nb == n &&
              memcmp(back, tok, n * sizeof *tok) == 0, "uint32 round trip: %s", err);
    free(back);
    expect_reject("u32.bin", 128255, "token 128255 at position 0 is outside the vocabulary 0..128254");
    CHECK(tokenfile_sniff(path_of("u32.bin"), err, sizeof err) == 1, "sniff: a uint32 token file");
    // The same ids of a small vocabulary stay uint16; a large vocabulary with small ids is uint32.
    for (size_t i = 0; i < n; i++) tok[i] %= 1000;
    CHECK(tokenfile_write(path_of("u16.bin"), tok, n, 50257, err, sizeof err) == 0 && file_size("u16.bin") == 1024 + 2 * (long)n &&
              header_word("u16.bin", 0) == 20240520 && header_word("u16.bin", 1) == 1, "vocab 50257 writes uint16");
    CHECK(tokenfile_write(path_of("u16.bin"), tok, n, 65536, err, sizeof err) == 0 && file_size("u16.bin") == 1024 + 2 * (long)n,
          "vocab 65536 writes uint16");
    CHECK(tokenfile_write(path_of("u32.bin"), tok, n, 65537, err, sizeof err) == 0 && file_size("u32.bin") == 1024 + 4 * (long)n,
          "vocab 65537 writes uint32");
    // vocab 0: the largest id decides.
    tok[7] = 65536;
    CHECK(tokenfile_write(path_of("auto.bin"), tok, n, 0, err, sizeof err) == 0 && header_word("auto.bin", 1) == 7,
          "vocab 0 with id 65536 writes uint32");
    tok[7] = 65535;
    CHECK(tokenfile_write(path_of("auto.bin"), tok, n, 0, err, sizeof err) == 0 && header_word("auto.bin", 1) == 1,
          "vocab 0 with ids below 65536 writes uint16");
    tok[9] = 70000;
    CHECK(tokenfile_write(path_of("bad.bin"), tok, n, 65536, err, sizeof err) == -1 &&
              strstr(err, "token 70000 at position 9 is outside the vocabulary 0..65535") && access(path_of("bad.bin"), F_OK) != 0,
          "an id past the vocabulary is refused: %s", err);
    // Hand-made uint32 files.
    write_raw_w("w32.bin", 20240801, 7, 5, 1024, 5, 4, 200000);
    CHECK(tokenfile_read(path_of("w32.bin"), 0, &back, &nb, err, sizeof err) == 0 && nb == 5 && back[4] == 200000,
          "a hand-made uint32 file reads: %s", err);
    free(back);
    write_raw_w("w32.bin", 20240801, 7, 5, 1024, 5, 4, 0x80000000u);
    expect_reject("w32.bin", 0, "token 2147483648 at position 4 is outside the vocabulary 0..2147483646");
    write_raw_w("w32.bin", 20240801, 7, 5, 1024, 4, 4, 3);
    expect_reject("w32.bin", 0, "the header says 5 tokens of 4 bytes (1044 bytes with the header) but the file has 1040");
    write_raw_w("mixed.bin", 20240801, 1, 5, 1024, 5, 2, 0);
    expect_reject("mixed.bin", 0, "token-file version 1 with magic 20240801, expected version 1 (uint16 tokens, magic "
                                  "20240520) or 7 (uint32 tokens, magic 20240801)");
    write_raw_w("mixed.bin", 20240520, 7, 5, 1024, 5, 4, 0);
    expect_reject("mixed.bin", 0, "token-file version 7 with magic 20240520");
    const char *names[] = {"u32.bin", "u16.bin", "auto.bin", "w32.bin", "mixed.bin"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(path_of(names[i]));
    free(tok);
}

static void expect_reject(const char *name, int vocab, const char *needle) {
    int32_t *t = (int32_t *)1;
    size_t n = 99;
    char err[512] = "";
    int rc = tokenfile_read(path_of(name), vocab, &t, &n, err, sizeof err);
    CHECK(rc == -1 && t == NULL && n == 0 && strstr(err, needle), "%s: got rc %d, '%s', want '%s'", name, rc, err,
          needle);
}

int main(void) {
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    char err[512];

    // Round trip, extremes included.
    size_t n = 100000;
    int32_t *tok = malloc(n * sizeof *tok);
    for (size_t i = 0; i < n; i++) tok[i] = (int32_t)((i * 2654435761u) % 65536);
    tok[0] = 0;
    tok[1] = 65535;
    CHECK(tokenfile_write(path_of("a.bin"), tok, n, 65536, err, sizeof err) == 0, "write: %s", err);
    FILE *f = fopen(path_of("a.bin"), "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    CHECK(size == 1024 + 2 * (long)n, "file size %ld, want %ld", size, 1024 + 2 * (long)n);
    CHECK(access(path_of("a.bin.tmp"), F_OK) != 0, "no temporary file is left behind");
    int32_t *back;
    size_t nb;
    CHECK(tokenfile_read(path_of("a.bin"), 0, &back, &nb, err, sizeof err) == 0, "read: %s", err);
    CHECK(nb == n && memcmp(back, tok, n * sizeof *tok) == 0, "read gives back the written tokens");
    free(back);
    CHECK(tokenfile_read(path_of("a.bin"), 65536, &back, &nb, err, sizeof err) == 0, "vocab 65536 admits 65535");
    free(back);
    expect_reject("a.bin", 65535, "token 65535 at position 1 is outside the vocabulary 0..65534");
    CHECK(tokenfile_sniff(path_of("a.bin"), err, sizeof err) == 1, "sniff: a token file");

    // An empty token list is a valid file.
    CHECK(tokenfile_write(path_of("empty.bin"), tok, 0, 256, err, sizeof err) == 0, "write 0 tokens");
    CHECK(tokenfile_read(path_of("empty.bin"), 256, &back, &nb, err, sizeof err) == 0 && nb == 0 && back,
          "read 0 tokens: %s", err);
    free(back);

    // Writing ids past the vocabulary fails and leaves nothing.
    tok[5] = 65536;
    CHECK(tokenfile_write(path_of("big.bin"), tok, 10, 65536, err, sizeof err) == -1 && strstr(err, "token 65536 at position 5"),
          "write rejects 65536 for a vocabulary of 65536: %s", err);
    CHECK(access(path_of("big.bin"), F_OK) != 0 && access(path_of("big.bin.tmp"), F_OK) != 0, "no file after a failed write");
    tok[5] = -3;
    CHECK(tokenfile_write(path_of("big.bin"), tok, 10, 0, err, sizeof err) == -1 && strstr(err, "token -3"),
          "write rejects -3: %s", err);
    CHECK(tokenfile_write("/nonexistent-dir/x.bin", tok, 1, 0, err, sizeof err) == -1 && strstr(err, "cannot create"),
          "write into a missing folder: %s", err);

    // Hand-made bad files.
    write_raw("magic.bin", 12345, 1, 4, 1024, 4);
    expect_reject("magic.bin", 0, "magic number 12345, expected 20240520 (uint16 tokens) or 20240801 (uint32)");
    write_raw("version.bin", 20240520, 2, 4, 1024, 4);
    expect_reject("version.bin", 0, "version 2 with magic 20240520, expected version 1");
    write_raw("short.bin", 20240520, 1, 10, 1024, 9);
    expect_reject("short.bin", 0, "the header says 10 tokens of 2 bytes (1044 bytes with the header) but the file has 1042 bytes");
    write_raw("long.bin", 20240520, 1, 3, 1024, 4);
    expect_reject("long.bin", 0, "the header says 3 tokens");
    write_raw("negative.bin", 20240520, 1, -7, 1024, 0);
    expect_reject("negative.bin", 0, "token count -7");
    write_raw("truncated.bin", 20240520, 1, 0, 100, 0);
    expect_reject("truncated.bin", 0, "truncated header: the file has 100 bytes, a token-file header has 1024");
    write_raw("vocab.bin", 20240520, 1, 300, 1024, 300);
    expect_reject("vocab.bin", 256, "token 256 at position 256 is outside the vocabulary 0..255");
    expect_reject("missing.bin", 0, "cannot open");

    f = fopen(path_of("text.txt"), "w");
    fputs("In the beginning", f);
    fclose(f);
    expect_reject("text.txt", 0, "is not a token file");
    CHECK(tokenfile_sniff(path_of("text.txt"), err, sizeof err) == 0, "sniff: text");
    CHECK(tokenfile_sniff(path_of("missing.bin"), err, sizeof err) == -1 && strstr(err, "cannot open"), "sniff: missing");

    test_uint32();
    const char *names[] = {"a.bin", "empty.bin", "magic.bin", "version.bin", "short.bin", "long.bin", "negative.bin",
                           "truncated.bin", "vocab.bin", "text.txt"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(path_of(names[i]));
    rmdir(dir);
    free(tok);
    return check_summary();
}
