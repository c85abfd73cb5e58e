// The MPI backend (built only with CTRON_HAVE_MPI). Every communicator returns errors instead of
// aborting inside the library (MPI_ERRORS_RETURN), and every call is checked: a failure becomes
// one message naming the call, the group and MPI's own explanation, then comm_abort ends all ranks.
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "parallel/comm_backend.h"
#include "util/common.h"

// MPI counts are ints: all-reduce, broadcast and the non-blocking calls go in pieces this long; a
// larger all-gather or reduce-scatter chunk (8 GiB) is refused rather than split.
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

// A non-blocking request's pieces, posted in order and completed in order: messages of one source,
// tag and communicator arrive in the order sent, and non-blocking collectives match in the order
// posted, so both sides' pieces pair up.
typedef struct {
    int pieces, done;   // done: the pieces completed so far, the first done of req[]
    MPI_Request req[];
} Pending;

static int pieces_of(size_t n) { return n == 0 ? 1 : (int)((n + MPI_PIECE - 1) / MPI_PIECE); }
static size_t piece_off(int i) { return (size_t)i * MPI_PIECE; }
static int piece_len(size_t n, int i) {
    size_t left = n - piece_off(i);
    return (int)(left < MPI_PIECE ? left : MPI_PIECE);
}

static Pending *pending_new(CommRequest *r, size_t n) {
    int k = pieces_of(n);
    Pending *p = xmalloc(sizeof *p + (size_t)k * sizeof(MPI_Request));
    p->pieces = k;
    p->done = 0;
    for (int i = 0; i < k; i++) p->req[i] = MPI_REQUEST_NULL;
    r->handle = p;
    return p;
}

static void mpi_isend(CommGroup *g, const float *buf, size_t n, int dst, int tag, CommRequest *r) {
    Pending *p = pending_new(r, n);
    for (int i = 0; i < p->pieces; i++) {  // n = 0: one empty message, buf possibly NULL and not offset
        const float *at = n ? buf + piece_off(i) : buf;
        check(g, MPI_Isend(at, piece_len(n, i), MPI_FLOAT, dst, tag, group_comm(g), &p->req[i]), "MPI_Isend");
    }
}

static void mpi_irecv(CommGroup *g, float *buf, size_t n, int src, int tag, CommRequest *r) {
    Pending *p = pending_new(r, n);
    for (int i = 0; i < p->pieces; i++) {
        float *at = n ? buf + piece_off(i) : buf;
        check(g, MPI_Irecv(at, piece_len(n, i), MPI_FLOAT, src, tag, group_comm(g), &p->req[i]), "MPI_Irecv");
    }
}

static void mpi_iallreduce_sum(CommGroup *g, float *buf, size_t n, CommRequest *r) {
    Pending *p = pending_new(r, n);
    for (int i = 0; i < p->pieces; i++)
        check(g, MPI_Iallreduce(MPI_IN_PLACE, buf + piece_off(i), piece_len(n, i), MPI_FLOAT, MPI_SUM, group_comm(g),
                                &p->req[i]), "MPI_Iallreduce");
}

// The call and what it completes, for check's message: "MPI_Wait (recv from rank 1, tag 3)".
static void describe(const CommRequest *r, const char *call, char *out, size_t len) {
    if (r->kind == COMM_SEND) snprintf(out, len, "%s (send to rank %d, tag %d)", call, r->peer, r->tag);
    else if (r->kind == COMM_RECV) snprintf(out, len, "%s (recv from rank %d, tag %d)", call, r->peer, r->tag);
    else snprintf(out, len, "%s (all-reduce of %zu floats)", call, r->n);
}

// A receive must get what it posted: a shorter message completes without error in MPI.
static void piece_done(const CommRequest *r, int i, MPI_Status *st) {
    if (r->kind != COMM_RECV) return;
    int got = 0, want = piece_len(r->n, i);
    check(r->group, MPI_Get_count(st, MPI_FLOAT, &got), "MPI_Get_count");
    if (got == want) return;
    char piece[48] = "";
    if (pieces_of(r->n) > 1) snprintf(piece, sizeof piece, " (piece %d of %d)", i + 1, pieces_of(r->n));
    comm_abort(r->group, "recv on group %s from rank %d, tag %d: got %d floats, expected %d%s", r->group->name, r->peer,
               r->tag, got, want, piece);
}

static void pending_free(CommRequest *r) {
    free(r->handle);
    r->handle = NULL;
}

static void mpi_wait(CommRequest *r) {
    Pending *p = r->handle;
    char call[96];
    describe(r, "MPI_Wait", call, sizeof call);
    for (; p->done < p->pieces; p->done++) {
        MPI_Status st;
        check(r->group, MPI_Wait(&p->req[p->done], &st), call);
        piece_done(r, p->done, &st);
    }
    pending_free(r);
}

static int mpi_test(CommRequest *r) {
    Pending *p = r->handle;
    char call[96];
    describe(r, "MPI_Test", call, sizeof call);
    for (; p->done < p->pieces; p->done++) {
        int flag = 0;
        MPI_Status st;
        check(r->group, MPI_Test(&p->req[p->done], &flag, &st), call);
        if (!flag) return 0;
        piece_done(r, p->done, &st);
    }
    pending_free(r);
    return 1;
}

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
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .iallreduce_sum = mpi_iallreduce_sum,
    .wait = mpi_wait,
    .test = mpi_test,
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
