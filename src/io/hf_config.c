#include "io/hf_config.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "util/common.h"
#include "util/fileio.h"

// How a model_type's config.json says which layers attend through a sliding window.
typedef enum {
    WINDOW_NONE,          // no window keys (Llama); only transformers 5's layer_types
    WINDOW_EVERY_LAYER,   // sliding_window, a number or null, on every layer (Mistral, Phi-3)
    WINDOW_UPPER_LAYERS,  // sliding_window only with use_sliding_window, on layers >= max_window_layers or on
                          // layer_types' "sliding_attention" layers (Qwen2, Qwen3)
} HfWindow;

// One model_type: its family in ctron, the keys its sizes live under, and the defaults transformers'
// config class gives a key that is absent (transformers 5.24's configuration_*.py).
typedef struct {
    const char *model_type;
    ArchKind arch;
    int qkv_bias;                 // Qwen2: q, k and v have biases
    int qk_norm;                  // Qwen3: q and k RMS-normalised per head before RoPE
    int fused_proj;               // Phi-3: q|k|v one qkv_proj, gate|up one gate_up_proj
    const char *k_hidden, *k_layers, *k_heads, *k_positions, *k_eps;
    int positions_default;
    double eps_default;
    int tied_default;
    int kv_default;               // num_key_value_heads when absent (0: the heads)
    int head_dim_default;         // head_dim when absent (0: hidden_size / num_attention_heads)
    HfWindow window;
    int window_default;           // WINDOW_EVERY_LAYER: sliding_window when absent (0: none)
    int rope_scaled;              // 1: rope_type linear, llama3, yarn, dynamic are read (0: Phi3Config: longrope only)
    int partial_rotary;           // 1: partial_rotary_factor f rotates int(head_dim · f) dims of each head (Phi-3's
                                  // block; the others rotate whole heads: see read_rotary)
} HfFamily;

#define LLAMA_KEYS "hidden_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings", "rms_norm_eps"
static const HfFamily FAMILIES[] = {
    {"gpt2", ARCH_GPT2, 0, 0, 0, "n_embd", "n_layer", "n_head", "n_positions", "layer_norm_epsilon", 1024, 1e-5, 1, 0, 0,
     WINDOW_NONE, 0, 0, 0},
    {"llama", ARCH_LLAMA, 0, 0, 0, LLAMA_KEYS, 2048, 1e-6, 0, 0, 0, WINDOW_NONE, 0, 1, 0},
    {"mistral", ARCH_LLAMA, 0, 0, 0, LLAMA_KEYS, 131072, 1e-6, 0, 8, 0, WINDOW_EVERY_LAYER, 4096, 1, 0},
    {"qwen2", ARCH_LLAMA, 1, 0, 0, LLAMA_KEYS, 32768, 1e-6, 0, 32, 0, WINDOW_UPPER_LAYERS, 0, 1, 0},
    // Qwen3Config: head_dim 128 when absent (not hidden / heads), num_key_value_heads 32, untied
    {"qwen3", ARCH_LLAMA, 0, 1, 0, LLAMA_KEYS, 32768, 1e-6, 0, 32, 128, WINDOW_UPPER_LAYERS, 0, 1, 0},
    // Phi3Config: num_key_value_heads = the heads, eps 1e-5, untied, 4096 positions, no window unless given
    // (Phi-3-mini-4k's is 2047); Phi3Attention reads head_dim where config.json has one; partial_rotary_factor
    // 1.0 when absent (Phi-4-mini's is 0.75)
    {"phi3", ARCH_LLAMA, 0, 0, 1, LLAMA_KEYS, 4096, 1e-5, 0, 0, 0, WINDOW_EVERY_LAYER, 0, 0, 1},
};
#undef LLAMA_KEYS
enum { N_FAMILIES = sizeof FAMILIES / sizeof FAMILIES[0] };

typedef struct {
    const cJSON *root;
    const char *path;
    char *err;
    size_t errlen;
    int failed;
} Reader;

