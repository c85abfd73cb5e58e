// The GEMM floor of a training step on one core: each GEMM the step needs, timed alone with the best of
// the two chosen libraries (OpenBLAS cblas_sgemm, oneDNN dnnl_sgemm), one thread, best of R repeats, in CPU seconds.
// Its sum is a lower bound on the CPU time of ANY implementation of the step that runs its GEMMs with
// these libraries and does nothing else: no norms, no softmax, no optimizer, no memory traffic of its
// own (bench/gemm_floor.py makes the list and sets a peer's measured step against the floor).
//
// stdin: one GEMM per line, "label ta tb m n k count" (count may be fractional: a causal attention
// GEMM that only the lower triangle needs counts half) (row-major C[m,n] = op(A)[m,k] · op(B)[k,n]; ta,
// tb 0 or 1). stdout: one line per GEMM, "label m n k count openblas_gflops dnnl_gflops best_seconds"
// (best_seconds: count × 2mnk / the better rate), then "total <GFLOP> <seconds>".
// usage: OMP_NUM_THREADS=1 gemm_floor [repeats] < shapes
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

// CPU time of the process, not wall time: on a shared machine a call descheduled by other work would
// otherwise look slow (the same measure as bench/cpu_bench.py's CPU seconds per step).
static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *filled(size_t n, unsigned seed) {
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "gemm_floor: out of memory (%zu floats)\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) x[i] = (float)((i * 2654435761u + seed) % 2001) / 1000.0f - 1.0f;
    return x;
}

// Seconds of one call, best of `repeats` after a warm-up call; lib 0 OpenBLAS, 1 oneDNN.
static double best_time(int lib, int ta, int tb, int m, int n, int k, const float *a, const float *b, float *c,
                        int repeats) {
    int lda = ta ? m : k, ldb = tb ? k : n;
    double best = 1e30;
    for (int r = 0; r <= repeats; r++) {
        double t0 = now_s();
        if (lib == 0)
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a,
                        lda, b, ldb, 0.0f, c, n);
        else if (dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n) != dnnl_success) {
            fprintf(stderr, "gemm_floor: dnnl_sgemm failed at m %d n %d k %d\n", m, n, k);
            exit(1);
        }
        double t = now_s() - t0;
        if (r > 0 && t < best) best = t;   // call 0 warms caches, threads and oneDNN's JIT
    }
    return best;
}

int main(int argc, char **argv) {
    int repeats = argc > 1 ? atoi(argv[1]) : 5;
    if (repeats < 1) {
        fprintf(stderr, "gemm_floor: repeats: expected a positive integer, got '%s'\n", argv[1]);
        return 2;
    }
    char label[64];
    int ta, tb, m, n, k;
    double count;
    double total_flop = 0.0, total_s = 0.0;
    while (scanf("%63s %d %d %d %d %d %lf", label, &ta, &tb, &m, &n, &k, &count) == 7) {
        if (m < 1 || n < 1 || k < 1 || !(count > 0.0) || (ta != 0 && ta != 1) || (tb != 0 && tb != 1)) {
            fprintf(stderr, "gemm_floor: %s: expected ta, tb in {0, 1} and positive m n k count\n", label);
            return 2;
        }
        float *a = filled((size_t)m * k, 1), *b = filled((size_t)k * n, 2), *c = filled((size_t)m * n, 3);
        double flop = 2.0 * m * n * k;
        double t_ob = best_time(0, ta, tb, m, n, k, a, b, c, repeats);
        double t_dn = best_time(1, ta, tb, m, n, k, a, b, c, repeats);
        double t = t_ob < t_dn ? t_ob : t_dn;
        printf("%s %d %d %d %g %.1f %.1f %.6f\n", label, m, n, k, count, flop / t_ob * 1e-9, flop / t_dn * 1e-9,
               t * count);
        total_flop += flop * count;
        total_s += t * count;
        free(a);
        free(b);
        free(c);
    }
    printf("total %.3f %.4f\n", total_flop * 1e-9, total_s);
    return 0;
}
