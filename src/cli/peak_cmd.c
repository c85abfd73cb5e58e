// ctron peak: a benchmark, not a test — square GEMMs of the precision, best of several runs.
#include "cli/peak_cmd.h"
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "backend/cpu/gemm_bf16.h"
#include "util/peak.h"

#define CMD "peak"
#define MAX_SIZES 8

typedef struct {
    int threads, repeats, json, show, n_sizes;
    int sizes[MAX_SIZES];
    const char *cache, *precision;
} PeakArgs;

void cli_peak_usage(FILE *f) {
    fprintf(f,
        "usage: ctron peak [options]\n"
        "\n"
        "Measures the GEMM peak of this machine (square matrices, the best run): fp32 with cblas_sgemm,\n"
        "bf16 with oneDNN (bf16 inputs, fp32 accumulation); caches it per CPU model, thread count and\n"
        "precision; `ctron train` takes its default --peak-gflops from it.\n"
        "\n"
        "  --precision P      fp32 (default) or bf16\n"
        "  --threads N        OpenMP/OpenBLAS threads (default: all cores)\n"
        "  --sizes LIST       matrix sizes, e.g. 1024,2048 (default), 64..16384\n"
        "  --repeats N        timed runs per size after one warm-up (default 5)\n"
        "  --cache FILE       the cache file (default $CTRON_PEAK_CACHE, $XDG_CACHE_HOME/ctron/peak.json\n"
        "                     or ~/.cache/ctron/peak.json)\n"
        "  --show             print the cached figure for this CPU, thread count and precision; measure nothing\n"
        "  --json             one JSON object\n"
        "  -h, --help         this text\n");
}

enum { OPT_THREADS = 1000, OPT_SIZES, OPT_REPEATS, OPT_CACHE, OPT_SHOW, OPT_JSON, OPT_PRECISION };

static int parse_sizes(const char *text, PeakArgs *a) {
    char buf[256];
    if (strlen(text) >= sizeof buf || !*text) return args_error(CMD, "--sizes: expected a list like 1024,2048, got '%s'", text);
    strcpy(buf, text);
    a->n_sizes = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (a->n_sizes == MAX_SIZES) return args_error(CMD, "--sizes: at most %d sizes", MAX_SIZES);
        int rc = args_int(CMD, "--sizes", tok, 64, 16384, &a->sizes[a->n_sizes]);
        if (rc) return rc;
        a->n_sizes++;
    }
    return a->n_sizes ? 0 : args_error(CMD, "--sizes: expected a list like 1024,2048, got '%s'", text);
}

static int parse(int argc, char **argv, PeakArgs *a) {
    static const struct option opts[] = {
        {"threads", required_argument, 0, OPT_THREADS}, {"sizes", required_argument, 0, OPT_SIZES},
        {"repeats", required_argument, 0, OPT_REPEATS}, {"cache", required_argument, 0, OPT_CACHE},
        {"show", no_argument, 0, OPT_SHOW}, {"json", no_argument, 0, OPT_JSON},
        {"precision", required_argument, 0, OPT_PRECISION},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->repeats = 5;
    a->precision = "fp32";
    a->sizes[0] = 1024;
    a->sizes[1] = 2048;
    a->n_sizes = 2;
    int rc = 0, ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *flag = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        switch (ch) {
        case OPT_THREADS: rc = args_int(CMD, "--threads", optarg, 1, 4096, &a->threads); break;
        case OPT_SIZES: rc = parse_sizes(optarg, a); break;
        case OPT_REPEATS: rc = args_int(CMD, "--repeats", optarg, 1, 1000, &a->repeats); break;
        case OPT_CACHE: a->cache = optarg; break;
        case OPT_SHOW: a->show = 1; break;
        case OPT_JSON: a->json = 1; break;
        case OPT_PRECISION:
            if (!peak_precision_valid(optarg)) return args_error(CMD, "--precision: expected fp32 or bf16, got '%s'", optarg);
            a->precision = optarg;
            break;
        case 'h': cli_peak_usage(stdout); return -1;
        case ':': return args_error(CMD, "%s: missing value", flag);
        default: return args_error(CMD, "unknown option '%s'", flag);
        }
        if (rc) return rc;
    }
    if (optind < argc) return args_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (a->cache && !*a->cache) return args_error(CMD, "--cache: empty file name");
    return 0;
}

