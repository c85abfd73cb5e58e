// Device-aware collectives (comm_device.h): the path chosen per grid, the host-staged path around the
// MPI backend, and the dispatch to the device's own library (Backend.collectives: NCCL where the CUDA
// backend was built with it). Device memory is reached only through the backend's copy and the
// library: this file never dereferences a device pointer.
#include "parallel/comm_device.h"
#include <stdlib.h>
#include <string.h>
#include "parallel/comm_backend.h"
#include "util/common.h"

enum { GRID_GROUPS = 4 };

// A point-to-point transfer's host bytes: a send's copy of the tensor, or a receive's landing place.
typedef struct {
    float *host;
    size_t cap;        // floats
    int busy;
    float *device;     // a receive: where the bytes go when it completes; NULL for a send
    size_t n;
} StageSlot;

struct CommDevice {
    Backend *be;
    CommDevicePath path;
    CommGroup *groups[GRID_GROUPS];
    const BackendCollectives *lib;   // the device's collectives (NCCL path), else NULL
    void *lib_comm[GRID_GROUPS];     // its communicator per group of two ranks or more
    float *stage;              // the collectives' staging buffer (host_alloc: pinned on a GPU)
    size_t stage_floats;
    StageSlot **slots;         // point-to-point slots, reused once their transfer completes
    int n_slots;
};

static int direct(const CommGroup *g) { return !g->device || g->device->path == COMM_DEVICE_DIRECT; }

static void *lib_comm(const CommGroup *g) {
    for (int i = 0; i < GRID_GROUPS; i++)
        if (g->device->groups[i] == g) return g->device->lib_comm[i];
    comm_abort(g, "group %s has no %s communicator (it is not one of the grid's)", g->name, g->device->lib->name);
}

// A failed library call ends every rank, naming the call, the group and the library's reason.
static void lib_check(const CommGroup *g, int rc, const char *call) {
    if (rc != 0)
        comm_abort(g, "%s %s on group %s (rank %d of %d) failed: %s", g->device->lib->name, call, g->name, g->rank,
                   g->size, g->device->lib->error_string(rc));
}

// ---- opening and closing

// A communicator over g (size ≥ 2), collective over g: rank 0 draws the id, g's MPI broadcast shares
// it (as floats: MPI_FLOAT copies bits between ranks of one machine type; setup, not counted).
static void *lib_comm_open(CommDevice *d, CommGroup *g) {
    size_t n = (d->lib->id_bytes + sizeof(float) - 1) / sizeof(float);
    float *id = xcalloc(n * sizeof(float));
    if (g->rank == 0) lib_check(g, d->lib->new_id(id), "unique id");
    g->ops->broadcast(g, id, n, 0);
    void *comm = NULL;
    lib_check(g, d->lib->comm_open(d->be, &comm, g->size, g->rank, id), "communicator init");
    free(id);
    return comm;
}

CommDevice *comm_device_open(CommGrid *grid, Backend *be, size_t stage_floats) {
    if (be->host_addressable) return NULL;
    CommDevice *d = xcalloc(sizeof *d);
    d->be = be;
    CommGroup *groups[GRID_GROUPS] = {&grid->tp_group, &grid->dp_group, &grid->pp_group, &grid->emb_group};
    int max_size = 1;
    for (int i = 0; i < GRID_GROUPS; i++) {
        d->groups[i] = groups[i];
        groups[i]->device = d;
        if (groups[i]->size > max_size && !groups[i]->solo) max_size = groups[i]->size;   // solo: device copies
    }
    // Every rank decides alike (the same build, backend and environment): no rank waits alone in NCCL.
    const char *force = getenv("CTRON_COMM_DEVICE");
    d->lib = force && strcmp(force, "staged") == 0 ? NULL : be->collectives;
    d->path = d->lib ? COMM_DEVICE_NCCL : COMM_DEVICE_STAGED;
    for (int i = 0; d->lib && i < GRID_GROUPS; i++)   // the same order on every rank: each open is collective
        if (groups[i]->size > 1 && !groups[i]->solo) d->lib_comm[i] = lib_comm_open(d, groups[i]);
    // Staged collectives (and, under NCCL, nothing but the transfers' slots) use one host buffer. A
    // reduce-scatter needs its input and its output in it: room for a piece of every rank plus one.
    if (d->path == COMM_DEVICE_STAGED && max_size > 1) {   // one rank everywhere: only device copies
        size_t want = stage_floats < COMM_STAGE_MAX_FLOATS ? stage_floats : COMM_STAGE_MAX_FLOATS;
        if (want < (size_t)max_size + 1) want = (size_t)max_size + 1;   // one float per rank at least
        d->stage_floats = want;
        d->stage = be->host_alloc(be, want * sizeof(float));
    }
    return d;
}

