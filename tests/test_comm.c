// The communication interface (src/parallel/comm.h) on whatever world it is started in: run plainly
// it tests the single-process backend; under mpiexec -n 1, 2, 4 the MPI backend. Inputs are small
// integers, so every sum is exact in fp32 and compared with ==. Every rank checks; the counts are
// summed over the world and rank 0 prints "N passed, N failed" for the job.
#include <stdlib.h>
#include <string.h>
#include "check_mpi.h"
#include "parallel/comm.h"

enum { N = 24 };  // divisible by 1, 2, 3, 4: an equal chunk for every group size used

static void test_world(Comm *c) {
    CommGroup *w = &c->world;
    CHECK(w->size >= 1 && w->rank >= 0 && w->rank < w->size, "world rank %d of %d", w->rank, w->size);
    CHECK(w->world_rank == w->rank && w->world_size == w->size, "world numbers");
    CHECK(strcmp(w->name, "world") == 0, "world name '%s'", w->name);
    const char *launched = getenv("OMPI_COMM_WORLD_SIZE");
    CHECK(c->backend == (launched ? COMM_MPI : COMM_SINGLE), "backend %s", comm_backend_name(c->backend));
    if (launched) CHECK(w->size == atoi(launched), "world size %d, launcher says %s", w->size, launched);
}

static void test_allreduce(CommGroup *g) {
    int n = g->size, r = g->rank;
    float send[N], recv[N], inplace[N];
    for (int i = 0; i < N; i++) send[i] = inplace[i] = (float)(r + 1) * 1000.0f + (float)i;
    comm_allreduce_sum(g, send, recv, N);
    comm_allreduce_sum(g, inplace, inplace, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        float want = 1000.0f * (float)(n * (n + 1) / 2) + (float)(n * i);
        bad += recv[i] != want || inplace[i] != want;
    }
    CHECK(bad == 0, "%s all-reduce: %d wrong of %d", g->name, bad, N);
    CHECK(send[1] == (float)(r + 1) * 1000.0f + 1.0f, "%s all-reduce changed its send buffer", g->name);
}

static void test_allgather(CommGroup *g) {
    int n = g->size, r = g->rank, chunk = N / n;
    float send[N] = {0}, recv[N], inplace[N] = {0};
    for (int j = 0; j < chunk; j++) send[j] = inplace[r * chunk + j] = (float)(100 * r + j);
    comm_allgather(g, send, recv, (size_t)chunk);
    comm_allgather(g, inplace + r * chunk, inplace, (size_t)chunk);
    int bad = 0;
    for (int p = 0; p < n; p++)
        for (int j = 0; j < chunk; j++) {
            float want = (float)(100 * p + j);
            bad += recv[p * chunk + j] != want || inplace[p * chunk + j] != want;
        }
    CHECK(bad == 0, "%s all-gather: %d wrong of %d", g->name, bad, N);
}

static void test_reduce_scatter(CommGroup *g) {
    int n = g->size, r = g->rank, chunk = N / n;
    float send[N], recv[N];
    for (int k = 0; k < N; k++) send[k] = (float)((r + 1) * (k + 1));
    comm_reduce_scatter_sum(g, send, recv, (size_t)chunk);
    int bad = 0;
    for (int j = 0; j < chunk; j++) bad += recv[j] != (float)(n * (n + 1) / 2 * (r * chunk + j + 1));
    CHECK(bad == 0, "%s reduce-scatter: %d wrong of %d", g->name, bad, chunk);
}

static void test_broadcast(CommGroup *g) {
    int root = g->size - 1;
    float buf[N];
    for (int i = 0; i < N; i++) buf[i] = (float)(g->rank * 7 + i);
    comm_broadcast(g, buf, N, root);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += buf[i] != (float)(root * 7 + i);
    CHECK(bad == 0, "%s broadcast from %d: %d wrong of %d", g->name, root, bad, N);
    comm_barrier(g);
}

static void test_collectives(CommGroup *g) {
    test_allreduce(g);
    test_allgather(g);
    test_reduce_scatter(g);
    test_broadcast(g);
}

