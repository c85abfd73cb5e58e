#include "io/hf_config_write.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "util/common.h"

// bos_token_id and eos_token_id: the model's (from the Hugging Face model it started from; a list when it has
// several ends), else null — ctron's own vocabularies have no special tokens, and the class defaults
// (GPT-2's 50256) may lie outside the vocabulary.
static void add_token_ids(cJSON *o, const SpecialTokens *t) {
    if (t->has_bos) cJSON_AddNumberToObject(o, "bos_token_id", t->bos);
    else cJSON_AddNullToObject(o, "bos_token_id");
    if (t->n_eos == 1) cJSON_AddNumberToObject(o, "eos_token_id", t->eos[0]);
    else if (t->n_eos > 1) cJSON_AddItemToObject(o, "eos_token_id", cJSON_CreateIntArray(t->eos, t->n_eos));
    else cJSON_AddNullToObject(o, "eos_token_id");
}

static void add_common_tail(cJSON *o, const GPTConfig *c, const char *dtype) {
    cJSON_AddBoolToObject(o, "tie_word_embeddings", gpt_tied(c));
    cJSON_AddNumberToObject(o, "initializer_range", 0.02);
    cJSON_AddBoolToObject(o, "use_cache", 1);
    add_token_ids(o, &c->tokens);
    cJSON_AddStringToObject(o, "dtype", dtype);         // transformers 5
    cJSON_AddStringToObject(o, "torch_dtype", dtype);   // transformers 4.x
}

static void gpt2_config(cJSON *o, const GPTConfig *c) {
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "architectures"), cJSON_CreateString("GPT2LMHeadModel"));
    cJSON_AddStringToObject(o, "model_type", "gpt2");
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab);
    cJSON_AddNumberToObject(o, "n_embd", c->hidden);
    cJSON_AddNumberToObject(o, "n_layer", c->layers);
    cJSON_AddNumberToObject(o, "n_head", c->heads);
    cJSON_AddNumberToObject(o, "n_positions", c->seq);
    cJSON_AddNullToObject(o, "n_inner");   // 4 x n_embd
    cJSON_AddStringToObject(o, "activation_function", "gelu_new");
    cJSON_AddNumberToObject(o, "layer_norm_epsilon", float_shortest(c->norm_eps));
    cJSON_AddNumberToObject(o, "resid_pdrop", float_shortest(c->dropout));
    cJSON_AddNumberToObject(o, "embd_pdrop", float_shortest(c->dropout));
    cJSON_AddNumberToObject(o, "attn_pdrop", float_shortest(c->dropout));
    cJSON_AddBoolToObject(o, "scale_attn_weights", 1);
    cJSON_AddBoolToObject(o, "scale_attn_by_inverse_layer_idx", 0);
    cJSON_AddBoolToObject(o, "reorder_and_upcast_attn", 0);
}

// A scaled RoPE's fields, under transformers' names (modeling_rope_utils): 4.x reads them from rope_scaling,
// 5 from rope_parameters (rope_scaling first when both are present: the same values here).
static void rope_scaling_fields(cJSON *o, const RopeScaling *sc, int max_positions) {
    if (sc->type == ROPE_LONGROPE) {   // the factors as float32 values; the attention factor as the double it is
        cJSON *s = cJSON_AddArrayToObject(o, "short_factor"), *l = cJSON_AddArrayToObject(o, "long_factor");
        for (int i = 0; i < sc->n_factors; i++) {
            cJSON_AddItemToArray(s, cJSON_CreateNumber(float_shortest(sc->short_factor[i])));
            cJSON_AddItemToArray(l, cJSON_CreateNumber(float_shortest(sc->long_factor[i])));
        }
        cJSON_AddNumberToObject(o, "original_max_position_embeddings", sc->original_max_positions);
        // written only when it is not what transformers derives from the two contexts (hf_config.c's read_longrope)
        double factor = (double)max_positions / (double)sc->original_max_positions;
        double derived = factor <= 1.0 ? 1.0 : sqrt(1.0 + log(factor) / log((double)sc->original_max_positions));
        if (sc->attention_factor != derived) cJSON_AddNumberToObject(o, "attention_factor", sc->attention_factor);
        return;
    }
    cJSON_AddNumberToObject(o, "factor", float_shortest(sc->factor));
    if (sc->type == ROPE_YARN) {   // beyond factor and the context, only what differs from what transformers derives
        cJSON_AddNumberToObject(o, "original_max_position_embeddings", sc->original_max_positions);
        // transformers derives the attention factor from the factor this file gives: float_shortest's number
        RopeScaling d = yarn_defaults(float_shortest(sc->factor), sc->original_max_positions);
        if (sc->attention_factor != d.attention_factor)
            cJSON_AddNumberToObject(o, "attention_factor", sc->attention_factor);
        if (sc->beta_fast != d.beta_fast) cJSON_AddNumberToObject(o, "beta_fast", float_shortest(sc->beta_fast));
        if (sc->beta_slow != d.beta_slow) cJSON_AddNumberToObject(o, "beta_slow", float_shortest(sc->beta_slow));
        if (!sc->truncate) cJSON_AddBoolToObject(o, "truncate", 0);
        return;
    }
    if (sc->type != ROPE_LLAMA3) return;
    cJSON_AddNumberToObject(o, "low_freq_factor", float_shortest(sc->low_freq_factor));
    cJSON_AddNumberToObject(o, "high_freq_factor", float_shortest(sc->high_freq_factor));
    cJSON_AddNumberToObject(o, "original_max_position_embeddings", sc->original_max_positions);
}

