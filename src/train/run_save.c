#include "train/run.h"
#include <stdio.h>
#include <string.h>
#include "model/lora_merge.h"
#include "train/sample.h"
#include "train/train_ckpt.h"
#include "train/train_dist.h"

// Rank 0 writes the model (gathered from its shards under TP, PP or ZeRO); every rank learns whether
// it worked.
int run_save(TrainRun *r, int step) {
    const TrainOptions *o = r->o;
    const GPT *m = &r->m;
    int index = ++r->saves, saved = 1;
    // A device the host cannot read (a GPU) writes through the gathered copy too: one host model.
    if (o->tp <= 1 && o->pp <= 1 && !r->zero && m->be->host_addressable && !m->base16) {   // (a bf16 base: widened)
        saved = r->rank != 0 ||
                train_ckpt_save(o, m, &r->opt, &r->sched, step, index, r->tokenizer_json, r->tokenizer_bytes) == 0;
    } else {   // the unsharded model and state, gathered for rank 0 to write
        // Only the ranks of dp group 0 receive the whole model; the others only send their pieces.
        GPT full;
        AdamW full_opt;
        memset(&full, 0, sizeof full);
        memset(&full_opt, 0, sizeof full_opt);
        if (r->grid.dp_group.rank == 0) {
            gpt_init_params(&full, &o->model);
            adamw_init(&full_opt, NULL, full.n_params, r->opt.beta1, r->opt.beta2, r->opt.eps, r->opt.weight_decay);
        }
        dist_gather_whole(m, &r->opt, r->zero, &r->grid, &full, &full_opt);
        if (r->rank == 0)
            saved = train_ckpt_save(o, &full, &full_opt, &r->sched, step, index, r->tokenizer_json,
                                    r->tokenizer_bytes) == 0;
        adamw_free(&full_opt);
        gpt_free(&full);
    }
    return run_all_ok(r->world, saved) ? 0 : -1;
}

void run_sample(TrainRun *r) {
    const TrainOptions *o = r->o;
    GPT full;
    memset(&full, 0, sizeof full);
    // rank 0 samples from the whole model (gathered by dp group 0), or from a host copy of a GPU's
    int gathered = o->tp > 1 || o->pp > 1 || !r->m.be->host_addressable || r->m.base16;
    if (gathered) {
        if (r->dp_rank == 0) gpt_init_params(&full, &o->model);
        dist_gather_whole(&r->m, NULL, NULL, &r->grid, &full, NULL);
    }
    if (r->rank == 0) {
        GPT *from = gathered ? &full : &r->m, merged;
        int lora = from->cfg.lora_rank > 0;
        if (lora) {   // the KV-cache block is the plain one: the adapters folded in, W + (α/r)·B·A
            GPTConfig bc = lora_base_config(&from->cfg);
            gpt_init_params(&merged, &bc);
            lora_to_plain(from, &merged, 1);
            from = &merged;
        }
        printf("sample (%d tokens, temperature 0.8, top-k 40%s):\n", o->sample_tokens, lora ? ", LoRA adapters merged" : "");
        sample_text(from, o->tokenizer_path ? &r->bpe : NULL, o->sample_prompt ? o->sample_prompt : "\n",
                    o->sample_tokens, 0.8f, 40, o->seed, stdout);
        if (lora) gpt_free(&merged);
    }
    if (gathered) gpt_free(&full);
}
