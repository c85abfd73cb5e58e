// The NCCL half of comm_device.c (built only where CMake finds NCCL and MPI: CTRON_HAVE_NCCL).
#include "parallel/comm_nccl.h"
#include <cuda_runtime.h>
#include <nccl.h>
#include <string.h>
#include "parallel/comm_backend.h"

static void check(const CommGroup *g, ncclResult_t rc, const char *call) {
    if (rc != ncclSuccess)
        comm_abort(g, "%s on group %s (rank %d of %d) failed: %s", call, g->name, g->rank, g->size,
                   ncclGetErrorString(rc));
}

void *comm_nccl_create(CommGroup *g) {
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (g->rank == 0) check(g, ncclGetUniqueId(&id), "ncclGetUniqueId");
    // The id's bytes travel as floats: MPI_Bcast of MPI_FLOAT copies bits on one machine type.
    enum { ID_FLOATS = (sizeof(ncclUniqueId) + sizeof(float) - 1) / sizeof(float) };
    float buf[ID_FLOATS];
    memset(buf, 0, sizeof buf);
    memcpy(buf, &id, sizeof id);
    g->ops->broadcast(g, buf, ID_FLOATS, 0);   // setup, not a counted collective
    memcpy(&id, buf, sizeof id);
    ncclComm_t comm = NULL;
    check(g, ncclCommInitRank(&comm, g->size, id, g->rank), "ncclCommInitRank");
    return comm;
}

void comm_nccl_destroy(CommGroup *g, void *comm) {
    if (comm) check(g, ncclCommDestroy((ncclComm_t)comm), "ncclCommDestroy");
}

void comm_nccl_allreduce(CommGroup *g, void *comm, void *stream, const float *send, float *recv, size_t n) {
    check(g, ncclAllReduce(send, recv, n, ncclFloat, ncclSum, (ncclComm_t)comm, (cudaStream_t)stream),
          "ncclAllReduce");
}

// In place when send == recv + rank·chunk, as comm.h's contract and NCCL's both say.
void comm_nccl_allgather(CommGroup *g, void *comm, void *stream, const float *send, float *recv, size_t chunk) {
    check(g, ncclAllGather(send, recv, chunk, ncclFloat, (ncclComm_t)comm, (cudaStream_t)stream), "ncclAllGather");
}

void comm_nccl_reduce_scatter(CommGroup *g, void *comm, void *stream, const float *send, float *recv, size_t chunk) {
    check(g, ncclReduceScatter(send, recv, chunk, ncclFloat, ncclSum, (ncclComm_t)comm, (cudaStream_t)stream),
          "ncclReduceScatter");
}

void comm_nccl_broadcast(CommGroup *g, void *comm, void *stream, float *buf, size_t n, int root) {
    check(g, ncclBroadcast(buf, buf, n, ncclFloat, root, (ncclComm_t)comm, (cudaStream_t)stream), "ncclBroadcast");
}
