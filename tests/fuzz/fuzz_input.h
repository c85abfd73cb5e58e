// Shared by the fuzz targets: the readers under test take paths, so each input is written to one
// scratch file (truncated and rewritten per input: no disk churn, no file left per input).
#ifndef CTRON_FUZZ_INPUT_H
#define CTRON_FUZZ_INPUT_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Path of a file holding exactly data[0..size), under dir (created once) as name.
static inline const char *fuzz_file(const uint8_t *data, size_t size, const char *name) {
    static char dir[64], path[128];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/ctron-fuzz-XXXXXX");
        if (!mkdtemp(dir)) abort();
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) abort();
    return path;
}

// The scratch directory of fuzz_file (for readers that take a directory).
static inline const char *fuzz_dir_of(const char *path, char *buf, size_t len) {
    snprintf(buf, len, "%s", path);
    char *slash = strrchr(buf, '/');
    if (slash) *slash = '\0';
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
#endif
