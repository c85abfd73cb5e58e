// The MPI backend (built only with CTRON_HAVE_MPI). Every communicator returns errors instead of
// aborting inside the library (MPI_ERRORS_RETURN), and every call is checked: a failure becomes
// one message naming the call, the group and MPI's own explanation, then comm_abort ends all ranks.
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "parallel/comm_backend.h"
#include "util/common.h"

// MPI counts are ints: all-reduce and broadcast go in pieces this long; a larger all-gather or
// reduce-scatter chunk (8 GiB) is refused rather than split.
#define MPI_PIECE ((size_t)1 << 30)

static MPI_Comm group_comm(const CommGroup *g) { return *(const MPI_Comm *)g->handle; }

static void check(const CommGroup *g, int rc, const char *call) {
    if (rc == MPI_SUCCESS) return;
    char why[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, why, &len) != MPI_SUCCESS) snprintf(why, sizeof why, "MPI error code %d", rc);
    comm_abort(g, "%s on group %s (rank %d of %d) failed: %s", call, g->name, g->rank, g->size, why);
}

static int count_of(const CommGroup *g, size_t n, const char *call) {
    if (n > (size_t)INT_MAX)
        comm_abort(g, "%s on group %s: %zu floats per rank exceed MPI's int count (%d)", call, g->name, n, INT_MAX);
    return (int)n;
}

static void mpi_allreduce_sum(CommGroup *g, const float *send, float *recv, size_t n) {
    for (size_t off = 0; off < n; off += MPI_PIECE) {
        int len = (int)(n - off < MPI_PIECE ? n - off : MPI_PIECE);
        const void *s = send == recv ? MPI_IN_PLACE : (const void *)(send + off);
        check(g, MPI_Allreduce(s, recv + off, len, MPI_FLOAT, MPI_SUM, group_comm(g)), "MPI_Allreduce");
    }
}

static void mpi_allgather(CommGroup *g, const float *send, float *recv, size_t chunk) {
    int len = count_of(g, chunk, "MPI_Allgather");
    const void *s = send ? (const void *)send : MPI_IN_PLACE;
    check(g, MPI_Allgather(s, len, MPI_FLOAT, recv, len, MPI_FLOAT, group_comm(g)), "MPI_Allgather");
}

static void mpi_reduce_scatter_sum(CommGroup *g, const float *send, float *recv, size_t chunk) {
    int len = count_of(g, chunk, "MPI_Reduce_scatter_block");
    check(g, MPI_Reduce_scatter_block(send, recv, len, MPI_FLOAT, MPI_SUM, group_comm(g)), "MPI_Reduce_scatter_block");
}

static void mpi_broadcast(CommGroup *g, float *buf, size_t n, int root) {
    for (size_t off = 0; off < n; off += MPI_PIECE) {
        int len = (int)(n - off < MPI_PIECE ? n - off : MPI_PIECE);
        check(g, MPI_Bcast(buf + off, len, MPI_FLOAT, root, group_comm(g)), "MPI_Bcast");
    }
}

static void mpi_barrier(CommGroup *g) { check(g, MPI_Barrier(group_comm(g)), "MPI_Barrier"); }

// The handle is a heap MPI_Comm: MPI_Comm is a pointer in Open MPI and an int in MPICH, so comm.h
// keeps it behind a void *.
static void adopt(CommGroup *g, MPI_Comm comm) {
    MPI_Comm *h = xmalloc(sizeof *h);
    *h = comm;
    g->handle = h;
    check(g, MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check(g, MPI_Comm_size(comm, &g->size), "MPI_Comm_size");
    check(g, MPI_Comm_rank(comm, &g->rank), "MPI_Comm_rank");
}

static void mpi_split(CommGroup *parent, int color, int key, CommGroup *out) {
    MPI_Comm comm;
    check(parent, MPI_Comm_split(group_comm(parent), color, key, &comm), "MPI_Comm_split");
    adopt(out, comm);
}

static void mpi_group_free(CommGroup *g) {
    if (!g->handle) return;
    MPI_Comm *h = g->handle;
    check(g, MPI_Comm_free(h), "MPI_Comm_free");
    free(h);
    g->handle = NULL;
}

static void mpi_abort_all(int status) {
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down) MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}

static void mpi_finalize(Comm *c) {
    if (c->finalize_mpi) MPI_Finalize();
    c->finalize_mpi = 0;
}

static const struct CommOps MPI_OPS = {
    .allreduce_sum = mpi_allreduce_sum,
    .allgather = mpi_allgather,
    .reduce_scatter_sum = mpi_reduce_scatter_sum,
    .broadcast = mpi_broadcast,
    .barrier = mpi_barrier,
    .split = mpi_split,
    .group_free = mpi_group_free,
    .abort_all = mpi_abort_all,
    .finalize = mpi_finalize,
};

int comm_mpi_init(Comm *c, int *argc, char ***argv, char *err, size_t errlen) {
    int up = 0;
    MPI_Initialized(&up);
    if (!up) {
        // OpenMP threads compute; only the main thread talks to MPI.
        int provided = MPI_THREAD_SINGLE;
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            snprintf(err, errlen, "MPI_Init_thread failed");
            return -1;
        }
        c->finalize_mpi = 1;
        if (provided < MPI_THREAD_FUNNELED) {
            MPI_Finalize();
            c->finalize_mpi = 0;
            snprintf(err, errlen, "the MPI library offers thread level %d, ctron needs MPI_THREAD_FUNNELED (%d)",
                     provided, MPI_THREAD_FUNNELED);
            return -1;
        }
    }
    CommGroup *w = &c->world;
    w->ops = &MPI_OPS;
    snprintf(w->name, sizeof w->name, "world");
    // Until the world group exists, failures are reported against MPI_COMM_WORLD's numbers.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_size(MPI_COMM_WORLD, &w->world_size);
    MPI_Comm_rank(MPI_COMM_WORLD, &w->world_rank);
    w->size = w->world_size;
    w->rank = w->world_rank;
    // A duplicate, so that ctron's collectives never match messages of other code on MPI_COMM_WORLD.
    MPI_Comm dup;
    check(w, MPI_Comm_dup(MPI_COMM_WORLD, &dup), "MPI_Comm_dup");
    adopt(w, dup);
    return 0;
}
