#include "train/run_peak.h"
#include <stdio.h>
#include <string.h>
#include "backend/cpu/gemm_bf16.h"
#include "util/peak.h"

void run_peak_init(RunPeak *p, const TrainOptions *o, Backend *be, int rank) {
    memset(p, 0, sizeof *p);
    p->gflops = o->peak_gflops;
    // MFU/HFU against the GEMM peak of the run's precision: a GPU's from its datasheet (the backend's
    // table), the CPU's measured (bf16: oneDNN's bf16 matmul).
    p->prec = precision_name((Precision)o->precision);
    p->cpu_device = strncmp(be->name, "cpu", 3) == 0;
    snprintf(p->src, sizeof p->src, "%s", o->peak_gflops > 0 ? "--peak-gflops" : p->prec);
    if (p->gflops <= 0 && !p->cpu_device) {
        char src[160];
        p->gflops = be->peak_flops(be, (Precision)o->precision, src, sizeof src) * 1e-9;
        snprintf(p->src, sizeof p->src, "%s", src);
    }
    char why[512] = "";
    if (rank == 0 && p->cpu_device && p->gflops <= 0 &&
        peak_gflops_lookup(o->threads, p->prec, &p->gflops, why, sizeof why) != 0) {
        // MFU needs this machine's peak: measure it once (a few seconds) and cache it (`ctron peak`).
        if (why[0]) printf("note: %s\n", why);   // absurd or expired: measured again
        printf("measuring this machine's %s GEMM peak for MFU/HFU (once; cached, see `ctron peak --precision %s`)...\n",
               p->prec, p->prec);
        fflush(stdout);
        p->gflops = peak_gflops_measure_prec(o->threads, p->prec);
        char perr[256];
        char native[160];   // an emulated bf16 figure is this process's, not the CPU's: not cached
        int emulated = o->precision == PRECISION_BF16 && !gemm_bf16_native(native, sizeof native);
        if (!emulated && peak_gflops_store_prec(o->threads, p->prec, p->gflops, perr, sizeof perr) != 0)
            fprintf(stderr, "ctron train: note: the peak was not cached: %s\n", perr);
    }
}

void run_peak_raise(RunPeak *p, const TrainOptions *o, double observed) {
    if (!p->cpu_device) return;   // a GPU's peak is its datasheet's, never raised nor written to the CPU's cache
    if (!(p->gflops > 0) || !(observed > p->gflops)) return;
    if (o->peak_gflops > 0) {
        if (!p->raised)
            printf("note: a step ran at %.1f GFLOP/s per rank, above --peak-gflops %.1f: MFU/HFU read above 100 %%\n",
                   observed, p->gflops);
        p->raised = -1;
        return;
    }
    if (!p->raised)
        printf("note: a step ran at %.1f GFLOP/s per rank, above the cached GEMM peak %.1f (measured on a busy "
               "machine?): MFU/HFU use the higher figure from here on, and the cache keeps it\n", observed, p->gflops);
    p->raised = 1;
    p->gflops = observed;
}

void run_peak_store(const RunPeak *p, const TrainOptions *o) {
    if (p->raised != 1) return;   // the best this machine has shown (an emulated bf16 figure is not cached)
    char why[160], perr[256];
    if ((o->precision != PRECISION_BF16 || gemm_bf16_native(why, sizeof why)) &&
        peak_gflops_store_prec(o->threads, p->prec, p->gflops, perr, sizeof perr) != 0)
        fprintf(stderr, "ctron train: note: the raised peak was not cached: %s\n", perr);
}
