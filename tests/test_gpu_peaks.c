// The GPU peak table (backend/gpu_peaks.h) that MFU/HFU use with --device cuda: device names as the
// drivers report them (cudaDeviceProp.name) give their datasheet's dense figures; a name that is a
// prefix of another at no word end ("NVIDIA A10" / "NVIDIA A100-...", "NVIDIA L40" / "NVIDIA L40S")
// is not confused with it; a MIG slice is scaled by its SMs; an unknown device gives 0 and says so.
// The CPU backend knows no datasheet peak (its sgemm is measured): 0.
#include <math.h>
#include <string.h>
#include "check.h"
#include "backend/backend.h"
#include "backend/gpu_peaks.h"

static void expect(const char *name, int sms, GpuPeakKind kind, double tflops, const char *in_source) {
    char src[256] = "";
    double got = gpu_peak_flops(name, sms, kind, src, sizeof src);
    CHECK(fabs(got - tflops * 1e12) <= 1e-9 * tflops * 1e12, "'%s' (%d SMs) kind %d: %.6g FLOP/s, want %.6g TFLOP/s",
          name, sms, (int)kind, got, tflops);
    CHECK(strstr(src, in_source) != NULL, "'%s': source '%s' does not say '%s'", name, src, in_source);
}

int main(void) {
    // names as nvidia-smi / cudaGetDeviceProperties report them
    expect("NVIDIA H100 80GB HBM3", 132, GPU_PEAK_BF16, 989.5, "H100 SXM5 datasheet, dense bf16");
    expect("NVIDIA H100 80GB HBM3", 132, GPU_PEAK_FP32, 67.0, "dense fp32");
    expect("NVIDIA H100 80GB HBM3", 132, GPU_PEAK_TF32, 494.5, "dense tf32");
    expect("NVIDIA H100 PCIe", 114, GPU_PEAK_BF16, 756.5, "H100 PCIe");
    expect("NVIDIA H100 PCIe", 114, GPU_PEAK_FP32, 51.0, "H100 PCIe");
    expect("NVIDIA H100 NVL", 132, GPU_PEAK_BF16, 835.5, "H100 NVL");
    expect("NVIDIA H200", 132, GPU_PEAK_BF16, 989.5, "H200 SXM");
    expect("NVIDIA H200 NVL", 132, GPU_PEAK_BF16, 835.5, "H200 NVL");
    expect("NVIDIA A100-SXM4-40GB", 108, GPU_PEAK_FP32, 19.5, "A100");
    expect("NVIDIA A100-SXM4-80GB", 108, GPU_PEAK_BF16, 312.0, "A100");
    expect("NVIDIA A100-PCIE-40GB", 108, GPU_PEAK_TF32, 156.0, "A100");
    expect("NVIDIA A100 80GB PCIe", 108, GPU_PEAK_BF16, 312.0, "A100");
    expect("NVIDIA A10", 72, GPU_PEAK_BF16, 125.0, "A10 datasheet");
    expect("NVIDIA L40S", 142, GPU_PEAK_BF16, 362.05, "L40S");
    expect("NVIDIA GeForce RTX 4090", 128, GPU_PEAK_BF16, 165.2, "RTX 4090");
    expect("nvidia h100 80gb hbm3", 132, GPU_PEAK_FP32, 67.0, "H100");   // case aside
    // a MIG slice: the row's name, fewer SMs
    expect("NVIDIA A100-SXM4-40GB MIG 3g.20gb", 42, GPU_PEAK_BF16, 312.0 * 42 / 108, "scaled to 42 of its 108 SMs");
    expect("NVIDIA H100 80GB HBM3 MIG 1g.10gb", 16, GPU_PEAK_BF16, 989.5 * 16 / 132, "scaled to 16 of its 132");
    // unknown: a prefix at no word end, an older or newer part
    expect("NVIDIA L40", 142, GPU_PEAK_BF16, 0.0, "unknown device 'NVIDIA L40'");
    expect("NVIDIA A1000", 72, GPU_PEAK_BF16, 0.0, "unknown device");
    expect("Tesla V100-SXM2-16GB", 80, GPU_PEAK_FP32, 0.0, "unknown device 'Tesla V100-SXM2-16GB' (80 SMs)");
    expect("NVIDIA B200", 148, GPU_PEAK_BF16, 0.0, "not in ctron's table");
    expect("", 0, GPU_PEAK_FP32, 0.0, "unknown device");

    char err[256], src[128] = "";
    Backend *cpu = backend_open("cpu", PRECISION_FP32, err, sizeof err);
    CHECK(cpu && cpu->peak_flops(cpu, PRECISION_FP32, src, sizeof src) == 0.0 && strstr(src, "measured"),
          "the CPU backend quotes a datasheet peak (%s)", src);
    backend_close(cpu);
    return check_summary();
}