static void bad(Reader *r, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void bad(Reader *r, const char *key, const char *fmt, ...) {
    if (r->failed) return;
    r->failed = 1;
    char why[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(r->err, r->errlen, "'%s': field '%s' %s", r->path, key, why);
}

// The value under key; NULL when absent (JSON null counts as absent).
static const cJSON *get(const Reader *r, const char *key) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(r->root, key);
    return x && !cJSON_IsNull(x) ? x : NULL;
}

static const char *kind_of(const cJSON *x) {
    return cJSON_IsString(x) ? "a string" : cJSON_IsBool(x) ? "a boolean" : cJSON_IsArray(x) ? "an array"
         : cJSON_IsObject(x) ? "an object" : "a number";
}

// An integer in lo..hi; required: an absent key is an error, else it reads as def.
static int int_field(Reader *r, const char *key, int required, int def, long lo, long hi) {
    const cJSON *x = get(r, key);
    if (r->failed) return def;
    if (!x) {
        if (required) bad(r, key, "is missing (expected an integer in %ld..%ld)", lo, hi);
        return def;
    }
    double v = cJSON_IsNumber(x) ? x->valuedouble : NAN;
    if (!cJSON_IsNumber(x)) bad(r, key, "is %s, expected an integer in %ld..%ld", kind_of(x), lo, hi);
    else if (!(v >= (double)lo && v <= (double)hi) || v != floor(v))
        bad(r, key, "is %g, expected an integer in %ld..%ld", v, lo, hi);
    return r->failed ? def : (int)v;
}

static double num_field(Reader *r, const cJSON *x, const char *key, double def, double lo, double hi) {
    if (r->failed || !x) return def;
    double v = cJSON_IsNumber(x) ? x->valuedouble : NAN;
    if (!cJSON_IsNumber(x)) bad(r, key, "is %s, expected a number in %g..%g", kind_of(x), lo, hi);
    else if (!(v >= lo && v <= hi)) bad(r, key, "is %g, expected a number in %g..%g", v, lo, hi);
    return r->failed ? def : v;
}

static int bool_field(Reader *r, const char *key, int def) {
    const cJSON *x = get(r, key);
    if (r->failed || !x) return def;
    if (!cJSON_IsBool(x)) bad(r, key, "is %s, expected true or false", kind_of(x));
    return cJSON_IsTrue(x);
}

static const char *str_field(Reader *r, const char *key, const char *def) {
    const cJSON *x = get(r, key);
    if (r->failed || !x) return def;
    if (!cJSON_IsString(x)) { bad(r, key, "is %s, expected a string", kind_of(x)); return def; }
    return x->valuestring;
}

// A key ctron requires to be false/absent (a feature it has not).
static void must_be_false(Reader *r, const char *key, const char *why) {
    if (bool_field(r, key, 0)) bad(r, key, "is true: %s", why);
}

// A number of the rope dict params (its key written pkey.key in errors); required: absent is an error.
static double rope_number(Reader *r, const cJSON *params, const char *pkey, const char *key, int required, double def,
                          double lo, double hi) {
    char full[80];
    snprintf(full, sizeof full, "%s.%s", pkey, key);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(params, key);
    if (x && cJSON_IsNull(x)) x = NULL;
    if (!x && required && !r->failed) bad(r, full, "is missing (expected a number in %g..%g)", lo, hi);
    return num_field(r, x, full, def, lo, hi);
}

// The scaling of a rope dict whose rope_type is linear, llama3 or dynamic (transformers' _compute_linear_scaling_
// rope_parameters, _compute_llama3_parameters, _compute_dynamic_ntk_parameters); llama3's
// original_max_position_embeddings falls back to max_position_embeddings, as transformers' standardize_rope_params
// does; dynamic scales past max_position_embeddings itself.
static void read_rope_scaling(Reader *r, const cJSON *params, const char *pkey, int type, int max_positions,
                              RopeScaling *sc) {
    sc->type = type;
    sc->factor = (float)rope_number(r, params, pkey, "factor", 1, 1.0, 1.0, 1e6);
    if (type == ROPE_DYNAMIC) sc->original_max_positions = max_positions;   // it scales past the config's context
    if (type != ROPE_LLAMA3) return;
    sc->low_freq_factor = (float)rope_number(r, params, pkey, "low_freq_factor", 1, 1.0, 1e-6, 1e6);
    sc->high_freq_factor = (float)rope_number(r, params, pkey, "high_freq_factor", 1, 4.0, 1e-6, 1e6);
    double orig = rope_number(r, params, pkey, "original_max_position_embeddings", 0, max_positions, 1, 1 << 30);
    char full[80];
    snprintf(full, sizeof full, "%s.original_max_position_embeddings", pkey);
    if (!r->failed && orig != floor(orig)) bad(r, full, "is %g, expected an integer", orig);
    sc->original_max_positions = (int)orig;
    char why[200];
    if (!r->failed && rope_scaling_check(sc, why, sizeof why)) bad(r, pkey, "is not a valid llama3 scaling: %s", why);
}

// YaRN (transformers' _compute_yarn_parameters): factor (a null one: max_position_embeddings / original); the original
// context from the dict, else max_position_embeddings (standardize_rope_params); attention_factor from the dict,
// else derived from factor and mscale / mscale_all_dim; beta_fast and beta_slow (a missing, null or zero one: 32
// and 1, as its `or`); truncate (default true).
static void read_yarn(Reader *r, const cJSON *params, const char *pkey, int max_positions, RopeScaling *sc) {
    char full[80];
    double orig = rope_number(r, params, pkey, "original_max_position_embeddings", 0, max_positions, 1, 1 << 30);
    snprintf(full, sizeof full, "%s.original_max_position_embeddings", pkey);
    if (!r->failed && orig != floor(orig)) bad(r, full, "is %g, expected an integer", orig);
    if (r->failed) return;
    snprintf(full, sizeof full, "%s.factor", pkey);
    if (!cJSON_GetObjectItemCaseSensitive(params, "factor")) {   // required, as transformers' validation has it
        bad(r, full, "is missing (expected a number of at least 1, or null for max_position_embeddings / "
            "original_max_position_embeddings)");
        return;
    }
    // null: the ratio of the two contexts
    double factor = rope_number(r, params, pkey, "factor", 0, (double)max_positions / orig, 1.0, 1e6);
    *sc = yarn_defaults(factor, (int)orig);
    double mscale = rope_number(r, params, pkey, "mscale", 0, 0.0, -1e6, 1e6);
    double mscale_all = rope_number(r, params, pkey, "mscale_all_dim", 0, 0.0, -1e6, 1e6);
    sc->attention_factor = rope_number(r, params, pkey, "attention_factor", 0,
                                       yarn_attention_factor(factor, mscale, mscale_all), 1e-6, 1e3);
    double fast = rope_number(r, params, pkey, "beta_fast", 0, 32.0, 0.0, 1e6);
    double slow = rope_number(r, params, pkey, "beta_slow", 0, 1.0, 0.0, 1e6);
    sc->beta_fast = fast != 0.0 ? (float)fast : 32.0f;
    sc->beta_slow = slow != 0.0 ? (float)slow : 1.0f;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(params, "truncate");
    snprintf(full, sizeof full, "%s.truncate", pkey);
    if (t && !cJSON_IsNull(t) && !cJSON_IsBool(t)) bad(r, full, "is %s, expected true or false", kind_of(t));
    else if (t && cJSON_IsBool(t)) sc->truncate = cJSON_IsTrue(t);
    char why[200];
    if (!r->failed && rope_scaling_check(sc, why, sizeof why)) bad(r, pkey, "is not a valid yarn scaling: %s", why);
}

// One of longrope's factor lists (pkey.key): R/2 positive numbers, one per rotated frequency (R: the rotated dims,
// the head dim unless partial_rotary_factor says fewer).
static void longrope_factors(Reader *r, const cJSON *params, const char *pkey, const char *key, int half, float *out) {
    char full[80];
    snprintf(full, sizeof full, "%s.%s", pkey, key);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(params, key);
    int n = cJSON_IsArray(x) ? cJSON_GetArraySize(x) : -1;
    if (r->failed) return;
    if (half > ROPE_MAX_FACTORS) {
        bad(r, full, "needs %d factors (%d rotated dims): ctron's longrope holds at most %d (%d rotated dims)", half,
            2 * half, ROPE_MAX_FACTORS, 2 * ROPE_MAX_FACTORS);
        return;
    }
    if (n != half) {
        bad(r, full, "is %s, expected a list of %d numbers (one per frequency: the %d rotated dims / 2)",
            !x ? "missing" : n < 0 ? kind_of(x) : "a list of another length", half, 2 * half);
        return;
    }
    int i = 0;
    for (const cJSON *e = x->child; e && !r->failed; e = e->next, i++) {
        if (!cJSON_IsNumber(e) || !(e->valuedouble > 0.0 && e->valuedouble <= 1e6))
            bad(r, full, "holds %s at %d, expected a number in (0, 1e6]", cJSON_IsNumber(e) ? "a number out of range" : kind_of(e), i);
        else out[i] = (float)e->valuedouble;
    }
}

// Phi-3's LongRoPE (transformers' _compute_longrope_parameters): short and long factors, one per frequency;
// original_max_position_embeddings from the config's top level (Phi3Config's attribute, 4096 when absent, wins
// over the dict's: standardize_rope_params gives it priority);
// attention_factor from the dict, else √(1 + ln(factor) / ln(original)) with factor the dict's or
// max_position_embeddings / original (1 when the factor is at most 1).
static void read_longrope(Reader *r, const cJSON *params, const char *pkey, int max_positions, int rotary,
                          RopeScaling *sc) {
    sc->type = ROPE_LONGROPE;
    sc->n_factors = rotary / 2;
    longrope_factors(r, params, pkey, "short_factor", rotary / 2, sc->short_factor);
    longrope_factors(r, params, pkey, "long_factor", rotary / 2, sc->long_factor);
    double orig = num_field(r, get(r, "original_max_position_embeddings"), "original_max_position_embeddings", 4096, 1,
                            1 << 30);
    if (!r->failed && orig != floor(orig)) bad(r, "original_max_position_embeddings", "is %g, expected an integer", orig);
    if (r->failed) return;
    sc->original_max_positions = (int)orig;
    double factor = rope_number(r, params, pkey, "factor", 0, (double)max_positions / orig, 1e-6, 1e6);
    double att = factor <= 1.0 ? 1.0 : sqrt(1.0 + log(factor) / log(orig));
    sc->attention_factor = rope_number(r, params, pkey, "attention_factor", 0, att, 1e-6, 1e3);
    char why[200];
    if (!r->failed && rope_scaling_check(sc, why, sizeof why)) bad(r, pkey, "is not a valid longrope scaling: %s", why);
}

// partial_rotary_factor where transformers 5.24 takes it from: the RoPE dict's (rope_scaling's, else
// rope_parameters'), else the top level's (convert_rope_params_to_dict puts it in the dict unless the dict has
// one); a null one counts as absent. NULL when there is none (1: every dim), with key naming where it was.
static const cJSON *rotary_factor(Reader *r, const cJSON *params, const char *pkey, char *key, size_t len) {
    const cJSON *x = params ? cJSON_GetObjectItemCaseSensitive(params, "partial_rotary_factor") : NULL;
    snprintf(key, len, "%s.partial_rotary_factor", pkey);
    if (!x || cJSON_IsNull(x)) {
        x = get(r, "partial_rotary_factor");
        snprintf(key, len, "partial_rotary_factor");
    }
    return x && !cJSON_IsNull(x) ? x : NULL;
}

// The dims of each head RoPE rotates, R (head_dim: all), from partial_rotary_factor f, as each family's modeling
// code applies it. Phi-3 (Phi3RotaryEmbedding, _compute_longrope_parameters): R = int(head_dim · f), the rest of
// the head passed through; f in (0, 1] and R even (transformers' odd R builds a table wider than R), at least 2.
// Llama, Mistral, Qwen2, Qwen3: the default table (their RotaryEmbedding's compute_default_rope_parameters)
// ignores f and rotates whole heads, and so does ctron; their scaled tables (linear, llama3: modeling_rope_utils)
// take int(head_dim · f) dims that apply_rotary_pos_emb, with no pass-through part, cannot apply to whole heads
// (the forward fails): refused unless 1.
static int read_rotary(Reader *r, const HfFamily *fam, const cJSON *params, const char *pkey, int scaled,
                       int head_dim) {
    char key[48];
    const cJSON *x = rotary_factor(r, params, pkey, key, sizeof key);
    if (r->failed || !x || (!fam->partial_rotary && !scaled)) return head_dim;
    if (!fam->partial_rotary) {
        static const char why[] = "with a scaled RoPE (rope_type linear, llama3, yarn or dynamic) model_type %s's "
                                  "table would be narrower than the heads it rotates (transformers' forward fails)";
        char because[224];
        snprintf(because, sizeof because, why, fam->model_type);
        if (!cJSON_IsNumber(x)) bad(r, key, "is %s, expected 1: %s", kind_of(x), because);
        else if (x->valuedouble != 1.0) bad(r, key, "is %g, expected 1: %s", x->valuedouble, because);
        return head_dim;
    }
    double f = cJSON_IsNumber(x) ? x->valuedouble : NAN;
    if (!cJSON_IsNumber(x)) bad(r, key, "is %s, expected a number in (0, 1] (the share of each head RoPE rotates)", kind_of(x));
    else if (!(f > 0.0 && f <= 1.0)) bad(r, key, "is %g, expected a number in (0, 1] (the share of each head RoPE rotates)", f);
    if (r->failed) return head_dim;
    int rotary = (int)((double)head_dim * f);   // Python's int(head_dim * f): a double product, truncated
    if (rotary < 2 || rotary % 2)
        bad(r, key, "is %g: int(head_dim %d x %g) = %d rotated dims, expected an even number of at least 2 (RoPE "
            "rotates pairs j, j + R/2)", f, head_dim, f, rotary);
    return rotary;
}

// The RoPE base and scaling: transformers 5's rope_parameters {rope_type, rope_theta, ...}, or 4.x's
// top-level rope_theta with an optional rope_scaling (which wins over rope_parameters, as in transformers);
// default 10000, unscaled. rope_type default, linear, llama3, yarn and dynamic are read, except for Phi-3, whose class
// takes default and longrope only (4.x's "yarn" there is longrope); the others are refused.
static float read_rope(Reader *r, const HfFamily *fam, int max_positions, int head_dim, RopeScaling *sc,
                       int *rotary_dim) {
    const cJSON *params = get(r, "rope_scaling");
    const char *pkey = "rope_scaling";
    if (!params) { params = get(r, "rope_parameters"); pkey = "rope_parameters"; }
    double theta = num_field(r, get(r, "rope_theta"), "rope_theta", 10000.0, 1.0 + 1e-9, 1e12);
    memset(sc, 0, sizeof *sc);
    if (params && !r->failed) {
        if (!cJSON_IsObject(params)) { bad(r, pkey, "is %s, expected an object", kind_of(params)); return 0; }
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(params, "rope_type");
        if (!type) type = cJSON_GetObjectItemCaseSensitive(params, "type");
        const char *name = type && cJSON_IsString(type) ? type->valuestring : "default";
        // Phi3Config reads 4.x's "su" and "yarn" as longrope (configuration_phi3.py)
        if (!fam->rope_scaled && (!strcmp(name, "su") || !strcmp(name, "yarn"))) name = "longrope";
        int kind = rope_type_from_name(name);
        int takes = fam->rope_scaled ? kind != ROPE_LONGROPE : kind == ROPE_PLAIN || kind == ROPE_LONGROPE;
        if ((type && !cJSON_IsString(type)) || kind < 0 || !takes) {
            char reads[160];
            if (fam->rope_scaled)
                snprintf(reads, sizeof reads,
                         "\"default\", \"linear\", \"llama3\" (Llama 3.1's), \"yarn\" and \"dynamic\"");
            else snprintf(reads, sizeof reads, "\"default\" and \"longrope\" for model_type %s (its config class takes no "
                          "\"linear\" or \"llama3\")", fam->model_type);
            bad(r, pkey, "has rope_type %s%s%s: ctron reads %s", cJSON_IsString(type) ? "\"" : "",
                cJSON_IsString(type) ? type->valuestring : kind_of(type), cJSON_IsString(type) ? "\"" : "", reads);
            return 0;
        }
        // the rotated dims first: longrope has one factor per rotated frequency
        *rotary_dim = read_rotary(r, fam, params, pkey, kind != ROPE_PLAIN && kind != ROPE_LONGROPE, head_dim);
        if (kind == ROPE_LONGROPE) read_longrope(r, params, pkey, max_positions, *rotary_dim, sc);
        else if (kind == ROPE_YARN) read_yarn(r, params, pkey, max_positions, sc);
        else if (kind != ROPE_PLAIN) read_rope_scaling(r, params, pkey, kind, max_positions, sc);
        if (!r->failed && kind == ROPE_DYNAMIC && *rotary_dim <= 2)   // transformers divides by D − 2
            bad(r, pkey, "has rope_type \"dynamic\" with heads of %d dims: its exponent D/(D-2) needs more than 2",
                *rotary_dim);
        char key[48];
        snprintf(key, sizeof key, "%s.rope_theta", pkey);
        theta = num_field(r, cJSON_GetObjectItemCaseSensitive(params, "rope_theta"), key, theta, 1.0 + 1e-9, 1e12);
    } else *rotary_dim = read_rotary(r, fam, NULL, "", 0, head_dim);   // top-level only (Phi-4-mini's 0.75)
    return (float)theta;
}

// GPT-2: what GPT2LMHeadModel computes and ctron's GPT-2 does not is refused.
static void read_gpt2(Reader *r, HfConfig *c) {
    GPTConfig *m = &c->model;
    const char *act = str_field(r, "activation_function", "gelu_new");
    if (!r->failed && strcmp(act, "gelu_new") != 0 && strcmp(act, "gelu_pytorch_tanh") != 0)
        bad(r, "activation_function", "is \"%s\": ctron's GPT-2 has the tanh GeLU (\"gelu_new\")", act);
    int inner = int_field(r, "n_inner", 0, 4 * m->hidden, 1, 1 << 30);
    if (!r->failed && inner != 4 * m->hidden)
        bad(r, "n_inner", "is %d: ctron's GPT-2 MLP is 4 x n_embd = %d wide", inner, 4 * m->hidden);
    // ctron's LayerNorm kernel has GPT-2's epsilon, 1e-5, built in
    if (!r->failed && fabsf(m->norm_eps - 1e-5f) > 1e-12f)
        bad(r, "layer_norm_epsilon", "is %g: ctron's GPT-2 LayerNorm uses 1e-5", (double)m->norm_eps);
    if (!bool_field(r, "scale_attn_weights", 1))
        bad(r, "scale_attn_weights", "is false: ctron scales attention scores by 1/sqrt(head_dim)");
    must_be_false(r, "scale_attn_by_inverse_layer_idx", "ctron scales every layer's scores alike");
    must_be_false(r, "add_cross_attention", "ctron's GPT-2 is a decoder without cross-attention");
    if (!r->failed && m->tie_embeddings < 0)
        bad(r, "tie_word_embeddings", "is false: ctron's GPT-2 ties its output layer to wte (use a llama model for "
            "an untied one)");
}

// layer_types (transformers 5; any family's config class checks it): one entry per layer, each full or sliding
// attention. The number of sliding layers, or -1 when there is no list.
static int sliding_layers(Reader *r, int layers) {
    const cJSON *types = get(r, "layer_types");
    if (!types || r->failed) return -1;
    int sliding = 0, n = cJSON_IsArray(types) ? cJSON_GetArraySize(types) : -1;
    if (n != layers) bad(r, "layer_types", "must list %d layers", layers);
    for (const cJSON *t = cJSON_IsArray(types) ? types->child : NULL; t && !r->failed; t = t->next) {
        if (cJSON_IsString(t) && strcmp(t->valuestring, "sliding_attention") == 0) sliding++;
        else if (!cJSON_IsString(t) || strcmp(t->valuestring, "full_attention") != 0)
            bad(r, "layer_types", "holds an entry other than \"full_attention\" or \"sliding_attention\"");
    }
    return r->failed ? -1 : sliding;
}

// sliding_window: a number, or null for none (a key that is absent: def).
static int window_field(Reader *r, int def) {
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(r->root, "sliding_window");
    return w && cJSON_IsNull(w) ? 0 : int_field(r, "sliding_window", 0, def, 1, 1 << 30);
}

// Which layers attend through a sliding window, as the family's modeling code decides it: a window on every
// layer is the model's (model.sliding_window); one on only some layers is kept apart (partial_window), since
// ctron runs one window on every layer or none.
static void read_window(Reader *r, const HfFamily *fam, HfConfig *c) {
    GPTConfig *m = &c->model;
    int window = 0, sliding = 0;
    const char *key = "sliding_window";
    if (fam->window == WINDOW_EVERY_LAYER) {   // Mistral, Phi-3: every layer's, whatever layer_types says
        window = window_field(r, fam->window_default);
        sliding = window ? m->layers : 0;
    } else if (fam->window == WINDOW_UPPER_LAYERS && bool_field(r, "use_sliding_window", 0)) {
        // Qwen2, Qwen3: the window only with use_sliding_window, on layers >= max_window_layers (a null one: none)
        window = window_field(r, 4096);
        int from = int_field(r, "max_window_layers", 0, 28, 0, 1 << 30);
        sliding = window && m->layers > from ? m->layers - from : 0;
        key = "max_window_layers";
    }
    int listed = sliding_layers(r, m->layers);   // checked for every family; Llama's, Mistral's, Phi-3's ignore it
    if (fam->window == WINDOW_UPPER_LAYERS && listed >= 0) {   // Qwen2's and Qwen3's layers follow the list
        if (listed && !window)
            bad(r, "layer_types", "has %d \"sliding_attention\" layer%s, but %s: model_type %s then gives %s no window "
                "(transformers cannot build %s mask)", listed, listed == 1 ? "" : "s",
                bool_field(r, "use_sliding_window", 0) ? "sliding_window is null" : "use_sliding_window is false",
                fam->model_type, listed == 1 ? "it" : "them", listed == 1 ? "its" : "their");
        sliding = listed;
        key = "layer_types";
    }
    if (r->failed || !sliding) return;
    if (sliding == m->layers) {
        m->sliding_window = window;
        return;
    }
    c->partial_window = window;
    c->partial_layers = sliding;
    snprintf(c->partial_key, sizeof c->partial_key, "%s", key);
}

// Llama, Mistral, Qwen2, Qwen3, Phi-3: the block ctron's --arch llama runs, and the sliding window.
static void read_llama(Reader *r, const HfFamily *fam, HfConfig *c) {
    GPTConfig *m = &c->model;
    m->ffn = int_field(r, "intermediate_size", 1, 0, 1, 1 << 30);
    const char *act = str_field(r, "hidden_act", "silu");
    if (!r->failed && strcmp(act, "silu") != 0)
        bad(r, "hidden_act", "is \"%s\": ctron's llama MLP is SwiGLU (\"silu\")", act);
    // head_dim (null or absent: hidden_size / num_attention_heads): Mistral Nemo's 128 with 5120 / 32. Qwen3Config's
    // is an integer, 128 when absent (whatever hidden / heads is); it refuses null.
    const cJSON *hd = get(r, "head_dim");
    const cJSON *hd_key = cJSON_GetObjectItemCaseSensitive(r->root, "head_dim");
    if (fam->head_dim_default && hd_key && cJSON_IsNull(hd_key))
        bad(r, "head_dim", "is null: Qwen3Config takes an integer (%d when absent)", fam->head_dim_default);
    int head_dim = hd ? int_field(r, "head_dim", 0, 0, 2, 1 << 16)
                 : fam->head_dim_default ? fam->head_dim_default : m->hidden / m->heads;
    if (!r->failed && head_dim % 2) bad(r, "head_dim", "is %d: RoPE rotates pairs (j, j + d/2), so it must be even", head_dim);
    m->head_dim = head_dim;
    must_be_false(r, "attention_bias", fam->qk_norm ? "Qwen3's attention_bias puts biases on q, k, v and o_proj; ctron "
                  "has no o_proj bias (nor q/k/v biases beside q/k norms)"
                  : "ctron has q/k/v biases (model_type qwen2) but no o_proj bias");
    must_be_false(r, "mlp_bias", "ctron's llama MLP has no biases");
    int rotary = head_dim;
    m->rope_theta = read_rope(r, fam, c->max_positions, head_dim, &m->rope_scaling, &rotary);
    m->rotary_dim = rotary < head_dim ? rotary : 0;   // every dim: the model without partial RoPE
    read_window(r, fam, c);
}

static void read_dtype(Reader *r, HfConfig *c) {
    const char *key = get(r, "dtype") ? "dtype" : "torch_dtype";
    const char *d = str_field(r, key, "");
    static const char *known[] = {"", "float32", "bfloat16", "float16"};
    int ok = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) ok |= strcmp(d, known[i]) == 0;
    if (!r->failed && !ok) bad(r, key, "is \"%.20s\", expected float32, bfloat16 or float16", d);
    snprintf(c->dtype, sizeof c->dtype, "%s", r->failed ? "" : d);
}

