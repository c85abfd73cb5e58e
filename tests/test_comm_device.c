// The device path of the communication interface (src/parallel/comm_device.h) on --device
// cpu-guarded, whose memory the host cannot touch outside the backend: every collective and transfer
// on device buffers, staged through host memory around MPI, with staging buffers of several sizes
// (large; one float per rank; 5 floats), so that each call also runs cut into pieces. Values are small
// integers: sums are exact in fp32 and compared with ==. The byte counters count each call once, as
// comm.h's convention says, whatever the pieces. On a group of one rank the calls copy on the device.
// A host-addressable backend (cpu) gets no device path: the groups keep comm.h's calls. The library
// path (NCCL's, on CUDA) runs against a stand-in library on the same backend.
// Run plainly (one process) and under mpiexec -n 2 and 4.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "check_mpi.h"
#include "parallel/comm_device.h"

enum { MAXF = 256 };

static Backend *be;

static float *dev_of(const float *host, size_t n) {
    float *d = be->alloc(be, (n ? n : 1) * sizeof(float));
    if (n) be->copy(be, d, host, n * sizeof(float), COPY_H2D);
    return d;
}
static void host_of(float *host, const float *dev, size_t n) {
    if (n) be->copy(be, host, dev, n * sizeof(float), COPY_D2H);
}
// Elements of got[0..n) that differ from want[0..n).
static int wrong(const float *got, const float *want, size_t n) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += got[i] != want[i];
    return bad;
}

static void test_allreduce(CommGroup *g, size_t stage) {
    enum { N = 37 };
    int size = g->size, r = g->rank;
    float send[N], want[N], got[N];
    for (int i = 0; i < N; i++) {
        send[i] = (float)(100 * r + i);
        want[i] = (float)(100 * (size * (size - 1) / 2) + size * i);
    }
    float *ds = dev_of(send, N), *dr = dev_of(send, N);
    comm_stats_reset(g);
    comm_device_allreduce_sum(g, ds, dr, N);   // out of place
    host_of(got, dr, N);
    CHECK(wrong(got, want, N) == 0, "stage %zu, %s: all-reduce out of place wrong", stage, g->name);
    comm_device_allreduce_sum(g, ds, ds, N);   // in place
    host_of(got, ds, N);
    CHECK(wrong(got, want, N) == 0, "stage %zu, %s: all-reduce in place wrong", stage, g->name);
    CommStats st = comm_stats(g);
    CHECK(st.calls[COMM_ALLREDUCE] == 2 && st.bytes[COMM_ALLREDUCE] == 2 * comm_bytes_for(COMM_ALLREDUCE, size, N * 4),
          "stage %zu, %s: all-reduce counted %llu calls, %llu bytes", stage, g->name,
          (unsigned long long)st.calls[COMM_ALLREDUCE], (unsigned long long)st.bytes[COMM_ALLREDUCE]);
    be->free(be, ds);
    be->free(be, dr);
}

static void test_allgather(CommGroup *g, size_t stage) {
    enum { C = 11 };
    int size = g->size, r = g->rank;
    size_t total = (size_t)C * size;
    float send[C], want[MAXF], got[MAXF], init[MAXF];
    for (int i = 0; i < C; i++) send[i] = (float)(100 * r + i);
    for (size_t k = 0; k < total; k++) {
        want[k] = (float)(100 * (int)(k / C) + (int)(k % C));
        init[k] = k / C == (size_t)r ? want[k] : -1.0f;
    }
    float *ds = dev_of(send, C), *dr = dev_of(init, total);
    comm_stats_reset(g);
    comm_device_allgather(g, ds, dr, C);
    host_of(got, dr, total);
    CHECK(wrong(got, want, total) == 0, "stage %zu, %s: all-gather wrong", stage, g->name);
    be->copy(be, dr, init, total * sizeof(float), COPY_H2D);
    comm_device_allgather(g, dr + (size_t)r * C, dr, C);   // in place
    host_of(got, dr, total);
    CHECK(wrong(got, want, total) == 0, "stage %zu, %s: all-gather in place wrong", stage, g->name);
    CommStats st = comm_stats(g);
    CHECK(st.bytes[COMM_ALLGATHER] == 2 * comm_bytes_for(COMM_ALLGATHER, size, total * 4),
          "stage %zu, %s: all-gather counted %llu bytes", stage, g->name, (unsigned long long)st.bytes[COMM_ALLGATHER]);
    be->free(be, ds);
    be->free(be, dr);
}

