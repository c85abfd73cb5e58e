// A Hugging Face config.json (ctron eval/generate --model, hf_load_into): hf_config_read turns every
// malformed or unsupported field into a message; what it accepts must be a model ctron can build.
#include "fuzz_input.h"
#include <string.h>
#include "io/hf_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size, "config.json");
    char err[512];
    // The same bytes as a generation_config.json: its ids, or a refusal that says why and changes nothing.
    SpecialTokens t = {0}, before = t;
    if (hf_generation_config_parse((const char *)data, size, "generation_config.json", &t, err, sizeof err) != 0) {
        if (!err[0] || memcmp(&t, &before, sizeof t)) abort();
    } else if (t.n_eos < 0 || t.n_eos > MAX_EOS_IDS || t.bos < 0) {
        abort();
    }
    err[0] = 0;
    HfConfig c;
    if (hf_config_read(path, &c, err, sizeof err) != 0) {
        if (!err[0]) abort();   // a refusal always says why
        return 0;
    }
    const GPTConfig *m = &c.model;
    if (m->layers < 1 || m->hidden < 1 || m->heads < 1 || m->hidden % m->heads || m->kv_heads < 1 ||
        m->heads % m->kv_heads || m->ffn < 1 || m->vocab < 1 || !(m->norm_eps > 0) || !(m->rope_theta > 1) ||
        c.max_positions < 1 || m->sliding_window < 0 || c.partial_window < 0 ||
        (c.partial_window && (m->sliding_window || c.partial_layers < 1 || c.partial_layers >= m->layers)) ||
        (m->sliding_window && m->arch == ARCH_GPT2) || (m->arch != ARCH_GPT2 && m->arch != ARCH_LLAMA) ||
        m->tokens.n_eos < 0 || m->tokens.n_eos > MAX_EOS_IDS || (m->rope_scaling.type && rope_scaling_check(&m->rope_scaling, err, sizeof err)))
        abort();
    GPTConfig run = {.seq = 64, .batch = 1};
    if (hf_config_apply(&c, &run, path, err, sizeof err) == 0 && (run.seq != 64 || run.hidden != m->hidden)) abort();
    return 0;
}