// The llama family's model_types: which one a configuration is written as (train refuses two knobs together).
// LlamaConfig has no sliding window: a plain llama block with one is Mistral's (the same tensors and block).
static const struct { const char *model_type, *class_name; } LLAMA_TYPES[] = {
    {"llama", "LlamaForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"},
    {"phi3", "Phi3ForCausalLM"}, {"mistral", "MistralForCausalLM"}};
enum { T_LLAMA, T_QWEN2, T_QWEN3, T_PHI3, T_MISTRAL };

static int llama_type(const GPTConfig *c) {
    return c->qkv_bias ? T_QWEN2 : c->qk_norm ? T_QWEN3 : c->fused_proj ? T_PHI3 : c->sliding_window ? T_MISTRAL : T_LLAMA;
}

// sliding_window: the window, or null for none (Phi3Config's default; MistralConfig's would be 4096).
static void add_window(cJSON *o, int window) {
    if (window > 0) cJSON_AddNumberToObject(o, "sliding_window", window);
    else cJSON_AddNullToObject(o, "sliding_window");
}

// Qwen2Config's and Qwen3Config's window settings: with a window, use_sliding_window and max_window_layers 0
// put it on every layer (layer_types lists them all sliding, as the class derives it); without, all full.
static void qwen_window(cJSON *o, const GPTConfig *c) {
    cJSON_AddBoolToObject(o, "use_sliding_window", c->sliding_window > 0);
    add_window(o, c->sliding_window);
    cJSON_AddNumberToObject(o, "max_window_layers", c->sliding_window > 0 ? 0 : c->layers);
    cJSON *types = cJSON_AddArrayToObject(o, "layer_types");
    const char *type = c->sliding_window > 0 ? "sliding_attention" : "full_attention";
    for (int l = 0; l < c->layers; l++) cJSON_AddItemToArray(types, cJSON_CreateString(type));
}

// Phi3Config's partial_rotary_factor for R rotated dims of d: R/d, nudged up where Python's int(d * f) would
// truncate the double product below R (transformers computes the rotated dims so; so does hf_config.c).
static double rotary_factor(int rotary, int d) {
    double f = (double)rotary / (double)d;
    while ((int)((double)d * f) < rotary) f = nextafter(f, 2.0);
    return f;
}

// A double under key in its shortest text that reads back as the same double (cJSON's own printing takes 15
// digits for one within an ulp, which can undo rotary_factor's nudge).
static void add_exact_number(cJSON *o, const char *key, double x) {
    char text[32];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, x);
        if (strtod(text, NULL) == x) break;
    }
    cJSON_AddRawToObject(o, key, text);
}

