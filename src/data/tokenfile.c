#include "data/tokenfile.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "util/common.h"
#include "util/fileio.h"
#include <unistd.h>

static void put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int tokenfile_token_bytes(int vocab) { return vocab > TOKENFILE_MAX_VOCAB ? 4 : 2; }

int tokenfile_write(const char *path, const int32_t *tokens, size_t n, int vocab, char *err, size_t errlen) {
    if (n > INT32_MAX) {
        snprintf(err, errlen, "'%s': %zu tokens do not fit a token file (at most %d)", path, n, INT32_MAX);
        return -1;
    }
    int32_t largest = 0;
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || (vocab > 0 && tokens[i] >= vocab)) {
            snprintf(err, errlen, "'%s': token %d at position %zu is outside the vocabulary 0..%d", path, tokens[i],
                     i, (vocab > 0 ? vocab : INT32_MAX) - 1);
            return -1;
        }
        if (tokens[i] > largest) largest = tokens[i];
    }
    int width = tokenfile_token_bytes(vocab > 0 ? vocab : largest + 1);
    uint8_t header[TOKENFILE_HEADER_BYTES] = {0};
    put_le32(header, width == 2 ? TOKENFILE_MAGIC : TOKENFILE_MAGIC_U32);
    put_le32(header + 4, width == 2 ? TOKENFILE_VERSION : TOKENFILE_VERSION_U32);
    put_le32(header + 8, (uint32_t)n);
    uint8_t *body = xmalloc(n ? (size_t)width * n : 1);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < width; k++) body[(size_t)width * i + (size_t)k] = (uint8_t)((uint32_t)tokens[i] >> (8 * k));
    const void *parts[2] = {header, body};
    size_t sizes[2] = {sizeof header, (size_t)width * n};
    int rc = fileio_write_atomic(path, parts, sizes, 2, err, errlen);
    free(body);
    return rc;
}

// The token width of a header (2 or 4), or 0 with a message when magic and version are not a pair
// ctron reads.
static int header_width(const char *path, uint32_t magic, uint32_t version, char *err, size_t errlen) {
    if (magic == TOKENFILE_MAGIC && version == TOKENFILE_VERSION) return 2;
    if (magic == TOKENFILE_MAGIC_U32 && version == TOKENFILE_VERSION_U32) return 4;
    snprintf(err, errlen, "'%s': token-file version %u with magic %u, expected version %d (uint16 tokens, magic %d) "
             "or %d (uint32 tokens, magic %d)", path, version, magic, TOKENFILE_VERSION, TOKENFILE_MAGIC,
             TOKENFILE_VERSION_U32, TOKENFILE_MAGIC_U32);
    return 0;
}

int tokenfile_read(const char *path, int vocab, int32_t **tokens, size_t *n, char *err, size_t errlen) {
    *tokens = NULL;
    *n = 0;
    uint8_t *data;
    size_t size;
    if (fileio_read_all(path, &data, &size, err, errlen) != 0) return -1;
    int rc = -1, width = 0;
    uint32_t magic = size >= 4 ? get_le32(data) : 0;
    if (size >= 4 && magic != TOKENFILE_MAGIC && magic != TOKENFILE_MAGIC_U32) {
        snprintf(err, errlen, "'%s' is not a token file: magic number %u, expected %d (uint16 tokens) or %d (uint32)",
                 path, magic, TOKENFILE_MAGIC, TOKENFILE_MAGIC_U32);
    } else if (size < TOKENFILE_HEADER_BYTES) {
        snprintf(err, errlen, "'%s': truncated header: the file has %zu bytes, a token-file header has %d", path,
                 size, TOKENFILE_HEADER_BYTES);
    } else if ((width = header_width(path, magic, get_le32(data + 4), err, errlen)) != 0) {
        uint32_t raw = get_le32(data + 8);
        size_t count = raw, want = TOKENFILE_HEADER_BYTES + (size_t)width * count;
        if (raw > INT32_MAX) {
            snprintf(err, errlen, "'%s': token count %d in the header is negative", path, (int32_t)raw);
        } else if (size != want) {
            snprintf(err, errlen, "'%s': the header says %zu tokens of %d bytes (%zu bytes with the header) but the "
                     "file has %zu bytes", path, count, width, want, size);
        } else {
            int32_t *t = xmalloc((count ? count : 1) * sizeof *t);
            const uint8_t *body = data + TOKENFILE_HEADER_BYTES;
            rc = 0;
            for (size_t i = 0; i < count; i++) {
                uint32_t v = width == 2 ? (uint32_t)(body[2 * i] | body[2 * i + 1] << 8) : get_le32(body + 4 * i);
                if (v > INT32_MAX || (vocab > 0 && v >= (uint32_t)vocab)) {
                    snprintf(err, errlen, "'%s': token %u at position %zu is outside the vocabulary 0..%d", path, v, i,
                             (vocab > 0 ? vocab : INT32_MAX) - 1);
                    rc = -1;
                    break;
                }
                t[i] = (int32_t)v;
            }
            if (rc == 0) { *tokens = t; *n = count; }
            else free(t);
        }
    }
    free(data);
    return rc;
}

int tokenfile_sniff(const char *path, char *err, size_t errlen) {
    int fd = fileio_open_regular(path, err, errlen);   // a FIFO is refused, never waited on
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "rb");
    if (!f) { snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno)); close(fd); return -1; }
    uint8_t head[4];
    size_t got = fread(head, 1, 4, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) { snprintf(err, errlen, "cannot read '%s'", path); return -1; }
    return got == 4 && (get_le32(head) == TOKENFILE_MAGIC || get_le32(head) == TOKENFILE_MAGIC_U32);
}
