// The family's defaults for the knobs a config leaves at 0 (arch/arch.h's table).
#include "model/gpt.h"
#include <limits.h>

void gpt_config_resolve(GPTConfig *c) {
    const ArchSpec *a = arch_spec((ArchKind)c->arch);
    if (c->kv_heads <= 0) c->kv_heads = c->heads;
    if (c->head_dim <= 0 && c->heads > 0) c->head_dim = c->hidden / c->heads;
    if (c->rotary_dim == c->head_dim) c->rotary_dim = 0;   // every dim rotated: the model without partial RoPE
    if (c->ffn <= 0) {   // saturated: a width past INT_MAX is refused by the memory estimate, not wrapped
        long f = arch_default_ffn((ArchKind)c->arch, c->hidden);
        c->ffn = f > INT_MAX ? INT_MAX : (int)f;
    }
    if (c->rope_theta <= 0.0f) c->rope_theta = 10000.0f;
    if (c->norm_eps <= 0.0f) c->norm_eps = a->norm_eps_default;
    if (c->tie_embeddings == 0) c->tie_embeddings = a->tied_default ? 1 : -1;
    if (c->lora_rank > 0 && !c->lora_targets) c->lora_targets = lora_family_sites(gpt_lora_family(c));
    if (c->lora_rank > 0 && c->lora_alpha <= 0.0f) c->lora_alpha = 8.0f;   // peft's LoraConfig default
}

unsigned gpt_keep_bits(const GPTConfig *cfg) {
    GPTConfig c = *cfg;
    gpt_config_resolve(&c);
    unsigned qk = c.qk_norm ? QK_NORM_REBUILD : 0;
    if (c.lora_rank <= 0) return qk;
    return qk | LORA_FROZEN | (c.lora_fa ? LORA_FA : 0) | c.lora_targets << LORA_TARGET_SHIFT;
}

void gpt_shape_family(const GPTConfig *cfg, ActShape *sh) {
    GPTConfig c = *cfg;
    gpt_config_resolve(&c);
    act_shape_set_family(sh, (ArchKind)c.arch, c.kv_heads, c.ffn, c.tie_embeddings, c.qkv_bias, c.qk_norm);
    sh->fused_proj = c.fused_proj != 0;
    sh->head_dim = gpt_shape_head_dim(&c);
    sh->lora_rank = c.lora_rank > 0 ? c.lora_rank : 0;
    sh->lora_sites = c.lora_rank > 0 ? c.lora_targets : 0;
    sh->base_bf16 = c.lora_rank > 0 && c.base_bf16;
    sh->lora_fa = c.lora_rank > 0 && c.lora_fa;
    sh->reversible = c.reversible != 0;
    sh->window = c.sliding_window > 0 ? c.sliding_window : 0;
}