static void test_reduce_scatter(CommGroup *g, size_t stage) {
    enum { C = 9 };
    int size = g->size, r = g->rank;
    size_t total = (size_t)C * size;
    float send[MAXF], want[C], got[C];
    for (size_t k = 0; k < total; k++) send[k] = (float)(1000 * r + 10 * (int)(k / C) + (int)(k % C));
    for (int i = 0; i < C; i++) want[i] = (float)(1000 * (size * (size - 1) / 2) + size * (10 * r + i));
    float *ds = dev_of(send, total), *dr = be->alloc(be, C * sizeof(float));
    comm_stats_reset(g);
    comm_device_reduce_scatter_sum(g, ds, dr, C);
    host_of(got, dr, C);
    CHECK(wrong(got, want, C) == 0, "stage %zu, %s: reduce-scatter wrong (got[0] %g, want %g)", stage, g->name,
          (double)got[0], (double)want[0]);
    CommStats st = comm_stats(g);
    CHECK(st.bytes[COMM_REDUCE_SCATTER] == comm_bytes_for(COMM_REDUCE_SCATTER, size, total * 4),
          "stage %zu, %s: reduce-scatter counted %llu bytes", stage, g->name,
          (unsigned long long)st.bytes[COMM_REDUCE_SCATTER]);
    be->free(be, ds);
    be->free(be, dr);
}

static void test_broadcast(CommGroup *g, size_t stage) {
    enum { N = 23 };
    int root = g->size - 1;
    float buf[N], want[N], got[N];
    for (int i = 0; i < N; i++) {
        want[i] = (float)(500 + i);
        buf[i] = g->rank == root ? want[i] : -1.0f;
    }
    float *d = dev_of(buf, N);
    comm_device_broadcast(g, d, N, root);
    host_of(got, d, N);
    CHECK(wrong(got, want, N) == 0, "stage %zu, %s: broadcast wrong", stage, g->name);
    be->free(be, d);
}

// A ring of sends and receives through host slots (polled with comm_test), an empty message, then a
// non-blocking all-reduce (complete when posted on the staged path).
static void test_nonblocking(CommGroup *g, size_t stage) {
    enum { N = 19 };
    int size = g->size, r = g->rank, next = (r + 1) % size, prev = (r + size - 1) % size;
    float send[N], want[N], got[N], none = 0.0f;
    for (int i = 0; i < N; i++) {
        send[i] = (float)(1000 * r + i);
        want[i] = (float)(1000 * prev + i);
        got[i] = -1.0f;
    }
    float *ds = dev_of(send, N), *dr = dev_of(got, N), *de = dev_of(&none, 1);
    if (size > 1) {
        comm_stats_reset(g);
        CommRequest rr, rs, er, es;
        comm_device_irecv(g, dr, N, prev, 3, &rr);
        comm_device_isend(g, ds, N, next, 3, &rs);
        be->memset(be, ds, 0, N * sizeof(float));   // the send took its copy when posted
        comm_device_irecv(g, de, 0, prev, 4, &er);
        comm_device_isend(g, de, 0, next, 4, &es);
        while (!comm_test(&rr)) {
        }
        CHECK(rr.handle == NULL && rr.staged == NULL, "stage %zu, %s: a completed receive is still active", stage, g->name);
        comm_wait(&rs);
        comm_wait(&er);
        comm_wait(&es);
        host_of(got, dr, N);
        CHECK(wrong(got, want, N) == 0, "stage %zu, %s: ring transfer wrong (got[0] %g, want %g)", stage, g->name,
              (double)got[0], (double)want[0]);
        CommStats st = comm_stats(g);
        CHECK(st.bytes[COMM_SEND] == N * 4 && st.bytes[COMM_RECV] == N * 4 && st.calls[COMM_SEND] == 2,
              "stage %zu, %s: transfers counted %llu/%llu bytes", stage, g->name,
              (unsigned long long)st.bytes[COMM_SEND], (unsigned long long)st.bytes[COMM_RECV]);
    }
    for (int i = 0; i < N; i++) {
        send[i] = (float)(r + i);
        want[i] = (float)(size * (size - 1) / 2 + size * i);
    }
    be->copy(be, ds, send, N * sizeof(float), COPY_H2D);
    CommRequest ar;
    comm_device_iallreduce_sum(g, ds, N, &ar);
    comm_wait(&ar);
    host_of(got, ds, N);
    CHECK(wrong(got, want, N) == 0, "stage %zu, %s: non-blocking all-reduce wrong", stage, g->name);
    be->free(be, ds);
    be->free(be, dr);
    be->free(be, de);
}

