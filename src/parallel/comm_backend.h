// What a backend of the communication interface provides (internal to src/parallel). comm.c checks
// arguments, counts bytes and serves groups of one rank itself, so a backend only ever sees groups
// of two ranks or more in its collectives, with valid arguments.
#ifndef CTRON_COMM_BACKEND_H
#define CTRON_COMM_BACKEND_H
#include "parallel/comm.h"

struct CommOps {
    void (*allreduce_sum)(CommGroup *g, const float *send, float *recv, size_t n);
    void (*allgather)(CommGroup *g, const float *send, float *recv, size_t chunk);  // send NULL: in place
    void (*reduce_scatter_sum)(CommGroup *g, const float *send, float *recv, size_t chunk);
    void (*broadcast)(CommGroup *g, float *buf, size_t n, int root);
    void (*barrier)(CommGroup *g);
    // Fills out->size, out->rank and out->handle; comm.c fills the rest.
    void (*split)(CommGroup *parent, int color, int key, CommGroup *out);
    void (*group_free)(CommGroup *g);
    void (*abort_all)(int status);      // ends every rank; does not return
    void (*finalize)(Comm *c);
};

// Fill c->world's size, rank, world_rank, world_size, ops and handle, and c->finalize_mpi.
void comm_single_init(Comm *c);
#ifdef CTRON_HAVE_MPI
int comm_mpi_init(Comm *c, int *argc, char ***argv, char *err, size_t errlen);
#endif
#endif
