// Point-to-point transfers, the non-blocking all-reduce and the dp × pp × tp grid (src/parallel/
// comm.h): run plainly it tests the single-process backend; under mpiexec -n 2 and 4 the MPI backend.
// Values are small integers, so every sum is exact in fp32 and compared with ==. Every rank checks;
// the counts are summed over the world and rank 0 prints "N passed, N failed" for the job.
#include <stdio.h>
#include <string.h>
#include "check_mpi.h"
#include "parallel/comm.h"

enum { N = 24 };

// The element-by-element check of a received buffer: want[i] = base + i.
static int wrong_elements(const float *got, int n, float base) {
    int bad = 0;
    for (int i = 0; i < n; i++) bad += got[i] != base + (float)i;
    return bad;
}

// Every rank sends N distinct values to the next rank and receives the previous rank's, polling the
// receive with comm_test; then the counters: exactly one send and one receive of N·4 bytes.
static void test_ring(CommGroup *g) {
    int n = g->size, r = g->rank, next = (r + 1) % n, prev = (r + n - 1) % n;
    float send[N], recv[N];
    for (int i = 0; i < N; i++) {
        send[i] = (float)(1000 * r + i);
        recv[i] = -1.0f;
    }
    comm_stats_reset(g);
    CommRequest rr, rs;
    comm_irecv(g, recv, N, prev, 7, &rr);
    comm_isend(g, send, N, next, 7, &rs);
    while (!comm_test(&rr)) {  // 0 until the message is in: poll, as a pipeline overlapping compute would
    }
    CHECK(rr.handle == NULL && comm_test(&rr) == 1, "%s ring: a completed receive is not inactive", g->name);
    comm_wait(&rs);
    comm_wait(&rs);  // inactive: a no-op
    CHECK(rs.handle == NULL, "%s ring: the send is still active after comm_wait", g->name);
    int bad = wrong_elements(recv, N, (float)(1000 * prev));
    CHECK(bad == 0, "%s ring: %d of %d wrong from rank %d (first %g, want %d)", g->name, bad, N, prev, recv[0],
          1000 * prev);
    CHECK(send[N - 1] == (float)(1000 * r + N - 1), "%s ring: the send buffer changed", g->name);

    CommStats s = comm_stats(g);
    CHECK(s.bytes[COMM_SEND] == N * 4 && s.bytes[COMM_RECV] == N * 4, "%s ring: send %llu recv %llu bytes, want %d",
          g->name, (unsigned long long)s.bytes[COMM_SEND], (unsigned long long)s.bytes[COMM_RECV], N * 4);
    CHECK(s.calls[COMM_SEND] == 1 && s.calls[COMM_RECV] == 1, "%s ring: %llu sends %llu recvs, want 1 and 1", g->name,
          (unsigned long long)s.calls[COMM_SEND], (unsigned long long)s.calls[COMM_RECV]);
    CHECK(comm_stats_total_bytes(&s) == 2 * N * 4 && s.calls[COMM_ALLREDUCE] == 0, "%s ring: other kinds counted",
          g->name);
}

// Tags pick the message: two sends of distinct values to the next rank, received in the opposite
// order; then an empty transfer (NULL buffers), which is counted as a call of zero bytes.
static void test_tags(CommGroup *g) {
    int n = g->size, r = g->rank, next = (r + 1) % n, prev = (r + n - 1) % n;
    float a[N], b[N], got_a[N], got_b[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)(100 * r + i);
        b[i] = (float)(-100 * r - 50 + i);
    }
    comm_stats_reset(g);
    CommRequest req[4];
    comm_isend(g, a, N, next, 1, &req[0]);
    comm_isend(g, b, N, next, 2, &req[1]);
    comm_irecv(g, got_b, N, prev, 2, &req[2]);
    comm_irecv(g, got_a, N, prev, 1, &req[3]);
    for (int k = 3; k >= 0; k--) comm_wait(&req[k]);
    int bad = wrong_elements(got_a, N, (float)(100 * prev)) + wrong_elements(got_b, N, (float)(-100 * prev - 50));
    CHECK(bad == 0, "%s tags: %d of %d wrong", g->name, bad, 2 * N);

    CommRequest e[2];
    comm_irecv(g, NULL, 0, prev, 3, &e[0]);
    comm_isend(g, NULL, 0, next, 3, &e[1]);
    comm_wait(&e[0]);
    comm_wait(&e[1]);
    CommStats s = comm_stats(g);
    CHECK(s.calls[COMM_SEND] == 3 && s.calls[COMM_RECV] == 3, "%s tags: %llu sends %llu recvs, want 3 and 3", g->name,
          (unsigned long long)s.calls[COMM_SEND], (unsigned long long)s.calls[COMM_RECV]);
    CHECK(s.bytes[COMM_SEND] == 2 * N * 4 && s.bytes[COMM_RECV] == 2 * N * 4, "%s tags: send %llu recv %llu bytes",
          g->name, (unsigned long long)s.bytes[COMM_SEND], (unsigned long long)s.bytes[COMM_RECV]);
    comm_stats_reset(g);
}

