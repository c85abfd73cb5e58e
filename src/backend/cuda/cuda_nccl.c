// NCCL behind Backend.collectives (built only where CMake finds NCCL and MPI: CTRON_HAVE_NCCL). The
// collectives run on the backend's compute stream, so they are ordered with its kernels and copies
// without a host synchronisation; communicators live on the backend's device.
#include <nccl.h>
#include <string.h>
#include "backend/cuda/cuda_internal.h"

static int nccl_new_id(void *id) { return (int)ncclGetUniqueId((ncclUniqueId *)id); }

static int nccl_comm_open(Backend *be, void **comm, int size, int rank, const void *id) {
    ncclUniqueId uid;
    memcpy(&uid, id, sizeof uid);
    CUDA_CHECK(cudaSetDevice(cuda_impl(be)->device));   // NCCL binds the communicator to the current device
    ncclComm_t c = NULL;
    ncclResult_t rc = ncclCommInitRank(&c, size, uid, rank);
    *comm = c;
    return (int)rc;
}

static int nccl_comm_close(void *comm) { return (int)ncclCommDestroy((ncclComm_t)comm); }

static int nccl_allreduce_sum(Backend *be, void *comm, const float *send, float *recv, size_t n) {
    return (int)ncclAllReduce(send, recv, n, ncclFloat, ncclSum, (ncclComm_t)comm, cuda_stream(be));
}

// In place when send == recv + rank·chunk, as comm.h's contract and NCCL's both say.
static int nccl_allgather(Backend *be, void *comm, const float *send, float *recv, size_t chunk) {
    return (int)ncclAllGather(send, recv, chunk, ncclFloat, (ncclComm_t)comm, cuda_stream(be));
}

static int nccl_reduce_scatter_sum(Backend *be, void *comm, const float *send, float *recv, size_t chunk) {
    return (int)ncclReduceScatter(send, recv, chunk, ncclFloat, ncclSum, (ncclComm_t)comm, cuda_stream(be));
}

static int nccl_broadcast(Backend *be, void *comm, float *buf, size_t n, int root) {
    return (int)ncclBroadcast(buf, buf, n, ncclFloat, root, (ncclComm_t)comm, cuda_stream(be));
}

static const char *nccl_error_string(int code) { return ncclGetErrorString((ncclResult_t)code); }

const BackendCollectives cuda_nccl_collectives = {
    .name = "nccl",
    .id_bytes = sizeof(ncclUniqueId),
    .new_id = nccl_new_id,
    .comm_open = nccl_comm_open,
    .comm_close = nccl_comm_close,
    .allreduce_sum = nccl_allreduce_sum,
    .allgather = nccl_allgather,
    .reduce_scatter_sum = nccl_reduce_scatter_sum,
    .broadcast = nccl_broadcast,
    .error_string = nccl_error_string,
};
