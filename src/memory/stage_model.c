#include "memory/stage_model.h"
#include "memory/memo_model.h"
#include "memory/param_count.h"
#include "memory/reversible_model.h"
#include <stdio.h>
#include <string.h>

static int chunk_layers(const StageLayout *lay) { return (int)(lay->sh.L / ((long)lay->p * lay->m)); }

int stage_layer_count(const StageLayout *lay) { return (int)(lay->sh.L / lay->p); }

int stage_layer(const StageLayout *lay, int i) {
    int lc = chunk_layers(lay);
    return (i / lc) * lay->p * lc + i % lc;
}

int stage_in_flight(const StageLayout *lay) {
    return lay->microbatches < lay->p ? (int)lay->microbatches : lay->p;
}

double stage_layer_factor(const StageLayout *lay) {
    double f = stage_in_flight(lay);
    // The interleaved warm-up runs (p−1)/m extra chunk-forwards ahead; with fewer than p micro-batches
    // there is no steady state to interleave.
    if (lay->m > 1 && lay->microbatches >= lay->p) f *= 1.0 + (double)(lay->p - 1) / ((double)lay->p * lay->m);
    return f;
}

int stage_policy_build(MemoryPolicy *pol, const StageLayout *lay, const char *recompute, const char *method,
                       int num_layers, const char *layer_list, char *err, size_t errlen) {
    int L = (int)lay->sh.L, lc = chunk_layers(lay);
    if (layer_list || lc == L || !recompute || strcmp(recompute, "full") != 0)
        return policy_build(pol, L, recompute, method, num_layers, layer_list, err, errlen);
    MemoryPolicy chunk = {.act_dtype = pol->act_dtype, .masks = pol->masks};
    char inner[256];
    if (policy_build(&chunk, lc, recompute, method, num_layers, NULL, inner, sizeof inner) != 0) {
        snprintf(err, errlen, "%s (with pipelining it counts the layers of one model chunk, L/(pp·interleave) = %d)",
                 inner, lc);
        policy_free(&chunk);
        return -1;
    }
    if (policy_build(pol, L, "none", NULL, 0, NULL, err, errlen) != 0) { policy_free(&chunk); return -1; }
    for (int l = 0; l < L; l++) {
        pol->kind[l] = chunk.kind[l % lc];
        pol->group_start[l] = l / lc * lc + chunk.group_start[l % lc];
    }
    policy_free(&chunk);
    return 0;
}

static int split_uneven(const StageLayout *lay, const StageSplit *sp) {
    return sp && (sp->first != 0 || sp->last != 0) && lay->p > 1;
}

// Layers of a stated first or last stage (STAGE_NO_LAYERS: none).
static long stated(int n) { return n > 0 ? n : 0; }

// The layers the stages without a stated count share, and how many such stages there are.
static void split_rest(const StageLayout *lay, const StageSplit *sp, long *rest, int *stages) {
    *rest = lay->sh.L - stated(sp->first) - stated(sp->last);
    *stages = lay->p - (sp->first != 0) - (sp->last != 0);
}

int stage_split_valid(const StageLayout *lay, const StageSplit *sp) {
    if (!split_uneven(lay, sp)) return lay->sh.L % ((long)lay->p * lay->m) == 0;
    long rest;
    int stages;
    split_rest(lay, sp, &rest, &stages);
    if (sp->first < STAGE_NO_LAYERS || sp->last < STAGE_NO_LAYERS || rest < 0 || stated(sp->first) % lay->m ||
        stated(sp->last) % lay->m)
        return 0;
    if (stages == 0) return rest == 0;
    // interleaved: each stage's layers split into m chunks of equal size
    return rest >= (long)stages * lay->m && rest % stages == 0 && (rest / stages) % lay->m == 0;
}

int stage_layers_split(const StageLayout *lay, const StageSplit *sp, int r) {
    if (!split_uneven(lay, sp)) return stage_layer_count(lay);
    if (r == 0 && sp->first != 0) return (int)stated(sp->first);
    if (r == lay->p - 1 && sp->last != 0) return (int)stated(sp->last);
    long rest;
    int stages;
    split_rest(lay, sp, &rest, &stages);
    return stages > 0 ? (int)(rest / stages) : 0;
}

