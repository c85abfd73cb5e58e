// --init-from PATH: the run starts from a model users already have, a Hugging Face model directory
// or a ctron checkpoint (io/model_source.h). Its architecture replaces the command line's: a shape
// flag given beside it must agree, since a model cannot be loaded into another shape. The run's own
// choices (seq, batch, dropout, the optimizer, the layout, the policy) stay the command line's.
#include "cli/train_passes.h"
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "cli/args.h"
#include "io/model_source.h"

#define usage_error(...) args_error("train", __VA_ARGS__)

// The architecture flags, and the GPTConfig field each sets (resolved values are compared).
static const struct {
    const char *flag;
    size_t offset;
    int is_float;
} ARCH_FLAGS[] = {
    {"layers", offsetof(GPTConfig, layers), 0},        {"hidden", offsetof(GPTConfig, hidden), 0},
    {"heads", offsetof(GPTConfig, heads), 0},          {"vocab", offsetof(GPTConfig, vocab), 0},
    {"arch", offsetof(GPTConfig, arch), 0},            {"kv-heads", offsetof(GPTConfig, kv_heads), 0},
    {"head-dim", offsetof(GPTConfig, head_dim), 0},
    {"ffn-hidden", offsetof(GPTConfig, ffn), 0},       {"rope-theta", offsetof(GPTConfig, rope_theta), 1},
    {"norm-eps", offsetof(GPTConfig, norm_eps), 1},    {"tie-embeddings", offsetof(GPTConfig, tie_embeddings), 0},
    {"qkv-bias", offsetof(GPTConfig, qkv_bias), 0},    {"qk-norm", offsetof(GPTConfig, qk_norm), 0},
    {"fused-proj", offsetof(GPTConfig, fused_proj), 0}, {"sliding-window", offsetof(GPTConfig, sliding_window), 0},
    {"rotary-dim", offsetof(GPTConfig, rotary_dim), 0},   // (resolved: the head dim's width is 0, all of it)
};

static double field(const GPTConfig *c, int i) {
    const char *p = (const char *)c + ARCH_FLAGS[i].offset;
    if (ARCH_FLAGS[i].is_float) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    int v;
    memcpy(&v, p, sizeof v);
    return v;
}

static const char *value_text(const GPTConfig *c, int i, char *buf, size_t len) {
    if (strcmp(ARCH_FLAGS[i].flag, "arch") == 0) return arch_spec((ArchKind)c->arch)->name;
    if (strcmp(ARCH_FLAGS[i].flag, "tie-embeddings") == 0) return gpt_tied(c) ? "tied" : "untied";
    if (strcmp(ARCH_FLAGS[i].flag, "qkv-bias") == 0) return c->qkv_bias ? "q/k/v biases" : "no q/k/v biases";
    if (strcmp(ARCH_FLAGS[i].flag, "qk-norm") == 0) return c->qk_norm ? "q/k norms" : "no q/k norms";
    if (strcmp(ARCH_FLAGS[i].flag, "fused-proj") == 0)
        return c->fused_proj ? "fused qkv_proj, gate_up_proj" : "no fused projections";
    if (strcmp(ARCH_FLAGS[i].flag, "sliding-window") == 0 && !c->sliding_window) return "no sliding window";
    if (strcmp(ARCH_FLAGS[i].flag, "rotary-dim") == 0 && !c->rotary_dim) {
        snprintf(buf, len, "all %d dims", gpt_head_dim(c));
        return buf;
    }
    snprintf(buf, len, "%.9g", field(c, i));
    return buf;
}

int train_init_from(TrainOptions *o, const TrainGiven *given) {
    if (!o->init_from) return 0;
    if (o->resume)
        return usage_error("--init-from and --resume: a resumed run continues from its checkpoint's weights "
                           "(start a new run, with its own --ckpt-dir, to begin again from '%s')", o->init_from);
    static ModelSource src;   // 12 KB of paths: not on the stack
    char err[1024];
    if (model_source_open(o->init_from, &src, err, sizeof err) != 0) return usage_error("--init-from: %s", err);
    GPTConfig c;
    if (model_source_config(&src, o->model.seq, o->model.batch, &c, err, sizeof err) != 0)
        return usage_error("--init-from '%s' with --seq %d: %s", o->init_from, o->model.seq, err);
    GPTConfig asked = o->model;
    gpt_config_resolve(&asked);
    gpt_config_resolve(&c);
    for (int i = 0; i < (int)(sizeof ARCH_FLAGS / sizeof ARCH_FLAGS[0]); i++) {
        if (!train_given(given, ARCH_FLAGS[i].flag) || field(&asked, i) == field(&c, i)) continue;
        char a[32], b[32];
        // --rotary-dim as given (resolved, the head dim itself is 0: all dims)
        const GPTConfig *mine = strcmp(ARCH_FLAGS[i].flag, "rotary-dim") == 0 ? &o->model : &asked;
        return usage_error("--%s %s disagrees with the model --init-from names ('%s': %s): its shape comes "
                           "from there, leave the flag out", ARCH_FLAGS[i].flag, value_text(mine, i, a, sizeof a),
                           o->init_from, value_text(&c, i, b, sizeof b));
    }
    if (train_given(given, "rope-scaling") && memcmp(&asked.rope_scaling, &c.rope_scaling, sizeof c.rope_scaling))
        return usage_error("--rope-scaling %s disagrees with the model --init-from names ('%s': %s): its RoPE comes "
                           "from there, leave the flag out", rope_scaling_label(&asked.rope_scaling, (char[96]){0}, 96),
                           o->init_from, rope_scaling_label(&c.rope_scaling, (char[96]){0}, 96));
    c.dropout = o->model.dropout;   // the run's (train_validate gives the family's default when not given)
    c.lora_rank = o->model.lora_rank;   // LoRA is the run's: the source is its frozen base
    c.lora_alpha = o->model.lora_alpha;
    c.lora_fa = o->model.lora_fa;
    c.lora_rslora = o->model.lora_rslora;
    c.base_bf16 = o->model.base_bf16;
    c.lora_dropout = o->model.lora_dropout;   // (--base-dtype bf16: the source's values rounded, a BF16 file's exact)
    c.lora_targets = 0;                 // parsed against the family by train_validate
    o->model = c;
    if (!o->tokenizer_path && src.tokenizer[0]) {   // text is encoded as the model was trained to read it
        snprintf(o->init_tokenizer_path, sizeof o->init_tokenizer_path, "%s", src.tokenizer);
        o->tokenizer_path = o->init_tokenizer_path;
    }
    return 0;
}
