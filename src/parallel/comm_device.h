// Collectives and transfers on tensors in a backend's device memory (DESIGN.md §4, §8). comm.h's
// calls take host memory; these take what Backend.alloc returned, and never dereference it on the
// host. Each group of a grid reaches its device one of three ways, chosen once by comm_device_open:
//   direct       the backend's memory is the host's (the CPU backend): comm.h's calls, unchanged;
//   nccl         the device's own collectives (Backend.collectives: NCCL, in the CUDA backend where
//                CMake finds NCCL and MPI), one communicator per group, on the backend's compute
//                stream; point-to-point transfers stay staged;
//   host-staged  copy device → a pinned host buffer through Backend.copy, the MPI call on the host
//                buffer, copy back. Always available; what a device without NCCL runs.
// Byte counters are comm.h's convention, once per call whatever the path (staging copies are not
// network bytes). A failure anywhere ends every rank (comm_abort).
#ifndef CTRON_COMM_DEVICE_H
#define CTRON_COMM_DEVICE_H
#include <stddef.h>
#include "backend/backend.h"
#include "parallel/comm.h"

typedef enum { COMM_DEVICE_DIRECT, COMM_DEVICE_NCCL, COMM_DEVICE_STAGED } CommDevicePath;

typedef struct CommDevice CommDevice;

// The largest staging buffer: collectives over more floats go in pieces of it (16 MiB of fp32, the
// data-parallel bucket of grads_dist.c, so the gradient all-reduce is never cut further).
enum { COMM_STAGE_MAX_FLOATS = 1 << 22 };

// Sets the device path of the grid's tp, dp, pp and emb groups for tensors on be (collective over
// the world: NCCL communicators are created here). stage_floats: the largest collective the caller
// runs on device memory, which sizes the one host staging buffer (at most COMM_STAGE_MAX_FLOATS;
// allocated here when a group has two ranks or more, reused by every call). Returns NULL for a host-addressable backend: the groups
// then keep no device and comm_device_* are comm.h's calls. The environment variable
// CTRON_COMM_DEVICE=staged forces the host-staged path where NCCL is built.
CommDevice *comm_device_open(CommGrid *grid, Backend *be, size_t stage_floats);
// Detaches the groups and frees the staging memory and NCCL communicators (collective; before the
// backend closes). NULL-safe. Any device transfer still in flight must have completed.
void comm_device_close(CommDevice *d);
CommDevicePath comm_device_path(const CommDevice *d);      // COMM_DEVICE_DIRECT for NULL
const char *comm_device_path_name(CommDevicePath p);        // "direct", "nccl", "host-staged"
// Host bytes held for staging: the collective buffer and the point-to-point slots so far.
size_t comm_device_host_bytes(const CommDevice *d);

// comm.h's collectives, on device buffers of g's device (host buffers when g has none). The same
// contracts: sizes, in-place rules, ranks calling in the same order. On a group of one rank they
// copy on the device.
void comm_device_allreduce_sum(CommGroup *g, const float *send, float *recv, size_t n);
void comm_device_allgather(CommGroup *g, const float *send, float *recv, size_t chunk);
void comm_device_reduce_scatter_sum(CommGroup *g, const float *send, float *recv, size_t chunk);
void comm_device_broadcast(CommGroup *g, float *buf, size_t n, int root);
// comm.h's non-blocking calls on device buffers, completed by comm_wait/comm_test. Staged: a send
// copies buf to a host slot when posted (buf is free again at once); a receive lands in a slot and
// reaches buf when completed; an all-reduce runs to completion when posted (req left inactive): the
// host path cannot overlap it with compute. Under NCCL the all-reduce is enqueued on the stream.
void comm_device_isend(CommGroup *g, const float *buf, size_t n, int dst, int tag, CommRequest *req);
void comm_device_irecv(CommGroup *g, float *buf, size_t n, int src, int tag, CommRequest *req);
void comm_device_iallreduce_sum(CommGroup *g, float *buf, size_t n, CommRequest *req);
#endif