// Two non-blocking sums in flight at once, completed in the opposite order: Σ over ranks of
// (r+1)·1000 + i and of r + 2i. A group of one completes at posting and counts no bytes.
static void test_iallreduce(CommGroup *g) {
    int n = g->size, r = g->rank;
    float x[N], y[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)((r + 1) * 1000 + i);
        y[i] = (float)(r + 2 * i);
    }
    comm_stats_reset(g);
    CommRequest rx, ry;
    comm_iallreduce_sum(g, x, N, &rx);
    comm_iallreduce_sum(g, y, N, &ry);
    if (n == 1)
        CHECK(rx.handle == NULL && ry.handle == NULL, "%s iallreduce of one rank is not complete at once", g->name);
    while (!comm_test(&ry)) {
    }
    comm_wait(&rx);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        bad += x[i] != (float)(1000 * n * (n + 1) / 2 + n * i);
        bad += y[i] != (float)(n * (n - 1) / 2 + 2 * n * i);
    }
    CHECK(bad == 0, "%s iallreduce: %d of %d wrong (x[0] %g, want %d)", g->name, bad, 2 * N, x[0],
          1000 * n * (n + 1) / 2);
    CommStats s = comm_stats(g);
    uint64_t want = 2 * (2 * (uint64_t)(n - 1) * N * 4 / (uint64_t)n);  // two all-reduces of N·4 bytes: 0, 192, 288
    CHECK(s.calls[COMM_ALLREDUCE] == 2 && s.bytes[COMM_ALLREDUCE] == want,
          "%s iallreduce: %llu calls %llu bytes, want 2 and %llu", g->name,
          (unsigned long long)s.calls[COMM_ALLREDUCE], (unsigned long long)s.bytes[COMM_ALLREDUCE],
          (unsigned long long)want);
    comm_stats_reset(g);
}

static void test_kinds(void) {
    CHECK(strcmp(comm_kind_name(COMM_SEND), "send") == 0 && strcmp(comm_kind_name(COMM_RECV), "recv") == 0,
          "kind names '%s' '%s'", comm_kind_name(COMM_SEND), comm_kind_name(COMM_RECV));
    CHECK(comm_bytes_for(COMM_SEND, 2, 400) == 400 && comm_bytes_for(COMM_RECV, 4, 400) == 400 &&
          comm_bytes_for(COMM_SEND, 1, 400) == 400, "comm_bytes_for send/recv");
    CHECK(comm_bytes_for(COMM_ALLREDUCE, 4, 400) == 600 && comm_bytes_for(COMM_BROADCAST, 1, 400) == 0,
          "comm_bytes_for collectives changed");
}

// The sum of w and of w² over the world ranks w in g: what its members are, by coordinates.
static void expected_members(int n, int tp, int pp, int r, int span, float want[2]) {
    int t = r % tp, p = (r / tp) % pp, d = r / (tp * pp);
    want[0] = want[1] = 0;
    for (int w = 0; w < n; w++) {
        int wt = w % tp, wp = (w / tp) % pp, wd = w / (tp * pp), in;
        switch (span) {
        case 0: in = wd == d && wp == p; break;                      // tp group
        case 1: in = wd == d && wt == t; break;                      // pp group
        case 2: in = wp == p && wt == t; break;                      // dp group
        default:                                                     // emb group
            in = pp > 1 && (p == 0 || p == pp - 1) ? wd == d && wt == t && (wp == 0 || wp == pp - 1) : w == r;
        }
        if (in) {
            want[0] += (float)w;
            want[1] += (float)(w * w);
        }
    }
}

static void check_group(CommGroup *g, const char *name, int size, int rank, int n, int tp, int pp, int r, int span) {
    CHECK(strcmp(g->name, name) == 0 && g->size == size && g->rank == rank,
          "tp %d pp %d rank %d: %s group '%s' rank %d of %d, want %d of %d", tp, pp, r, name, g->name, g->rank, g->size,
          rank, size);
    float got[2] = {(float)r, (float)(r * r)}, want[2];
    comm_allreduce_sum(g, got, got, 2);
    expected_members(n, tp, pp, r, span, want);
    CHECK(got[0] == want[0] && got[1] == want[1], "tp %d pp %d rank %d: %s group sums %g, %g of ranks, want %g, %g",
          tp, pp, r, name, got[0], got[1], want[0], want[1]);
}