void comm_device_close(CommDevice *d) {
    if (!d) return;
    for (int i = 0; i < GRID_GROUPS; i++) {
        if (d->lib_comm[i]) lib_check(d->groups[i], d->lib->comm_close(d->lib_comm[i]), "communicator close");
        d->groups[i]->device = NULL;
    }
    for (int i = 0; i < d->n_slots; i++) {
        d->be->host_free(d->be, d->slots[i]->host);
        free(d->slots[i]);
    }
    free(d->slots);
    if (d->stage) d->be->host_free(d->be, d->stage);
    free(d);
}

CommDevicePath comm_device_path(const CommDevice *d) { return d ? d->path : COMM_DEVICE_DIRECT; }

const char *comm_device_path_name(CommDevicePath p) {
    static const char *const NAMES[] = {"direct", "nccl", "host-staged"};
    return (unsigned)p < sizeof NAMES / sizeof NAMES[0] ? NAMES[p] : "unknown";
}

size_t comm_device_host_bytes(const CommDevice *d) {
    if (!d) return 0;
    size_t b = d->stage_floats * sizeof(float);
    for (int i = 0; i < d->n_slots; i++) b += d->slots[i]->cap * sizeof(float);
    return b;
}

// ---- the host-staged path: device ↔ stage through the backend's copies, MPI on the stage

static void to_host(CommDevice *d, float *host, const float *dev, size_t n) {
    d->be->copy(d->be, host, dev, n * sizeof(float), COPY_D2H);
}
static void to_device(CommDevice *d, float *dev, const float *host, size_t n) {
    d->be->copy(d->be, dev, host, n * sizeof(float), COPY_H2D);
}
static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

static void staged_allreduce(CommGroup *g, const float *send, float *recv, size_t n) {
    CommDevice *d = g->device;
    for (size_t off = 0; off < n; off += d->stage_floats) {
        size_t len = min_size(n - off, d->stage_floats);
        to_host(d, d->stage, send + off, len);
        g->ops->allreduce_sum(g, d->stage, d->stage, len);
        to_device(d, recv + off, d->stage, len);
    }
}

// Pieces [off, off + len) of every rank's chunk, gathered in place in the stage (rank r's at r·len).
static void staged_allgather(CommGroup *g, const float *send, float *recv, size_t chunk) {
    CommDevice *d = g->device;
    size_t size = (size_t)g->size, piece = min_size(chunk, d->stage_floats / size);
    for (size_t off = 0; off < chunk; off += piece) {
        size_t len = min_size(chunk - off, piece);
        to_host(d, d->stage + (size_t)g->rank * len, send + off, len);
        g->ops->allgather(g, NULL, d->stage, len);
        if (len == chunk) to_device(d, recv, d->stage, size * chunk);
        else
            for (size_t r = 0; r < size; r++) to_device(d, recv + r * chunk + off, d->stage + r * len, len);
    }
}

// Every rank's piece [off, off + len) of the input at stage[r·len], the sum at stage[size·len].
static void staged_reduce_scatter(CommGroup *g, const float *send, float *recv, size_t chunk) {
    CommDevice *d = g->device;
    size_t size = (size_t)g->size, piece = min_size(chunk, d->stage_floats / (size + 1));
    for (size_t off = 0; off < chunk; off += piece) {
        size_t len = min_size(chunk - off, piece);
        if (len == chunk) to_host(d, d->stage, send, size * chunk);
        else
            for (size_t r = 0; r < size; r++) to_host(d, d->stage + r * len, send + r * chunk + off, len);
        g->ops->reduce_scatter_sum(g, d->stage, d->stage + size * len, len);
        to_device(d, recv + off, d->stage + size * len, len);
    }
}

static void staged_broadcast(CommGroup *g, float *buf, size_t n, int root) {
    CommDevice *d = g->device;
    for (size_t off = 0; off < n; off += d->stage_floats) {
        size_t len = min_size(n - off, d->stage_floats);
        if (g->rank == root) to_host(d, d->stage, buf + off, len);
        g->ops->broadcast(g, d->stage, len, root);
        if (g->rank != root) to_device(d, buf + off, d->stage, len);
    }
}

// ---- the collectives: checks and count (comm.c), a group of one on the device, then the path

static void device_copy(CommGroup *g, float *dst, const float *src, size_t n) {
    if (dst != src) g->device->be->copy(g->device->be, dst, src, n * sizeof(float), COPY_D2D);
}

// comm_grid_solo's group on the device: the host ops' stand-ins (comm_solo.c) as device copies.
static void solo_allgather(CommGroup *g, const float *send, float *recv, size_t chunk) {
    const float *own = send ? send : recv + (size_t)g->rank * chunk;
    for (int r = 0; r < g->size; r++) device_copy(g, recv + (size_t)r * chunk, own, chunk);
}

void comm_device_allreduce_sum(CommGroup *g, const float *send, float *recv, size_t n) {
    if (direct(g)) { comm_allreduce_sum(g, send, recv, n); return; }
    if (!comm_begin_allreduce(g, send, recv, n) || g->solo) { device_copy(g, recv, send, n); return; }
    if (g->device->lib) {
        lib_check(g, g->device->lib->allreduce_sum(g->device->be, lib_comm(g), send, recv, n), "allreduce");
        return;
    }
    staged_allreduce(g, send, recv, n);
}

