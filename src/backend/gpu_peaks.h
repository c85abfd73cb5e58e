// Known GPUs' dense peak FLOP/s (NVIDIA's datasheets), for MFU/HFU against the device a run is on.
// Keyed by the name the driver reports (cudaDeviceProp.name) and the SM count: a MIG slice or a
// cut-down part with fewer SMs than the table's row gets the row's figure scaled by its SMs.
#ifndef CTRON_GPU_PEAKS_H
#define CTRON_GPU_PEAKS_H
#include <stddef.h>

typedef enum { GPU_PEAK_FP32 = 0, GPU_PEAK_TF32 = 1, GPU_PEAK_BF16 = 2 } GpuPeakKind;

// FLOP/s of dense (not sparse) GEMMs of this kind on the device `name` with `sms` SMs, and in source
// the row's datasheet (and the scaling, when the SMs differ); 0 with "unknown device ..." in source
// when no row matches. A row matches when the name starts with it, case aside, at a word end
// ("NVIDIA A10" is not "NVIDIA A100-SXM4-40GB").
double gpu_peak_flops(const char *name, int sms, GpuPeakKind kind, char *source, size_t sourcelen);
#endif
