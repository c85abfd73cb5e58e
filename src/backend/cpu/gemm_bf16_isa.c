// Does this CPU run bf16 dot products natively? cpuid for the instructions, xgetbv for the OS saving
// the AVX-512 state, and oneDNN's effective ISA (ONEDNN_MAX_CPU_ISA can hold it below the CPU's).
#include <cpuid.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include "backend/cpu/gemm_bf16.h"

static unsigned long long xgetbv0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static const char *isa_name(unsigned isa) {
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    default: return "?";
    }
}

int gemm_bf16_native(char *why, size_t len) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || (xgetbv0() & 0xE6) != 0xE6) {
        snprintf(why, len, "this CPU lacks AVX-512 (and so AVX512-BF16), which oneDNN's bf16 GEMMs need");
        return 0;
    }
    unsigned b7 = 0, d7 = 0, a71 = 0;
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b7, c, d7);
        __cpuid_count(7, 1, a71, b, c, d);
    }
    int avx512_bf16 = (b7 & bit_AVX512F) && (b7 & bit_AVX512BW) && (a71 & (1u << 5));
    int amx_bf16 = (d7 & (1u << 22)) != 0;
    if (!avx512_bf16 && !amx_bf16) {
        snprintf(why, len, "this CPU lacks AVX512-BF16 (cpuid 7.1 EAX bit 5) and AMX-BF16");
        return 0;
    }
    // dnnl_cpu_isa_t values are bit sets: avx512_core_bf16 holds every bit of the ISAs below it.
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    if (isa != dnnl_cpu_isa_all && (isa & dnnl_cpu_isa_avx512_core_bf16) != dnnl_cpu_isa_avx512_core_bf16) {
        snprintf(why, len, "oneDNN is held to %s, below avx512_core_bf16 (ONEDNN_MAX_CPU_ISA or DNNL_MAX_CPU_ISA)",
                 isa_name(isa));
        return 0;
    }
    if (len) why[0] = '\0';
    return 1;
}
