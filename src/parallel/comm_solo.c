// comm_grid_solo (comm.h): the TP group of one process standing for tp ranks. comm.c checks and counts
// each collective as for a group of `size` ranks; these ops stand in for the absent ranks' data.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "parallel/comm_backend.h"

static void solo_allreduce(CommGroup *g, const float *send, float *recv, size_t n) {
    (void)g;
    if (send != recv) memmove(recv, send, n * sizeof *recv);   // this rank's partial sum only
}

static void solo_allgather(CommGroup *g, const float *send, float *recv, size_t chunk) {
    const float *own = send ? send : recv + (size_t)g->rank * chunk;
    for (int r = 0; r < g->size; r++)
        if (recv + (size_t)r * chunk != own) memmove(recv + (size_t)r * chunk, own, chunk * sizeof *recv);
}

static void solo_reduce_scatter(CommGroup *g, const float *send, float *recv, size_t chunk) {
    memmove(recv, send + (size_t)g->rank * chunk, chunk * sizeof *recv);   // its own slice, unsummed
}

static void solo_broadcast(CommGroup *g, float *buf, size_t n, int root) {
    (void)g, (void)buf, (void)n, (void)root;
}

static void solo_barrier(CommGroup *g) { (void)g; }

static void solo_transfer(CommGroup *g, const float *buf, size_t n, int peer, int tag, CommRequest *req) {
    (void)buf, (void)n, (void)tag, (void)req;
    comm_abort(g, "group %s stands for %d ranks with only rank 0 present (--tp-solo): no transfer to rank %d",
               g->name, g->size, peer);
}
static void solo_isend(CommGroup *g, const float *buf, size_t n, int dst, int tag, CommRequest *req) {
    solo_transfer(g, buf, n, dst, tag, req);
}
static void solo_irecv(CommGroup *g, float *buf, size_t n, int src, int tag, CommRequest *req) {
    solo_transfer(g, buf, n, src, tag, req);
}

// Done when posted: the request stays inactive (no handle), as on a group of one rank.
static void solo_iallreduce(CommGroup *g, float *buf, size_t n, CommRequest *req) {
    (void)g, (void)buf, (void)n;
    req->handle = NULL;
}
static void solo_wait(CommRequest *req) { (void)req; }
static int solo_test(CommRequest *req) { (void)req; return 1; }

static void solo_split(CommGroup *parent, int color, int key, CommGroup *out) {
    (void)parent, (void)color, (void)key;
    out->size = 1;
    out->rank = 0;
    out->handle = NULL;
}
static void solo_group_free(CommGroup *g) { (void)g; }
static void solo_abort_all(int status) { exit(status); }   // one process: the job is this process

static const struct CommOps SOLO_OPS = {
    .allreduce_sum = solo_allreduce, .allgather = solo_allgather, .reduce_scatter_sum = solo_reduce_scatter,
    .broadcast = solo_broadcast, .barrier = solo_barrier, .isend = solo_isend, .irecv = solo_irecv,
    .iallreduce_sum = solo_iallreduce, .wait = solo_wait, .test = solo_test, .split = solo_split,
    .group_free = solo_group_free, .abort_all = solo_abort_all,
};

int comm_grid_solo(Comm *c, int tp, CommGrid *grid, char *err, size_t errlen) {
    memset(grid, 0, sizeof *grid);
    if (c->world.size != 1) {
        snprintf(err, errlen, "--tp-solo runs one TP rank alone, in one process (this run has %d ranks)", c->world.size);
        return -1;
    }
    if (tp < 2) {
        snprintf(err, errlen, "--tp-solo stands for the other ranks of a TP group: it needs --tp 2 or more (got %d)", tp);
        return -1;
    }
    grid->tp = tp;
    grid->pp = grid->dp = 1;
    comm_split(&c->world, 0, 0, "tp", &grid->tp_group);
    comm_split(&c->world, 0, 0, "dp", &grid->dp_group);
    comm_split(&c->world, 0, 0, "pp", &grid->pp_group);
    comm_split(&c->world, 0, 0, "emb", &grid->emb_group);
    CommGroup *g = &grid->tp_group;
    g->ops->group_free(g);   // the world backend's group of one, replaced by the stand-in
    g->size = tp;
    g->rank = 0;
    g->handle = NULL;
    g->ops = &SOLO_OPS;
    g->solo = 1;
    return 0;
}
