#include "util/fileio.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "util/common.h"

const char *fileio_kind(unsigned mode) {
    return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
         : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : "not a regular file";
}

int fileio_open_regular(const char *path, char *err, size_t errlen) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) { snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno)); return -1; }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "'%s' is %s, expected a regular file", path, fileio_kind(st.st_mode));
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

int fileio_read_all(const char *path, uint8_t **data, size_t *n, char *err, size_t errlen) {
    return fileio_read_bounded(path, SIZE_MAX, data, n, err, errlen);
}

int fileio_read_bounded(const char *path, size_t max, uint8_t **data, size_t *n, char *err, size_t errlen) {
    *data = NULL;
    *n = 0;
    int fd = fileio_open_regular(path, err, errlen);
    if (fd < 0) return -1;
    struct stat st;
    fstat(fd, &st);
    if ((unsigned long long)st.st_size > (unsigned long long)max) {
        snprintf(err, errlen, "'%s' holds %lld bytes, more than the %zu this reader takes", path, (long long)st.st_size,
                 max);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size, got = 0;
    uint8_t *buf = xmalloc(size);
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(err, errlen, "short read of '%s': %zu of %zu bytes%s%s", path, got, size, r < 0 ? ": " : "",
                     r < 0 ? strerror(errno) : "");
            free(buf);
            close(fd);
            return -1;
        }
        got += (size_t)r;
    }
    close(fd);
    *data = buf;
    *n = size;
    return 0;
}

static int write_all(int fd, const uint8_t *p, size_t len) {
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w == 0) errno = ENOSPC;
        if (w <= 0) return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

int fileio_out_kind(const char *path, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) return FILEIO_OUT_REPLACE;   // absent: created
    if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) return FILEIO_OUT_IN_PLACE;
    snprintf(err, errlen, "'%s' is %s: an output must be a regular file, a FIFO or a character device",
             path, fileio_kind(st.st_mode));
    return FILEIO_OUT_REFUSED;
}

int fileio_open_in_place(const char *path, int append, char *err, size_t errlen) {
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : 0));
    if (fd < 0) {
        if (errno == ENXIO) snprintf(err, errlen, "'%s' is a FIFO that nobody reads (start its reader first)", path);
        else snprintf(err, errlen, "cannot open '%s' for writing: %s", path, strerror(errno));
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

FILE *fileio_fopen_out(const char *path, int append, char *err, size_t errlen) {
    int kind = fileio_out_kind(path, err, errlen), fd;
    if (kind == FILEIO_OUT_REFUSED) return NULL;
    if (kind == FILEIO_OUT_IN_PLACE) fd = fileio_open_in_place(path, append, err, errlen);
    else if ((fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644)) < 0)
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, append ? "a" : "w");
    if (!f) { snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno)); close(fd); }
    return f;
}

// A FIFO or a device: the bytes go straight in (no fsync: it has no storage to flush).
static int write_in_place(const char *path, const void *const *parts, const size_t *sizes, int n_parts, char *err,
                          size_t errlen) {
    int fd = fileio_open_in_place(path, 0, err, errlen);
    if (fd < 0) return -1;
    int ok = 1;
    for (int i = 0; ok && i < n_parts; i++) ok = write_all(fd, parts[i], sizes[i]) == 0;
    int saved = errno;
    if (close(fd) != 0 && ok) { ok = 0; saved = errno; }
    if (!ok) snprintf(err, errlen, "cannot write '%s': %s", path, strerror(saved));
    return ok ? 0 : -1;
}

int fileio_write_atomic(const char *path, const void *const *parts, const size_t *sizes, int n_parts,
                        char *err, size_t errlen) {
    int kind = fileio_out_kind(path, err, errlen);
    if (kind == FILEIO_OUT_REFUSED) return -1;
    if (kind == FILEIO_OUT_IN_PLACE) return write_in_place(path, parts, sizes, n_parts, err, errlen);
    size_t tlen = strlen(path) + 5;
    char *tmp = xmalloc(tlen);
    snprintf(tmp, tlen, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create '%s': %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    int ok = 1;
    for (int i = 0; ok && i < n_parts; i++) ok = write_all(fd, parts[i], sizes[i]) == 0;
    ok = ok && fsync(fd) == 0;
    int saved = errno;
    if (close(fd) != 0 && ok) { ok = 0; saved = errno; }
    if (ok && rename(tmp, path) != 0) { ok = 0; saved = errno; }
    if (!ok) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(saved));
        unlink(tmp);
    }
    free(tmp);
    return ok ? 0 : -1;
}