// bos/eos ids (generation settings, not the model): an integer or null; eos also a list of them. A key that
// is absent leaves t as it is.
static int is_token_id(const cJSON *x) {
    return cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble <= 2147483647.0 &&
           x->valuedouble == floor(x->valuedouble);
}
static void token_ids(Reader *r, SpecialTokens *t) {
    const cJSON *bos = cJSON_GetObjectItemCaseSensitive(r->root, "bos_token_id");
    if (cJSON_IsArray(bos)) bos = bos->child;   // a list: its first (an empty one: as absent)
    if (bos && !r->failed) {
        if (!cJSON_IsNull(bos) && !is_token_id(bos)) bad(r, "bos_token_id", "is not a token id (a non-negative integer or null)");
        t->has_bos = !cJSON_IsNull(bos);
        t->bos = t->has_bos && is_token_id(bos) ? (int)bos->valuedouble : 0;   // a refused one: never cast
    }
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(r->root, "eos_token_id");
    if (!eos || r->failed) return;
    t->n_eos = 0;
    if (cJSON_IsNull(eos)) return;
    int n = cJSON_IsArray(eos) ? cJSON_GetArraySize(eos) : 1;
    if (n > MAX_EOS_IDS) { bad(r, "eos_token_id", "lists %d ids; ctron keeps at most %d", n, MAX_EOS_IDS); return; }
    for (const cJSON *x = cJSON_IsArray(eos) ? eos->child : eos; x && !r->failed; x = cJSON_IsArray(eos) ? x->next : NULL) {
        if (!is_token_id(x)) bad(r, "eos_token_id", "is not a token id (a non-negative integer, a list of them, or null)");
        else t->eos[t->n_eos++] = (int32_t)x->valuedouble;
    }
}

