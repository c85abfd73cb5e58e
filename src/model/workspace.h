// The model's temporaries and their scopes. A temporary belongs to a scope: a block's forward or
// backward pass (key: the layer), the head, the embedding, or the whole backward (the running
// residual gradient). By default each has a buffer of its own for the run; with --static-plan it is
// recorded once and then placed by the plan (memory/step_mem.h) for the scope it is used in.
#ifndef CTRON_WORKSPACE_H
#define CTRON_WORKSPACE_H
#include "model/gpt.h"

enum { SCOPE_HEAD, SCOPE_EMB, SCOPE_BWD, SCOPE_KEYS };   // keys after the layers' (key = cfg.layers + SCOPE_*)
static inline int scope_key(const GPT *m, int scope) { return m->cfg.layers + scope; }

// Workspace buffer w for the running scope (the same place for every use within it).
float *ws(GPT *m, WorkName w);
void scope_begin(GPT *m, int key);
// The scope is over: its temporaries (and those of its layer, e.g. the block's input) are free.
void scope_end(GPT *m, int key);
// The scope a working copy of tensor `name` of `layer` belongs to (-1: the embedding's or the head's).
int tensor_scope(const GPT *m, ActName name, int layer);
// Plan tags: saved tensors by ActName, working copies TAG_WORK + name, workspace TAG_WS + WorkName.
enum { TAG_WORK = 100, TAG_WS = 200 };
const char *mem_tag_name(int tag);

// What --static-plan found: the training micro-batch's and the evaluation forward's plans (every
// saved tensor and temporary of one step), and the default layout it replaces.
typedef struct {
    int buffers, saved, temporaries;   // of the training step
    size_t peak, lower_bound, naive_sum;   // of the training step: the plan, the most bytes live at once, no reuse
    size_t saved_at_peak;              // saved-tensor bytes live when the training step's live bytes peak
    size_t eval_peak, eval_lower_bound;
    size_t block;                      // the one block: the larger of the two peaks
    size_t default_bytes;              // what the default layout held: the arena and the workspace buffers
} StaticPlanReport;

// Records one training micro-batch (forward and backward) and one evaluation forward on these
// [seq, batch] tokens, solves the plans, frees the arena's storage and the workspace buffers, and
// places every later step in one block. Collective (every rank of a TP group calls it). Leaves the
// gradients zero. Every later step must have the model's [seq, batch] shape and targets.
StaticPlanReport gpt_plan_memory(GPT *m, const int32_t *tokens, const int32_t *targets, StepCtx ctx);
#endif
