// The peak cache's read/write logic with a temporary cache path (the benchmark itself is not timed
// here: `ctron peak` is a benchmark, only a tiny GEMM checks that measuring returns a figure).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "backend/cpu/gemm_bf16.h"
#include "check.h"
#include "util/peak.h"

int main(void) {
    char dir[] = "/tmp/ctron_peak_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[512], err[512];
    double g = 0;
    snprintf(path, sizeof path, "%s/a/b/peak.json", dir);

    CHECK(peak_cache_read(path, "cpu X", 4, &g) == -1, "missing file reads as no entry");
    CHECK(peak_cache_write(path, "cpu X", 4, 123.5, err, sizeof err) == 0, "write creates the folders: %s", err);
    CHECK(peak_cache_read(path, "cpu X", 4, &g) == 0 && g == 123.5, "read back %g", g);
    CHECK(peak_cache_read(path, "cpu X", 8, &g) == -1, "another thread count is another key");
    CHECK(peak_cache_read(path, "cpu Y", 4, &g) == -1, "another CPU is another key");
    CHECK(peak_cache_write(path, "cpu X", 8, 200.0, err, sizeof err) == 0, "second entry: %s", err);
    CHECK(peak_cache_write(path, "cpu Y", 4, 50.0, err, sizeof err) == 0, "third entry: %s", err);
    CHECK(peak_cache_write(path, "cpu X", 4, 130.0, err, sizeof err) == 0, "replace: %s", err);
    CHECK(peak_cache_read(path, "cpu X", 4, &g) == 0 && g == 130.0, "replaced figure %g", g);
    CHECK(peak_cache_read(path, "cpu X", 8, &g) == 0 && g == 200.0, "other entries kept %g", g);
    CHECK(peak_cache_read(path, "cpu Y", 4, &g) == 0 && g == 50.0, "other CPU kept %g", g);
    FILE *f = fopen(path, "r");
    int entries = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f)) entries += strstr(line, "\"gflops\"") != NULL;
    if (f) fclose(f);
    CHECK(entries == 3, "three entries in the file, not %d (a replaced one is not duplicated)", entries);

    // Precision is part of the key; an entry without "precision" (the files from before bf16) is fp32,
    // and a bf16 entry carries no "gflops" (a ctron from before bf16 must not take it for fp32).
    CHECK(peak_cache_read_prec(path, "cpu X", 4, "bf16", &g) == -1, "no bf16 figure yet");
    CHECK(peak_cache_read_prec(path, "cpu X", 4, "fp32", &g) == 0 && g == 130.0, "fp32 by name %g", g);
    CHECK(peak_cache_read_prec(path, "cpu X", 4, NULL, &g) == 0 && g == 130.0, "NULL precision is fp32 %g", g);
    CHECK(peak_cache_write_prec(path, "cpu X", 4, "bf16", 400.0, err, sizeof err) == 0, "bf16 entry: %s", err);
    CHECK(peak_cache_read_prec(path, "cpu X", 4, "bf16", &g) == 0 && g == 400.0, "bf16 read back %g", g);
    CHECK(peak_cache_read(path, "cpu X", 4, &g) == 0 && g == 130.0, "fp32 kept beside bf16 %g", g);
    CHECK(peak_cache_write_prec(path, "cpu X", 4, "bf16", 410.0, err, sizeof err) == 0, "bf16 replace: %s", err);
    CHECK(peak_cache_read_prec(path, "cpu X", 4, "bf16", &g) == 0 && g == 410.0, "bf16 replaced %g", g);
    CHECK(peak_cache_write_prec(path, "cpu X", 4, "fp16", 1.0, err, sizeof err) == -1, "unknown precision refused");
    CHECK(peak_precision_valid("fp32") && peak_precision_valid("bf16") && !peak_precision_valid("fp16") &&
              !peak_precision_valid(NULL), "precision names");
    f = fopen(path, "r");
    int bf16_entries = 0, legacy_figure_in_bf16 = 0, in_bf16 = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strstr(line, "\"precision\"") && strstr(line, "bf16")) bf16_entries++, in_bf16 = 1;
        if (in_bf16 && strstr(line, "\"gflops\"")) legacy_figure_in_bf16 = 1;
        if (strchr(line, '}')) in_bf16 = 0;
    }
    if (f) fclose(f);
    CHECK(bf16_entries == 1 && !legacy_figure_in_bf16, "one bf16 entry, with no plain \"gflops\"");
    // A file written before bf16 (no precision anywhere) reads as fp32.
    char old[600];
    snprintf(old, sizeof old, "%s/old.json", dir);
    f = fopen(old, "w");
    fputs("{\"version\":1,\"entries\":[{\"cpu\":\"cpu Z\",\"threads\":2,\"gflops\":205.5,\"measured_at\":1}]}\n", f);
    fclose(f);
    CHECK(peak_cache_read_prec(old, "cpu Z", 2, "fp32", &g) == 0 && g == 205.5, "old file is fp32 %g", g);
    CHECK(peak_cache_read_prec(old, "cpu Z", 2, "bf16", &g) == -1, "old file has no bf16");

    // A malformed cache reads as empty and is replaced by the next write.
    f = fopen(path, "w");
    fputs("{not json", f);
    fclose(f);
    CHECK(peak_cache_read(path, "cpu X", 4, &g) == -1, "malformed file reads as no entry");
    CHECK(peak_cache_write(path, "cpu X", 4, 99.0, err, sizeof err) == 0, "rewrite a malformed file: %s", err);
    CHECK(peak_cache_read(path, "cpu X", 4, &g) == 0 && g == 99.0, "after rewrite %g", g);
    // Valid JSON of another shape is no cache either.
    f = fopen(path, "w");
    fputs("[1, 2, 3]", f);
    fclose(f);
    CHECK(peak_cache_read(path, "cpu X", 4, &g) == -1, "wrong shape reads as no entry");
    // A path under a regular file cannot be written: an error, not a crash.
    char bad[600];
    snprintf(bad, sizeof bad, "%s/sub/peak.json", path);
    CHECK(peak_cache_write(bad, "cpu X", 4, 1.0, err, sizeof err) == -1 && err[0], "unwritable path: '%s'", err);

    // The default path follows CTRON_PEAK_CACHE, then XDG_CACHE_HOME, then HOME; the trainer's entry
    // points use it with this machine's CPU model and the resolved thread count.
    char def[512], xdg[512];
    unsetenv("CTRON_PEAK_CACHE");
    snprintf(xdg, sizeof xdg, "%s/xdg", dir);
    setenv("XDG_CACHE_HOME", xdg, 1);
    CHECK(peak_cache_path(def, sizeof def) == 0 && strstr(def, "/xdg/ctron/peak.json"), "XDG path '%s'", def);
    CHECK(peak_gflops_cached(3, &g) == -1, "nothing cached yet");
    CHECK(peak_gflops_store(3, 77.0, err, sizeof err) == 0, "store: %s", err);
    CHECK(peak_gflops_cached(3, &g) == 0 && g == 77.0, "cached %g", g);
    CHECK(peak_gflops_cached(5, &g) == -1, "other thread count not cached");
    char cpu[256];
    peak_cpu_model(cpu, sizeof cpu);
    CHECK(peak_cache_read(def, cpu, 3, &g) == 0 && g == 77.0, "keyed by the CPU model '%s'", cpu);
    setenv("CTRON_PEAK_CACHE", path, 1);
    CHECK(peak_cache_path(def, sizeof def) == 0 && strcmp(def, path) == 0, "CTRON_PEAK_CACHE wins: '%s'", def);
    unsetenv("CTRON_PEAK_CACHE");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", dir, 1);
    CHECK(peak_cache_path(def, sizeof def) == 0 && strstr(def, "/.cache/ctron/peak.json"), "HOME path '%s'", def);
    CHECK(peak_threads(0) >= 1 && peak_threads(6) == 6, "thread resolution");

    // Measuring works (a tiny GEMM, one run: no timing claims).
    const int sizes[] = {64};
    int best = 0;
    double gf = peak_gflops_measure_sizes(1, sizes, 1, 1, &best);
    CHECK(gf > 0 && best == 64, "tiny measurement %g at n=%d", gf, best);
    char why[256];
    int support = gemm_bf16_support(why, sizeof why);
    best = 0;
    gf = peak_gflops_measure_sizes_prec(1, "bf16", sizes, 1, 1, &best);
    CHECK(gf > 0 && best == 64, "tiny bf16 measurement %g at n=%d (support %d: %s)", gf, best, support, why);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "cleanup");
    return check_summary();
}
