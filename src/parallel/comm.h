// The communication interface (DESIGN.md §4): a world of ranks, process groups split from it, the
// collectives TP, SP and DP need and the point-to-point transfers PP needs, on fp32 buffers in host
// memory (comm_device.h takes a device backend's tensors). Two backends sit behind it: Open MPI
// (built when CMake finds MPI, CTRON_HAVE_MPI) and a single process (always built). Nothing here
// includes mpi.h, so callers compile the same either way.
//
// Byte counters. Every collective adds, to the counter of its kind on the group it ran on, the bytes
// one rank sends under the bandwidth-optimal algorithm on a ring of n ranks, for a tensor of N bytes
// (N = the full, unsharded tensor: the all-reduce buffer, the all-gather output, the reduce-scatter
// input, the broadcast buffer):
//   all-reduce      2(n−1)/n · N   (a reduce-scatter followed by an all-gather)
//   all-gather       (n−1)/n · N
//   reduce-scatter   (n−1)/n · N
//   broadcast        (n−1)/n · N   (pipelined along a chain: n−1 links carry N; averaged per rank)
// So SP's all-gather + reduce-scatter of an N-byte activation count exactly the bytes of TP's
// all-reduce of it (Korthikanti et al. §4.2.2), and a group of one rank counts zero. These are the
// algorithm's bytes, not what the MPI library happens to do; all-reduce rounds down when n does not
// divide N (never the case for TP/SP activations, whose rows divide by t).
// Point-to-point transfers count N, the buffer, when posted: a send on the sender's COMM_SEND, a
// receive on the receiver's COMM_RECV (so a rank's total counts both directions, and over the job
// Σ send = Σ recv).
#ifndef CTRON_COMM_H
#define CTRON_COMM_H
#include <stddef.h>
#include <stdint.h>

typedef enum {
    COMM_ALLREDUCE, COMM_ALLGATHER, COMM_REDUCE_SCATTER, COMM_BROADCAST, COMM_SEND, COMM_RECV, COMM_KINDS
} CommKind;

typedef struct {
    uint64_t bytes[COMM_KINDS];  // the convention above, summed since the last reset
    uint64_t calls[COMM_KINDS];  // collectives run (size-1 groups included), transfers posted
} CommStats;

typedef enum {
    COMM_AUTO,    // MPI when built with it and started by a launcher (mpirun/mpiexec), else single
    COMM_SINGLE,  // one process, no MPI even when built with it
    COMM_MPI,     // MPI; an error when ctron was built without it
} CommBackend;

struct CommOps;     // the backend's functions (comm_backend.h)
struct CommDevice;  // the device path of a group's tensors (comm_device.h)

// A process group: a sub-communicator of the world. size/rank are its own; world_rank/world_size
// name the process in messages. Read the fields, do not write them.
typedef struct {
    int size, rank;
    int world_rank, world_size;
    char name[16];               // "world", "tp", "pp", "dp", "emb", or what comm_split was given
    CommStats stats;
    const struct CommOps *ops;
    void *handle;                // the backend's communicator (an MPI_Comm), NULL for single
    struct CommDevice *device;   // set by comm_device_open: how comm_device_* reach device memory
    int solo;                    // comm_grid_solo's TP group: rank 0 of `size`, the others absent
} CommGroup;

typedef struct {
    CommGroup world;
    CommBackend backend;         // COMM_SINGLE or COMM_MPI once initialised
    int finalize_mpi;            // we called MPI_Init, so comm_finalize calls MPI_Finalize
} Comm;

// Ranks = dp × pp × tp, laid out tp-fastest as in Megatron: world rank r = (dp_rank·pp + pp_rank)·tp
// + tp_rank, so a TP group is tp consecutive ranks (the ones that share a node first), a PP group
// the pp stages of one (dp, tp) rank pair, tp apart, and a DP group the ranks with the same pp and
// tp rank, pp·tp apart. emb_group is Megatron's embedding group, over which the tied token
// embedding's gradient is summed: stage 0 (rank 0) and stage pp−1 (rank 1) of one (dp, tp) pair
// when pp > 1; a group of one rank on the middle stages and on every rank when pp = 1.
typedef struct {
    int tp, dp, pp;
    CommGroup tp_group, dp_group, pp_group, emb_group;
} CommGrid;

// A non-blocking operation in flight. A zeroed request is inactive; posting fills every field
// (whatever req held is overwritten, so never post onto an active one: its transfer would be lost);
// comm_wait, or comm_test returning 1, completes it and makes it inactive again. Read nothing here.
typedef struct {
    void *handle;      // the backend's outstanding pieces; NULL when inactive
    CommGroup *group;  // what it was posted on: must outlive the request
    CommKind kind;     // COMM_SEND, COMM_RECV or COMM_ALLREDUCE
    size_t n;          // floats
    int peer;          // the group rank sent to or received from; -1 for an all-reduce
    int tag;
    void *staged;      // comm_device.c's host staging slot of a device transfer, NULL otherwise
} CommRequest;

