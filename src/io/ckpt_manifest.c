#include "io/ckpt_manifest.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "util/common.h"
#include "util/fileio.h"

int ckpt_file_crc(const char *path, uint32_t *crc, uint64_t *size, char *err, size_t errlen) {
    int fd = fileio_open_regular(path, err, errlen);
    if (fd < 0) return -1;
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = xmalloc(CHUNK);
    uLong c = crc32(0L, Z_NULL, 0);
    uint64_t total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, CHUNK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
            free(buf);
            close(fd);
            return -1;
        }
        if (r == 0) break;
        c = crc32(c, buf, (uInt)r);
        total += (uint64_t)r;
    }
    free(buf);
    close(fd);
    *crc = (uint32_t)c;
    *size = total;
    return 0;
}

int ckpt_manifest_write(const char *dir, const char *const *names, int n, char *err, size_t errlen) {
    size_t cap = 64 + (size_t)n * 128, k = 0;
    char *text = xmalloc(cap), path[4200];
    k += (size_t)snprintf(text + k, cap - k, "%s\n", CKPT_MANIFEST_HEADER);
    for (int i = 0; i < n; i++) {
        uint32_t crc;
        uint64_t size;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (ckpt_file_crc(path, &crc, &size, err, errlen) != 0) { free(text); return -1; }
        k += (size_t)snprintf(text + k, cap - k, "crc32 %08x %llu %s\n", crc, (unsigned long long)size, names[i]);
    }
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_MANIFEST_FILE);
    const void *parts[1] = {text};
    int rc = fileio_write_atomic(path, parts, &k, 1, err, errlen);
    free(text);
    return rc;
}

static int plain_name(const char *s, size_t n) {
    if (n == 0 || n >= sizeof(((CkptSum *)0)->name) || s[0] == '.') return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '.' || s[i] == '_' || s[i] == '-'))
            return 0;
    return 1;
}

// One line "crc32 XXXXXXXX SIZE NAME" (without its newline) into e; 0 or -1.
static int parse_line(const char *s, size_t n, CkptSum *e) {
    if (n < 6 || memcmp(s, "crc32 ", 6) != 0) return -1;
    size_t i = 6;
    uint32_t crc = 0;
    for (int d = 0; d < 8; d++, i++) {
        if (i >= n) return -1;
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) return -1;
        crc = crc << 4 | (uint32_t)v;
    }
    if (i >= n || s[i++] != ' ') return -1;
    uint64_t size = 0;
    size_t d0 = i;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        if (i - d0 >= 19) return -1;   // below 10^19: no overflow
        size = size * 10 + (uint64_t)(s[i] - '0');
    }
    if (i == d0 || i >= n || s[i++] != ' ') return -1;
    if (!plain_name(s + i, n - i)) return -1;
    memcpy(e->name, s + i, n - i);
    e->name[n - i] = '\0';
    e->crc = crc;
    e->size = size;
    return 0;
}

int ckpt_manifest_parse(const char *text, size_t n, const char *path, CkptManifest *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    size_t pos = 0, hl = strlen(CKPT_MANIFEST_HEADER);
    int line = 1;
    if (n < hl + 1 || memcmp(text, CKPT_MANIFEST_HEADER, hl) != 0 || text[hl] != '\n') {
        snprintf(err, errlen, "'%s': line 1 must be \"%s\"", path, CKPT_MANIFEST_HEADER);
        return -1;
    }
    pos = hl + 1;
    while (pos < n) {
        line++;
        const char *nl = memchr(text + pos, '\n', n - pos);
        if (!nl) {
            snprintf(err, errlen, "'%s': line %d does not end with a newline (the file is truncated)", path, line);
            return -1;
        }
        size_t len = (size_t)(nl - (text + pos));
        if (m->n == CKPT_MANIFEST_MAX) {
            snprintf(err, errlen, "'%s': more than %d files listed", path, CKPT_MANIFEST_MAX);
            return -1;
        }
        if (parse_line(text + pos, len, &m->e[m->n]) != 0) {
            snprintf(err, errlen, "'%s': line %d is not \"crc32 <8 lowercase hex digits> <size> <file name>\"", path,
                     line);
            return -1;
        }
        if (ckpt_manifest_find(m, m->e[m->n].name)) {
            snprintf(err, errlen, "'%s': line %d lists '%s' a second time", path, line, m->e[m->n].name);
            return -1;
        }
        m->n++;
        pos += len + 1;
    }
    return 0;
}

int ckpt_manifest_read(const char *dir, CkptManifest *m, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, CKPT_MANIFEST_FILE);
    if (access(path, F_OK) != 0 && errno == ENOENT) { memset(m, 0, sizeof *m); return 1; }
    uint8_t *data;
    size_t n;
    if (fileio_read_all(path, &data, &n, err, errlen) != 0) return -1;
    int rc = ckpt_manifest_parse((const char *)data, n, path, m, err, errlen);
    free(data);
    return rc;
}

const CkptSum *ckpt_manifest_find(const CkptManifest *m, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->e[i].name, name) == 0) return &m->e[i];
    return NULL;
}

int ckpt_manifest_verify(const char *dir, const CkptManifest *m, char *err, size_t errlen) {
    char path[4200];
    for (int i = 0; i < m->n; i++) {
        uint32_t crc;
        uint64_t size;
        snprintf(path, sizeof path, "%s/%s", dir, m->e[i].name);
        if (ckpt_file_crc(path, &crc, &size, err, errlen) != 0) return -1;
        if (size != m->e[i].size) {
            snprintf(err, errlen, "'%s' has %llu bytes, %s lists %llu (truncated or replaced)", path,
                     (unsigned long long)size, CKPT_MANIFEST_FILE, (unsigned long long)m->e[i].size);
            return -1;
        }
        if (crc != m->e[i].crc) {
            snprintf(err, errlen, "'%s' has crc32 %08x, %s lists %08x (the file is corrupt)", path, crc,
                     CKPT_MANIFEST_FILE, m->e[i].crc);
            return -1;
        }
    }
    return 0;
}
