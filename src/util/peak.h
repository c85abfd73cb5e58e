// This machine's fp32 GEMM peak, the denominator of MFU/HFU on a CPU (DESIGN.md §5): measured with
// cblas_sgemm on square matrices and cached in a small JSON file keyed by CPU model and thread count,
// so that a run can default its peak without spending seconds on a benchmark.
#ifndef CTRON_PEAK_H
#define CTRON_PEAK_H
#include <stddef.h>

// The trainer's entry points. threads ≤ 0 means all cores (omp_get_max_threads(), as --threads 0).
// Measure: best of 5 timed runs at n = 1024 and 2048 (after a warm-up), GFLOP/s = 2n³/seconds; a few
// seconds. Cached: 0 and *out when the cache holds a figure for this CPU and thread count, else -1.
double peak_gflops_measure(int threads);
int peak_gflops_cached(int threads, double *out);
// Records a figure for this CPU and thread count in the default cache. Returns 0 or -1 with err.
int peak_gflops_store(int threads, double gflops, char *err, size_t errlen);

// The pieces, for `ctron peak` and the tests.
int peak_threads(int threads);                       // ≤ 0 → omp_get_max_threads()
double peak_gflops_measure_sizes(int threads, const int *sizes, int n_sizes, int repeats, int *best_size);
void peak_cpu_model(char *buf, size_t len);          // /proc/cpuinfo "model name", or "unknown"
// $CTRON_PEAK_CACHE, else $XDG_CACHE_HOME/ctron/peak.json, else $HOME/.cache/ctron/peak.json.
// Returns 0, or -1 when none of these is set.
int peak_cache_path(char *buf, size_t len);
// A missing, unreadable or malformed file, or no entry for (cpu, threads): -1.
int peak_cache_read(const char *path, const char *cpu, int threads, double *out);
// Adds or replaces the (cpu, threads) entry, keeping the others; creates the folders; writes atomically.
int peak_cache_write(const char *path, const char *cpu, int threads, double gflops, char *err, size_t errlen);
#endif