int stage_layer_split(const StageLayout *lay, const StageSplit *sp, int r, int i) {
    if (!split_uneven(lay, sp)) return stage_layer_at(lay, r, i);
    int start = 0;
    for (int q = 0; q < r; q++) start += stage_layers_split(lay, sp, q);
    return start + i;
}

// Stage r's layers under the policy: bytes stored, the largest backward transient, bytes offloaded, and
// the most the backward's rebuilds add to the stored bytes. A chunk's backward runs top down, so when it
// rebuilds layer l the chunk's layers above l are already freed: under a mixed policy (full layers first)
// that is less than the largest transient.
static void stage_layer_bytes(const StageLayout *lay, const StageSplit *sp, const MemoryPolicy *pol, int r,
                              size_t *layers, size_t *working, size_t *offloaded, size_t *rebuild_over) {
    const ActShape *sh = &lay->sh;
    *layers = *working = *offloaded = *rebuild_over = 0;
    int ls = stage_layers_split(lay, sp, r);
    int per_chunk = split_uneven(lay, sp) || lay->m <= 1 ? ls : ls / lay->m;
    for (int c0 = 0; c0 < ls; c0 += per_chunk) {
        size_t chunk = 0, below = 0;
        for (int i = c0; i < c0 + per_chunk && i < ls; i++) chunk += act_layer_bytes(sh, pol, stage_layer_split(lay, sp, r, i));
        for (int i = c0; i < c0 + per_chunk && i < ls; i++) {
            int l = stage_layer_split(lay, sp, r, i);
            size_t bytes = act_layer_bytes(sh, pol, l), w = stage_recompute_working(sh, pol, l);
            below += bytes;
            *layers += bytes;
            if (pol && pol->offload) *offloaded += act_layer_offload_bytes(sh, pol, l);
            if (w > *working) *working = w;
            if (below + w > chunk && below + w - chunk > *rebuild_over) *rebuild_over = below + w - chunk;
        }
    }
}

size_t stage_recompute_working(const ActShape *sh, const MemoryPolicy *pol, int l) {
    if (sh->reversible && !(pol && pol->rev_store)) {   // one half-layer rebuilt at a time
        size_t attn = act_rev_half_bytes(sh, pol ? pol->tempo : 0, 1), mlp = act_rev_half_bytes(sh, pol ? pol->tempo : 0, 0);
        return attn > mlp ? attn : mlp;
    }
    LayerRecompute kind = pol ? pol->kind[l] : RECOMPUTE_NONE;
    if (kind == RECOMPUTE_SELECTIVE)
        return act_tensor_bytes(sh, ACT_ATTN_PROB) + act_tensor_bytes(sh, ACT_ATTN_MASK) +
               act_tensor_bytes(sh, ACT_ATTN_DROP);
    // As in act_peak_bytes: at a group's last layer the whole group is rebuilt on its checkpoint.
    return act_recompute_working_bytes(sh, pol, l);
}

static void first_stage_activations(const StageLayout *lay, const StageSplit *sp, const MemoryPolicy *pol,
                                    StageActivations *out) {
    const ActShape *sh = &lay->sh;
    size_t layers, working, offloaded, over;
    stage_layer_bytes(lay, sp, pol, 0, &layers, &working, &offloaded, &over);
    memset(out, 0, sizeof *out);
    out->layers = (double)layers * stage_layer_factor(lay);
    out->extras = (double)act_tensor_bytes(sh, ACT_EMB_MASK) * stage_in_flight(lay);
    if (lay->p == 1) out->extras = (double)act_model_extra_bytes(sh);
    out->extras += (double)act_offload_stage_bytes(sh, pol);   // --offload: the two stage slots, once
    out->extras += (double)act_memo_stage_bytes(sh, pol);      // --memo: its two stage slots, once
    out->offloaded = (double)offloaded * stage_layer_factor(lay);
    out->memo_pool = (double)act_memo_pool_bytes(sh, pol);
    out->held = out->layers + out->extras;
    out->working = (double)working;
    out->rebuild_over = (double)over;
    out->peak = lay->p == 1 ? (double)act_peak_bytes(sh, pol) : out->held + out->rebuild_over;
}

