// Named model shapes and layouts for `ctron memory` and `ctron plan --cluster`: the paper's Table 3
// models, GPT-2's four sizes, Llama 3's three, Llama 3.2's two small ones, Qwen3's six dense ones and
// Phi-3 mini, Phi-3 medium, Phi-4 and Phi-4-mini.
#ifndef CTRON_PRESETS_H
#define CTRON_PRESETS_H

typedef struct {
    const char *name;          // "22B", "gpt2-xl", … (matched case-insensitively)
    const char *label;         // one line for reports
    int a, h, L, s, v;         // v is the vocabulary as the model allocates it (already padded)
    int t, p, m;               // tensor-, pipeline-parallel size, interleaved stages per rank
    int gpus, global_batch, micro_batch;
    double iter_full_s;        // Table 5: iteration time with full recompute (0: not published)
    double iter_sel_s;         //          and with sequence parallelism + selective recompute
    int arch;                  // ArchKind (0: GPT-2)
    int kv, ffn;               // key/value heads and FFN width (0: the family's default)
    int tied;                  // 1: the output layer is the token embedding (0: the family's default)
    int head_dim;              // each head's width (0: h / a)
    int qk_norm;               // 1: q and k RMS-normalised per head before RoPE (Qwen3)
    int fused_proj;            // 1: q|k|v one qkv_proj, gate|up one gate_up_proj (Phi-3, Phi-4)
} ModelPreset;

int preset_count(void);
const ModelPreset *preset_at(int i);
const ModelPreset *preset_find(const char *name);   // NULL when unknown
// "22B, 175B, …": the accepted names, for help texts and errors.
const char *preset_names(void);
// A group name ("paper": the four Table 3 models; "llama3": the three Llama 3 models; "llama3.2": its 1B and
// 3B; "qwen3": the six Qwen3 dense models; "phi3": Phi-3 mini, medium, Phi-4 and Phi-4-mini): fills up to
// PRESET_GROUP_MAX names and returns their count, or 0 when `name` is no group.
#define PRESET_GROUP_MAX 6
int preset_group(const char *name, const char **names);
#endif
