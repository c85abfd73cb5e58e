#include "util/peak.h"
#include <cblas.h>
#include "backend/cpu/bf16_convert.h"
#include "backend/cpu/gemm_bf16.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "util/common.h"
#include "util/fileio.h"

int peak_threads(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

int peak_precision_valid(const char *precision) {
    return precision && (strcmp(precision, "fp32") == 0 || strcmp(precision, "bf16") == 0);
}

static int is_fp32(const char *precision) { return !precision || strcmp(precision, "fp32") == 0; }

// One n x n x n GEMM of the precision: cblas_sgemm, or gemm_bf16 (bf16 inputs, fp32 output).
static void square_gemm(int bf16, int N, const float *a, const float *b, const uint16_t *ab, const uint16_t *bb, float *c) {
    if (bf16) gemm_bf16(0, 0, N, N, N, ab, N, bb, N, 0.0f, c, N);
    else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
}

double peak_gflops_measure_sizes(int threads, const int *sizes, int n_sizes, int repeats, int *best_size) {
    return peak_gflops_measure_sizes_prec(threads, "fp32", sizes, n_sizes, repeats, best_size);
}

double peak_gflops_measure_sizes_prec(int threads, const char *precision, const int *sizes, int n_sizes, int repeats,
                                      int *best_size) {
    int bf16 = !is_fp32(precision);
    int saved = omp_get_max_threads();
    omp_set_num_threads(peak_threads(threads));   // the OpenMP build of OpenBLAS follows this
    double best = 0.0;
    for (int i = 0; i < n_sizes; i++) {
        size_t n = (size_t)sizes[i];
        float *a = xmalloc(n * n * sizeof(float)), *b = xmalloc(n * n * sizeof(float)), *c = xcalloc(n * n * sizeof(float));
        uint16_t *ab = bf16 ? xmalloc(n * n * 2) : NULL, *bb = bf16 ? xmalloc(n * n * 2) : NULL;
        for (size_t k = 0; k < n * n; k++) {      // values that stay normal: no denormal slow paths
            a[k] = (float)((k * 7 + 3) % 13) / 13.0f - 0.5f;
            b[k] = (float)((k * 5 + 1) % 11) / 11.0f - 0.5f;
        }
        if (bf16) {
            cvt_f32_to_bf16(ab, a, n * n);
            cvt_f32_to_bf16(bb, b, n * n);
        }
        int N = (int)n;
        square_gemm(bf16, N, a, b, ab, bb, c);   // warm-up (and, in bf16, the primitive's creation)
        for (int r = 0; r < repeats; r++) {
            double t0 = now_seconds();
            square_gemm(bf16, N, a, b, ab, bb, c);
            double dt = now_seconds() - t0;
            double gf = dt > 0 ? 2.0 * (double)n * n * n / dt * 1e-9 : 0.0;
            if (gf > best) {
                best = gf;
                if (best_size) *best_size = N;
            }
        }
        free(a);
        free(b);
        free(c);
        free(ab);
        free(bb);
    }
    omp_set_num_threads(saved);
    return best;
}

double peak_gflops_measure(int threads) { return peak_gflops_measure_prec(threads, "fp32"); }

double peak_gflops_measure_prec(int threads, const char *precision) {
    const int sizes[] = {1024, 2048};
    return peak_gflops_measure_sizes_prec(threads, precision, sizes, 2, 5, NULL);
}

void peak_cpu_model(char *buf, size_t len) {
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *s = colon + 1;
        while (*s == ' ' || *s == '\t') s++;
        size_t n = strlen(s);
        while (n && (s[n - 1] == '\n' || s[n - 1] == ' ')) s[--n] = '\0';
        if (n) snprintf(buf, len, "%s", s);
        break;
    }
    fclose(f);
}

int peak_cache_path(char *buf, size_t len) {
    const char *env = getenv("CTRON_PEAK_CACHE");
    if (env && *env) return snprintf(buf, len, "%s", env) < (int)len ? 0 : -1;
    env = getenv("XDG_CACHE_HOME");
    if (env && *env) return snprintf(buf, len, "%s/ctron/peak.json", env) < (int)len ? 0 : -1;
    env = getenv("HOME");
    if (env && *env) return snprintf(buf, len, "%s/.cache/ctron/peak.json", env) < (int)len ? 0 : -1;
    return -1;
}

