// The verdict of a test that runs on every rank of a job (check.h's counts summed over the world):
// every rank exits alike, rank 0 prints the summary. Finalizes the communication layer.
#ifndef CTRON_CHECK_MPI_H
#define CTRON_CHECK_MPI_H
#include "check.h"
#include "parallel/comm.h"

static inline int check_summary_world(Comm *c) {
    float counts[2] = {(float)check_passed, (float)check_failed};
    comm_allreduce_sum(&c->world, counts, counts, 2);
    int rank = c->world.rank;
    comm_finalize(c);
    check_passed = (int)counts[0];
    check_failed = (int)counts[1];
    if (rank != 0) return check_failed ? 1 : 0;
    return check_summary();
}
#endif