// The counters: the ring convention, and SP's all-gather + reduce-scatter == TP's all-reduce.
static void test_counters(CommGroup *g) {
    int n = g->size;
    uint64_t bytes = N * sizeof(float);
    float a[N], b[N];
    for (int i = 0; i < N; i++) a[i] = 1.0f;
    comm_stats_reset(g);
    CommStats s = comm_stats(g);
    CHECK(comm_stats_total_bytes(&s) == 0 && s.calls[COMM_ALLREDUCE] == 0, "%s reset", g->name);

    comm_allreduce_sum(g, a, b, N);
    CommStats tp = comm_stats(g);
    comm_stats_reset(g);
    comm_allgather(g, a, b, N / n);         // g: all-gather the s/t rows into the full tensor ...
    comm_reduce_scatter_sum(g, b, a, N / n); // ḡ: ... and reduce-scatter the full tensor into s/t rows
    CommStats sp = comm_stats(g);
    uint64_t ar = tp.bytes[COMM_ALLREDUCE];
    uint64_t ag_rs = sp.bytes[COMM_ALLGATHER] + sp.bytes[COMM_REDUCE_SCATTER];
    CHECK(ar == ag_rs, "%s: all-reduce %llu bytes, all-gather + reduce-scatter %llu", g->name,
          (unsigned long long)ar, (unsigned long long)ag_rs);
    CHECK(ar == 2 * (uint64_t)(n - 1) * bytes / (uint64_t)n, "%s all-reduce bytes %llu for n=%d", g->name,
          (unsigned long long)ar, n);
    CHECK(sp.bytes[COMM_ALLGATHER] == (uint64_t)(n - 1) * bytes / (uint64_t)n, "%s all-gather bytes", g->name);
    CHECK(tp.calls[COMM_ALLREDUCE] == 1 && sp.calls[COMM_ALLGATHER] == 1 && sp.calls[COMM_REDUCE_SCATTER] == 1,
          "%s call counts", g->name);
    CHECK(sp.bytes[COMM_ALLREDUCE] == 0 && sp.bytes[COMM_BROADCAST] == 0, "%s counted other kinds", g->name);
    if (n == 1) CHECK(ar == 0 && ag_rs == 0, "%s of one rank counted bytes", g->name);

    comm_stats_reset(g);
    comm_broadcast(g, a, N, 0);
    s = comm_stats(g);
    CHECK(s.bytes[COMM_BROADCAST] == (uint64_t)(n - 1) * bytes / (uint64_t)n, "%s broadcast bytes", g->name);
    comm_stats_reset(g);

    CHECK(comm_bytes_for(COMM_ALLREDUCE, 4, 400) == 600 && comm_bytes_for(COMM_ALLGATHER, 4, 400) == 300 &&
          comm_bytes_for(COMM_REDUCE_SCATTER, 1, 400) == 0, "comm_bytes_for");
    CHECK(strcmp(comm_kind_name(COMM_REDUCE_SCATTER), "reduce-scatter") == 0, "kind name");
}

// Membership: each group all-gathers its members' world ranks.
static void test_grid(Comm *c, int tp) {
    int n = c->world.size, r = c->world.rank;
    CommGrid grid;
    char err[256];
    if (comm_grid(c, tp, &grid, err, sizeof err) != 0) {
        CHECK(0, "comm_grid(tp=%d) on %d ranks: %s", tp, n, err);
        return;
    }
    int dp = n / tp;
    CHECK(grid.tp == tp && grid.dp == dp && grid.pp == 1, "grid %d x %d x %d", grid.dp, grid.pp, grid.tp);
    // comm_grid is the grid of one stage: every pp and embedding group is the rank alone.
    CHECK(grid.pp_group.size == 1 && grid.pp_group.rank == 0 && grid.emb_group.size == 1 && grid.emb_group.rank == 0,
          "tp=%d: pp group %d of %d, emb group %d of %d", tp, grid.pp_group.rank, grid.pp_group.size,
          grid.emb_group.rank, grid.emb_group.size);
    CHECK(grid.tp_group.size == tp && grid.tp_group.rank == r % tp, "tp group rank %d of %d",
          grid.tp_group.rank, grid.tp_group.size);
    CHECK(grid.dp_group.size == dp && grid.dp_group.rank == r / tp, "dp group rank %d of %d",
          grid.dp_group.rank, grid.dp_group.size);
    float me = (float)r, members[N];
    comm_allgather(&grid.tp_group, &me, members, 1);
    int bad = 0;
    for (int i = 0; i < tp; i++) bad += members[i] != (float)((r / tp) * tp + i);  // consecutive ranks
    comm_allgather(&grid.dp_group, &me, members, 1);
    for (int i = 0; i < dp; i++) bad += members[i] != (float)(i * tp + r % tp);    // tp apart
    CHECK(bad == 0, "grid tp=%d: %d wrong members", tp, bad);

    test_collectives(&grid.tp_group);
    test_collectives(&grid.dp_group);
    test_counters(&grid.tp_group);
    // Counters belong to their group: traffic on the tp group leaves dp's untouched.
    comm_stats_reset(&grid.dp_group);
    float a[N] = {0}, b[N];
    comm_allreduce_sum(&grid.tp_group, a, b, N);
    CommStats d = comm_stats(&grid.dp_group);
    CHECK(comm_stats_total_bytes(&d) == 0 && d.calls[COMM_ALLREDUCE] == 0, "dp counted tp's all-reduce");
    comm_grid_free(&grid);
}

static void test_grid_errors(Comm *c) {
    int n = c->world.size;
    CommGrid grid;
    char err[256] = "";
    CHECK(comm_grid(c, 0, &grid, err, sizeof err) == -1 && strstr(err, "size 0"), "tp=0: '%s'", err);
    CHECK(comm_grid(c, n + 1, &grid, err, sizeof err) == -1 && strstr(err, "does not divide"), "tp=n+1: '%s'", err);
    if (n == 4) CHECK(comm_grid(c, 3, &grid, err, sizeof err) == -1, "tp=3 on 4 ranks accepted");
}

int main(int argc, char **argv) {
    Comm c;
    char err[256];
    if (comm_init(&c, COMM_AUTO, &argc, &argv, err, sizeof err) != 0) {
        fprintf(stderr, "comm_init: %s\n", err);
        return 1;
    }
    test_world(&c);
    test_collectives(&c.world);
    test_counters(&c.world);
    for (int tp = 1; tp <= c.world.size; tp++)
        if (c.world.size % tp == 0) test_grid(&c, tp);
    test_grid_errors(&c);

    return check_summary_world(&c);   // one verdict for the job: every rank exits alike
}
