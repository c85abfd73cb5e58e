// NCCL for comm_device.c (internal to src/parallel; built with CTRON_HAVE_NCCL). One communicator per
// group of two ranks or more, created from the MPI group; collectives enqueued on the backend's
// compute stream, so they are ordered with its kernels and copies. A failed call ends every rank
// through comm_abort, naming the call, the group and NCCL's reason.
#ifndef CTRON_COMM_NCCL_H
#define CTRON_COMM_NCCL_H
#include <stddef.h>
#include "parallel/comm.h"

// Collective over g: rank 0 draws the unique id, the group's MPI broadcast shares it.
void *comm_nccl_create(CommGroup *g);
void comm_nccl_destroy(CommGroup *g, void *comm);
void comm_nccl_allreduce(CommGroup *g, void *comm, void *stream, const float *send, float *recv, size_t n);
void comm_nccl_allgather(CommGroup *g, void *comm, void *stream, const float *send, float *recv, size_t chunk);
void comm_nccl_reduce_scatter(CommGroup *g, void *comm, void *stream, const float *send, float *recv, size_t chunk);
void comm_nccl_broadcast(CommGroup *g, void *comm, void *stream, float *buf, size_t n, int root);
#endif