// A group of one rank: the calls copy on the device (or leave the buffer), counting zero bytes.
static void test_one_rank(CommGroup *g) {
    enum { N = 13 };
    float a[N], got[N];
    for (int i = 0; i < N; i++) a[i] = (float)(7 + i);
    float *ds = dev_of(a, N), *dr = be->alloc(be, N * sizeof(float));
    comm_stats_reset(g);
    comm_device_allreduce_sum(g, ds, dr, N);
    host_of(got, dr, N);
    CHECK(wrong(got, a, N) == 0, "group of one: all-reduce did not copy");
    be->memset(be, dr, 0, N * sizeof(float));
    comm_device_reduce_scatter_sum(g, ds, dr, N);
    host_of(got, dr, N);
    CHECK(wrong(got, a, N) == 0, "group of one: reduce-scatter did not copy");
    be->memset(be, dr, 0, N * sizeof(float));
    comm_device_allgather(g, ds, dr, N);
    host_of(got, dr, N);
    CHECK(wrong(got, a, N) == 0, "group of one: all-gather did not copy");
    CHECK(comm_stats_total_bytes(&g->stats) == 0, "group of one: counted bytes");
    be->free(be, ds);
    be->free(be, dr);
}

// ---- a device library stand-in (the role NCCL plays on CUDA): each collective copies the device
// buffer to the host, runs comm.h's call on a shadow communicator of the same ranks (its own
// counters) and copies back. It records what comm_device.c asked of it.

enum { SHADOWS = 4, ID_BYTES = 128 };
static CommGroup *shadows[SHADOWS];   // the groups comm_open will be asked for, in the order asked
static int n_shadows, n_opened, n_new_ids, n_closed, n_lib_calls, bad_ids;