static int cmp_keys(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Python's json keeps the last of a repeated key, cJSON the first: a repeated key is refused.
static void unique_keys(Reader *r) {
    int n = cJSON_GetArraySize(r->root), k = 0;
    const char **keys = xmalloc(sizeof(char *) * (size_t)(n + 1));
    for (const cJSON *x = r->root->child; x; x = x->next) keys[k++] = x->string;
    qsort(keys, (size_t)k, sizeof(char *), cmp_keys);
    for (int i = 1; i < k && !r->failed; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0) bad(r, keys[i], "appears twice");
    free(keys);
}

// The table's model_types: "gpt2, llama, … and phi3" (last: " and " or " or ").
static const char *family_names(char *buf, size_t len, const char *last) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < N_FAMILIES && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%s", i == 0 ? "" : i == N_FAMILIES - 1 ? last : ", ",
                              FAMILIES[i].model_type);
    return buf;
}

static const HfFamily *family_of(Reader *r) {
    const char *type = str_field(r, "model_type", NULL);
    char names[128];
    if (r->failed) return NULL;
    if (!type) {
        bad(r, "model_type", "is missing (expected %s)", family_names(names, sizeof names, " or "));
        return NULL;
    }
    for (int i = 0; i < N_FAMILIES; i++)
        if (strcmp(type, FAMILIES[i].model_type) == 0) return &FAMILIES[i];
    bad(r, "model_type", "is \"%.40s\": ctron reads %s", type, family_names(names, sizeof names, " and "));
    return NULL;
}