void stage_activations(const StageLayout *lay, const MemoryPolicy *pol, StageActivations *out) {
    first_stage_activations(lay, NULL, pol, out);
}

double stage_paper_extra_bytes(const StageLayout *lay) {
    const ActShape *sh = &lay->sh;
    double sbh = (double)sh->s * sh->b * sh->h, t = sh->t > 1 ? sh->t : 1;
    double extra = sbh * lay->p / t;
    if (lay->p == 1) extra += 4.0 * sbh / t * (1.0 + (double)sh->v / sh->h);
    return extra;
}

// The vocabulary-sized matrix on one rank: v·h/t (the paper's accounting, unpadded).
static double vocab_matrix(const ActShape *sh) { return (double)sh->v * (double)sh->h / (sh->t > 1 ? sh->t : 1); }

static double first_stage_params(const StageLayout *lay, const StageSplit *sp) {
    const ActShape *sh = &lay->sh;
    double n = stage_layers_split(lay, sp, 0) * (double)param_layer_count(sh) + vocab_matrix(sh) +
               (double)param_position_count(sh);
    if (lay->p == 1) n += (double)param_final_norm_count(sh) + (param_vocab_matrices(sh) - 1) * vocab_matrix(sh);
    return n;
}

int stage_layer_at(const StageLayout *lay, int r, int i) {
    int lc = chunk_layers(lay);
    return ((i / lc) * lay->p + r) * lc + i % lc;
}

double stage_layer_factor_at(const StageLayout *lay, int r) {
    if (r == 0) return stage_layer_factor(lay);
    long n = lay->microbatches;
    if (lay->m > 1 && n >= lay->p) {
        double chunks = 2.0 * (lay->p - r - 1) + (double)(lay->m - 1) * lay->p + 1.0;
        if (chunks > (double)n * lay->m) chunks = (double)n * lay->m;
        return chunks / lay->m;
    }
    return (double)(lay->p - r < n ? lay->p - r : n);
}

void stage_activations_at(const StageLayout *lay, const MemoryPolicy *pol, int r, StageActivations *out) {
    stage_activations_split(lay, NULL, pol, r, out);
}

void stage_activations_split(const StageLayout *lay, const StageSplit *sp, const MemoryPolicy *pol, int r,
                             StageActivations *out) {
    if (r == 0 || lay->p == 1) {
        first_stage_activations(lay, sp, pol, out);
        return;
    }
    const ActShape *sh = &lay->sh;
    size_t layers, working, offloaded, over;
    stage_layer_bytes(lay, sp, pol, r, &layers, &working, &offloaded, &over);
    double factor = stage_layer_factor_at(lay, r);
    memset(out, 0, sizeof *out);
    out->layers = (double)layers * factor;
    if (r == lay->p - 1)
        out->extras = (double)(act_tensor_bytes(sh, ACT_LNF_IN) + act_tensor_bytes(sh, ACT_LNF_STATS) +
                               act_tensor_bytes(sh, ACT_LM_IN) + act_tensor_bytes(sh, ACT_LOGITS) +
                               act_tensor_bytes(sh, ACT_LM_GRAD));
    out->extras += (double)act_offload_stage_bytes(sh, pol);
    out->offloaded = (double)offloaded * factor;
    out->held = out->layers + out->extras;
    out->working = (double)working;
    out->rebuild_over = (double)over;
    out->peak = out->held + out->rebuild_over;
}

double stage_param_count(const StageLayout *lay) { return first_stage_params(lay, NULL); }

double stage_param_count_at(const StageLayout *lay, int r) { return stage_param_count_split(lay, NULL, r); }

double stage_param_count_split(const StageLayout *lay, const StageSplit *sp, int r) {
    if (r == 0) return first_stage_params(lay, sp);
    const ActShape *sh = &lay->sh;
    double n = stage_layers_split(lay, sp, r) * (double)param_layer_count(sh);
    // the last stage's output layer: its own lm_head, or its copy of the tied embedding
    if (r == lay->p - 1) n += (double)param_final_norm_count(sh) + vocab_matrix(sh);
    return n;
}