static int lib_new_id(void *id) {
    memset(id, 0xC7, ID_BYTES);
    ((unsigned char *)id)[0] = (unsigned char)n_opened;   // which open it is for
    n_new_ids++;
    return 0;
}
static int lib_comm_open(Backend *b, void **comm, int size, int rank, const void *id) {
    (void)b;
    const unsigned char *u = id;
    int ok = u[0] == (unsigned char)n_opened;
    for (int i = 1; i < ID_BYTES; i++) ok &= u[i] == 0xC7;   // rank 0's id, broadcast to every rank
    bad_ids += !ok;
    if (n_opened >= n_shadows || shadows[n_opened]->size != size || shadows[n_opened]->rank != rank) return 1;
    *comm = shadows[n_opened++];
    return 0;
}
static int lib_comm_close(void *comm) {
    (void)comm;
    n_closed++;
    return 0;
}
static float *lib_host(const float *dev, size_t n) {
    float *h = malloc((n ? n : 1) * sizeof(float));
    host_of(h, dev, n);
    return h;
}
static int lib_allreduce(Backend *b, void *comm, const float *send, float *recv, size_t n) {
    (void)b;
    float *h = lib_host(send, n);
    comm_allreduce_sum(comm, h, h, n);
    be->copy(be, recv, h, n * sizeof(float), COPY_H2D);
    free(h);
    n_lib_calls++;
    return 0;
}
static int lib_allgather(Backend *b, void *comm, const float *send, float *recv, size_t chunk) {
    (void)b;
    CommGroup *g = comm;
    size_t total = chunk * (size_t)g->size;
    float *h = lib_host(send, chunk), *all = malloc(total * sizeof(float));
    comm_allgather(g, h, all, chunk);
    be->copy(be, recv, all, total * sizeof(float), COPY_H2D);
    free(h);
    free(all);
    n_lib_calls++;
    return 0;
}
static int lib_reduce_scatter(Backend *b, void *comm, const float *send, float *recv, size_t chunk) {
    (void)b;
    CommGroup *g = comm;
    float *h = lib_host(send, chunk * (size_t)g->size), *out = malloc(chunk * sizeof(float));
    comm_reduce_scatter_sum(g, h, out, chunk);
    be->copy(be, recv, out, chunk * sizeof(float), COPY_H2D);
    free(h);
    free(out);
    n_lib_calls++;
    return 0;
}
static int lib_broadcast(Backend *b, void *comm, float *buf, size_t n, int root) {
    (void)b;
    float *h = lib_host(buf, n);
    comm_broadcast(comm, h, n, root);
    be->copy(be, buf, h, n * sizeof(float), COPY_H2D);
    free(h);
    n_lib_calls++;
    return 0;
}
static const char *lib_error_string(int code) { return code ? "the stand-in was asked for another group" : "ok"; }

static const BackendCollectives STAND_IN = {
    .name = "stand-in", .id_bytes = ID_BYTES, .new_id = lib_new_id, .comm_open = lib_comm_open,
    .comm_close = lib_comm_close, .allreduce_sum = lib_allreduce, .allgather = lib_allgather,
    .reduce_scatter_sum = lib_reduce_scatter, .broadcast = lib_broadcast, .error_string = lib_error_string,
};

// The library path: one communicator per grid group of two ranks or more, opened in the grid's order
// from rank 0's id; every collective goes to the library (and is counted once, on the grid's group);
// no staging buffer; transfers still through host slots; CTRON_COMM_DEVICE=staged overrides it.
static void test_library(Comm *c) {
    int tp = c->world.size % 2 == 0 ? 2 : 1;
    CommGrid grid;
    char err[256];
    if (comm_grid_pp(c, tp, 1, &grid, err, sizeof err) != 0) {
        CHECK(0, "grid: %s", err);
        return;
    }
    CommGroup dup[SHADOWS];
    CommGroup *order[SHADOWS] = {&grid.tp_group, &grid.dp_group, &grid.pp_group, &grid.emb_group};
    n_shadows = 0;
    for (int i = 0; i < SHADOWS; i++)
        if (order[i]->size > 1) {
            comm_split(order[i], 0, order[i]->rank, "shadow", &dup[n_shadows]);
            shadows[n_shadows] = &dup[n_shadows];
            n_shadows++;
        }
    be->collectives = &STAND_IN;
    CommDevice *d = comm_device_open(&grid, be, 4096);
    CHECK(comm_device_path(d) == COMM_DEVICE_NCCL && comm_device_host_bytes(d) == 0,
          "library: path %s with %zu staging bytes", comm_device_path_name(comm_device_path(d)), comm_device_host_bytes(d));
    CHECK(n_opened == n_shadows && bad_ids == 0, "library: %d of %d communicators opened, %d with another id",
          n_opened, n_shadows, bad_ids);
    int roots = 0;
    for (int i = 0; i < SHADOWS; i++) roots += order[i]->size > 1 && order[i]->rank == 0;
    CHECK(n_new_ids == roots, "library: %d ids drawn on this rank, expected %d (rank 0 of each group)", n_new_ids, roots);
    for (int i = 0; i < SHADOWS; i++) {
        if (order[i]->size < 2) continue;
        int before = n_lib_calls;
        test_allreduce(order[i], 0);
        test_allgather(order[i], 0);
        test_reduce_scatter(order[i], 0);
        test_broadcast(order[i], 0);
        test_nonblocking(order[i], 0);
        // 2 all-reduces, 2 all-gathers, a reduce-scatter, a broadcast and the non-blocking all-reduce
        CHECK(n_lib_calls - before == 7, "library: %d calls reached it on %s, expected 7", n_lib_calls - before,
              order[i]->name);
    }
    test_one_rank(&grid.pp_group);
    comm_device_close(d);
    CHECK(n_closed == n_shadows, "library: %d of %d communicators closed", n_closed, n_shadows);
    setenv("CTRON_COMM_DEVICE", "staged", 1);
    d = comm_device_open(&grid, be, 4096);
    CHECK(comm_device_path(d) == COMM_DEVICE_STAGED, "CTRON_COMM_DEVICE=staged: path %s",
          comm_device_path_name(comm_device_path(d)));
    comm_device_close(d);
    unsetenv("CTRON_COMM_DEVICE");
    be->collectives = NULL;
    for (int i = 0; i < n_shadows; i++) comm_group_free(&dup[i]);
    comm_grid_free(&grid);
}