void comm_device_allgather(CommGroup *g, const float *send, float *recv, size_t chunk) {
    if (direct(g)) { comm_allgather(g, send, recv, chunk); return; }
    if (!comm_begin_allgather(g, send, recv, chunk)) { device_copy(g, recv, send, chunk); return; }
    if (g->solo) { solo_allgather(g, send, recv, chunk); return; }
    if (g->device->lib) {
        lib_check(g, g->device->lib->allgather(g->device->be, lib_comm(g), send, recv, chunk), "allgather");
        return;
    }
    staged_allgather(g, send, recv, chunk);
}

void comm_device_reduce_scatter_sum(CommGroup *g, const float *send, float *recv, size_t chunk) {
    if (direct(g)) { comm_reduce_scatter_sum(g, send, recv, chunk); return; }
    if (!comm_begin_reduce_scatter(g, send, recv, chunk)) { device_copy(g, recv, send, chunk); return; }
    if (g->solo) { device_copy(g, recv, send + (size_t)g->rank * chunk, chunk); return; }
    if (g->device->lib) {
        lib_check(g, g->device->lib->reduce_scatter_sum(g->device->be, lib_comm(g), send, recv, chunk), "reduce-scatter");
        return;
    }
    staged_reduce_scatter(g, send, recv, chunk);
}

void comm_device_broadcast(CommGroup *g, float *buf, size_t n, int root) {
    if (direct(g)) { comm_broadcast(g, buf, n, root); return; }
    if (!comm_begin_broadcast(g, buf, n, root) || g->solo) return;
    if (g->device->lib) {
        lib_check(g, g->device->lib->broadcast(g->device->be, lib_comm(g), buf, n, root), "broadcast");
        return;
    }
    staged_broadcast(g, buf, n, root);
}

// ---- non-blocking: transfers through host slots (both paths), all-reduces staged or on the stream

// A free slot of at least n floats: an idle one (grown if it must), else a new one. The pool grows
// to the transfers a schedule keeps in flight at once, then is reused.
static StageSlot *slot_acquire(CommDevice *d, size_t n) {
    StageSlot *idle = NULL;
    for (int i = 0; i < d->n_slots; i++) {
        StageSlot *s = d->slots[i];
        if (s->busy) continue;
        if (s->cap >= n) { idle = s; break; }
        if (!idle) idle = s;
    }
    if (!idle) {
        StageSlot **grown = realloc(d->slots, sizeof *grown * (size_t)(d->n_slots + 1));
        if (!grown) ctron_fatal("comm: out of memory for a staging slot");
        d->slots = grown;
        idle = d->slots[d->n_slots++] = xcalloc(sizeof *idle);
    }
    if (idle->cap < n) {
        if (idle->host) d->be->host_free(d->be, idle->host);
        idle->host = d->be->host_alloc(d->be, (n ? n : 1) * sizeof(float));
        idle->cap = n ? n : 1;
    }
    idle->busy = 1;
    idle->device = NULL;
    idle->n = n;
    return idle;
}

void comm_device_complete(CommRequest *req) {
    StageSlot *s = req->staged;
    CommDevice *d = req->group->device;
    if (s->device && s->n) to_device(d, s->device, s->host, s->n);
    s->busy = 0;
    s->device = NULL;
    req->staged = NULL;
}

void comm_device_isend(CommGroup *g, const float *buf, size_t n, int dst, int tag, CommRequest *req) {
    if (direct(g)) { comm_isend(g, buf, n, dst, tag, req); return; }
    comm_begin_transfer(g, COMM_SEND, buf, n, dst, tag, req);
    StageSlot *s = slot_acquire(g->device, n);
    if (n) to_host(g->device, s->host, buf, n);
    req->staged = s;
    g->ops->isend(g, s->host, n, dst, tag, req);
}

void comm_device_irecv(CommGroup *g, float *buf, size_t n, int src, int tag, CommRequest *req) {
    if (direct(g)) { comm_irecv(g, buf, n, src, tag, req); return; }
    comm_begin_transfer(g, COMM_RECV, buf, n, src, tag, req);
    StageSlot *s = slot_acquire(g->device, n);
    s->device = buf;
    req->staged = s;
    g->ops->irecv(g, s->host, n, src, tag, req);
}

void comm_device_iallreduce_sum(CommGroup *g, float *buf, size_t n, CommRequest *req) {
    if (direct(g)) { comm_iallreduce_sum(g, buf, n, req); return; }
    memset(req, 0, sizeof *req);   // completes when posted: inactive
    req->group = g;
    req->kind = COMM_ALLREDUCE;
    req->n = n;
    req->peer = -1;
    comm_device_allreduce_sum(g, buf, buf, n);
}
