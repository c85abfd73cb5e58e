#include "memory/memory_model.h"

size_t act_elements(const ActShape *sh, ActName name) {
    size_t sbh = (size_t)(sh->s * sh->b * sh->h), as2b = (size_t)(sh->a * sh->s * sh->s * sh->b);
    switch (name) {
    case ACT_LN1_IN: case ACT_QKV_IN: case ACT_Q: case ACT_K: case ACT_V: case ACT_PROJ_IN:
    case ACT_LN2_IN: case ACT_FC1_IN: case ACT_LNF_IN: case ACT_LM_IN:
        return sbh;
    case ACT_GELU_IN: case ACT_FC2_IN:
        return 4 * sbh;
    case ACT_ATTN_PROB:
        return as2b;
    case ACT_ATTN_MASK: case ACT_ATTN_DROP:
        return sh->dropout ? as2b : 0;     // without dropout attn_drop is attn_prob itself
    case ACT_DROP1_MASK: case ACT_DROP2_MASK: case ACT_EMB_MASK:
        return sh->dropout ? sbh : 0;
    case ACT_LN1_STATS: case ACT_LN2_STATS: case ACT_LNF_STATS:
        return 2 * (size_t)(sh->s * sh->b);  // mean and 1/std per row
    case ACT_LOGITS:
        return (size_t)(sh->s * sh->b * sh->v);
    default:
        return 0;
    }
}

size_t act_bytes(const ActShape *sh, ActName name) {
    size_t per = act_is_mask(name) ? (size_t)sh->mask_bytes : act_is_fp32_always(name) ? 4 : (size_t)sh->elem_bytes;
    return act_elements(sh, name) * per;
}

size_t act_layer_core_bytes(const ActShape *sh) {
    size_t sum = 0;
    for (int n = 0; n < ACT_N_CORE; n++) sum += act_bytes(sh, (ActName)n);
    return sum;
}

size_t act_layer_bytes(const ActShape *sh) {
    return act_layer_core_bytes(sh) + act_bytes(sh, ACT_LN1_STATS) + act_bytes(sh, ACT_LN2_STATS);
}

size_t act_model_extra_bytes(const ActShape *sh) {
    return act_bytes(sh, ACT_EMB_MASK) + act_bytes(sh, ACT_LNF_IN) + act_bytes(sh, ACT_LNF_STATS) +
           act_bytes(sh, ACT_LM_IN) + act_bytes(sh, ACT_LOGITS);
}

size_t act_total_bytes(const ActShape *sh) {
    return (size_t)sh->L * act_layer_bytes(sh) + act_model_extra_bytes(sh);
}
