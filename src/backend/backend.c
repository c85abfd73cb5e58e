#include "backend/backend.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/common.h"

Backend *backend_cpu_open(Precision precision, char *err, size_t errlen);
void backend_cpu_close(Backend *be);
Backend *backend_guard_open(Precision precision, char *err, size_t errlen);
void backend_guard_close(Backend *be);
#ifdef CTRON_HAVE_CUDA
Backend *backend_cuda_open(const char *name, Precision precision, char *err, size_t errlen);
void backend_cuda_close(Backend *be);
int backend_has_cuda(void) { return 1; }
#else
int backend_has_cuda(void) { return 0; }
#endif

const char *precision_name(Precision p) { return p == PRECISION_BF16 ? "bf16" : "fp32"; }

int precision_parse(const char *text, Precision *out) {
    if (!strcmp(text, "fp32")) *out = PRECISION_FP32;
    else if (!strcmp(text, "bf16")) *out = PRECISION_BF16;
    else return -1;
    return 0;
}

int backend_bf16_copies(char *err, size_t errlen) {
    const char *copies = getenv("CTRON_BF16_COPIES");
    if (!copies || !*copies || !strcmp(copies, "1")) return 1;
    if (!strcmp(copies, "0")) return 0;
    snprintf(err, errlen, "CTRON_BF16_COPIES='%s': expected 1 (at bf16 the kernels read and write the arena's bf16 "
             "copies, the default) or 0 (fp32 values unpacked and rounded again)", copies);
    return -1;
}

Backend *backend_open(const char *name, Precision precision, char *err, size_t errlen) {
    if (!strcmp(name, "cpu")) return backend_cpu_open(precision, err, errlen);
    if (!strcmp(name, "cpu-guarded")) return backend_guard_open(precision, err, errlen);
#ifdef CTRON_HAVE_CUDA
    if (!strncmp(name, "cuda", 4)) return backend_cuda_open(name, precision, err, errlen);
    snprintf(err, errlen, "unknown device '%s' (expected cpu, cuda or cuda:N)", name);
#else
    if (!strncmp(name, "cuda", 4))
        snprintf(err, errlen, "device '%s': this ctron was built without the CUDA backend (no CUDA toolkit at build time)",
                 name);
    else
        snprintf(err, errlen, "unknown device '%s' (expected cpu; this build has no CUDA backend)", name);
#endif
    return NULL;
}

float backend_clip_scale(double norm, float max_norm) {
    if (max_norm <= 0.0f || !(norm > max_norm)) return 1.0f;
    return (float)(max_norm / (norm + 1e-6));
}

void backend_close(Backend *be) {
    if (!be) return;
    if (!strcmp(be->name, "cpu")) backend_cpu_close(be);
    else if (!strcmp(be->name, "cpu-guarded")) backend_guard_close(be);
#ifdef CTRON_HAVE_CUDA
    else if (!strcmp(be->name, "cuda")) backend_cuda_close(be);
#endif
    free(be);
}
