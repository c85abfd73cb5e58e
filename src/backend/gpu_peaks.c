#include "backend/gpu_peaks.h"
#include <strings.h>
#include <stdio.h>
#include <string.h>

// Dense TFLOP/s: FP32 (CUDA cores), TF32 and BF16 (tensor cores, FP32 accumulation). The datasheets
// quote tensor-core figures "with sparsity" (2:4) beside or instead of the dense ones; the dense
// figure is half of the sparse one, and that is what is listed here.
//   A100: NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/content/dam/en-zz/Solutions/Data-Center/
//     a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf): FP32 19.5, TF32 156, BF16 312,
//     the same for SXM4 and PCIe, 40 and 80 GB; 108 SMs.
//   H100 SXM5 / PCIe / NVL: NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/
//     nvidia-tensor-core-gpu-datasheet): FP32 67 / 51 / 60; TF32 989 / 756 / 835 and BF16 1979 / 1513 /
//     1671 with sparsity, halved; 132 / 114 / 132 SMs.
//   H200 SXM / NVL: NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200): FP32
//     67 / 60; TF32 989 / 835 and BF16 1979 / 1671 with sparsity, halved; 132 SMs.
//   L40S: NVIDIA L40S datasheet (nvidia.com/en-us/data-center/l40s): FP32 91.6, TF32 183, BF16 362.05
//     dense; 142 SMs.
//   A10: NVIDIA A10 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/products/a10-gpu): FP32
//     31.2, TF32 62.5, BF16 125 dense; 72 SMs.
//   RTX 4090: NVIDIA Ada Lovelace GPU architecture whitepaper v1.1, appendix A (GeForce RTX 4090):
//     FP32 82.6, TF32 82.6, BF16 with FP32 accumulate 165.2 dense; 128 SMs.
typedef struct {
    const char *name;   // as the driver reports it
    int sms;
    double tflops[3];   // GpuPeakKind order: fp32, tf32, bf16
    const char *source;
} GpuPeakRow;

// Longer names first where one is a prefix of another at a word end ("NVIDIA H200 NVL", "NVIDIA H200").
static const GpuPeakRow rows[] = {
    {"NVIDIA A100-SXM4-40GB", 108, {19.5, 156.0, 312.0}, "NVIDIA A100 datasheet"},
    {"NVIDIA A100-SXM4-80GB", 108, {19.5, 156.0, 312.0}, "NVIDIA A100 datasheet"},
    {"NVIDIA A100-PCIE-40GB", 108, {19.5, 156.0, 312.0}, "NVIDIA A100 datasheet"},
    {"NVIDIA A100 80GB PCIe", 108, {19.5, 156.0, 312.0}, "NVIDIA A100 datasheet"},
    {"NVIDIA H100 80GB HBM3", 132, {67.0, 494.5, 989.5}, "NVIDIA H100 SXM5 datasheet"},
    {"NVIDIA H100 PCIe", 114, {51.0, 378.0, 756.5}, "NVIDIA H100 PCIe datasheet"},
    {"NVIDIA H100 NVL", 132, {60.0, 417.5, 835.5}, "NVIDIA H100 NVL datasheet"},
    {"NVIDIA H200 NVL", 132, {60.0, 417.5, 835.5}, "NVIDIA H200 NVL datasheet"},
    {"NVIDIA H200", 132, {67.0, 494.5, 989.5}, "NVIDIA H200 SXM datasheet"},
    {"NVIDIA L40S", 142, {91.6, 183.0, 362.05}, "NVIDIA L40S datasheet"},
    {"NVIDIA A10", 72, {31.2, 62.5, 125.0}, "NVIDIA A10 datasheet"},
    {"NVIDIA GeForce RTX 4090", 128, {82.6, 82.6, 165.2}, "NVIDIA Ada Lovelace whitepaper (RTX 4090)"},
};

static const char *const kind_names[] = {"fp32", "tf32", "bf16"};

// name starts with row, case aside, and the row ends at a word end of name.
static int matches(const char *name, const char *row) {
    size_t n = strlen(row);
    if (strncasecmp(name, row, n) != 0) return 0;
    char next = name[n];
    return next == '\0' || next == ' ' || next == '-' || next == '_';
}

double gpu_peak_flops(const char *name, int sms, GpuPeakKind kind, char *source, size_t sourcelen) {
    if (kind < GPU_PEAK_FP32 || kind > GPU_PEAK_BF16) kind = GPU_PEAK_FP32;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const GpuPeakRow *r = &rows[i];
        if (!name || !matches(name, r->name)) continue;
        double flops = r->tflops[kind] * 1e12;
        if (sms > 0 && sms != r->sms) {   // a MIG slice, or a part with SMs disabled: the same clock per SM
            flops *= (double)sms / (double)r->sms;
            if (sourcelen) snprintf(source, sourcelen, "%s, dense %s, scaled to %d of its %d SMs", r->source,
                                    kind_names[kind], sms, r->sms);
        } else if (sourcelen) {
            snprintf(source, sourcelen, "%s, dense %s", r->source, kind_names[kind]);
        }
        return flops;
    }
    if (sourcelen) snprintf(source, sourcelen, "unknown device '%s' (%d SMs): not in ctron's table of GPU peaks",
                            name ? name : "", sms);
    return 0.0;
}
