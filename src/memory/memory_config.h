// Everything `ctron memory` reports about one model and layout, computed in one place so that the
// text, the JSON, the SVG and the tests read the same numbers.
#ifndef CTRON_MEMORY_CONFIG_H
#define CTRON_MEMORY_CONFIG_H
#include "memory/stage_model.h"
#include "memory/techniques.h"

typedef struct {
    char name[32];             // preset name, or "custom"
    char label[128];           // one line describing it
    StageLayout lay;           // shape, t, sp, p, m, precision, masks, micro-batches per pipeline
    MemoryPolicy policy;       // over all L layers
    double dropout;            // probability (0: no masks are kept)
    long global_batch;         // B, sequences per iteration
    int gpus;                  // t · p · dp
    double iter_time;          // seconds per iteration; 0 when unknown (no MFU/HFU)
    int iter_time_from_paper;  // iter_time is Table 5's measurement for this configuration
    double peak_tflops;        // per GPU
} MemoryConfig;

typedef struct {
    size_t tech_layer[TECH_COUNT];  // the paper's per-layer bytes for each technique
    int tech_ok[TECH_COUNT];        // 0 when the technique does not apply (SP needs t | s)
    double tech_pct[TECH_COUNT];    // percent of the TP baseline
    StageActivations act;           // this configuration on the first stage
    double paper_extra;             // the paper's extra term for this layout
    double params;                  // on one rank of the first stage (the base, without LoRA's adapters)
    double adapters, trainable;     // LoRA: the adapters' parameters, and those that train (all of them, or
                                    // LoRA-FA's B); without LoRA 0 and params
    double param_bytes, grad_bytes, adam_bytes, state_bytes;  // fp32: 4, 4, 8 bytes per parameter
    double total_bytes;             // activation peak + state
    int dp;                         // data-parallel size gpus / (t · p)
    double model_flops, hw_flops;   // per iteration (Eq. 7; with what the policy recomputes)
    double mfu, hfu;                // fractions; < 0 when the iteration time is unknown
} MemorySummary;

void memory_summarize(const MemoryConfig *c, MemorySummary *out);
// The weights term of the first stage on one TP rank: the base at 4 B per element (2 B when LoRA's frozen
// base is stored in bf16, sh.base_bf16) and LoRA's adapters at 4 B. ctron train's weights, measured
// (gpt_weight_bytes) at --precision fp32, equal it; mixed precision's bf16 copies are not in the model.
double memory_weight_bytes(const StageLayout *lay);
#endif