// A JSON file's text as its object, or NULL with err saying it is not one.
static cJSON *parse_object(const char *text, size_t len, const char *path, char *err, size_t errlen) {
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (cJSON_IsObject(root)) return root;
    snprintf(err, errlen, "'%s' is not %s", path, root ? "a JSON object" : "valid JSON");
    cJSON_Delete(root);
    return NULL;
}

int hf_config_parse(const char *text, size_t len, const char *path, HfConfig *c, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    cJSON *root = parse_object(text, len, path, err, errlen);
    if (!root) return -1;
    Reader r = {root, path, err, errlen, 0};
    unique_keys(&r);
    const HfFamily *fam = family_of(&r);
    GPTConfig *m = &c->model;
    if (fam) {
        snprintf(c->model_type, sizeof c->model_type, "%s", fam->model_type);
        m->arch = fam->arch;
        m->qkv_bias = fam->qkv_bias;
        m->qk_norm = fam->qk_norm;
        m->fused_proj = fam->fused_proj;
        m->vocab = int_field(&r, "vocab_size", 1, 0, 1, 2147483647L);
        m->hidden = int_field(&r, fam->k_hidden, 1, 0, 1, 1 << 30);
        m->layers = int_field(&r, fam->k_layers, 1, 0, 1, 65535);
        m->heads = int_field(&r, fam->k_heads, 1, 0, 1, 1 << 20);
        if (!r.failed && m->hidden % m->heads != 0)
            bad(&r, fam->k_heads, "is %d, which does not divide %s %d", m->heads, fam->k_hidden, m->hidden);
        m->kv_heads = m->arch == ARCH_GPT2 ? m->heads
                    : int_field(&r, "num_key_value_heads", 0, fam->kv_default ? fam->kv_default : m->heads, 1, 1 << 20);
        if (!r.failed && (m->kv_heads > m->heads || m->heads % m->kv_heads != 0))
            bad(&r, "num_key_value_heads", "is %d, expected a divisor of %s %d", m->kv_heads, fam->k_heads, m->heads);
    }
    if (fam && !r.failed) {   // the sizes are known and consistent: the rest may divide by them
        c->max_positions = int_field(&r, fam->k_positions, 0, fam->positions_default, 1, 1 << 30);
        if (m->arch == ARCH_GPT2 && !get(&r, "n_positions") && get(&r, "n_ctx"))   // very old GPT-2 configs
            c->max_positions = int_field(&r, "n_ctx", 0, 1024, 1, 1 << 30);
        m->norm_eps = (float)num_field(&r, get(&r, fam->k_eps), fam->k_eps, fam->eps_default, 1e-30, 1.0);
        m->tie_embeddings = bool_field(&r, "tie_word_embeddings", fam->tied_default) ? 1 : -1;
        if (get(&r, "quantization_config")) bad(&r, "quantization_config", "is set: ctron reads unquantised weights only");
        if (m->arch == ARCH_GPT2) read_gpt2(&r, c);
        else read_llama(&r, fam, c);
        read_dtype(&r, c);
        token_ids(&r, &m->tokens);
        if (m->arch != ARCH_GPT2) m->max_positions = c->max_positions;   // GPT-2's is its wpe's rows
    }
    cJSON_Delete(root);
    if (r.failed) return -1;
    gpt_config_resolve(m);
    return 0;
}

