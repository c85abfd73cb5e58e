// The backend-independent half of the communication interface: backend choice, argument checks,
// byte counters, groups of one rank, the dp × pp × tp grid, abort. Point-to-point transfers and
// non-blocking all-reduces live in comm_nonblocking.c.
#include "parallel/comm.h"
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "parallel/comm_backend.h"

static const char *const KIND_NAMES[COMM_KINDS] = {"all-reduce", "all-gather", "reduce-scatter", "broadcast",
                                                    "send", "recv"};

const char *comm_kind_name(CommKind kind) {
    return (unsigned)kind < COMM_KINDS ? KIND_NAMES[kind] : "unknown";
}

const char *comm_backend_name(CommBackend b) {
    switch (b) {
    case COMM_AUTO: return "auto";
    case COMM_SINGLE: return "single";
    case COMM_MPI: return "mpi";
    }
    return "unknown";
}

uint64_t comm_bytes_for(CommKind kind, int n_ranks, uint64_t tensor_bytes) {
    // A transfer moves its buffer whatever the group's size (comm_isend refuses groups of one).
    if (kind == COMM_SEND || kind == COMM_RECV) return tensor_bytes;
    if (n_ranks <= 1) return 0;
    uint64_t n = (uint64_t)n_ranks;
    switch (kind) {
    case COMM_ALLREDUCE: return 2 * (n - 1) * tensor_bytes / n;
    case COMM_ALLGATHER:
    case COMM_REDUCE_SCATTER:
    case COMM_BROADCAST: return (n - 1) * tensor_bytes / n;
    default: return 0;
    }
}

uint64_t comm_stats_total_bytes(const CommStats *s) {
    uint64_t t = 0;
    for (int k = 0; k < COMM_KINDS; k++) t += s->bytes[k];
    return t;
}

CommStats comm_stats(const CommGroup *g) { return g->stats; }
void comm_stats_reset(CommGroup *g) { memset(&g->stats, 0, sizeof g->stats); }

void comm_count(CommGroup *g, CommKind kind, size_t tensor_floats) {
    g->stats.calls[kind]++;
    g->stats.bytes[kind] += comm_bytes_for(kind, g->size, (uint64_t)tensor_floats * sizeof(float));
}

void comm_abort(const CommGroup *g, const char *fmt, ...) {
    // stdout first, so that progress lines printed before the failure are not lost behind it.
    fflush(stdout);
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ctron: error: rank %d of %d: %s\n", g->world_rank, g->world_size, msg);
    fflush(stderr);
    g->ops->abort_all(1);
    exit(1);  // not reached: abort_all ends the process
}

// Launchers announce a rank through the environment: Open MPI's mpirun, PMIx, Hydra/Slurm's PMI.
static int launched_ranks(void) {
    static const char *const VARS[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++) {
        const char *v = getenv(VARS[i]);
        if (v && *v) return atoi(v) > 0 ? atoi(v) : 1;
    }
    return getenv("PMIX_RANK") || getenv("PMI_RANK") ? 1 : 0;
}

static void name_group(CommGroup *g, const char *name) {
    snprintf(g->name, sizeof g->name, "%s", name ? name : "group");
}

int comm_init(Comm *c, CommBackend want, int *argc, char ***argv, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    int launched = launched_ranks();
#ifdef CTRON_HAVE_MPI
    if (want == COMM_MPI || (want == COMM_AUTO && launched > 0)) {
        if (comm_mpi_init(c, argc, argv, err, errlen) != 0) return -1;
        c->backend = COMM_MPI;
        name_group(&c->world, "world");
        return 0;
    }
#else
    (void)argc;
    (void)argv;
    if (want == COMM_MPI) {
        snprintf(err, errlen, "the MPI backend was asked for, but ctron was built without MPI "
                              "(install libopenmpi-dev, e.g. with scripts/setup.sh, and rebuild)");
        return -1;
    }
    if (want == COMM_AUTO && launched > 1) {
        snprintf(err, errlen, "started by an MPI launcher as one of %d ranks, but ctron was built without "
                              "MPI (install libopenmpi-dev, e.g. with scripts/setup.sh, and rebuild)", launched);
        return -1;
    }
#endif
    if (want != COMM_AUTO && want != COMM_SINGLE && want != COMM_MPI) {
        snprintf(err, errlen, "unknown communication backend %d (expected auto, single or mpi)", (int)want);
        return -1;
    }
    comm_single_init(c);
    c->backend = COMM_SINGLE;
    name_group(&c->world, "world");
    return 0;
}

