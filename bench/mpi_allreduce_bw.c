// The "link" of ctron's CPU ranks for the cluster planner's CPU check: the bus bandwidth of an
// MPI_Allreduce of N floats between the ranks (ring convention: 2(n−1)/n · bytes / time), best of R.
// Built and run by bench/cluster_cpu_check.py: mpicc -O2 bench/mpi_allreduce_bw.c; mpirun -np 2 a.out
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long count = argc > 1 ? atol(argv[1]) : 1L << 22;
    int reps = argc > 2 ? atoi(argv[2]) : 8;
    float *a = malloc((size_t)count * sizeof *a), *b = malloc((size_t)count * sizeof *b);
    for (long i = 0; i < count; i++) a[i] = 1.0f;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(a, b, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double dt = MPI_Wtime() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (dt < best) best = dt;
    }
    if (rank == 0) printf("%.6g\n", 2.0 * (n - 1) / n * (double)count * sizeof(float) / best);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
