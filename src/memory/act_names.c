#include "memory/act_names.h"

const char *act_name_str(ActName n) {
    static const char *names[ACT_COUNT] = {
        "ln1_in", "qkv_in", "q", "k", "attn_prob", "attn_mask", "attn_drop", "v", "proj_in",
        "drop1_mask", "ln2_in", "fc1_in", "gelu_in", "fc2_in", "drop2_mask",
        "ln1_stats", "ln2_stats", "gelu_branch", "gelu_code", "attn_lse", "gate", "up",
        "q_norm_in", "k_norm_in", "q_norm_stats", "k_norm_stats",
        "lora_q", "lora_k", "lora_v", "lora_o", "lora_gate", "lora_up", "lora_down", "lora_qkv", "lora_proj", "lora_fc",
        "lora_fc2", "lora_gate_up", "emb_mask", "lnf_in", "lnf_stats", "lm_in", "logits", "lm_grad", "offload_stage", "rev_x1", "rev_x2",
        "memo_stage"};
    return (n >= 0 && n < ACT_COUNT) ? names[n] : "?";
}