void comm_finalize(Comm *c) {
    if (!c->world.ops) return;
    const struct CommOps *ops = c->world.ops;
    ops->group_free(&c->world);
    ops->finalize(c);
    c->world.ops = NULL;
}

void comm_split(CommGroup *parent, int color, int key, const char *name, CommGroup *out) {
    if (color < 0) comm_abort(parent, "comm_split of group %s: color %d is negative", parent->name, color);
    memset(out, 0, sizeof *out);
    out->world_rank = parent->world_rank;  // set first: the backend's error messages use them
    out->world_size = parent->world_size;
    out->ops = parent->ops;
    name_group(out, name);
    parent->ops->split(parent, color, key, out);
}

void comm_group_free(CommGroup *g) {
    if (g->ops) g->ops->group_free(g);
    memset(g, 0, sizeof *g);
}

int comm_grid_pp(Comm *c, int tp, int pp, CommGrid *grid, char *err, size_t errlen) {
    memset(grid, 0, sizeof *grid);
    int n = c->world.size;
    const char *s = n == 1 ? "" : "s";
    if (pp < 1) {
        snprintf(err, errlen, "pipeline-parallel size %d is not a number of stages (expected 1 or more)", pp);
        return -1;
    }
    if (tp < 1 || (pp == 1 && n % tp != 0)) {  // pp = 1 keeps comm_grid's message
        snprintf(err, errlen, "tensor-parallel size %d does not divide the %d rank%s (expected a divisor of %d)",
                 tp, n, s, n);
        return -1;
    }
    if ((long long)tp * pp > n || n % (tp * pp) != 0) {  // the first test keeps tp·pp from overflowing
        snprintf(err, errlen, "--pp %d × --tp %d = %lld does not divide the %d rank%s", pp, tp, (long long)tp * pp,
                 n, s);
        return -1;
    }
    int r = c->world.rank;
    int t = r % tp, p = (r / tp) % pp, d = r / (tp * pp);
    grid->tp = tp;
    grid->pp = pp;
    grid->dp = n / (tp * pp);
    // Colours name the coordinates a group shares, keys order it by the one it spans. With pp = 1 the
    // tp and dp splits are comm_grid's of old: (r / tp, r % tp) and (r % tp, r / tp).
    comm_split(&c->world, d * pp + p, t, "tp", &grid->tp_group);
    comm_split(&c->world, p * tp + t, d, "dp", &grid->dp_group);
    comm_split(&c->world, d * tp + t, p, "pp", &grid->pp_group);
    // The first and last stage of a (dp, tp) pair share a colour below dp·tp; every other rank takes
    // a colour of its own above it, a group of one.
    int ends = pp > 1 && (p == 0 || p == pp - 1);
    comm_split(&c->world, ends ? d * tp + t : grid->dp * tp + r, p == 0 ? 0 : 1, "emb", &grid->emb_group);
    return 0;
}

int comm_grid(Comm *c, int tp, CommGrid *grid, char *err, size_t errlen) {
    return comm_grid_pp(c, tp, 1, grid, err, errlen);
}

void comm_grid_free(CommGrid *grid) {
    comm_group_free(&grid->emb_group);
    comm_group_free(&grid->pp_group);
    comm_group_free(&grid->dp_group);
    comm_group_free(&grid->tp_group);
}

