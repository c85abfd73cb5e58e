// The offload pool: where --offload sends saved activations between a layer's forward and its
// backward, out of the arena's budget. Host memory, or a file (--offload-dir: created there,
// unlinked at once so that nothing is left behind, its blocks reserved up front so that a full
// disk is an error before training). One I/O thread copies or writes/reads in submission order
// while the model computes; the caller waits on a ticket only when it needs the bytes.
// Behind the backend (DESIGN.md §8): the pool's memory is the backend's host_alloc (pinned on a
// GPU), and every byte moves by the backend's copy_async with COPY_D2H / COPY_H2D and an event the
// I/O thread waits on, so the compute thread never blocks on a transfer it does not need yet. The
// file goes through a host bounce buffer when the backend's memory is not host-addressable.
#ifndef CTRON_OFFLOAD_POOL_H
#define CTRON_OFFLOAD_POOL_H
#include <stddef.h>
#include <stdint.h>
#include "backend/backend.h"

typedef struct OffloadPool OffloadPool;

typedef struct {
    uint64_t stored, loaded;   // bytes moved to and from the pool
    double wait_s;             // seconds the caller waited for the I/O thread (the part not overlapped)
} OffloadStats;

// bytes: the pool's size. dir NULL: host memory. Returns NULL with a message in err on failure.
// The buffers given to store/load are device allocations of be.
OffloadPool *offload_pool_open(Backend *be, size_t bytes, const char *dir, char *err, size_t errlen);
void offload_pool_close(OffloadPool *p);
// Queue a copy of n bytes to / from the pool at byte `at`; returns its ticket. The buffer must stay
// untouched until the ticket is waited for.
uint64_t offload_pool_store(OffloadPool *p, size_t at, const void *src, size_t n);
uint64_t offload_pool_load(OffloadPool *p, size_t at, void *dst, size_t n);
// Returns once every operation up to `ticket` is done; an I/O error is fatal here, named.
void offload_pool_wait(OffloadPool *p, uint64_t ticket);
void offload_pool_drain(OffloadPool *p);
OffloadStats offload_pool_stats(const OffloadPool *p);
// "host memory" or the file's directory.
const char *offload_pool_where(const OffloadPool *p);
#endif
