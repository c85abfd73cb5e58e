// The backend-independent half of the non-blocking calls: argument checks, byte counters, groups of
// one rank, the request's state. The backend posts, waits and tests.
#include <stdio.h>
#include <string.h>
#include "parallel/comm.h"
#include "parallel/comm_backend.h"

enum { TAG_MAX = 32767 };  // the least MPI_TAG_UB the MPI standard allows

// A peer must be another rank of g: out of range or the caller itself is a broken invariant.
static void check_transfer(const CommGroup *g, const char *what, const void *buf, size_t n, int peer, int tag) {
    const char *to = strcmp(what, "send") == 0 ? "send to" : "receive from";
    if (g->size == 1) comm_abort(g, "%s on group %s of one rank: there is no other rank to %s", what, g->name, to);
    if (peer < 0 || peer >= g->size)
        comm_abort(g, "%s on group %s: peer rank %d is out of range (expected 0 to %d)", what, g->name, peer,
                   g->size - 1);
    if (peer == g->rank) comm_abort(g, "%s on group %s: peer rank %d is this rank itself", what, g->name, peer);
    if (tag < 0 || tag > TAG_MAX)
        comm_abort(g, "%s on group %s: tag %d is out of range (expected 0 to %d)", what, g->name, tag, TAG_MAX);
    if (n > 0 && !buf) comm_abort(g, "%s on group %s: NULL buffer for %zu floats", what, g->name, n);
}

static void start(CommRequest *req, CommGroup *g, CommKind kind, size_t n, int peer, int tag) {
    memset(req, 0, sizeof *req);
    req->group = g;
    req->kind = kind;
    req->n = n;
    req->peer = peer;
    req->tag = tag;
}

// The checks, the request's fields and the count of a transfer, shared with comm_device.c.
void comm_begin_transfer(CommGroup *g, CommKind kind, const void *buf, size_t n, int peer, int tag, CommRequest *req) {
    check_transfer(g, kind == COMM_SEND ? "send" : "recv", buf, n, peer, tag);
    start(req, g, kind, n, peer, tag);
    comm_count(g, kind, n);
}

// n = 0 still posts a message: the two sides match, so a size mismatch cannot hide behind it.
void comm_isend(CommGroup *g, const float *buf, size_t n, int dst, int tag, CommRequest *req) {
    comm_begin_transfer(g, COMM_SEND, buf, n, dst, tag, req);
    g->ops->isend(g, buf, n, dst, tag, req);
}

void comm_irecv(CommGroup *g, float *buf, size_t n, int src, int tag, CommRequest *req) {
    comm_begin_transfer(g, COMM_RECV, buf, n, src, tag, req);
    g->ops->irecv(g, buf, n, src, tag, req);
}

void comm_iallreduce_sum(CommGroup *g, float *buf, size_t n, CommRequest *req) {
    if (n > 0 && !buf) comm_abort(g, "all-reduce on group %s: NULL buffer for %zu floats", g->name, n);
    start(req, g, COMM_ALLREDUCE, n, -1, 0);
    comm_count(g, COMM_ALLREDUCE, n);
    if (n == 0 || g->size == 1) return;  // the sum is buf itself: done, req stays inactive
    g->ops->iallreduce_sum(g, buf, n, req);
}

// A device transfer completes when its staged bytes have reached the device (comm_device.c).
void comm_wait(CommRequest *req) {
    if (req->handle) req->group->ops->wait(req);
    if (req->staged) comm_device_complete(req);
}

int comm_test(CommRequest *req) {
    if (req->handle && !req->group->ops->test(req)) return 0;
    if (req->staged) comm_device_complete(req);
    return 1;
}