static cJSON *load(const char *path) {
    uint8_t *data;
    size_t n;
    char err[256];
    if (fileio_read_all(path, &data, &n, err, sizeof err) != 0) return NULL;
    cJSON *root = cJSON_ParseWithLength((const char *)data, n);
    free(data);
    if (root && !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "entries"))) {
        cJSON_Delete(root);
        root = NULL;
    }
    return root;
}

// An entry without "precision" is fp32 (the files written before bf16). The figure of an fp32 entry is
// "gflops", of another precision "gflops_<precision>": a ctron from before bf16 matches entries by CPU
// and threads only, and so must find no "gflops" in a bf16 entry.
static cJSON *find_entry(cJSON *entries, const char *cpu, int threads, const char *precision) {
    cJSON *e;
    cJSON_ArrayForEach(e, entries) {
        cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "cpu"), *t = cJSON_GetObjectItemCaseSensitive(e, "threads");
        cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "precision");
        const char *ep = cJSON_IsString(p) ? p->valuestring : "fp32";
        if (cJSON_IsString(c) && cJSON_IsNumber(t) && strcmp(c->valuestring, cpu) == 0 && t->valuedouble == threads &&
            strcmp(ep, is_fp32(precision) ? "fp32" : precision) == 0)
            return e;
    }
    return NULL;
}

static void figure_key(char *key, size_t len, const char *precision) {
    if (is_fp32(precision)) snprintf(key, len, "gflops");
    else snprintf(key, len, "gflops_%s", precision);
}

int peak_cache_read(const char *path, const char *cpu, int threads, double *out) {
    return peak_cache_read_prec(path, cpu, threads, "fp32", out);
}

int peak_cache_read_prec(const char *path, const char *cpu, int threads, const char *precision, double *out) {
    char why[256];
    return peak_cache_lookup(path, cpu, threads, precision, out, NULL, why, sizeof why) == 0 ? 0 : -1;
}

int peak_cache_lookup(const char *path, const char *cpu, int threads, const char *precision, double *out,
                      double *measured_at, char *why, size_t whylen) {
    cJSON *root = load(path);
    if (!root) return -1;
    char key[64];
    figure_key(key, sizeof key, precision);
    cJSON *e = find_entry(cJSON_GetObjectItemCaseSensitive(root, "entries"), cpu, threads, precision);
    cJSON *g = e ? cJSON_GetObjectItemCaseSensitive(e, key) : NULL;
    cJSON *at = e ? cJSON_GetObjectItemCaseSensitive(e, "measured_at") : NULL;
    int rc = -1;
    double now = (double)time(NULL), when = cJSON_IsNumber(at) ? at->valuedouble : -1.0;
    if (!cJSON_IsNumber(g)) {
        rc = -1;
    } else if (!(g->valuedouble >= PEAK_GFLOPS_MIN && g->valuedouble <= PEAK_GFLOPS_MAX)) {
        snprintf(why, whylen, "the cached %s figure %.4g GFLOP/s in %s is not plausible (expected %g to %g GFLOP/s)",
                 is_fp32(precision) ? "fp32" : precision, g->valuedouble, path, PEAK_GFLOPS_MIN, PEAK_GFLOPS_MAX);
        rc = -2;
    } else if (!(when > 0 && when <= now + 60.0)) {
        snprintf(why, whylen, "the cached %s figure in %s has no valid measured_at (%s)",
                 is_fp32(precision) ? "fp32" : precision, path, cJSON_IsNumber(at) ? "in the future" : "missing");
        rc = -2;
    } else if (now - when > PEAK_CACHE_MAX_AGE_S) {
        snprintf(why, whylen, "the cached %s figure in %s was measured %.0f days ago (it expires after %.0f)",
                 is_fp32(precision) ? "fp32" : precision, path, (now - when) / 86400.0, PEAK_CACHE_MAX_AGE_S / 86400.0);
        rc = -2;
    } else {
        *out = g->valuedouble;
        if (measured_at) *measured_at = when;
        rc = 0;
    }
    cJSON_Delete(root);
    return rc;
}

