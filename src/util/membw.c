#include "util/membw.h"
#include <omp.h>
#include <string.h>
#include "util/common.h"

double membw_measure_gbps(int threads) {
    size_t n = (size_t)64 << 20;
    char *src = xmalloc(n), *dst = xmalloc(n);
    int nt = threads > 0 ? threads : omp_get_max_threads();
    memset(src, 1, n);
    memset(dst, 0, n);
    double best = 0.0;
    for (int rep = 0; rep < 6; rep++) {
        double t0 = omp_get_wtime();
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int c = 0; c < 64; c++) memcpy(dst + (size_t)c * (n / 64), src + (size_t)c * (n / 64), n / 64);
        double sec = omp_get_wtime() - t0;
        double gbps = 2.0 * (double)n / sec * 1e-9;
        if (rep > 0 && gbps > best) best = gbps;   // the first pass warms the pages up
    }
    free(src);
    free(dst);
    return best;
}
