// One rank of the first pipeline stage: which layers it holds, how many micro-batches it keeps in
// flight (the paper's Eq. 5 and the interleaved factor), its activation bill on top of the per-layer
// model (memory_model.h), and its parameters and optimizer state.
#ifndef CTRON_STAGE_MODEL_H
#define CTRON_STAGE_MODEL_H
#include <stddef.h>
#include "memory/memory_model.h"

typedef struct {
    ActShape sh;        // one micro-batch on one tensor-parallel rank; sh.L is the whole model
    int p;              // pipeline stages
    int m;              // interleaved model chunks per stage (1: plain 1F1B)
    long microbatches;  // micro-batches per pipeline per iteration: B / (b · dp)
} StageLayout;

// The first stage holds chunks 0, p, 2p, … of L/(pm) layers each (chunk c = layers c·L/(pm) …).
int stage_layer_count(const StageLayout *lay);              // L / p
int stage_layer(const StageLayout *lay, int i);             // global index of its i-th layer
int stage_in_flight(const StageLayout *lay);                // micro-batches started, not finished: min(p, n)
// Micro-batches' worth of the stage's layers held at once: p for 1F1B, × (1 + (p−1)/(pm)) interleaved.
double stage_layer_factor(const StageLayout *lay);

// Megatron's semantics under pipelining: --recompute-method/--recompute-num-layers apply within each
// model chunk of L/(pm) layers (uniform groups never straddle stages; block recomputes the first N of
// every chunk); an explicit list names every layer of the model. Returns 0 or -1 with err.
int stage_policy_build(MemoryPolicy *pol, const StageLayout *lay, const char *recompute, const char *method,
                       int num_layers, const char *layer_list, char *err, size_t errlen);

typedef struct {
    double layers;     // its layers' bytes × stage_layer_factor
    double extras;     // embedding mask × in flight; with p = 1 also final LN, output-layer input, logits;
                       // with --offload or --memo the stage slots
    double held;       // layers + extras: the most any point of the forward keeps
    double working;    // the largest transient backward recomputes (one layer's attention core or a group)
    double rebuild_over;  // the most that transient adds to `held`: rebuilding layer l, the layers above it
                          // in its chunk are freed (= working under a uniform policy, less under a mixed one)
    double peak;       // p = 1: act_peak_bytes exactly; p > 1: held + rebuild_over (an upper bound)
    double offloaded;  // --offload: its layers' bytes in the offload pool × stage_layer_factor (off the device)
    double memo_pool;  // --memo: its memo layers' swapped slices in the host pool (off the device)
} StageActivations;

// What backward rebuilds on top of the stored bytes when it reaches layer l (0 for none).
size_t stage_recompute_working(const ActShape *sh, const MemoryPolicy *pol, int l);
void stage_activations(const StageLayout *lay, const MemoryPolicy *pol, StageActivations *out);
// The paper's extra term, (sbhL/t)(p/L + δ_{p=1}(4/L)(1 + v/h)), bytes.
double stage_paper_extra_bytes(const StageLayout *lay);

// Parameters on one rank of the first stage: L/p layers (memory/param_count.h: GPT-2's 12h²/t + 7h/t + 6h,
// QKV, Proj, FC1, FC2 weights and the column-parallel biases sharded, Proj/FC2 biases and LayerNorms
// replicated; llama's q, k, v, o, gate, up, down and RMSNorms), the vocabulary-parallel token embedding
// vh/t, GPT-2's position embedding sh, and with p = 1 the final norm and an untied output layer vh/t.
double stage_param_count(const StageLayout *lay);

// Every stage r of p (0 = the first; the functions above are r = 0). Stage r holds chunks r, r + p,
// r + 2p, …. Under 1F1B it keeps min(p − r, n) micro-batches in flight; interleaved, Megatron's
// warm-up runs 2(p − r − 1) + (m − 1)p chunk-forwards before the first backward, so it keeps
// 2(p − r − 1) + (m − 1)p + 1 chunk-micro-batches of L/(pm) layers (for r = 0 this is
// p(1 + (p−1)/(pm)) stage-layers' worth, Eq. 5's factor). The first stage holds the most.
int stage_layer_at(const StageLayout *lay, int r, int i);   // global index of stage r's i-th layer

// Uneven stages (Megatron's --decoder-first/last-pipeline-num-layers): the layers of the first and the
// last stage, 0 for an even share; the other stages split the rest evenly; interleaved, each stage's
// layers form m equal chunks. A NULL split, or both 0, is the even layout of the functions above.
// STAGE_NO_LAYERS: the stage holds no transformer layer, only the embedding (first) or the head
// (last): a stage of its own, as Megatron's --pipeline-model-parallel-layout "E|…" and "…|L" write it.
typedef struct { int first, last; } StageSplit;
enum { STAGE_NO_LAYERS = -1 };
// Does the split work: every chunk at least one layer, the rest divisible by the other stages, every
// stage's layers by m?
int stage_split_valid(const StageLayout *lay, const StageSplit *split);
int stage_layers_split(const StageLayout *lay, const StageSplit *split, int r);          // layers of stage r
int stage_layer_split(const StageLayout *lay, const StageSplit *split, int r, int i);    // its i-th layer's index
void stage_activations_split(const StageLayout *lay, const StageSplit *split, const MemoryPolicy *pol, int r,
                             StageActivations *out);
double stage_param_count_split(const StageLayout *lay, const StageSplit *split, int r);
double stage_layer_factor_at(const StageLayout *lay, int r);
// As stage_activations, for stage r: the first stage adds the embedding dropout mask for its
// in-flight micro-batches; the last stage (p > 1) the final LN input and statistics, the output-
// layer input and the logits of the one micro-batch whose forward and backward it runs back to back.
void stage_activations_at(const StageLayout *lay, const MemoryPolicy *pol, int r, StageActivations *out);
// Parameters of stage r: its layers; the first stage the token and position embeddings; the last
// the final norm and (p > 1) its output layer vh/t: an untied lm_head, or its own copy of the tied
// embedding, as Megatron keeps it (the same count).
double stage_param_count_at(const StageLayout *lay, int r);
#endif