int cli_peak_main(int argc, char **argv) {
    PeakArgs a;
    int rc = parse(argc, argv, &a);
    if (rc == -1) return 0;
    if (rc) return rc;
    char path[4096], cpu[256], err[512];
    if (a.cache) snprintf(path, sizeof path, "%s", a.cache);
    else if (peak_cache_path(path, sizeof path) != 0) path[0] = '\0';
    peak_cpu_model(cpu, sizeof cpu);
    int threads = peak_threads(a.threads), best_size = 0;
    double gflops = 0.0;
    int stored = 0, emulated = 0;
    const char *prec = a.precision;
    if (a.show) {
        if (!path[0] || peak_cache_read_prec(path, cpu, threads, prec, &gflops) != 0) {
            fprintf(stderr, "ctron peak: no cached %s figure for '%s' with %d threads in %s (run ctron peak%s)\n", prec,
                    cpu, threads, path[0] ? path : "(no cache path: set HOME or XDG_CACHE_HOME)",
                    strcmp(prec, "fp32") ? " --precision bf16" : "");
            return 1;
        }
    } else {
        if (strcmp(prec, "bf16") == 0) {
            char why[256];
            int support = gemm_bf16_support(why, sizeof why);
            if (support != GEMM_BF16_NATIVE) {   // measured and cached all the same: it is what a run gets
                emulated = 1;
                fprintf(stderr, "ctron peak: note: bf16 is %s here (%s)\n",
                        support == GEMM_BF16_EMULATED ? "emulated by oneDNN" : "widened to fp32 sgemm", why);
            }
        }
        gflops = peak_gflops_measure_sizes_prec(threads, prec, a.sizes, a.n_sizes, a.repeats, &best_size);
        if (!path[0]) fprintf(stderr, "ctron peak: not cached: neither HOME nor XDG_CACHE_HOME is set\n");
        else if (peak_cache_write_prec(path, cpu, threads, prec, gflops, err, sizeof err) != 0)
            fprintf(stderr, "ctron peak: not cached: %s\n", err);
        else stored = 1;
    }
    if (a.json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "gflops", gflops);
        cJSON_AddStringToObject(o, "precision", prec);
        if (emulated) cJSON_AddBoolToObject(o, "emulated", 1);
        cJSON_AddNumberToObject(o, "threads", threads);
        cJSON_AddStringToObject(o, "cpu", cpu);
        cJSON_AddBoolToObject(o, "measured", !a.show);
        if (!a.show) {
            cJSON_AddNumberToObject(o, "best_size", best_size);
            cJSON_AddNumberToObject(o, "repeats", a.repeats);
        }
        cJSON_AddStringToObject(o, "cache", path);
        cJSON_AddBoolToObject(o, "cached", a.show || stored);
        char *text = cJSON_PrintUnformatted(o);
        printf("%s\n", text);
        cJSON_free(text);
        cJSON_Delete(o);
    } else if (a.show) {
        printf("%s GEMM peak: %.1f GFLOP/s (cached; threads %d, %s)\n", prec, gflops, threads, cpu);
    } else {
        printf("%s GEMM peak: %.1f GFLOP/s (%s n=%d, best of %d; threads %d, %s)\n", prec, gflops,
               strcmp(prec, "fp32") ? (emulated ? "bf16 GEMM, not native" : "oneDNN matmul") : "cblas_sgemm", best_size,
               a.repeats, threads, cpu);
        if (stored) printf("cached in %s\n", path);
    }
    return a.show || stored || !path[0] ? 0 : 1;
}
