// A rank that gives up ends the whole job: run under mpiexec by test_comm_abort.sh. The last rank
// fails while the others wait in a collective that would never complete without the abort. Modes:
// "abort" calls comm_abort; "badroot" passes comm_broadcast an out-of-range root; "mpierror" passes
// it to the backend directly, past comm.c's checks, so that MPI itself returns the error; "selfsend"
// posts a send to the rank itself (a group of one has no other rank to send to either);
// "shortrecv" has the last rank receive 4 floats where rank 0 sent 2.
#include <stdio.h>
#include <string.h>
#include "parallel/comm.h"
#include "parallel/comm_backend.h"

int main(int argc, char **argv) {
    Comm c;
    char err[256];
    if (comm_init(&c, COMM_AUTO, &argc, &argv, err, sizeof err) != 0) {
        fprintf(stderr, "comm_init: %s\n", err);
        return 3;
    }
    const char *mode = argc > 1 ? argv[1] : "abort";
    int last = c.world.rank == c.world.size - 1;
    float x[4] = {0};
    if (strcmp(mode, "abort") == 0) {
        if (last) comm_abort(&c.world, "deliberate abort from rank %d", c.world.rank);
        comm_barrier(&c.world);
        comm_allreduce_sum(&c.world, x, x, 4);
    } else if (strcmp(mode, "badroot") == 0) {
        comm_broadcast(&c.world, x, 4, last ? c.world.size + 3 : 0);
    } else if (strcmp(mode, "mpierror") == 0) {
        if (last && c.world.size > 1) c.world.ops->broadcast(&c.world, x, 4, c.world.size + 3);
        else comm_broadcast(&c.world, x, 4, 0);
    } else if (strcmp(mode, "selfsend") == 0) {
        CommRequest req;
        if (last) comm_isend(&c.world, x, 4, c.world.rank, 0, &req);
        comm_barrier(&c.world);
    } else if (strcmp(mode, "shortrecv") == 0) {
        CommRequest req = {0};
        if (c.world.rank == 0 && !last) comm_isend(&c.world, x, 2, c.world.size - 1, 5, &req);
        if (last) comm_irecv(&c.world, x, 4, 0, 5, &req);
        comm_wait(&req);
        comm_barrier(&c.world);
    } else {
        fprintf(stderr, "unknown mode '%s' (expected abort, badroot, mpierror, selfsend or shortrecv)\n", mode);
        return 3;
    }
    // Reached only by a job of one rank that did not abort: a failure of the test.
    comm_finalize(&c);
    printf("not aborted\n");
    return 0;
}
