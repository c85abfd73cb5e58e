#include "backend/backend.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Backend *backend_cpu_open(Precision precision, char *err, size_t errlen);
void backend_cpu_close(Backend *be);

const char *precision_name(Precision p) { return p == PRECISION_BF16 ? "bf16" : "fp32"; }

int precision_parse(const char *text, Precision *out) {
    if (!strcmp(text, "fp32")) *out = PRECISION_FP32;
    else if (!strcmp(text, "bf16")) *out = PRECISION_BF16;
    else return -1;
    return 0;
}

Backend *backend_open(const char *name, Precision precision, char *err, size_t errlen) {
    if (!strcmp(name, "cpu")) return backend_cpu_open(precision, err, errlen);
    if (!strncmp(name, "cuda", 4))
        snprintf(err, errlen, "backend '%s': this ctron was built without the CUDA backend", name);
    else
        snprintf(err, errlen, "unknown backend '%s' (expected cpu)", name);
    return NULL;
}

void backend_close(Backend *be) {
    if (!be) return;
    if (!strcmp(be->name, "cpu")) backend_cpu_close(be);
    free(be);
}
