// The GEMM peak a training run's MFU and HFU are measured against: --peak-gflops, a GPU's datasheet
// figure (its backend's table), or this CPU's measured and cached figure (`ctron peak`).
#ifndef CTRON_RUN_PEAK_H
#define CTRON_RUN_PEAK_H
#include "backend/backend.h"
#include "train/trainer.h"

typedef struct {
    double gflops;     // per rank; <= 0: none (MFU/HFU are not shown)
    char src[192];     // where it came from, for the header
    const char *prec;  // the run's precision's name (the cache keeps a figure per precision)
    int cpu_device;    // a CPU's peak is measured and cached; a GPU's is its datasheet's, never raised
    int raised;        // 0: not yet; 1: raised to what a step ran at; -1: --peak-gflops kept, noted
} RunPeak;

// Fills p for the run's backend; rank 0 measures (and caches) a CPU peak missing from the cache.
void run_peak_init(RunPeak *p, const TrainOptions *o, Backend *be, int rank);
// MFU never reads above 100 % unremarked: a step that ran faster than the peak (observed GFLOP/s per
// rank) proves the peak low. A cached peak is raised to it; a --peak-gflops given is kept, with a note.
void run_peak_raise(RunPeak *p, const TrainOptions *o, double observed);
// At the end of the run: a raised peak goes into the cache (an emulated bf16 figure does not).
void run_peak_store(const RunPeak *p, const TrainOptions *o);
#endif
