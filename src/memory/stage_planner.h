// The per-stage budget planner (`ctron plan --pp`, DESIGN.md §9): under a pipeline schedule each rank
// holds its own number of micro-batches in flight (the first stage the most), so each stage gets its own
// recompute plan for one per-rank activation budget. The result is one whole-model MemoryPolicy that
// every rank computes identically (stage r's layers take stage r's choice).
//
// The candidates are memory/planner.h's family, per stage: of the stage's layers, in its local chunk
// order (chunk 0 first: under interleaving it has the most contexts in flight), the first F full (each
// its own group, so none straddles a chunk), the next S selective, the rest none. Restricted:
//  - dropout-mask storage, Tempo, mini-seq and flash attention are one value for the whole model (the
//    policy carries one), chosen for the slowest stage: the fewest recompute FLOPs of the stage that
//    recomputes most (the pipeline runs at its pace), then the fewest in all, then the fewest passes;
//  - the attention scratch is sized by gpt_init from the whole model's policy (selective's 3s² per
//    thread as soon as any layer is selective), so a plan either allows selective on every stage and
//    every stage pays that scratch, or allows it on none;
//  - no offload (the pool and its stage slots are a single-process design) and no
//    --recompute-microbatches (every context follows the plan).
#ifndef CTRON_STAGE_PLANNER_H
#define CTRON_STAGE_PLANNER_H
#include <stddef.h>
#include "backend/backend.h"
#include "memory/memory_model.h"
#include "train/pipe_schedule.h"

#define STAGE_PLAN_MAX_STAGES 64

typedef struct {
    int p;                                         // stages planned
    int n_layers;                                  // layers per stage, L/p
    int n_full[STAGE_PLAN_MAX_STAGES];             // stage r: full-recompute layers
    int n_sel[STAGE_PLAN_MAX_STAGES];              //          selective layers (the rest keep everything)
    size_t peak[STAGE_PLAN_MAX_STAGES];            //          pipe_rank_act_peak under the plan
    double extra_flops[STAGE_PLAN_MAX_STAGES];     //          recompute FLOPs per micro-batch on one rank
    double model_flops[STAGE_PLAN_MAX_STAGES];     //          its layers' (and head's) Eq. 7 FLOPs, the same
    size_t scratch_bytes;                          // attention backward scratch, all threads (every rank)
    size_t gemm_scratch_bytes;                     // bf16 GEMM operand scratch (0 under fp32)
    MaskMode masks;
    unsigned tempo;                                // TEMPO_* parts, MINI_SEQ, ATTN_FLASH
    ActShape shape;                                // the shape the bytes are counted with (the chosen masks
                                                   // and mini-seq chunks): pass it to pipe_rank_act_peak
    int fits;                                      // every stage: peak + scratch + GEMM scratch ≤ budget
} StagePlan;

// Plans each pipeline stage for its own activation budget: stage r gets the cheapest (fewest recompute
// FLOPs) policy for its own layers such that pipe_rank_act_peak(r) + the attention/GEMM scratch of the
// planner ≤ budget. The first stage, holding the most micro-batches, may recompute more than the last.
// sh: the shape and layout (s, b, h, a, L, v, e, dropout, t, sp; masks are chosen here). out is
// allocated (policy_free it). Returns 0 when every stage fits; −1 with the least-memory plan in out and
// report, and a message in err naming a stage that does not fit and the least bytes it needs. Also −1
// (out untouched) when spec->p > STAGE_PLAN_MAX_STAGES.
// be, threads: who sizes the attention scratch (plan_attention_scratch_bytes; be NULL: the CPU's).
int stage_plan_memory(const PipeSpec *spec, const ActShape *sh, Precision precision, Backend *be, int threads,
                      double budget, MemoryPolicy *out, StagePlan *report, char *err, size_t errlen);

// The policy as the --recompute-layers list that reproduces it ("0-1:full,2-5:none,6:full,…"; each
// full layer of a list is its own group, as the plan's are).
void stage_plan_layer_list(const MemoryPolicy *p, char *buf, size_t len);
// The ctron train flags of the plan: the pipeline (--pp, --pp-schedule, --virtual-stages, --grad-accum),
// the whole-model --recompute-layers list, masks, Tempo, mini-seq, flash.
void stage_plan_flags(const PipeSpec *spec, const MemoryPolicy *p, char *buf, size_t len);
#endif
