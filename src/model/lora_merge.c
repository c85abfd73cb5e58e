#include "model/lora_merge.h"
#include <cblas.h>
#include <stdio.h>
#include <string.h>
#include "util/common.h"

GPTConfig lora_base_config(const GPTConfig *c) {
    GPTConfig b = *c;
    b.lora_rank = 0;
    b.lora_alpha = 0.0f;
    b.lora_targets = 0;
    b.lora_fa = 0;
    b.lora_rslora = 0;
    return b;
}

float *lora_tensor_data(const GPT *m, const ParamInfo *pi) {
    int trainable = pi >= m->info && pi < m->info + m->n_info;
    return (trainable ? m->params : m->frozen) + pi->offset;
}

// peft's "base_model.model.<module path>.lora_A.weight" names the base linear "<module path>.weight";
// ctron's GPT-2 names drop HF's "transformer." as well.
const ParamInfo *lora_base_weight(const GPT *plain, LoraSite s, int layer) {
    char name[160];
    lora_param_name(gpt_lora_family(&plain->cfg), s, layer, 'A', name, sizeof name);
    char *tail = strstr(name, ".lora_A.weight");
    if (!tail || strncmp(name, "base_model.model.", 17) != 0) return NULL;
    snprintf(tail, sizeof name - (size_t)(tail - name), ".weight");
    const char *path = name + 17;
    const ParamInfo *pi = gpt_find_param(plain, path);
    const char *dot = strchr(path, '.');
    return pi || !dot ? pi : gpt_find_param(plain, dot + 1);
}

static const ParamInfo *adapter(const GPT *lora, LoraSite s, int layer, char which) {
    char name[160];
    lora_param_name(gpt_lora_family(&lora->cfg), s, layer, which, name, sizeof name);
    const ParamInfo *pi = gpt_find_param(lora, name);
    if (!pi) ctron_fatal("lora_to_plain: no adapter '%s'", name);
    return pi;
}

void lora_to_plain(const GPT *lora, GPT *plain, int merge) {
    for (int i = 0; i < plain->n_info; i++) {
        const ParamInfo *pi = &plain->info[i], *li = gpt_info_by_full_index(lora, pi->full_index);
        if (!li || li->numel != pi->numel || strcmp(li->name, pi->name) != 0)
            ctron_fatal("lora_to_plain: '%s' is not the LoRA model's base tensor", pi->name);
        memcpy(plain->params + pi->offset, lora_tensor_data(lora, li), pi->numel * sizeof(float));
    }
    if (merge) lora_merge_adapters(lora, plain, plain->params);
    gpt_params_changed(plain);
}

void lora_merge_adapters(const GPT *lora, const GPT *plain, float *params) {
    if (lora->cfg.lora_rank > 0) {
        int r = lora->cfg.lora_rank;
        float scale = gpt_lora_scale(&lora->cfg);
        for (int s = 0; s < LORA_SITES; s++) {
            if (!(lora->cfg.lora_targets >> s & 1u)) continue;
            for (int l = 0; l < lora->cfg.layers; l++) {
                const ParamInfo *w = lora_base_weight(plain, (LoraSite)s, l), *a = adapter(lora, (LoraSite)s, l, 'A'),
                                *b = adapter(lora, (LoraSite)s, l, 'B');
                if (!w) ctron_fatal("lora_to_plain: no base weight for site %d of layer %d", s, l);
                int out = w->shape[0], in = w->shape[1];   // W [out, in] += scale · B [out, r] · A [r, in]
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, out, in, r, scale, lora_tensor_data(lora, b), r,
                            lora_tensor_data(lora, a), in, 1.0f, params + w->offset, in);
            }
        }
    }
}