// Starts the backend (MPI_Init_thread when MPI; argc/argv may be NULL). Returns 0, or -1 with a
// message in err (COMM_MPI without MPI built in; a launcher started several ranks of a build
// without MPI). MPI calls then return errors instead of aborting, and every failure is reported
// through comm_abort.
int comm_init(Comm *c, CommBackend want, int *argc, char ***argv, char *err, size_t errlen);
// Frees the world group and calls MPI_Finalize when comm_init called MPI_Init (collective).
// Free grids and split groups first.
void comm_finalize(Comm *c);
const char *comm_backend_name(CommBackend b);

// Splits the world into the dp × pp × tp grid (collective over the world). Returns 0, or -1 with a
// message in err when tp < 1, pp < 1 or tp·pp does not divide the world size (every rank gets the
// same error: let rank 0 print it).
int comm_grid_pp(Comm *c, int tp, int pp, CommGrid *grid, char *err, size_t errlen);
// The grid with pp = 1: dp × tp, as before pipelines (the same groups and messages).
int comm_grid(Comm *c, int tp, CommGrid *grid, char *err, size_t errlen);
void comm_grid_free(CommGrid *grid);
// One process as rank 0 of a TP group of tp ranks whose other ranks are absent (`ctron train --tp-solo`,
// for timing one TP rank's work and measuring its memory on one device). Every collective on the TP
// group counts the bytes a ring of tp ranks would move and stands in for the data locally: an all-reduce
// leaves this rank's partial sum, an all-gather repeats its chunk in every slot, a reduce-scatter keeps its
// own slice unsummed, a broadcast keeps the buffer. Values are therefore not the model's; shapes, memory,
// kernels and byte counts are rank 0's. The world must be one process; dp, pp and emb are groups of one.
int comm_grid_solo(Comm *c, int tp, CommGrid *grid, char *err, size_t errlen);
// MPI_Comm_split: the ranks of parent with the same color form a group, ranked by key (ties by
// parent rank). Collective over parent; color ≥ 0.
void comm_split(CommGroup *parent, int color, int key, const char *name, CommGroup *out);
void comm_group_free(CommGroup *g);

// The collectives: every rank of g calls them, in the same order, with the same sizes. n and chunk
// count floats. On a group of one rank they copy (or do nothing in place) and count zero bytes.
// Sum over the ranks: recv[i] = Σ send[i]. In place when send == recv.
void comm_allreduce_sum(CommGroup *g, const float *send, float *recv, size_t n);
// recv[r·chunk .. (r+1)·chunk) = rank r's send[0 .. chunk). In place when send == recv + rank·chunk.
void comm_allgather(CommGroup *g, const float *send, float *recv, size_t chunk);
// recv[0 .. chunk) = Σ over ranks of send[rank·chunk .. (rank+1)·chunk). send holds size·chunk
// floats; send and recv must not overlap.
void comm_reduce_scatter_sum(CommGroup *g, const float *send, float *recv, size_t chunk);
// Every rank's buf[0 .. n) = root's.
void comm_broadcast(CommGroup *g, float *buf, size_t n, int root);
void comm_barrier(CommGroup *g);

// Non-blocking transfers (pipeline stages: activations forward, gradients backward). peer is a rank
// of g other than the caller's own (a group of one rank has none: any transfer on it is a bug and
// aborts); 0 ≤ tag ≤ 32767 (the least MPI_TAG_UB MPI allows). A receive must match its send's n,
// or the job aborts when it completes. buf must stay untouched until the request completes. Sizes
// over 2^30 floats go as several messages of the same tag, which MPI keeps in order.
void comm_isend(CommGroup *g, const float *buf, size_t n, int dst, int tag, CommRequest *req);
void comm_irecv(CommGroup *g, float *buf, size_t n, int src, int tag, CommRequest *req);
// In-place sum over the ranks of g, completed by comm_wait/comm_test; counted as COMM_ALLREDUCE.
// Every rank of g posts it in the same order relative to g's other collectives, blocking or not.
// On a group of one rank (or n = 0) it completes at once: req is left inactive. Sizes over 2^30
// floats go as several all-reduces of up to 2^30 floats each.
void comm_iallreduce_sum(CommGroup *g, float *buf, size_t n, CommRequest *req);
// Blocks until req completes; a no-op on an inactive request.
void comm_wait(CommRequest *req);
// 1 when req has completed (it is then inactive; an inactive request answers 1), else 0.
int comm_test(CommRequest *req);

// Prints "ctron: error: rank R of N: <message>" once, from the calling rank, and ends every rank
// of the job with exit status 1 (MPI_Abort on the world; exit(1) for a single process). For broken
// invariants and failed MPI calls; a user error every rank detects alike should instead be printed
// by rank 0, followed by comm_finalize and exit(2) on all ranks.
_Noreturn void comm_abort(const CommGroup *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// The counters: a copy, a reset, the bytes of one kind by the convention above, a kind's name
// ("all-reduce", "all-gather", "reduce-scatter", "broadcast", "send", "recv").
CommStats comm_stats(const CommGroup *g);
void comm_stats_reset(CommGroup *g);
uint64_t comm_bytes_for(CommKind kind, int n_ranks, uint64_t tensor_bytes);
uint64_t comm_stats_total_bytes(const CommStats *s);
const char *comm_kind_name(CommKind kind);
#endif