int main(int argc, char **argv) {
    Comm c;
    char err[256];
    if (comm_init(&c, COMM_AUTO, &argc, &argv, err, sizeof err) != 0) {
        fprintf(stderr, "test_comm_device: %s\n", err);
        return 1;
    }
    // A host-addressable backend: no device path, comm.h's calls.
    CommGrid grid;
    if (comm_grid_pp(&c, c.world.size, 1, &grid, err, sizeof err) != 0) {
        fprintf(stderr, "test_comm_device: %s\n", err);
        return 1;
    }
    Backend *cpu = backend_open("cpu", PRECISION_FP32, err, sizeof err);
    CommDevice *none = comm_device_open(&grid, cpu, 1024);
    CHECK(none == NULL && grid.tp_group.device == NULL && comm_device_path(none) == COMM_DEVICE_DIRECT,
          "cpu: a device path where none is needed");
    float x[3] = {1, 2, 3};
    comm_device_allreduce_sum(&grid.tp_group, x, x, 3);
    CHECK(x[2] == 3.0f * (float)c.world.size, "cpu: the direct all-reduce gave %g", (double)x[2]);
    backend_close(cpu);

    be = backend_open("cpu-guarded", PRECISION_FP32, err, sizeof err);
    if (!be) {
        fprintf(stderr, "test_comm_device: %s\n", err);
        return 1;
    }
    size_t stages[] = {4096, (size_t)c.world.size + 1, 5};
    for (size_t k = 0; k < sizeof stages / sizeof stages[0]; k++) {
        CommDevice *d = comm_device_open(&grid, be, stages[k]);
        CHECK(d && comm_device_path(d) == COMM_DEVICE_STAGED && grid.dp_group.device == d,
              "cpu-guarded: not the host-staged path");
        // One float per rank at least; nothing at all when every group is one rank (device copies only).
        size_t want = stages[k] > (size_t)c.world.size + 1 ? stages[k] : (size_t)c.world.size + 1;
        if (c.world.size == 1) want = 0;
        CHECK(comm_device_host_bytes(d) == want * sizeof(float), "stage %zu: %zu host bytes, expected %zu", stages[k],
              comm_device_host_bytes(d), want * sizeof(float));
        test_allreduce(&grid.tp_group, stages[k]);
        test_allgather(&grid.tp_group, stages[k]);
        test_reduce_scatter(&grid.tp_group, stages[k]);
        test_broadcast(&grid.tp_group, stages[k]);
        test_nonblocking(&grid.tp_group, stages[k]);
        test_one_rank(&grid.pp_group);
        comm_device_close(d);
        CHECK(grid.tp_group.device == NULL, "closed, the groups still name the device");
    }
    comm_grid_free(&grid);
    test_library(&c);
    backend_close(be);
    return check_summary_world(&c);
}
