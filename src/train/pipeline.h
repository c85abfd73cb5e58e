// The pipeline executor (DESIGN.md §9): runs this rank's schedule of (micro-batch, chunk, forward |
// backward) units, each in its activation context, with the activations and their gradients moving
// between stages point to point (non-blocking sends; a receive waits, and the wait is the bubble).
// With one stage the same code runs GPipe or layered gradient accumulation on one process: a chunk's
// output then waits in a local mailbox for the next chunk.
#ifndef CTRON_PIPELINE_H
#define CTRON_PIPELINE_H
#include <stddef.h>
#include <stdint.h>
#include "data/dataset.h"
#include "model/gpt.h"
#include "parallel/comm.h"
#include "train/phase_marks.h"
#include "train/pipe_schedule.h"

// A boundary tensor [s_rank·b, h] on its way: sent to another stage (req), or kept for this rank's
// own next chunk (tag ≥ 0 until it is taken).
typedef struct {
    float *data;
    CommRequest req;
    int sending;
    int local_tag;
} PipeBuf;

typedef struct {
    PipeSpec spec;
    int stage;
    CommGroup *pp;                // the pipeline group (a group of one when p = 1)
    CommGroup *dp;                // layered: where each layer's gradient is reduced as soon as it is complete
    int reduce_layers;            // layered with data parallelism (and no ZeRO): reduce per layer
    PipeUnit *units;
    int *slot_of;
    int n_units, contexts;
    size_t act_floats;            // one boundary tensor: s_rank·b·h floats
    Backend *be;                  // the model's: boundary tensors are device tensors (set on first use)
    float *recv;                  // the input or gradient being received
    PipeBuf *bufs;
    int n_bufs;
    CommRequest *layer_reqs;      // layered: the per-layer all-reduces in flight
    int n_layer_reqs, cap_layer_reqs;
    int32_t *tokens, *targets;    // [m][s·b]: this step's micro-batches (host_alloc, on first use)
    size_t step_tokens;           // m·s·b
    // This step: seconds blocked on receives (the bubble), computing, and per direction (fwd_s, bwd_s:
    // the device's, from the step's PhaseMarks, set by the trainer after the step's wait).
    double wait_s, fwd_s, bwd_s;
} Pipeline;

// Sets up the schedule of `stage` (the spec was checked by pipe_spec_init). s_rank·b·h floats cross a
// boundary. Returns the number of activation contexts the stage needs (pl->contexts).
int pipeline_init(Pipeline *pl, const PipeSpec *spec, int stage, CommGroup *pp, CommGroup *dp, int reduce_layers,
                  int s, int b, size_t act_floats);
// Before gpt_free: the buffers go back to the model's backend.
void pipeline_free(Pipeline *pl);

typedef struct {
    uint64_t seed;
    int step;
    uint32_t sample0;             // the rank's first sequence of the step (dp_rank · batch · m)
    uint32_t samples_per_step;    // sequences of the whole step (every dp group)
    DataOrder order;
    float grad_scale;
    PhaseMarks *marks;            // each unit's forward or backward, timed on the device
} PipeStep;

// One training step's forwards and backwards on this rank; gradients accumulate in m->grads. Returns
// Σ loss over the rows of the micro-batches (the last stage; 0 elsewhere).
double pipeline_train_step(Pipeline *pl, GPT *m, const Dataset *ds, const PipeStep *st);
// Layered with data parallelism: waits for the per-layer all-reduces and sums the gradients of the
// tensors outside the layers (embeddings, final LN) over dp.
void pipeline_finish_dp(Pipeline *pl, GPT *m);
// The loss of one evaluation batch through every stage (forward only), on every rank of the pipeline.
double pipeline_eval_batch(Pipeline *pl, GPT *m, const int32_t *tokens, const int32_t *targets, int s, int b);
// Bytes of the send buffers and the receive buffer (outside the ledger: nothing the backward reads).
size_t pipeline_buffer_bytes(const Pipeline *pl);
#endif
