#include "train/zero.h"
#include <string.h>
#include "util/common.h"

enum { ZERO_PIECE_MAX = 1 << 22 };

void zero_init(Zero *z, CommGroup *dp, size_t n) {
    memset(z, 0, sizeof *z);
    z->dp = dp;
    z->n = n;
    size_t per_rank = (n + (size_t)dp->size - 1) / (size_t)dp->size;
    z->piece = per_rank < ZERO_PIECE_MAX ? (per_rank ? per_rank : 1) : ZERO_PIECE_MAX;
    size_t lo, hi;
    for (size_t k = 0; zero_piece(z, k, &lo, &hi); k++) z->n_owned += hi - lo;
    z->stage = xmalloc(((size_t)dp->size + 1) * z->piece * sizeof(float));
}

void zero_free(Zero *z) {
    free(z->stage);
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

// Region k as a contiguous dp·B array: the buffer itself, or the stage (zero-padded) for the last.
static float *region_buf(Zero *z, float *buf, size_t k, int *staged) {
    size_t region = z->piece * (size_t)z->dp->size, start = k * region;
    *staged = start + region > z->n;
    if (!*staged) return buf + start;
    memset(z->stage, 0, region * sizeof(float));
    memcpy(z->stage, buf + start, (z->n - start) * sizeof(float));
    return z->stage;
}

void zero_reduce_scatter(Zero *z, float *g) {
    size_t region = z->piece * (size_t)z->dp->size, r = (size_t)z->dp->rank;
    float *out = z->stage + region;
    for (size_t k = 0; k * region < z->n; k++) {
        int staged;
        float *src = region_buf(z, g, k, &staged);
        comm_reduce_scatter_sum(z->dp, src, out, z->piece);
        size_t a = k * region + r * z->piece;
        if (a < z->n) memcpy(g + a, out, ((a + z->piece < z->n ? a + z->piece : z->n) - a) * sizeof(float));
    }
}

void zero_allgather(Zero *z, float *buf) {
    size_t region = z->piece * (size_t)z->dp->size, r = (size_t)z->dp->rank;
    for (size_t k = 0; k * region < z->n; k++) {
        int staged;
        float *dst = region_buf(z, buf, k, &staged);
        comm_allgather(z->dp, dst + r * z->piece, dst, z->piece);
        if (staged) memcpy(buf + k * region, dst, (z->n - k * region) * sizeof(float));
    }
}

void zero_pack(const Zero *z, const float *full, float *owned) {
    size_t lo, hi, off = 0;
    for (size_t k = 0; zero_piece(z, k, &lo, &hi); k++, off += hi - lo) memcpy(owned + off, full + lo, (hi - lo) * sizeof(float));
}

void zero_unpack(const Zero *z, const float *owned, float *full) {
    size_t lo, hi, off = 0;
    for (size_t k = 0; zero_piece(z, k, &lo, &hi); k++, off += hi - lo) memcpy(full + lo, owned + off, (hi - lo) * sizeof(float));
}