// A pipeline's traffic on the pp group: stage p sends its world rank forward to p+1 and receives
// p+1's back, as activations and gradients go.
static void test_stage_exchange(CommGrid *grid, int r) {
    CommGroup *g = &grid->pp_group;
    int p = g->rank, tp = grid->tp;
    float fwd = (float)r, bwd = (float)r, from_prev = -1, from_next = -1;
    CommRequest req[4] = {{0}};
    if (p > 0) comm_irecv(g, &from_prev, 1, p - 1, 10, &req[0]);
    if (p < grid->pp - 1) comm_irecv(g, &from_next, 1, p + 1, 11, &req[1]);
    if (p < grid->pp - 1) comm_isend(g, &fwd, 1, p + 1, 10, &req[2]);
    if (p > 0) comm_isend(g, &bwd, 1, p - 1, 11, &req[3]);
    for (int k = 0; k < 4; k++) comm_wait(&req[k]);  // the unposted ones are zeroed: inactive
    CHECK(from_prev == (p > 0 ? (float)(r - tp) : -1.0f) && from_next == (p < grid->pp - 1 ? (float)(r + tp) : -1.0f),
          "tp %d pp %d rank %d: stage exchange got %g from the previous stage and %g from the next", tp, grid->pp, r,
          from_prev, from_next);
}

static void test_grid(Comm *c, int tp, int pp) {
    int n = c->world.size, r = c->world.rank;
    CommGrid grid;
    char err[256];
    if (comm_grid_pp(c, tp, pp, &grid, err, sizeof err) != 0) {
        CHECK(0, "comm_grid_pp(tp %d, pp %d) on %d ranks: %s", tp, pp, n, err);
        return;
    }
    int t = r % tp, p = (r / tp) % pp, d = r / (tp * pp), dp = n / (tp * pp);
    CHECK(grid.tp == tp && grid.pp == pp && grid.dp == dp, "grid %d x %d x %d, want %d x %d x %d", grid.dp, grid.pp,
          grid.tp, dp, pp, tp);
    int ends = pp > 1 && (p == 0 || p == pp - 1);
    check_group(&grid.tp_group, "tp", tp, t, n, tp, pp, r, 0);
    check_group(&grid.pp_group, "pp", pp, p, n, tp, pp, r, 1);
    check_group(&grid.dp_group, "dp", dp, d, n, tp, pp, r, 2);
    check_group(&grid.emb_group, "emb", ends ? 2 : 1, ends && p == pp - 1 ? 1 : 0, n, tp, pp, r, 3);
    if (pp > 1) test_stage_exchange(&grid, r);
    if (tp > 1) test_iallreduce(&grid.tp_group);
    comm_grid_free(&grid);
    CHECK(grid.emb_group.handle == NULL && grid.pp_group.handle == NULL && grid.emb_group.size == 0,
          "comm_grid_free left the pp or emb group");
}

// Bad grids: every rank gets -1 and the same message.
static void test_grid_errors(Comm *c) {
    int n = c->world.size;
    const char *s = n == 1 ? "" : "s";
    CommGrid grid;
    char err[256] = "", want[256];
    CHECK(comm_grid_pp(c, 1, 0, &grid, err, sizeof err) == -1 && strstr(err, "pipeline-parallel size 0"), "pp 0: '%s'",
          err);
    CHECK(comm_grid_pp(c, 0, 2, &grid, err, sizeof err) == -1 && strstr(err, "tensor-parallel size 0"), "tp 0: '%s'",
          err);
    snprintf(want, sizeof want, "--pp %d × --tp 1 = %d does not divide the %d rank%s", n + 1, n + 1, n, s);
    CHECK(comm_grid_pp(c, 1, n + 1, &grid, err, sizeof err) == -1 && strcmp(err, want) == 0, "pp n+1: '%s', want '%s'",
          err, want);
    snprintf(want, sizeof want, "tensor-parallel size %d does not divide the %d rank%s (expected a divisor of %d)",
             n + 1, n, s, n);
    CHECK(comm_grid_pp(c, n + 1, 1, &grid, err, sizeof err) == -1 && strcmp(err, want) == 0, "tp n+1 pp 1: '%s'", err);
    if (n == 4) {
        int rc = comm_grid_pp(c, 2, 3, &grid, err, sizeof err);
        CHECK(rc == -1 && strcmp(err, "--pp 3 × --tp 2 = 6 does not divide the 4 ranks") == 0,
              "pp 3 tp 2 on 4 ranks: '%s'", err);
    }
    int rc = comm_grid_pp(c, 1 << 16, 1 << 16, &grid, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "= 4294967296 does not divide"), "tp·pp overflowing an int: '%s'", err);
}

int main(int argc, char **argv) {
    Comm c;
    char err[256];
    if (comm_init(&c, COMM_AUTO, &argc, &argv, err, sizeof err) != 0) {
        fprintf(stderr, "comm_init: %s\n", err);
        return 1;
    }
    test_kinds();
    if (c.world.size > 1) {  // a transfer on a group of one aborts: test_comm_abort.sh checks that
        test_ring(&c.world);
        test_tags(&c.world);
    }
    test_iallreduce(&c.world);
    for (int tp = 1; tp <= c.world.size; tp++)
        for (int pp = 1; pp <= c.world.size; pp++)
            if (c.world.size % (tp * pp) == 0) test_grid(&c, tp, pp);
    test_grid_errors(&c);

    return check_summary_world(&c);   // one verdict for the job: every rank exits alike
}