static void llama_config(cJSON *o, const GPTConfig *c) {
    int type = llama_type(c), qwen2 = type == T_QWEN2, qwen3 = type == T_QWEN3, phi3 = type == T_PHI3,
        mistral = type == T_MISTRAL;
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "architectures"), cJSON_CreateString(LLAMA_TYPES[type].class_name));
    cJSON_AddStringToObject(o, "model_type", LLAMA_TYPES[type].model_type);
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab);
    cJSON_AddNumberToObject(o, "hidden_size", c->hidden);
    cJSON_AddNumberToObject(o, "intermediate_size", c->ffn);
    cJSON_AddNumberToObject(o, "num_hidden_layers", c->layers);
    cJSON_AddNumberToObject(o, "num_attention_heads", c->heads);
    cJSON_AddNumberToObject(o, "num_key_value_heads", c->kv_heads);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    // The source model's context when it declared one (a run at a shorter --seq does not shrink it).
    int positions = c->max_positions > c->seq ? c->max_positions : c->seq;
    // dynamic NTK scales past max_position_embeddings: it must stay the context the scaling was read with
    if (c->rope_scaling.type == ROPE_DYNAMIC) positions = c->rope_scaling.original_max_positions;
    cJSON_AddNumberToObject(o, "max_position_embeddings", positions);
    // Phi3Config: the context trained at before any long-RoPE extension (read with longrope only)
    if (phi3)
        cJSON_AddNumberToObject(o, "original_max_position_embeddings", c->rope_scaling.type == ROPE_LONGROPE
                                                                           ? c->rope_scaling.original_max_positions
                                                                           : positions);
    cJSON_AddNumberToObject(o, "rms_norm_eps", float_shortest(c->norm_eps));
    cJSON_AddNumberToObject(o, "rope_theta", float_shortest(c->rope_theta));   // transformers 4.x
    const RopeScaling *sc = &c->rope_scaling;
    if (sc->type != ROPE_PLAIN) {   // transformers 4.x (5 reads it too)
        cJSON *scaling = cJSON_AddObjectToObject(o, "rope_scaling");
        cJSON_AddStringToObject(scaling, "rope_type", rope_type_name(sc->type));
        rope_scaling_fields(scaling, sc, positions);
    }
    cJSON *rope = cJSON_AddObjectToObject(o, "rope_parameters");              // transformers 5
    cJSON_AddNumberToObject(rope, "rope_theta", float_shortest(c->rope_theta));
    cJSON_AddStringToObject(rope, "rope_type", rope_type_name(sc->type));
    if (sc->type != ROPE_PLAIN) rope_scaling_fields(rope, sc, positions);
    // as Phi3Config writes it (1: every dimension); with a rotary_dim also at the top level, which 4.x reads and 5
    // puts into the rope_scaling dict it takes in place of rope_parameters (longrope's)
    double rotary = c->rotary_dim > 0 ? rotary_factor(c->rotary_dim, gpt_head_dim(c)) : 1.0;
    if (phi3) add_exact_number(rope, "partial_rotary_factor", rotary);
    if (phi3 && c->rotary_dim > 0) add_exact_number(o, "partial_rotary_factor", rotary);
    cJSON_AddNumberToObject(o, "attention_dropout", 0.0);
    if (phi3) {   // Phi3Config's dropouts and window; it has no head_dim, attention_bias or mlp_bias keys
        cJSON_AddNumberToObject(o, "resid_pdrop", 0.0);
        cJSON_AddNumberToObject(o, "embd_pdrop", 0.0);
        add_window(o, c->sliding_window);
        // Phi3Config's pad_token_id default, 32000, is nn.Embedding's padding_idx: outside a smaller vocabulary
        // the model cannot be built (ctron has no padding token: none)
        cJSON_AddNullToObject(o, "pad_token_id");
        // Phi3Attention reads head_dim where the config has one: written only when it is not hidden / heads
        if (gpt_head_dim(c) * c->heads != c->hidden) cJSON_AddNumberToObject(o, "head_dim", gpt_head_dim(c));
        return;
    }
    if (qwen2 || qwen3) qwen_window(o, c);
    if (mistral) add_window(o, c->sliding_window);   // every layer's (MistralConfig has no layer_types)
    if (!qwen2) {   // head_dim always (Qwen3Config's default is 128, not hidden / heads); no biases
        cJSON_AddNumberToObject(o, "head_dim", gpt_head_dim(c));
        if (!mistral) cJSON_AddBoolToObject(o, "attention_bias", 0);   // (MistralConfig has no bias keys)
        if (!qwen3 && !mistral) cJSON_AddBoolToObject(o, "mlp_bias", 0);   // (nor has Qwen3Config mlp_bias)
    }
}

int hf_config_exportable(const GPTConfig *cfg, char *err, size_t errlen) {
    GPTConfig c = *cfg;
    gpt_config_resolve(&c);
    if (c.arch == ARCH_GPT2 || c.rotary_dim <= 0 || llama_type(&c) == T_PHI3) return 0;
    // transformers' Llama, Mistral, Qwen2 and Qwen3 rotate whole heads whatever partial_rotary_factor says, and the
    // classes that take one (GLM, StableLM, NeoX, ...) have other blocks: only Phi3ForCausalLM runs this one
    snprintf(err, errlen, "the model's RoPE rotates %d of each head's %d dims (rotary_dim), and transformers' %s "
             "rotates whole heads: only Phi3ForCausalLM (a model with --fused-proj%s) takes a partial_rotary_factor",
             c.rotary_dim, gpt_head_dim(&c), LLAMA_TYPES[llama_type(&c)].class_name,
             c.qkv_bias ? ", without q/k/v biases" : c.qk_norm ? ", without q/k norms" : "");
    return -1;
}

char *hf_config_json(const GPTConfig *cfg, const char *dtype) {
    GPTConfig c = *cfg;
    gpt_config_resolve(&c);
    cJSON *o = cJSON_CreateObject();
    if (c.arch == ARCH_GPT2) gpt2_config(o, &c);
    else llama_config(o, &c);
    add_common_tail(o, &c, dtype);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    return text;
}

char *hf_generation_config_json(const GPTConfig *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "_from_model_config", 1);
    add_token_ids(o, &c->tokens);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    return text;
}
