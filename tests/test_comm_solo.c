// comm_grid_solo (src/parallel/comm.h, --tp-solo): one process as TP rank 0 of 4. Every collective counts
// the bytes a ring of 4 ranks moves and stands in for the absent ranks locally: the all-reduce keeps this
// rank's partial sum, the all-gather repeats its chunk in every slot, the reduce-scatter keeps its own
// slice, the broadcast keeps the buffer; the same on device memory (cpu-guarded: device copies, no host
// staging, no library communicator). A transfer on the group and a world of two processes are refused.
#include <stdio.h>
#include <string.h>
#include "backend/backend.h"
#include "check.h"
#include "parallel/comm_device.h"

enum { T = 4, C = 6 };

static void fill(float *x, size_t n, float base) {
    for (size_t i = 0; i < n; i++) x[i] = base + (float)i;
}

// The stand-ins on host buffers (dev NULL) or through the device path of be.
static void check_collectives(CommGroup *g, Backend *dev) {
    float send[T * C], recv[T * C], want[T * C];
    float *ds = NULL, *dr = NULL;
    if (dev) {
        ds = dev->alloc(dev, sizeof send);
        dr = dev->alloc(dev, sizeof recv);
    }
    const char *where = dev ? "device" : "host";
    comm_stats_reset(g);
    // all-reduce: this rank's values, out of place
    fill(send, C, 1);
    memset(recv, 0, sizeof recv);
    if (dev) {
        dev->copy(dev, ds, send, C * sizeof(float), COPY_H2D);
        comm_device_allreduce_sum(g, ds, dr, C);
        dev->copy(dev, recv, dr, C * sizeof(float), COPY_D2H);
    } else {
        comm_allreduce_sum(g, send, recv, C);
    }
    CHECK(memcmp(recv, send, C * sizeof(float)) == 0, "%s all-reduce: not this rank's partial sum", where);
    // all-gather: the chunk in each of the T slots
    fill(send, C, 10);
    for (int r = 0; r < T; r++) memcpy(want + r * C, send, C * sizeof(float));
    memset(recv, 0, sizeof recv);
    if (dev) {
        dev->copy(dev, ds, send, C * sizeof(float), COPY_H2D);
        comm_device_allgather(g, ds, dr, C);
        dev->copy(dev, recv, dr, sizeof recv, COPY_D2H);
    } else {
        comm_allgather(g, send, recv, C);
    }
    CHECK(memcmp(recv, want, sizeof want) == 0, "%s all-gather: the chunk is not in every slot", where);
    // reduce-scatter: rank 0's slice of the input, unsummed
    fill(send, T * C, 100);
    memset(recv, 0, sizeof recv);
    if (dev) {
        dev->copy(dev, ds, send, sizeof send, COPY_H2D);
        comm_device_reduce_scatter_sum(g, ds, dr, C);
        dev->copy(dev, recv, dr, C * sizeof(float), COPY_D2H);
    } else {
        comm_reduce_scatter_sum(g, send, recv, C);
    }
    CHECK(memcmp(recv, send, C * sizeof(float)) == 0 && recv[1] == 101.0f, "%s reduce-scatter: recv[1] %g, expected 101",
          where, (double)recv[1]);
    // broadcast from rank 2: the buffer stays
    fill(send, C, 7);
    memcpy(want, send, C * sizeof(float));
    if (dev) {
        dev->copy(dev, ds, send, C * sizeof(float), COPY_H2D);
        comm_device_broadcast(g, ds, C, 2);
        dev->copy(dev, recv, ds, C * sizeof(float), COPY_D2H);
    } else {
        memcpy(recv, send, C * sizeof(float));
        comm_broadcast(g, recv, C, 2);
    }
    CHECK(memcmp(recv, want, C * sizeof(float)) == 0, "%s broadcast changed the buffer", where);
    // The bytes of a ring of 4: all-reduce 2·3/4·24 B, all-gather 3/4·96, reduce-scatter 3/4·96, broadcast 3/4·24
    CommStats s = comm_stats(g);
    CHECK(s.bytes[COMM_ALLREDUCE] == 36 && s.bytes[COMM_ALLGATHER] == 72 && s.bytes[COMM_REDUCE_SCATTER] == 72 &&
              s.bytes[COMM_BROADCAST] == 18 && s.calls[COMM_ALLREDUCE] == 1,
          "%s bytes: all-reduce %llu (36), all-gather %llu (72), reduce-scatter %llu (72), broadcast %llu (18)", where,
          (unsigned long long)s.bytes[COMM_ALLREDUCE], (unsigned long long)s.bytes[COMM_ALLGATHER],
          (unsigned long long)s.bytes[COMM_REDUCE_SCATTER], (unsigned long long)s.bytes[COMM_BROADCAST]);
    if (dev) {
        dev->free(dev, ds);
        dev->free(dev, dr);
    }
}

int main(int argc, char **argv) {
    Comm c;
    char err[256];
    if (comm_init(&c, COMM_SINGLE, &argc, &argv, err, sizeof err) != 0) {
        fprintf(stderr, "test_comm_solo: %s\n", err);
        return 1;
    }
    CommGrid grid;
    CHECK(comm_grid_solo(&c, 1, &grid, err, sizeof err) != 0 && strstr(err, "--tp 2 or more"), "tp 1 accepted: %s", err);
    CHECK(comm_grid_solo(&c, T, &grid, err, sizeof err) == 0, "comm_grid_solo: %s", err);
    CHECK(grid.tp == T && grid.dp == 1 && grid.pp == 1 && grid.tp_group.size == T && grid.tp_group.rank == 0 &&
              grid.tp_group.solo && grid.dp_group.size == 1 && grid.pp_group.size == 1 && grid.emb_group.size == 1,
          "the grid: tp %d (size %d, rank %d), dp %d, pp %d", grid.tp, grid.tp_group.size, grid.tp_group.rank, grid.dp,
          grid.pp);
    check_collectives(&grid.tp_group, NULL);
    CommRequest req;
    float x[4] = {1, 2, 3, 4};
    comm_iallreduce_sum(&grid.tp_group, x, 4, &req);
    CHECK(comm_test(&req) == 1 && x[3] == 4.0f, "the non-blocking all-reduce is not complete when posted");
    Backend *be = backend_open("cpu-guarded", PRECISION_FP32, err, sizeof err);
    CHECK(be != NULL, "cpu-guarded: %s", err);
    if (be) {
        CommDevice *d = comm_device_open(&grid, be, 1024);
        CHECK(d && comm_device_host_bytes(d) == 0, "the solo group staged through %zu host bytes",
              comm_device_host_bytes(d));
        check_collectives(&grid.tp_group, be);
        comm_device_close(d);
        backend_close(be);
    }
    comm_grid_free(&grid);
    comm_finalize(&c);
    return check_summary();
}
