// Token files (llm.c format): write/read round trip, and hand-made bad files rejected with a
// message that names the bad value and what was expected.
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

// A file with the given header fields and n_body uint16 tokens 0, 1, 2, ...
static void write_raw(const char *name, int32_t magic, int32_t version, int32_t count, size_t header_bytes,
                      size_t n_body) {
    FILE *f = fopen(path_of(name), "wb");
    int32_t hdr[256] = {0};
    hdr[0] = magic;   // the test machine is little-endian, as the format is
    hdr[1] = version;
    hdr[2] = count;
    fwrite(hdr, 1, header_bytes, f);
    for (size_t i = 0; i < n_body; i++) {
        uint16_t t = (uint16_t)i;
        fwrite(&t, 2, 1, f);
    }
    fclose(f);
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
    CHECK(tokenfile_write(path_of("a.bin"), tok, n, err, sizeof err) == 0, "write: %s", err);
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
    CHECK(tokenfile_write(path_of("empty.bin"), tok, 0, err, sizeof err) == 0, "write 0 tokens");
    CHECK(tokenfile_read(path_of("empty.bin"), 256, &back, &nb, err, sizeof err) == 0 && nb == 0 && back,
          "read 0 tokens: %s", err);
    free(back);

    // Writing ids that do not fit uint16 fails and leaves nothing.
    tok[5] = 65536;
    CHECK(tokenfile_write(path_of("big.bin"), tok, 10, err, sizeof err) == -1 && strstr(err, "token 65536 at position 5"),
          "write rejects 65536: %s", err);
    CHECK(access(path_of("big.bin"), F_OK) != 0 && access(path_of("big.bin.tmp"), F_OK) != 0, "no file after a failed write");
    tok[5] = -3;
    CHECK(tokenfile_write(path_of("big.bin"), tok, 10, err, sizeof err) == -1 && strstr(err, "token -3"),
          "write rejects -3: %s", err);
    CHECK(tokenfile_write("/nonexistent-dir/x.bin", tok, 1, err, sizeof err) == -1 && strstr(err, "cannot create"),
          "write into a missing folder: %s", err);

    // Hand-made bad files.
    write_raw("magic.bin", 12345, 1, 4, 1024, 4);
    expect_reject("magic.bin", 0, "magic number 12345, expected 20240520");
    write_raw("version.bin", 20240520, 2, 4, 1024, 4);
    expect_reject("version.bin", 0, "version 2, expected 1");
    write_raw("short.bin", 20240520, 1, 10, 1024, 9);
    expect_reject("short.bin", 0, "the header says 10 tokens (1044 bytes with the header) but the file has 1042 bytes");
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

    const char *names[] = {"a.bin", "empty.bin", "magic.bin", "version.bin", "short.bin", "long.bin", "negative.bin",
                           "truncated.bin", "vocab.bin", "text.txt"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(path_of(names[i]));
    rmdir(dir);
    free(tok);
    return check_summary();
}
