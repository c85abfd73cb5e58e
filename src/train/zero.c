#include "train/zero.h"
#include <string.h>
#include "parallel/comm_device.h"
#include "util/common.h"

enum { ZERO_PIECE_MAX = 1 << 22 };

void zero_init(Zero *z, CommGroup *dp, size_t n, Backend *be) {
    memset(z, 0, sizeof *z);
    z->dp = dp;
    z->be = be && !be->host_addressable ? be : NULL;
    z->n = n;
    size_t per_rank = (n + (size_t)dp->size - 1) / (size_t)dp->size;
    z->piece = per_rank < ZERO_PIECE_MAX ? (per_rank ? per_rank : 1) : ZERO_PIECE_MAX;
    size_t lo, hi;
    for (size_t k = 0; zero_piece(z, k, &lo, &hi); k++) z->n_owned += hi - lo;
    size_t stage = ((size_t)dp->size + 1) * z->piece * sizeof(float);
    z->stage = z->be ? z->be->alloc(z->be, stage) : xmalloc(stage);
}

void zero_free(Zero *z) {
    if (z->be) z->be->free(z->be, z->stage);
    else free(z->stage);
    z->stage = NULL;
}

int zero_piece(const Zero *z, size_t k, size_t *lo, size_t *hi) {
    // A rank's piece of the last region may lie past the end: it then owns nothing more.
    size_t a = k * z->piece * (size_t)z->dp->size + (size_t)z->dp->rank * z->piece;
    if (a >= z->n) return 0;
    *lo = a;
    *hi = a + z->piece < z->n ? a + z->piece : z->n;
    return 1;
}

// Moves within the step's memory: the backend's (dev) or the host's.
static void move(const Zero *z, int dev, float *dst, const float *src, size_t n) {
    if (dev) z->be->copy(z->be, dst, src, n * sizeof(float), COPY_D2D);
    else memcpy(dst, src, n * sizeof(float));
}

// Region k as a contiguous dp·B array: the buffer itself, or stage (zero-padded) for the last.
static float *region_buf(Zero *z, int dev, float *stage, float *buf, size_t k, int *staged) {
    size_t region = z->piece * (size_t)z->dp->size, start = k * region;
    *staged = start + region > z->n;
    if (!*staged) return buf + start;
    if (dev) z->be->memset(z->be, stage, 0, region * sizeof(float));
    else memset(stage, 0, region * sizeof(float));
    move(z, dev, stage, buf + start, z->n - start);
    return stage;
}

void zero_reduce_scatter(Zero *z, float *g) {
    size_t region = z->piece * (size_t)z->dp->size, r = (size_t)z->dp->rank;
    int dev = z->be != NULL;
    float *out = z->stage + region;
    for (size_t k = 0; k * region < z->n; k++) {
        int staged;
        float *src = region_buf(z, dev, z->stage, g, k, &staged);
        comm_device_reduce_scatter_sum(z->dp, src, out, z->piece);
        size_t a = k * region + r * z->piece;
        if (a < z->n) move(z, dev, g + a, out, (a + z->piece < z->n ? a + z->piece : z->n) - a);
    }
}

static void allgather_in(Zero *z, float *buf, int dev, float *stage) {
    size_t region = z->piece * (size_t)z->dp->size, r = (size_t)z->dp->rank;
    for (size_t k = 0; k * region < z->n; k++) {
        int staged;
        float *dst = region_buf(z, dev, stage, buf, k, &staged);
        if (dev) comm_device_allgather(z->dp, dst + r * z->piece, dst, z->piece);
        else comm_allgather(z->dp, dst + r * z->piece, dst, z->piece);
        if (staged) move(z, dev, buf + k * region, dst, z->n - k * region);
    }
}

void zero_allgather(Zero *z, float *buf) { allgather_in(z, buf, z->be != NULL, z->stage); }

// The stage is the backend's when it is a device: a host buffer's ragged region needs a host one.
void zero_allgather_host(Zero *z, float *buf) {
    float *stage = z->be ? xmalloc(z->piece * (size_t)z->dp->size * sizeof(float)) : z->stage;
    allgather_in(z, buf, 0, stage);
    if (z->be) free(stage);
}

void zero_pack(const Zero *z, const float *full, float *owned) {
    size_t lo, hi, off = 0;
    for (size_t k = 0; zero_piece(z, k, &lo, &hi); k++, off += hi - lo) {
        if (z->be) z->be->copy(z->be, owned + off, full + lo, (hi - lo) * sizeof(float), COPY_H2D);
        else memcpy(owned + off, full + lo, (hi - lo) * sizeof(float));
    }
}

void zero_unpack(const Zero *z, const float *owned, float *full) {
    size_t lo, hi, off = 0;
    for (size_t k = 0; zero_piece(z, k, &lo, &hi); k++, off += hi - lo) {
        if (z->be) z->be->copy(z->be, full + lo, owned + off, (hi - lo) * sizeof(float), COPY_D2H);
        else memcpy(full + lo, owned + off, (hi - lo) * sizeof(float));
    }
}