int hf_generation_config_parse(const char *text, size_t len, const char *path, SpecialTokens *t, char *err,
                               size_t errlen) {
    cJSON *root = parse_object(text, len, path, err, errlen);
    if (!root) return -1;
    Reader r = {root, path, err, errlen, 0};
    unique_keys(&r);
    SpecialTokens got = *t;
    token_ids(&r, &got);
    cJSON_Delete(root);
    if (r.failed) return -1;
    *t = got;
    return 0;
}

int hf_config_read(const char *path, HfConfig *c, char *err, size_t errlen) {
    uint8_t *data;
    size_t n;
    // A config.json is a few KiB; a huge one is not a config (and is not read whole into memory).
    if (fileio_read_bounded(path, (size_t)16 << 20, &data, &n, err, errlen) != 0) return -1;
    int rc = hf_config_parse((const char *)data, n, path, c, err, errlen);
    free(data);
    return rc;
}

int hf_config_apply(const HfConfig *c, GPTConfig *run, const char *path, char *err, size_t errlen) {
    if (c->model.arch == ARCH_GPT2 && run->seq > c->max_positions) {
        snprintf(err, errlen, "'%s': field 'n_positions' is %d: the model has no position embedding for a sequence "
                 "of %d (use --seq %d or less)", path, c->max_positions, run->seq, c->max_positions);
        return -1;
    }
    if (c->partial_window > 0 && c->partial_window < run->seq) {   // within the window, every layer sees all
        snprintf(err, errlen, "'%s': field '%s' gives %d of the %d layers a sliding window of %d positions and the "
                 "others none: ctron runs one window on every layer or none (use --seq %d or less)", path,
                 c->partial_key, c->partial_layers, c->model.layers, c->partial_window, c->partial_window);
        return -1;
    }
    GPTConfig m = c->model;
    m.seq = run->seq;
    m.batch = run->batch;
    m.dropout = run->dropout;
    *run = m;
    return 0;
}
