#include "memory/offload_pool.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "util/common.h"

enum { QUEUE = 64 };   // operations in flight; a layer submits one store and one load per step
// The file's bounce buffer when device memory is not host-addressable: moved in pieces of this size.
enum { BOUNCE_MAX = 8 << 20 };

typedef struct { int load; size_t at, n; uint8_t *buf; } PoolOp;

struct OffloadPool {
    Backend *be;
    uint8_t *mem;                  // host memory (the backend's host_alloc: pinned on a GPU)
    uint8_t *bounce;               // file and a device the host cannot address: host_alloc'd staging
    size_t bounce_bytes;
    int fd;                        // file backend (-1: host memory)
    char where[512];
    size_t bytes;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t work, done_cv;
    PoolOp queue[QUEUE];
    uint64_t submitted, done;      // tickets: operation k is done when done >= k
    int quit;
    int err_errno;                 // first I/O error (0: none), and the operation it stopped
    PoolOp err_op;
    OffloadStats stats;
};

// The whole of n bytes, or -1 with errno (pread/pwrite may move less than asked).
static int file_io(int fd, int load, uint8_t *buf, size_t n, size_t at) {
    while (n > 0) {
        ssize_t k = load ? pread(fd, buf, n, (off_t)at) : pwrite(fd, buf, n, (off_t)at);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) { errno = load ? EIO : ENOSPC; return -1; }
        buf += k; at += (size_t)k; n -= (size_t)k;
    }
    return 0;
}

// Device ↔ host, waited for here (in the I/O thread): on a GPU the copy engine moves it while the
// compute thread goes on; on the CPU the copy is done when copy_async returns.
static void move(OffloadPool *p, int load, uint8_t *dev, uint8_t *host, size_t n) {
    BackendEvent ev = {0};
    if (load) p->be->copy_async(p->be, dev, host, n, COPY_H2D, &ev);
    else p->be->copy_async(p->be, host, dev, n, COPY_D2H, &ev);
    p->be->event_wait(p->be, &ev);
}

static int run_op(OffloadPool *p, const PoolOp *op) {
    if (p->fd < 0) {
        move(p, op->load, op->buf, p->mem + op->at, op->n);
        return 0;
    }
    if (!p->bounce)   // the host reads and writes the device buffer in place (the CPU backend)
        return file_io(p->fd, op->load, op->buf, op->n, op->at) == 0 ? 0 : errno;
    for (size_t done = 0; done < op->n; done += p->bounce_bytes) {
        size_t k = op->n - done < p->bounce_bytes ? op->n - done : p->bounce_bytes;
        if (!op->load) move(p, 0, op->buf + done, p->bounce, k);
        if (file_io(p->fd, op->load, p->bounce, k, op->at + done) != 0) return errno;
        if (op->load) move(p, 1, op->buf + done, p->bounce, k);
    }
    return 0;
}

static void *io_thread(void *arg) {
    OffloadPool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (p->done == p->submitted && !p->quit) pthread_cond_wait(&p->work, &p->lock);
        if (p->done == p->submitted) break;
        PoolOp op = p->queue[p->done % QUEUE];
        pthread_mutex_unlock(&p->lock);
        int e = p->err_errno ? 0 : run_op(p, &op);   // after an error nothing more is moved
        pthread_mutex_lock(&p->lock);
        if (e && !p->err_errno) { p->err_errno = e; p->err_op = op; }
        p->done++;
        pthread_cond_broadcast(&p->done_cv);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static int open_file(OffloadPool *p, const char *dir, size_t bytes, char *err, size_t errlen) {
    char path[600];
    snprintf(path, sizeof path, "%s/ctron-offload-XXXXXX", dir);
    p->fd = mkstemp(path);
    if (p->fd < 0) {
        snprintf(err, errlen, "--offload-dir %s: cannot create the offload file: %s", dir, strerror(errno));
        return -1;
    }
    unlink(path);   // the file lives as long as the descriptor: nothing is left behind, even on a crash
    int e = posix_fallocate(p->fd, 0, (off_t)(bytes ? bytes : 1));
    if (e != 0) {
        snprintf(err, errlen, "--offload-dir %s: cannot reserve %zu bytes for the offload pool: %s", dir, bytes,
                 strerror(e));
        close(p->fd);
        return -1;
    }
    snprintf(p->where, sizeof p->where, "file in %s", dir);
    return 0;
}

OffloadPool *offload_pool_open(Backend *be, size_t bytes, const char *dir, char *err, size_t errlen) {
    OffloadPool *p = xcalloc(sizeof *p);
    p->be = be;
    p->bytes = bytes;
    p->fd = -1;
    if (dir) {
        if (open_file(p, dir, bytes, err, errlen) != 0) {
            free(p);
            return NULL;
        }
        if (!be->host_addressable) {
            p->bounce_bytes = bytes < BOUNCE_MAX ? (bytes ? bytes : 1) : BOUNCE_MAX;
            p->bounce = be->host_alloc(be, p->bounce_bytes);
        }
    } else {
        p->mem = be->host_alloc(be, bytes);   // zeroed now: there before training, not faulted in mid-step
        snprintf(p->where, sizeof p->where, "host memory");
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    if (pthread_create(&p->thread, NULL, io_thread, p) != 0) ctron_fatal("offload: cannot start the I/O thread");
    return p;
}

void offload_pool_close(OffloadPool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->quit = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done_cv);
    if (p->fd >= 0) close(p->fd);
    if (p->mem) p->be->host_free(p->be, p->mem);
    if (p->bounce) p->be->host_free(p->be, p->bounce);
    free(p);
}

static uint64_t submit(OffloadPool *p, int load, size_t at, void *buf, size_t n) {
    if (at + n > p->bytes || at + n < at)
        ctron_fatal("offload: %s of %zu bytes at %zu is outside the %zu-byte pool", load ? "load" : "store", n, at,
                    p->bytes);
    pthread_mutex_lock(&p->lock);
    while (p->submitted - p->done >= QUEUE) pthread_cond_wait(&p->done_cv, &p->lock);
    PoolOp op = {load, at, n, buf};
    p->queue[p->submitted % QUEUE] = op;
    uint64_t ticket = ++p->submitted;
    if (load) p->stats.loaded += n;
    else p->stats.stored += n;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->lock);
    return ticket;
}

uint64_t offload_pool_store(OffloadPool *p, size_t at, const void *src, size_t n) {
    return submit(p, 0, at, (void *)src, n);
}

uint64_t offload_pool_load(OffloadPool *p, size_t at, void *dst, size_t n) { return submit(p, 1, at, dst, n); }

void offload_pool_wait(OffloadPool *p, uint64_t ticket) {
    pthread_mutex_lock(&p->lock);
    if (p->done < ticket) {
        double t0 = now_seconds();
        while (p->done < ticket) pthread_cond_wait(&p->done_cv, &p->lock);
        p->stats.wait_s += now_seconds() - t0;
    }
    int e = p->err_errno;
    PoolOp op = p->err_op;
    pthread_mutex_unlock(&p->lock);
    if (e)
        ctron_fatal("offload: %s %zu bytes at byte %zu of the pool (%s) failed: %s", op.load ? "reading" : "writing",
                    op.n, op.at, p->where, strerror(e));
}

void offload_pool_drain(OffloadPool *p) {
    pthread_mutex_lock(&p->lock);
    uint64_t last = p->submitted;
    pthread_mutex_unlock(&p->lock);
    offload_pool_wait(p, last);
}

OffloadStats offload_pool_stats(const OffloadPool *p) { return p->stats; }

const char *offload_pool_where(const OffloadPool *p) { return p->where; }
