// ZeRO stage 1 (the distributed optimizer): the AdamW moments are sharded over the data-parallel
// ranks. The flat parameter buffer is cut into regions of dp × B floats (B ≤ 4 Mi); in each region
// dp rank r owns the r-th B floats. A step reduce-scatters the gradients (each rank gets the sum of
// its own pieces), updates the parameters it owns, and all-gathers the parameters: the same bytes
// as the all-reduce it replaces, and 1/dp of the optimizer state per rank.
#ifndef CTRON_ZERO_H
#define CTRON_ZERO_H
#include <stddef.h>
#include "backend/backend.h"
#include "parallel/comm.h"

typedef struct {
    CommGroup *dp;
    Backend *be;         // where the step's buffers and the stage live; NULL: host memory
    size_t n;            // floats in the buffer (the rank's parameters)
    size_t piece;        // B
    size_t n_owned;      // floats this rank owns (Σ of its pieces)
    float *stage;        // dp·B + B floats: the ragged last region and reduce-scatter output
} Zero;

// be: the backend holding the gradients, parameters and owned moments; NULL or a host-addressable
// one: host memory. A device's buffers go through comm_device.h over dp (comm_device_open first).
void zero_init(Zero *z, CommGroup *dp, size_t n, Backend *be);
void zero_free(Zero *z);
// Piece k of this rank: buffer floats [*lo, *hi); returns 0 past the last piece. Pieces are
// numbered in buffer order and laid out back to back in the owned state.
int zero_piece(const Zero *z, size_t k, size_t *lo, size_t *hi);
// g[owned pieces] = Σ over dp ranks of g (other entries of g are left stale).
void zero_reduce_scatter(Zero *z, float *g);
// Every rank's owned pieces of buf, everywhere (in place). buf on the backend; _host: host memory.
void zero_allgather(Zero *z, float *buf);
void zero_allgather_host(Zero *z, float *buf);
// Between a whole-buffer array in host memory and the rank's owned pieces on the backend (packed
// back to back).
void zero_pack(const Zero *z, const float *full, float *owned);
void zero_unpack(const Zero *z, const float *owned, float *full);
#endif
