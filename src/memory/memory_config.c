#include "memory/memory_config.h"
#include <string.h>
#include "memory/flops.h"
#include "memory/param_count.h"
#include "memory/reversible_model.h"

double memory_weight_bytes(const StageLayout *lay) {
    const ActShape *sh = &lay->sh;
    double layers = stage_layer_count(lay);
    double adapters = layers * (double)(param_lora_layer_count(sh, 0) + param_lora_layer_count(sh, 1));
    double base = sh->lora_rank > 0 && sh->base_bf16 ? 2.0 : 4.0;   // --base-dtype bf16: the frozen base
    // The vocabulary-sized matrices hold ⌈v/t⌉ rows on every rank (the last rank's padded with zeros), not
    // stage_param_count's v/t: the embedding, and with one stage an untied output layer.
    int t = sh->t > 1 ? sh->t : 1, matrices = 1 + (lay->p == 1 ? param_vocab_matrices(sh) - 1 : 0);
    double pad = ((double)((sh->v + t - 1) / t) - (double)sh->v / t) * (double)sh->h * matrices;
    return base * (stage_param_count(lay) + pad) + 4.0 * adapters;
}

void memory_summarize(const MemoryConfig *c, MemorySummary *out) {
    const ActShape *sh = &c->lay.sh;
    memset(out, 0, sizeof *out);
    for (int k = 0; k < TECH_COUNT; k++) {
        out->tech_ok[k] = technique_applies(sh->s, sh->t, (Technique)k);
        out->tech_layer[k] = technique_layer_bytes_block(sh, (Technique)k);
    }
    for (int k = 0; k < TECH_COUNT; k++)
        out->tech_pct[k] = 100.0 * (double)out->tech_layer[k] / (double)out->tech_layer[TECH_TP];

    stage_activations(&c->lay, &c->policy, &out->act);
    out->paper_extra = stage_paper_extra_bytes(&c->lay);

    // ctron keeps parameters, gradients and AdamW's m and v in fp32 (DESIGN.md §1), unsharded over
    // data parallelism (no ZeRO / distributed optimizer).
    // LoRA: the base is frozen (fp32 weights, or bf16 under --base-dtype bf16; no gradient, no AdamW state);
    // only the adapters (fp32) that train
    // (A and B, or LoRA-FA's B) have gradients and moments.
    out->params = stage_param_count(&c->lay);
    double layers = stage_layer_count(&c->lay);
    double a = layers * (double)param_lora_layer_count(sh, 0), b = layers * (double)param_lora_layer_count(sh, 1);
    out->adapters = a + b;
    out->trainable = sh->lora_rank > 0 ? ((c->policy.tempo & LORA_FA) ? b : a + b) : out->params;
    out->param_bytes = memory_weight_bytes(&c->lay);
    out->grad_bytes = 4.0 * out->trainable;
    out->adam_bytes = 8.0 * out->trainable;
    out->state_bytes = out->param_bytes + out->grad_bytes + out->adam_bytes;
    out->total_bytes = out->act.peak + out->state_bytes;

    int tp = sh->t > 1 ? sh->t : 1;
    out->dp = c->gpus / (tp * c->lay.p);
    double B = (double)c->global_batch;
    FlopBlock blk = flops_block_of(sh);
    out->model_flops = flops_model_block(B, (double)sh->L, (double)sh->s, (double)sh->h, (double)sh->v, &blk);
    out->hw_flops = flops_hardware_block(B, (double)sh->s, (double)sh->h, (double)sh->v, &c->policy, (int)sh->L, 0, &blk) +
                    flops_rev_recompute(B, sh, &c->policy);
    out->mfu = out->hfu = -1.0;
    if (c->iter_time > 0 && c->gpus > 0 && c->peak_tflops > 0) {
        double capacity = c->iter_time * c->gpus * c->peak_tflops * 1e12;
        out->mfu = out->model_flops / capacity;
        out->hfu = out->hw_flops / capacity;
    }
}
