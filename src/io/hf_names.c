#include "io/hf_names.h"
#include <stdio.h>
#include <string.h>
#include "io/checkpoint.h"

#define GPT2_PREFIX "transformer."

static int is_gpt2(const GPTConfig *c) { return c->arch == ARCH_GPT2; }

void hf_param_name(const GPTConfig *c, const ParamInfo *pi, char *buf, size_t len) {
    snprintf(buf, len, "%s%s", is_gpt2(c) ? GPT2_PREFIX : "", pi->name);
}

int hf_param_transposed(const GPTConfig *c, const ParamInfo *pi) { return is_gpt2(c) && ckpt_is_conv1d(pi); }

int hf_param_is_positions(const GPTConfig *c, const ParamInfo *pi) {
    return is_gpt2(c) && strcmp(pi->name, "wpe.weight") == 0;
}

void hf_param_shape(const GPTConfig *c, const ParamInfo *pi, int positions, int64_t shape[2]) {
    int t = hf_param_transposed(c, pi);
    shape[0] = hf_param_is_positions(c, pi) ? positions : pi->full_shape[t ? 1 : 0];
    shape[1] = pi->ndim == 2 ? pi->full_shape[t ? 0 : 1] : 0;
}

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

int hf_is_buffer(const char *name) {
    const char *base = strncmp(name, GPT2_PREFIX, strlen(GPT2_PREFIX)) == 0 ? name + strlen(GPT2_PREFIX) : name;
    if (strncmp(base, "h.", 2) == 0 && (ends_with(base, ".attn.bias") || ends_with(base, ".attn.masked_bias")))
        return 1;
    return strncmp(name, "model.layers.", 13) == 0 && ends_with(name, ".self_attn.rotary_emb.inv_freq");
}

const ParamInfo *hf_find_param(const GPT *m, const char *file_name) {
    if (!is_gpt2(&m->cfg)) return gpt_find_param(m, file_name);
    size_t k = strlen(GPT2_PREFIX);
    return gpt_find_param(m, strncmp(file_name, GPT2_PREFIX, k) == 0 ? file_name + k : file_name);
}
