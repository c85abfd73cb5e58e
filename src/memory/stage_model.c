#include "memory/stage_model.h"
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

void stage_activations(const StageLayout *lay, const MemoryPolicy *pol, StageActivations *out) {
    const ActShape *sh = &lay->sh;
    size_t layers = 0, working = 0, offloaded = 0;
    for (int i = 0; i < stage_layer_count(lay); i++) {
        int l = stage_layer(lay, i);
        layers += act_layer_bytes(sh, pol, l);
        if (pol && pol->offload) offloaded += act_layer_offload_bytes(sh, pol, l);
        size_t w = stage_recompute_working(sh, pol, l);
        if (w > working) working = w;
    }
    memset(out, 0, sizeof *out);
    out->layers = (double)layers * stage_layer_factor(lay);
    out->extras = (double)act_tensor_bytes(sh, ACT_EMB_MASK) * stage_in_flight(lay);
    if (lay->p == 1) out->extras = (double)act_model_extra_bytes(sh);
    out->extras += (double)act_offload_stage_bytes(sh, pol);   // --offload: the two stage slots, once
    out->offloaded = (double)offloaded * stage_layer_factor(lay);
    out->held = out->layers + out->extras;
    out->working = (double)working;
    out->peak = lay->p == 1 ? (double)act_peak_bytes(sh, pol) : out->held + out->working;
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

double stage_param_count(const StageLayout *lay) {
    const ActShape *sh = &lay->sh;
    double n = stage_layer_count(lay) * (double)param_layer_count(sh) + vocab_matrix(sh) + (double)param_position_count(sh);
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
    if (r == 0 || lay->p == 1) {
        stage_activations(lay, pol, out);
        return;
    }
    const ActShape *sh = &lay->sh;
    size_t layers = 0, working = 0, offloaded = 0;
    for (int i = 0; i < stage_layer_count(lay); i++) {
        int l = stage_layer_at(lay, r, i);
        layers += act_layer_bytes(sh, pol, l);
        if (pol && pol->offload) offloaded += act_layer_offload_bytes(sh, pol, l);
        size_t w = stage_recompute_working(sh, pol, l);
        if (w > working) working = w;
    }
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
    out->peak = out->held + out->working;
}

double stage_param_count_at(const StageLayout *lay, int r) {
    if (r == 0) return stage_param_count(lay);
    const ActShape *sh = &lay->sh;
    double n = stage_layer_count(lay) * (double)param_layer_count(sh);
    // the last stage's output layer: its own lm_head, or its copy of the tied embedding
    if (r == lay->p - 1) n += (double)param_final_norm_count(sh) + vocab_matrix(sh);
    return n;
}