// mkdir -p of path's folder.
static int make_parents(const char *path, char *err, size_t errlen) {
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) {
        snprintf(err, errlen, "cache path too long: '%s'", path);
        return -1;
    }
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "cannot create '%s': %s", dir, strerror(errno));
            return -1;
        }
        *p = '/';
    }
    return 0;
}

int peak_cache_write(const char *path, const char *cpu, int threads, double gflops, char *err, size_t errlen) {
    return peak_cache_write_prec(path, cpu, threads, "fp32", gflops, err, errlen);
}

int peak_cache_write_prec(const char *path, const char *cpu, int threads, const char *precision, double gflops,
                          char *err, size_t errlen) {
    if (!is_fp32(precision) && !peak_precision_valid(precision)) {
        snprintf(err, errlen, "unknown precision '%s'", precision);
        return -1;
    }
    if (!(gflops >= PEAK_GFLOPS_MIN && gflops <= PEAK_GFLOPS_MAX)) {
        snprintf(err, errlen, "%.4g GFLOP/s is not a plausible peak (expected %g to %g)", gflops, PEAK_GFLOPS_MIN,
                 PEAK_GFLOPS_MAX);
        return -1;
    }
    if (make_parents(path, err, errlen) != 0) return -1;
    cJSON *root = load(path);   // a malformed cache is replaced, not merged
    if (!root) {
        root = cJSON_CreateObject();
        cJSON_AddNumberToObject(root, "version", 1);
        cJSON_AddArrayToObject(root, "entries");
    }
    cJSON *entries = cJSON_GetObjectItemCaseSensitive(root, "entries");
    cJSON *e = find_entry(entries, cpu, threads, precision);
    if (e) cJSON_Delete(cJSON_DetachItemViaPointer(entries, e));
    e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "cpu", cpu);
    cJSON_AddNumberToObject(e, "threads", threads);
    char key[64];
    figure_key(key, sizeof key, precision);
    if (!is_fp32(precision)) cJSON_AddStringToObject(e, "precision", precision);
    cJSON_AddNumberToObject(e, key, gflops);
    cJSON_AddNumberToObject(e, "measured_at", (double)time(NULL));
    cJSON_AddItemToArray(entries, e);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    size_t n = strlen(text);
    text[n] = '\n';   // the terminator's byte becomes the file's final newline
    const void *parts[] = {text};
    const size_t sizes[] = {n + 1};
    int rc = fileio_write_atomic(path, parts, sizes, 1, err, errlen);
    cJSON_free(text);
    return rc;
}

int peak_gflops_cached(int threads, double *out) { return peak_gflops_cached_prec(threads, "fp32", out); }

int peak_gflops_cached_prec(int threads, const char *precision, double *out) {
    char path[4096], cpu[256];
    if (peak_cache_path(path, sizeof path) != 0) return -1;
    peak_cpu_model(cpu, sizeof cpu);
    return peak_cache_read_prec(path, cpu, peak_threads(threads), precision, out);
}

int peak_gflops_lookup(int threads, const char *precision, double *out, char *why, size_t whylen) {
    char path[4096], cpu[256];
    if (peak_cache_path(path, sizeof path) != 0) return -1;
    peak_cpu_model(cpu, sizeof cpu);
    return peak_cache_lookup(path, cpu, peak_threads(threads), precision, out, NULL, why, whylen);
}

int peak_gflops_store(int threads, double gflops, char *err, size_t errlen) {
    return peak_gflops_store_prec(threads, "fp32", gflops, err, errlen);
}

int peak_gflops_store_prec(int threads, const char *precision, double gflops, char *err, size_t errlen) {
    char path[4096], cpu[256];
    if (peak_cache_path(path, sizeof path) != 0) {
        snprintf(err, errlen, "no cache folder: neither CTRON_PEAK_CACHE, XDG_CACHE_HOME nor HOME is set");
        return -1;
    }
    peak_cpu_model(cpu, sizeof cpu);
    return peak_cache_write_prec(path, cpu, peak_threads(threads), precision, gflops, err, errlen);
}
