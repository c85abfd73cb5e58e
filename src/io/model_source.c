#include "io/model_source.h"
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "io/hf_load.h"
#include "io/peft_adapter.h"
#include "model/lora_merge.h"
#include "util/common.h"

int model_source_open(const char *path, ModelSource *src, char *err, size_t errlen) {
    memset(src, 0, sizeof *src);
    snprintf(src->path, sizeof src->path, "%s", path);
    if (hf_is_model_dir(path)) {
        src->is_hf = 1;
        if (hf_dir_config(path, &src->hf, err, errlen) != 0) return -1;
        src->cfg = src->hf.model;
        src->positions = src->cfg.arch == ARCH_GPT2 ? src->hf.max_positions : 0;
        src->cfg.seq = src->hf.max_positions;
        src->precision = PRECISION_FP32;
        char tok[4200];
        struct stat sb;
        snprintf(tok, sizeof tok, "%s/tokenizer.json", path);
        if (stat(tok, &sb) == 0) snprintf(src->tokenizer, sizeof src->tokenizer, "%s", tok);
        return 0;
    }
    int found = ckpt_resolve(path, src->path, sizeof src->path, NULL, 0, err, errlen);
    if (found == -1) {
        char inner[1024];
        snprintf(inner, sizeof inner, "%s", err);
        snprintf(err, errlen, "%s; nor is it a Hugging Face model directory (it has no config.json)", inner);
    }
    if (found != 0) return found;
    if (ckpt_read_state(src->path, &src->state, err, errlen) != 0) return -1;
    src->cfg = lora_base_config(&src->state.model);   // a LoRA checkpoint gives its merged model
    if (src->cfg.reversible) {
        snprintf(err, errlen, "checkpoint '%s' is a reversible-block model (model.reversible in its state.json): only "
                 "ctron train --resume runs it; eval, generate and --init-from compute the standard block", src->path);
        return -1;
    }
    gpt_config_resolve(&src->cfg);
    src->positions = src->cfg.arch == ARCH_GPT2 ? src->cfg.seq : 0;
    src->precision = src->state.precision;
    snprintf(src->tokenizer, sizeof src->tokenizer, "%s", src->state.tokenizer_path);
    return 0;
}

int model_source_config(const ModelSource *src, int seq, int batch, GPTConfig *out, char *err, size_t errlen) {
    GPTConfig c = src->cfg;
    c.seq = seq;
    c.batch = batch;
    c.dropout = 0.0f;
    if (src->is_hf) {
        char cfg_path[4200];
        snprintf(cfg_path, sizeof cfg_path, "%s/config.json", src->path);
        if (hf_config_apply(&src->hf, &c, cfg_path, err, errlen) != 0) return -1;
    } else if (src->positions && seq > src->positions) {
        snprintf(err, errlen, "checkpoint '%s' has learned positions for %d tokens, not %d", src->path, src->positions,
                 seq);
        return -1;
    }
    *out = c;
    return 0;
}

// A checkpoint is loaded at its own sequence length into a host model, then copied parameter by
// parameter (GPT-2's position table: its first seq rows) into m, or, when m is one TP/PP rank's part,
// into a whole host model at m's length that this rank's shards are cut from.
static int load_checkpoint(const ModelSource *src, GPT *m, char *err, size_t errlen) {
    GPT ck, merged, full;
    gpt_init_params(&ck, &src->state.model);
    int rc = ckpt_load(src->path, &ck, NULL, NULL, err, errlen), lora = ck.cfg.lora_rank > 0;
    const GPT *from = &ck;
    if (lora) {   // a LoRA checkpoint: its base with the adapters folded in (W + (α/r)·B·A)
        GPTConfig bc = lora_base_config(&ck.cfg);
        gpt_init_params(&merged, &bc);
        if (rc == 0) lora_to_plain(&ck, &merged, 1);
        from = &merged;
    }
    int whole = m->tp.t <= 1 && m->pp.p <= 1;
    GPT *dst = m;
    if (!whole) {
        gpt_init_params(&full, &m->cfg);
        dst = &full;
    }
    for (int i = 0; rc == 0 && i < dst->n_info; i++) {
        const ParamInfo *pi = &dst->info[i], *ci = gpt_find_param(from, pi->name);
        if (!ci || ci->numel < pi->numel) ctron_fatal("model_source: '%s' does not fit the checkpoint's model", pi->name);
        const float *x = from->params + ci->offset;
        if (whole && !m->be) memcpy(m->params + pi->offset, x, pi->numel * sizeof(float));   // a host model
        else if (whole) m->be->copy(m->be, m->params + pi->offset, x, pi->numel * sizeof(float), COPY_H2D);
        else memcpy(full.params + pi->offset, x, pi->numel * sizeof(float));
    }
    if (rc == 0 && !whole) gpt_shard_from_full(m, &full, full.params, m->params);
    if (!whole) gpt_free(&full);
    gpt_params_changed(m);
    if (lora) gpt_free(&merged);
    gpt_free(&ck);
    return rc;
}

int model_source_set_adapter(ModelSource *src, const char *dir, char *err, size_t errlen) {
    PeftConfig pc;
    if (peft_read_config(dir, gpt_lora_family(&src->cfg), &pc, err, errlen) != 0) return -1;
    snprintf(src->adapter, sizeof src->adapter, "%s", dir);
    return 0;
}

int model_source_load(const ModelSource *src, GPT *m, char *err, size_t errlen) {
    int rc = src->is_hf ? hf_load_into(m, src->path, err, errlen) : load_checkpoint(src, m, err, errlen);
    if (rc == 0 && src->adapter[0]) rc = peft_merge_into(m, src->adapter, err, errlen);
    return rc;
}
