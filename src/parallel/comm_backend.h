// What a backend of the communication interface provides (internal to src/parallel). comm.c checks
// arguments, counts bytes and serves groups of one rank itself, so a backend only ever sees groups
// of two ranks or more in its collectives and transfers, with valid arguments, and only active
// requests in wait and test.
#ifndef CTRON_COMM_BACKEND_H
#define CTRON_COMM_BACKEND_H
#include "parallel/comm.h"

struct CommOps {
    void (*allreduce_sum)(CommGroup *g, const float *send, float *recv, size_t n);
    void (*allgather)(CommGroup *g, const float *send, float *recv, size_t chunk);  // send NULL: in place
    void (*reduce_scatter_sum)(CommGroup *g, const float *send, float *recv, size_t chunk);
    void (*broadcast)(CommGroup *g, float *buf, size_t n, int root);
    void (*barrier)(CommGroup *g);
    // Non-blocking: post on req (comm.c has filled its group, kind, n, peer and tag) and set
    // req->handle; wait/test complete it, free the handle and set it to NULL.
    void (*isend)(CommGroup *g, const float *buf, size_t n, int dst, int tag, CommRequest *req);
    void (*irecv)(CommGroup *g, float *buf, size_t n, int src, int tag, CommRequest *req);
    void (*iallreduce_sum)(CommGroup *g, float *buf, size_t n, CommRequest *req);  // n > 0
    void (*wait)(CommRequest *req);
    int (*test)(CommRequest *req);
    // Fills out->size, out->rank and out->handle; comm.c fills the rest.
    void (*split)(CommGroup *parent, int color, int key, CommGroup *out);
    void (*group_free)(CommGroup *g);
    void (*abort_all)(int status);      // ends every rank; does not return
    void (*finalize)(Comm *c);
};

// Adds one call of kind on tensor_floats floats to g's counters (comm.h's convention).
void comm_count(CommGroup *g, CommKind kind, size_t tensor_floats);

// The checks and the count of a collective (comm.c): 1 when the backend must move data (two ranks or
// more, a non-empty tensor), 0 when the caller copies send to recv (one rank) or is done.
int comm_begin_allreduce(CommGroup *g, const float *send, const float *recv, size_t n);
int comm_begin_allgather(CommGroup *g, const float *send, const float *recv, size_t chunk);
int comm_begin_reduce_scatter(CommGroup *g, const float *send, const float *recv, size_t chunk);
int comm_begin_broadcast(CommGroup *g, const float *buf, size_t n, int root);
// The checks, the request's fields and the count of a send or receive (comm_nonblocking.c).
void comm_begin_transfer(CommGroup *g, CommKind kind, const void *buf, size_t n, int peer, int tag, CommRequest *req);
// A staged device transfer whose MPI part is done: copies a received slot to the device, frees the
// slot and clears req->staged (comm_device.c).
void comm_device_complete(CommRequest *req);

// Fill c->world's size, rank, world_rank, world_size, ops and handle, and c->finalize_mpi.
void comm_single_init(Comm *c);
#ifdef CTRON_HAVE_MPI
int comm_mpi_init(Comm *c, int *argc, char ***argv, char *err, size_t errlen);
#endif
#endif