// Collectives: checks every backend would otherwise need, then groups of one rank, then the backend.

static void check_buffers(const CommGroup *g, const char *what, const void *a, const void *b, size_t n) {
    if (n > 0 && (!a || !b)) comm_abort(g, "%s on group %s: NULL buffer for %zu floats", what, g->name, n);
}

// As integers: comparing pointers into different objects is undefined in C.
static int overlaps(const float *a, size_t na, const float *b, size_t nb) {
    uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
    return pa < pb + nb * sizeof(float) && pb < pa + na * sizeof(float);
}

// The checks and the count of each collective, shared with comm_device.c: 1 when a backend must move
// data (a group of two ranks or more, a non-empty tensor), 0 when the caller only copies or is done.
int comm_begin_allreduce(CommGroup *g, const float *send, const float *recv, size_t n) {
    check_buffers(g, "all-reduce", send, recv, n);
    if (send != recv && overlaps(send, n, recv, n))
        comm_abort(g, "all-reduce on group %s: send and recv overlap without being the same buffer", g->name);
    comm_count(g, COMM_ALLREDUCE, n);
    return n > 0 && g->size > 1;
}

int comm_begin_allgather(CommGroup *g, const float *send, const float *recv, size_t chunk) {
    check_buffers(g, "all-gather", send, recv, chunk);
    size_t total = chunk * (size_t)g->size;
    if (send != recv + (size_t)g->rank * chunk && overlaps(send, chunk, recv, total))
        comm_abort(g, "all-gather on group %s: send overlaps recv but is not recv + rank·chunk", g->name);
    comm_count(g, COMM_ALLGATHER, total);
    return chunk > 0 && g->size > 1;
}

int comm_begin_reduce_scatter(CommGroup *g, const float *send, const float *recv, size_t chunk) {
    check_buffers(g, "reduce-scatter", send, recv, chunk);
    size_t total = chunk * (size_t)g->size;
    if (overlaps(send, total, recv, chunk))
        comm_abort(g, "reduce-scatter on group %s: send and recv overlap", g->name);
    comm_count(g, COMM_REDUCE_SCATTER, total);
    return chunk > 0 && g->size > 1;
}

int comm_begin_broadcast(CommGroup *g, const float *buf, size_t n, int root) {
    check_buffers(g, "broadcast", buf, buf, n);
    if (root < 0 || root >= g->size)
        comm_abort(g, "broadcast on group %s: root %d is out of range (expected 0 to %d)", g->name, root, g->size - 1);
    comm_count(g, COMM_BROADCAST, n);
    return n > 0 && g->size > 1;
}

void comm_allreduce_sum(CommGroup *g, const float *send, float *recv, size_t n) {
    if (comm_begin_allreduce(g, send, recv, n)) g->ops->allreduce_sum(g, send, recv, n);
    else if (n > 0 && send != recv) memcpy(recv, send, n * sizeof(float));
}

void comm_allgather(CommGroup *g, const float *send, float *recv, size_t chunk) {
    int in_place = send == recv + (size_t)g->rank * chunk;
    if (comm_begin_allgather(g, send, recv, chunk)) g->ops->allgather(g, in_place ? NULL : send, recv, chunk);
    else if (chunk > 0 && !in_place) memcpy(recv, send, chunk * sizeof(float));
}

void comm_reduce_scatter_sum(CommGroup *g, const float *send, float *recv, size_t chunk) {
    if (comm_begin_reduce_scatter(g, send, recv, chunk)) g->ops->reduce_scatter_sum(g, send, recv, chunk);
    else if (chunk > 0) memcpy(recv, send, chunk * sizeof(float));
}

void comm_broadcast(CommGroup *g, float *buf, size_t n, int root) {
    if (comm_begin_broadcast(g, buf, n, root)) g->ops->broadcast(g, buf, n, root);
}

void comm_barrier(CommGroup *g) {
    if (g->size > 1) g->ops->barrier(g);
}
