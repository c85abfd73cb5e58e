// This machine's GEMM peak per precision, the denominator of MFU/HFU on a CPU (DESIGN.md §5): measured
// on square matrices, fp32 with cblas_sgemm, bf16 with gemm_bf16 (bf16 inputs, fp32 accumulation and
// output), and cached in a small JSON file keyed by CPU model, thread count and precision, so that a
// run can default its peak without spending seconds on a benchmark. precision is "fp32" or "bf16"
// (NULL means fp32); the functions without _prec are the fp32 ones.
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
// The same per precision (bf16 measures whatever gemm_bf16_support() says runs here: native, emulated by
// oneDNN or widened to fp32 sgemm).
double peak_gflops_measure_prec(int threads, const char *precision);
int peak_gflops_cached_prec(int threads, const char *precision, double *out);
int peak_gflops_store_prec(int threads, const char *precision, double gflops, char *err, size_t errlen);
int peak_precision_valid(const char *precision);     // "fp32" or "bf16"

// The pieces, for `ctron peak` and the tests.
int peak_threads(int threads);                       // ≤ 0 → omp_get_max_threads()
double peak_gflops_measure_sizes(int threads, const int *sizes, int n_sizes, int repeats, int *best_size);
double peak_gflops_measure_sizes_prec(int threads, const char *precision, const int *sizes, int n_sizes, int repeats,
                                      int *best_size);
void peak_cpu_model(char *buf, size_t len);          // /proc/cpuinfo "model name", or "unknown"
// $CTRON_PEAK_CACHE, else $XDG_CACHE_HOME/ctron/peak.json, else $HOME/.cache/ctron/peak.json.
// Returns 0, or -1 when none of these is set.
int peak_cache_path(char *buf, size_t len);
// A missing, unreadable or malformed file, or no entry for (cpu, threads, precision): -1. An entry
// without "precision" (files from before bf16) is fp32.
int peak_cache_read(const char *path, const char *cpu, int threads, double *out);
int peak_cache_read_prec(const char *path, const char *cpu, int threads, const char *precision, double *out);
// Adds or replaces the (cpu, threads, precision) entry, keeping the others; creates the folders;
// writes atomically.
int peak_cache_write(const char *path, const char *cpu, int threads, double gflops, char *err, size_t errlen);
int peak_cache_write_prec(const char *path, const char *cpu, int threads, const char *precision, double gflops,
                          char *err, size_t errlen);
#endif
