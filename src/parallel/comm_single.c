// The single-process backend: a world of one rank. comm.c serves every collective on a group of one
// rank itself (a copy, zero bytes) and refuses point-to-point transfers on it (there is no peer), so
// only the group bookkeeping and the exit live here.
#include <stdlib.h>
#include "parallel/comm_backend.h"

static void single_split(CommGroup *parent, int color, int key, CommGroup *out) {
    (void)parent;
    (void)color;
    (void)key;
    out->size = 1;
    out->rank = 0;
    out->handle = NULL;
}

static void single_group_free(CommGroup *g) { (void)g; }
static void single_abort_all(int status) { exit(status); }
static void single_finalize(Comm *c) { (void)c; }

// The collectives and transfers stay NULL: comm.c never passes a group of one rank to a backend
// (a transfer on one aborts; a non-blocking all-reduce on one is complete when posted).
static const struct CommOps SINGLE_OPS = {
    .split = single_split,
    .group_free = single_group_free,
    .abort_all = single_abort_all,
    .finalize = single_finalize,
};

void comm_single_init(Comm *c) {
    c->world.size = c->world.world_size = 1;
    c->world.rank = c->world.world_rank = 0;
    c->world.ops = &SINGLE_OPS;
    c->world.handle = NULL;
    c->finalize_mpi = 0;
}
