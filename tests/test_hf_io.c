// Hugging Face interop without transformers (issue 26): the F16/BF16 conversions against independent
// formulas; config.json of both transformers generations and every refusal (Qwen3's and Phi-3's too); the
// shard index; config.json written then read back (llama, Qwen2, Qwen3, Phi-3); export then import, bitwise in
// fp32 and bf16-rounded in bf16, for GPT-2 and llama (tied, untied, q/k/v biases, q/k norms, fused, sharded); hf_load_into at TP and PP layouts equal to the shards of the whole model; and bad
// directories refused with the file and the field named, the model left unchanged.
// usage: test_hf_io WORKDIR
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "check.h"
#include "io/ckpt_fs.h"
#include "io/hf_config.h"
#include "io/hf_config_write.h"
#include "io/hf_export.h"
#include "io/hf_index.h"
#include "io/hf_load.h"
#include "io/st_convert.h"
#include "util/common.h"

static char work[1024];

// ---- dtypes ------------------------------------------------------------------------------------

// binary16 by its definition: (-1)^s · 2^(e−15) · 1.m, subnormals 2^−14 · 0.m.
static double f16_reference(unsigned h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static void test_dtypes(void) {
    int bad = 0;
    for (unsigned h = 0; h < 65536; h++) {
        double want = f16_reference(h);
        float got = st_f16_to_f32((uint16_t)h);
        int same = isnan(want) ? isnan(got) : (double)got == want && !signbit(got) == !signbit(want);
        bad += !same;
    }
    CHECK(bad == 0, "F16 -> F32: %d of 65536 values differ from the definition", bad);
    // BF16 through a stored tensor (odd address: the mapping gives no alignment), and the finite scan
    uint8_t raw[1 + 6 * 2];
    uint16_t b16[6] = {0x3f80, 0xbfc0, 0x0001, 0x7f7f, 0x7f80, 0xffc1};   // 1, -1.5, tiny, max, inf, nan
    memcpy(raw + 1, b16, sizeof b16);
    StTensor t = {.dtype = ST_BF16, .ndim = 1, .shape = {6}, .data = raw + 1, .nbytes = 12};
    float out[6];
    long nf = st_to_f32(&t, 0, 4, out);
    CHECK(nf == -1 && out[0] == 1.0f && out[1] == -1.5f && out[2] == ldexpf(1.0f, -133) && out[3] == 0x1.fep127f,
          "BF16 -> F32: %g %g %g %g (first non-finite %ld)", out[0], out[1], out[2], out[3], nf);
    CHECK(st_find_nonfinite(&t) == 4, "the finite scan finds the BF16 inf at 4, not %ld", st_find_nonfinite(&t));
    StTensor h = {.dtype = ST_F16, .ndim = 1, .shape = {2}, .data = "\x00\x3c\x00\x7c", .nbytes = 4};
    CHECK(st_find_nonfinite(&h) == 1, "the finite scan finds the F16 inf at 1");
}

// fp32 → BF16 on write rounds to nearest, ties to even (read back through st_read).
static void test_bf16_write(void) {
    float x[5] = {1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -2.5f, 0x1.fffffep127f};
    uint16_t want[5] = {0x3f80, 0x3f82, 0x3f81, 0xc020, 0x7f80};   // tie down, tie up, above half, exact, overflow
    StFile f;
    st_init(&f);
    int64_t shape[1] = {5};
    st_add_converted(&f, "x", ST_BF16, 1, shape, x, 0);
    char path[1100], err[512];
    snprintf(path, sizeof path, "%s/bf16.safetensors", work);
    CHECK(st_write(&f, path, err, sizeof err) == 0, "write: %s", err);
    st_free(&f);
    CHECK(st_read(&f, path, err, sizeof err) == 0, "read: %s", err);
    const StTensor *t = st_find(&f, "x");
    CHECK(t && t->dtype == ST_BF16 && t->nbytes == 10 && memcmp(t->data, want, 10) == 0, "BF16 rounding on write");
    st_free(&f);
}

// ---- config.json -------------------------------------------------------------------------------

static int parse(const char *json, HfConfig *c, char *err, size_t errlen) {
    return hf_config_parse(json, strlen(json), "dir/config.json", c, err, errlen);
}

#define LLAMA_SIZES "\"vocab_size\": 96, \"hidden_size\": 64, \"intermediate_size\": 176, \"num_hidden_layers\": 2, " \
                    "\"num_attention_heads\": 4"

static void test_config_ok(void) {
    HfConfig c;
    char err[512] = "";
    // transformers 5: rope_parameters, dtype; the keys it leaves out take LlamaConfig's defaults
    int rc = parse("{\"model_type\": \"llama\", " LLAMA_SIZES ", \"num_key_value_heads\": 2, \"rope_parameters\": "
                   "{\"rope_theta\": 500000.0, \"rope_type\": \"default\"}, \"dtype\": \"bfloat16\", \"eos_token_id\": [7, 8]}",
                   &c, err, sizeof err);
    CHECK(rc == 0, "llama 5.x: %s", err);
    CHECK(c.model.arch == ARCH_LLAMA && c.model.kv_heads == 2 && c.model.ffn == 176 && c.model.rope_theta == 500000.0f &&
          c.model.norm_eps == 1e-6f && c.model.tie_embeddings == -1 && !c.model.qkv_bias && !c.model.qk_norm &&
          c.max_positions == 2048 &&
          strcmp(c.dtype, "bfloat16") == 0 && c.model.tokens.n_eos == 2 && c.model.tokens.eos[0] == 7 &&
          c.model.tokens.eos[1] == 8 && !c.model.tokens.has_bos,
          "llama 5.x fields: kv %d ffn %d theta %g eps %g tie %d pos %d dtype %s eos %d ids", c.model.kv_heads, c.model.ffn,
          (double)c.model.rope_theta, (double)c.model.norm_eps, c.model.tie_embeddings, c.max_positions, c.dtype,
          c.model.tokens.n_eos);
    CHECK(gpt_head_dim(&c.model) == 16 && gpt_q_width(&c.model) == 64 && c.model.max_positions == 2048,
          "llama 5.x: head dim %d, q width %d, context %d", gpt_head_dim(&c.model), gpt_q_width(&c.model),
          c.model.max_positions);
    // head_dim other than hidden / heads (Mistral Nemo's kind): q and the attention output 4·32 wide
    rc = parse("{\"model_type\": \"mistral\", " LLAMA_SIZES ", \"num_key_value_heads\": 2, \"head_dim\": 32}", &c, err, sizeof err);
    CHECK(rc == 0 && gpt_head_dim(&c.model) == 32 && gpt_q_width(&c.model) == 128 && gpt_kv_width(&c.model) == 64,
          "mistral head_dim 32: %s (d %d, q %d, kv %d)", err, gpt_head_dim(&c.model), gpt_q_width(&c.model),
          gpt_kv_width(&c.model));
    rc = parse("{\"model_type\": \"llama\", " LLAMA_SIZES ", \"head_dim\": null}", &c, err, sizeof err);
    CHECK(rc == 0 && gpt_head_dim(&c.model) == 16, "head_dim null: hidden / heads (%s)", err);
    rc = parse("{\"model_type\": \"llama\", " LLAMA_SIZES ", \"num_key_value_heads\": 2, \"rope_parameters\": "
               "{\"rope_theta\": 500000.0, \"rope_type\": \"default\"}, \"dtype\": \"bfloat16\", \"eos_token_id\": [7, 8]}",
               &c, err, sizeof err);
    // generation_config.json's ids replace config.json's (Llama 3.1 Instruct's three ends)
    SpecialTokens t = c.model.tokens;
    rc = hf_generation_config_parse("{\"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009], "
                                    "\"temperature\": 0.6}", 86, "g.json", &t, err, sizeof err);
    CHECK(rc == 0 && t.has_bos && t.bos == 128000 && t.n_eos == 3 && t.eos[2] == 128009, "generation_config: %s", err);
    t = c.model.tokens;
    rc = hf_generation_config_parse("{\"temperature\": 0.6}", 20, "g.json", &t, err, sizeof err);
    CHECK(rc == 0 && t.n_eos == 2 && t.eos[0] == 7, "generation_config without ids keeps config.json's: %s", err);
    static const char *const BAD_GEN[][2] = {
        {"{\"eos_token_id\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}", "'eos_token_id' lists 9 ids; ctron keeps at most 8"},
        {"{\"eos_token_id\": -1}", "'eos_token_id' is not a token id"},
        {"{\"bos_token_id\": \"<s>\"}", "'bos_token_id' is not a token id"},
        {"{\"eos_token_id\": 2", "'g.json' is not valid JSON"}};
    for (size_t i = 0; i < sizeof BAD_GEN / sizeof BAD_GEN[0]; i++) {
        t = c.model.tokens;
        rc = hf_generation_config_parse(BAD_GEN[i][0], strlen(BAD_GEN[i][0]), "g.json", &t, err, sizeof err);
        CHECK(rc != 0 && strstr(err, BAD_GEN[i][1]) && t.n_eos == 2, "generation_config '%s': '%s'", BAD_GEN[i][0], err);
    }
    // transformers 4.x: top-level rope_theta, torch_dtype, rope_scaling null; no kv key: = heads
    rc = parse("{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_theta\": 10000.0, \"rope_scaling\": null, "
               "\"torch_dtype\": \"float16\", \"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": true}", &c, err, sizeof err);
    CHECK(rc == 0 && c.model.kv_heads == 4 && c.model.rope_theta == 10000.0f && c.model.norm_eps == 1e-5f &&
          c.model.tie_embeddings == 1 && strcmp(c.dtype, "float16") == 0, "llama 4.x: %s", err);
    // Llama 3.2's config (transformers 4.x): rope_scaling llama3 beside the top-level rope_theta
    rc = parse("{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_theta\": 500000.0, \"rope_scaling\": {\"factor\": 32.0, "
               "\"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192, "
               "\"rope_type\": \"llama3\"}, \"max_position_embeddings\": 131072}", &c, err, sizeof err);
    const RopeScaling *sc = &c.model.rope_scaling;
    CHECK(rc == 0 && c.model.rope_theta == 500000.0f && sc->type == ROPE_LLAMA3 && sc->factor == 32.0f &&
          sc->low_freq_factor == 1.0f && sc->high_freq_factor == 4.0f && sc->original_max_positions == 8192,
          "llama 3.2 rope_scaling: %s (type %d factor %g orig %d)", err, sc->type, (double)sc->factor,
          sc->original_max_positions);
    // transformers 5: the same in rope_parameters; original_max_position_embeddings absent: max_position_embeddings
    rc = parse("{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_parameters\": {\"rope_type\": \"llama3\", "
               "\"rope_theta\": 10000.0, \"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4}, "
               "\"max_position_embeddings\": 4096}", &c, err, sizeof err);
    CHECK(rc == 0 && sc->type == ROPE_LLAMA3 && sc->original_max_positions == 4096 && c.model.rope_theta == 10000.0f,
          "llama3 without original_max_position_embeddings: %s (%d)", err, sc->original_max_positions);
    rc = parse("{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 4}}", &c,
               err, sizeof err);
    CHECK(rc == 0 && sc->type == ROPE_LINEAR && sc->factor == 4.0f, "linear (4.x's 'type' key): %s", err);
    // YaRN as Qwen3's model card enables it (4.x's rope_scaling; transformers' defaults for the rest), and every field
    rc = parse("{\"model_type\": \"qwen3\", " LLAMA_SIZES ", \"num_key_value_heads\": 4, \"rope_theta\": 1000000, "
               "\"max_position_embeddings\": 40960, \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
               "\"original_max_position_embeddings\": 32768}}", &c, err, sizeof err);
    CHECK(rc == 0 && sc->type == ROPE_YARN && sc->factor == 4.0f && sc->original_max_positions == 32768 &&
              sc->attention_factor == 0.1 * log(4.0) + 1.0 && sc->beta_fast == 32.0f && sc->beta_slow == 1.0f && sc->truncate == 1,
          "qwen3 yarn: %s (type %d factor %g orig %d attention %.17g)", err, sc->type, (double)sc->factor,
          sc->original_max_positions, sc->attention_factor);
    rc = parse("{\"model_type\": \"llama\", " LLAMA_SIZES ", \"max_position_embeddings\": 8192, \"rope_parameters\": "
               "{\"rope_type\": \"yarn\", \"factor\": null, \"original_max_position_embeddings\": 2048, \"mscale\": 0.707, "
               "\"mscale_all_dim\": 1.0, \"beta_fast\": 16, \"beta_slow\": 2, \"truncate\": false}}", &c, err, sizeof err);
    CHECK(rc == 0 && sc->type == ROPE_YARN && sc->factor == 4.0f && sc->original_max_positions == 2048 &&
              sc->attention_factor == (0.1 * 0.707 * log(4.0) + 1.0) / (0.1 * log(4.0) + 1.0) && sc->beta_fast == 16.0f &&
              sc->beta_slow == 2.0f && sc->truncate == 0,
          "llama yarn, factor null (8192 / 2048), mscale over mscale_all_dim: %s (factor %g attention %.17g)", err,
          (double)sc->factor, sc->attention_factor);
    // dynamic NTK (4.x's "type"): past the config's max_position_embeddings
    rc = parse("{\"model_type\": \"llama\", " LLAMA_SIZES ", \"max_position_embeddings\": 4096, \"rope_scaling\": "
               "{\"type\": \"dynamic\", \"factor\": 2.0}}", &c, err, sizeof err);
    CHECK(rc == 0 && sc->type == ROPE_DYNAMIC && sc->factor == 2.0f && sc->original_max_positions == 4096,
          "llama dynamic: %s (type %d factor %g max %d)", err, sc->type, (double)sc->factor, sc->original_max_positions);
    // Qwen2: q/k/v biases; its window is off unless use_sliding_window
    rc = parse("{\"model_type\": \"qwen2\", " LLAMA_SIZES ", \"num_key_value_heads\": 2, \"sliding_window\": 8, "
               "\"use_sliding_window\": false, \"layer_types\": [\"full_attention\", \"full_attention\"]}", &c, err, sizeof err);
    CHECK(rc == 0 && c.model.qkv_bias && !c.model.qk_norm && c.model.sliding_window == 0 && c.partial_window == 0 &&
          c.max_positions == 32768 &&
          gpt_head_dim(&c.model) == 16, "qwen2: %s", err);
    // Mistral: the class's window (4096) when the key is absent, on every layer: the model's, any --seq; null: none
    rc = parse("{\"model_type\": \"mistral\", " LLAMA_SIZES ", \"num_key_value_heads\": 4}", &c, err, sizeof err);
    CHECK(rc == 0 && c.model.sliding_window == 4096 && c.partial_window == 0, "mistral default window: %s (%d)", err,
          c.model.sliding_window);
    GPTConfig run = {.seq = 8192, .batch = 2};
    CHECK(hf_config_apply(&c, &run, "dir/config.json", err, sizeof err) == 0 && run.hidden == 64 && run.seq == 8192 &&
          run.batch == 2 && run.sliding_window == 4096, "mistral: seq 8192 runs with the window of 4096: %s (window %d)",
          err, run.sliding_window);
    rc = parse("{\"model_type\": \"mistral\", " LLAMA_SIZES ", \"num_key_value_heads\": 4, \"sliding_window\": 8}", &c,
               err, sizeof err);
    run = (GPTConfig){.seq = 32, .batch = 2};
    CHECK(rc == 0 && hf_config_apply(&c, &run, "dir/config.json", err, sizeof err) == 0 && run.seq == 32 &&
          run.sliding_window == 8, "mistral: a window of 8 under seq 32 is the model's: %s (window %d)", err,
          run.sliding_window);
    rc = parse("{\"model_type\": \"mistral\", " LLAMA_SIZES ", \"num_key_value_heads\": 4, \"sliding_window\": null}", &c,
               err, sizeof err);
    CHECK(rc == 0 && c.model.sliding_window == 0, "mistral null window: %s", err);
    // GPT-2: its defaults (1024 positions, tied, eps 1e-5)
    rc = parse("{\"model_type\": \"gpt2\", \"vocab_size\": 300, \"n_embd\": 64, \"n_layer\": 2, \"n_head\": 4, "
               "\"n_inner\": null, \"activation_function\": \"gelu_new\", \"bos_token_id\": 50256}", &c, err, sizeof err);
    CHECK(rc == 0 && c.model.arch == ARCH_GPT2 && c.max_positions == 1024 && c.model.tie_embeddings == 1 &&
          c.model.ffn == 256 && c.model.tokens.has_bos && c.model.tokens.bos == 50256, "gpt2: %s", err);
    run.seq = 1025;
    CHECK(hf_config_apply(&c, &run, "dir/config.json", err, sizeof err) != 0 && strstr(err, "'n_positions' is 1024"),
          "gpt2: seq beyond n_positions is refused: %s", err);
}

// Qwen3 (model_type qwen3): the llama block with q/k norms; Qwen3Config's defaults for the keys left out
// (head_dim 128 whatever hidden / heads is, num_key_value_heads 32, eps 1e-6, untied, 32768 positions).
static void test_config_qwen3(void) {
    HfConfig c;
    char err[512] = "";
    // transformers 5's form: rope_parameters, layer_types all full attention, head_dim 32 (hidden / heads is 16)
    int rc = parse("{\"architectures\": [\"Qwen3ForCausalLM\"], \"model_type\": \"qwen3\", " LLAMA_SIZES ", "
                   "\"num_key_value_heads\": 2, \"head_dim\": 32, \"rms_norm_eps\": 1e-05, \"rope_parameters\": "
                   "{\"rope_theta\": 1000000.0, \"rope_type\": \"default\"}, \"attention_bias\": false, "
                   "\"use_sliding_window\": false, \"sliding_window\": null, \"max_window_layers\": 28, \"layer_types\": "
                   "[\"full_attention\", \"full_attention\"], \"tie_word_embeddings\": true, \"dtype\": \"bfloat16\", "
                   "\"max_position_embeddings\": 40960}", &c, err, sizeof err);
    CHECK(rc == 0, "qwen3 5.x: %s", err);
    CHECK(rc == 0 && strcmp(c.model_type, "qwen3") == 0 && c.model.arch == ARCH_LLAMA && c.model.qk_norm == 1 &&
          !c.model.qkv_bias && c.model.kv_heads == 2 && gpt_head_dim(&c.model) == 32 && gpt_q_width(&c.model) == 128 &&
          gpt_kv_width(&c.model) == 64 && c.model.ffn == 176 && c.model.norm_eps == 1e-5f &&
          c.model.rope_theta == 1000000.0f && c.model.rope_scaling.type == ROPE_PLAIN && c.model.tie_embeddings == 1 &&
          c.model.sliding_window == 0 && c.max_positions == 40960 && c.model.max_positions == 40960,
          "qwen3 5.x fields: type %s arch %d qk_norm %d kv %d d %d eps %g theta %g tie %d window %d pos %d", c.model_type,
          c.model.arch, c.model.qk_norm, c.model.kv_heads, gpt_head_dim(&c.model), (double)c.model.norm_eps,
          (double)c.model.rope_theta, c.model.tie_embeddings, c.model.sliding_window, c.max_positions);
    // transformers 4.x's form: Qwen3-0.6B's own config.json (top-level rope_theta, rope_scaling null, no layer_types,
    // a sliding_window that use_sliding_window false leaves unused)
    rc = parse("{\"architectures\": [\"Qwen3ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
               "\"bos_token_id\": 151643, \"eos_token_id\": 151645, \"head_dim\": 128, \"hidden_act\": \"silu\", "
               "\"hidden_size\": 1024, \"initializer_range\": 0.02, \"intermediate_size\": 3072, "
               "\"max_position_embeddings\": 40960, \"max_window_layers\": 28, \"model_type\": \"qwen3\", "
               "\"num_attention_heads\": 16, \"num_hidden_layers\": 28, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-06, "
               "\"rope_scaling\": null, \"rope_theta\": 1000000, \"sliding_window\": 4096, \"tie_word_embeddings\": true, "
               "\"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.51.0\", \"use_cache\": true, "
               "\"use_sliding_window\": false, \"vocab_size\": 151936}", &c, err, sizeof err);
    CHECK(rc == 0 && c.model.arch == ARCH_LLAMA && c.model.qk_norm == 1 && c.model.layers == 28 && c.model.hidden == 1024 &&
          c.model.heads == 16 && c.model.kv_heads == 8 && gpt_head_dim(&c.model) == 128 && gpt_q_width(&c.model) == 2048 &&
          c.model.ffn == 3072 && c.model.vocab == 151936 && c.model.norm_eps == 1e-6f && c.model.rope_theta == 1000000.0f &&
          c.model.tie_embeddings == 1 && c.model.sliding_window == 0 && c.max_positions == 40960 &&
          strcmp(c.dtype, "bfloat16") == 0 && c.model.tokens.has_bos && c.model.tokens.bos == 151643 &&
          c.model.tokens.n_eos == 1 && c.model.tokens.eos[0] == 151645,
          "qwen3 4.x (Qwen3-0.6B): %s (kv %d d %d eps %g theta %g tie %d window %d pos %d)", err, c.model.kv_heads,
          gpt_head_dim(&c.model), (double)c.model.norm_eps, (double)c.model.rope_theta, c.model.tie_embeddings,
          c.model.sliding_window, c.max_positions);
    // the keys left out take Qwen3Config's defaults: head_dim 128 (not hidden / heads = 16), eps 1e-6, theta
    // 10000, untied, 32768 positions
    rc = parse("{\"model_type\": \"qwen3\", " LLAMA_SIZES ", \"num_key_value_heads\": 4}", &c, err, sizeof err);
    CHECK(rc == 0 && c.model.qk_norm == 1 && gpt_head_dim(&c.model) == 128 && c.model.head_dim == 128 &&
          gpt_q_width(&c.model) == 512 && gpt_kv_width(&c.model) == 512 && c.model.norm_eps == 1e-6f &&
          c.model.rope_theta == 10000.0f && c.model.tie_embeddings == -1 && c.max_positions == 32768,
          "qwen3 defaults: %s (d %d eps %g theta %g tie %d pos %d)", err, gpt_head_dim(&c.model),
          (double)c.model.norm_eps, (double)c.model.rope_theta, c.model.tie_embeddings, c.max_positions);
    // RoPE scaling is read as for llama (linear in 4.x's rope_scaling)
    rc = parse("{\"model_type\": \"qwen3\", " LLAMA_SIZES ", \"num_key_value_heads\": 4, \"rope_theta\": 1000000, "
               "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 4}}", &c, err, sizeof err);
    CHECK(rc == 0 && c.model.qk_norm == 1 && c.model.rope_scaling.type == ROPE_LINEAR &&
          c.model.rope_scaling.factor == 4.0f && c.model.rope_theta == 1000000.0f, "qwen3 linear rope_scaling: %s", err);
    // the other families have no q/k norms
    rc = parse("{\"model_type\": \"mistral\", " LLAMA_SIZES ", \"num_key_value_heads\": 4}", &c, err, sizeof err);
    CHECK(rc == 0 && !c.model.qk_norm, "mistral has no q/k norms: %s", err);
}

// Phi-3 / Phi-4 (model_type phi3): the llama block with q|k|v one qkv_proj and gate|up one gate_up_proj;
// Phi3Config's defaults for the keys left out (num_key_value_heads = the heads, eps 1e-5, theta 10000, untied,
// 4096 positions, no window), sliding_window read as Mistral's (a number or null on every layer).
static void test_config_phi3(void) {
    HfConfig c;
    char err[512] = "";
    // transformers 4.x's form, Phi-3-mini-4k-instruct's keys: its window of 2047 is every layer's
    int rc = parse("{\"architectures\": [\"Phi3ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0, "
                   "\"bos_token_id\": 1, \"embd_pdrop\": 0.0, \"eos_token_id\": 32000, \"hidden_act\": \"silu\", "
                   "\"hidden_size\": 3072, \"initializer_range\": 0.02, \"intermediate_size\": 8192, "
                   "\"max_position_embeddings\": 4096, \"model_type\": \"phi3\", \"num_attention_heads\": 32, "
                   "\"num_hidden_layers\": 32, \"num_key_value_heads\": 32, \"original_max_position_embeddings\": 4096, "
                   "\"pad_token_id\": 32000, \"resid_pdrop\": 0.0, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null, "
                   "\"rope_theta\": 10000.0, \"sliding_window\": 2047, \"tie_word_embeddings\": false, "
                   "\"torch_dtype\": \"bfloat16\", \"use_cache\": true, \"vocab_size\": 32064}", &c, err, sizeof err);
    CHECK(rc == 0 && strcmp(c.model_type, "phi3") == 0 && c.model.arch == ARCH_LLAMA && c.model.fused_proj == 1 &&
          !c.model.qkv_bias && !c.model.qk_norm && c.model.layers == 32 && c.model.hidden == 3072 &&
          c.model.heads == 32 && c.model.kv_heads == 32 && gpt_head_dim(&c.model) == 96 && c.model.ffn == 8192 &&
          c.model.vocab == 32064 && c.model.norm_eps == 1e-5f && c.model.rope_theta == 10000.0f &&
          c.model.rope_scaling.type == ROPE_PLAIN && c.model.tie_embeddings == -1 && c.model.sliding_window == 2047 &&
          c.max_positions == 4096 && strcmp(c.dtype, "bfloat16") == 0 && c.model.tokens.has_bos &&
          c.model.tokens.bos == 1 && c.model.tokens.n_eos == 1 && c.model.tokens.eos[0] == 32000,
          "phi3 4.x (Phi-3-mini-4k): %s (fused %d kv %d d %d eps %g theta %g tie %d window %d pos %d)", err,
          c.model.fused_proj, c.model.kv_heads, gpt_head_dim(&c.model), (double)c.model.norm_eps,
          (double)c.model.rope_theta, c.model.tie_embeddings, c.model.sliding_window, c.max_positions);
    // the window is every layer's: the model's, at any --seq (4096, its whole context, too)
    GPTConfig run = {.seq = 4096, .batch = 2};
    CHECK(hf_config_apply(&c, &run, "dir/config.json", err, sizeof err) == 0 && run.fused_proj == 1 && run.seq == 4096 &&
          run.sliding_window == 2047, "phi3: seq 4096 runs with the window of 2047: %s (window %d)", err, run.sliding_window);
    // transformers 5's form, Phi-4's shape: rope_parameters (partial_rotary_factor 1 as 5.x writes it), GQA, null window
    rc = parse("{\"model_type\": \"phi3\", \"vocab_size\": 100352, \"hidden_size\": 5120, \"intermediate_size\": 17920, "
               "\"num_hidden_layers\": 40, \"num_attention_heads\": 40, \"num_key_value_heads\": 10, "
               "\"max_position_embeddings\": 16384, \"original_max_position_embeddings\": 16384, \"rope_parameters\": "
               "{\"partial_rotary_factor\": 1.0, \"rope_theta\": 250000.0, \"rope_type\": \"default\"}, "
               "\"sliding_window\": null, \"dtype\": \"bfloat16\"}", &c, err, sizeof err);
    CHECK(rc == 0 && c.model.fused_proj == 1 && c.model.kv_heads == 10 && gpt_head_dim(&c.model) == 128 &&
          c.model.rope_theta == 250000.0f && c.model.rope_scaling.type == ROPE_PLAIN && c.model.sliding_window == 0 &&
          c.max_positions == 16384 && c.model.max_positions == 16384 && c.model.norm_eps == 1e-5f,
          "phi3 5.x (Phi-4's shape): %s (kv %d d %d theta %g window %d pos %d)", err, c.model.kv_heads,
          gpt_head_dim(&c.model), (double)c.model.rope_theta, c.model.sliding_window, c.max_positions);
    // the keys left out take Phi3Config's defaults; a head_dim other than hidden / heads is Phi3Attention's
    rc = parse("{\"model_type\": \"phi3\", " LLAMA_SIZES "}", &c, err, sizeof err);
    CHECK(rc == 0 && c.model.fused_proj == 1 && c.model.kv_heads == 4 && gpt_head_dim(&c.model) == 16 &&
          c.model.norm_eps == 1e-5f && c.model.rope_theta == 10000.0f && c.model.tie_embeddings == -1 &&
          c.model.sliding_window == 0 && c.max_positions == 4096,
          "phi3 defaults: %s (kv %d d %d eps %g theta %g tie %d window %d pos %d)", err, c.model.kv_heads,
          gpt_head_dim(&c.model), (double)c.model.norm_eps, (double)c.model.rope_theta, c.model.tie_embeddings,
          c.model.sliding_window, c.max_positions);
    rc = parse("{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"head_dim\": 24, \"num_key_value_heads\": 2}", &c, err, sizeof err);
    CHECK(rc == 0 && gpt_head_dim(&c.model) == 24 && gpt_q_width(&c.model) == 96 && gpt_kv_width(&c.model) == 48,
          "phi3 head_dim 24: %s (d %d)", err, gpt_head_dim(&c.model));
    // LongRoPE as Phi-3.5-mini writes it (transformers 4.x: rope_scaling type "longrope"; original context 4096 at the
    // top level, max 131072): the attention factor derived, √(1 + ln 32 / ln 4096) = 1.1902380714238083; "su" too
    const char *types[2] = {"longrope", "su"};
    for (int k = 0; k < 2; k++) {
        char json[900];
        snprintf(json, sizeof json, "{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"max_position_embeddings\": 131072, "
                 "\"original_max_position_embeddings\": 4096, \"rope_scaling\": {\"type\": \"%s\", \"short_factor\": "
                 "[1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5], \"long_factor\": [2, 4, 6, 8, 10, 12, 14, 16]}}", types[k]);
        rc = parse(json, &c, err, sizeof err);
        const RopeScaling *sc = &c.model.rope_scaling;
        CHECK(rc == 0 && sc->type == ROPE_LONGROPE && sc->n_factors == 8 && sc->original_max_positions == 4096 &&
                  fabs(sc->attention_factor - 1.1902380714238083) < 1e-15 && sc->short_factor[3] == 2.5f &&
                  sc->long_factor[7] == 16.0f,
              "phi3 %s: %s (type %d, %d factors, orig %d, attention %.17g)", types[k], err, sc->type, sc->n_factors,
              sc->original_max_positions, sc->attention_factor);
        // the scaling's text round-trips (state.json's), and --seq past 4096 takes the long factors
        char text[ROPE_SCALING_TEXT_MAX];
        RopeScaling back;
        CHECK(rope_scaling_parse(rope_scaling_text(sc, text, sizeof text), &back, err, sizeof err) == 0 &&
                  memcmp(&back, sc, sizeof back) == 0, "longrope text '%s' does not round-trip: %s", text, err);
        CHECK(!rope_long_factors(sc, 4096) && rope_long_factors(sc, 4097), "longrope switches past 4096");
    }
    // transformers 5 (rope_parameters with the dict's own original context, which the top-level key overrides;
    // absent, Phi3Config's 4096) and an attention factor given
    rc = parse("{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"rope_parameters\": {\"rope_type\": \"longrope\", "
               "\"rope_theta\": 10000.0, \"short_factor\": [1, 1, 1, 1, 1, 1, 1, 1], \"long_factor\": [3, 3, 3, 3, 3, 3, 3, 3], "
               "\"original_max_position_embeddings\": 64, \"attention_factor\": 1.25}}", &c, err, sizeof err);
    CHECK(rc == 0 && c.model.rope_scaling.original_max_positions == 4096 && c.model.rope_scaling.attention_factor == 1.25,
          "phi3 5.x longrope: %s (orig %d, attention %g)", err, c.model.rope_scaling.original_max_positions,
          c.model.rope_scaling.attention_factor);
    // the other families keep separate projections
    static const char *const OTHERS[] = {"llama", "mistral", "qwen2", "qwen3"};
    for (size_t i = 0; i < sizeof OTHERS / sizeof OTHERS[0]; i++) {
        char json[400];
        snprintf(json, sizeof json, "{\"model_type\": \"%s\", " LLAMA_SIZES ", \"num_key_value_heads\": 4}", OTHERS[i]);
        rc = parse(json, &c, err, sizeof err);
        CHECK(rc == 0 && c.model.fused_proj == 0, "%s has no fused projections: %s", OTHERS[i], err);
    }
}

// The sliding window as each family's modeling code applies it (transformers 5.24): a window on every layer is
// the model's and takes any --seq; one on only some layers (Qwen2's and Qwen3's max_window_layers, a mixed
// layer_types) is refused where the sequence is longer than it, since ctron runs one window on every layer or none.
#define LLAMA_SIZES4 "\"vocab_size\": 96, \"hidden_size\": 64, \"intermediate_size\": 176, \"num_hidden_layers\": 4, " \
                     "\"num_attention_heads\": 4, \"num_key_value_heads\": 2"
static void test_config_window(void) {
    HfConfig c;
    char err[512] = "";
    GPTConfig run;
    // Qwen2, max_window_layers 0: every layer from 0 on slides, the model's window
    int rc = parse("{\"model_type\": \"qwen2\", " LLAMA_SIZES4 ", \"use_sliding_window\": true, \"sliding_window\": 8, "
                   "\"max_window_layers\": 0}", &c, err, sizeof err);
    run = (GPTConfig){.seq = 32, .batch = 1};
    CHECK(rc == 0 && c.model.sliding_window == 8 && c.partial_window == 0 &&
          hf_config_apply(&c, &run, "dir/config.json", err, sizeof err) == 0 && run.sliding_window == 8 && run.seq == 32,
          "qwen2 max_window_layers 0: %s (window %d, partial %d, run's %d)", err, c.model.sliding_window, c.partial_window,
          run.sliding_window);
    // Qwen2, max_window_layers 2 of 4: layers 2 and 3 slide, 0 and 1 see everything: runs only where the window
    // covers the sequence (seq 8: every layer sees all of it, no window), refused past it
    rc = parse("{\"model_type\": \"qwen2\", " LLAMA_SIZES4 ", \"use_sliding_window\": true, \"sliding_window\": 8, "
               "\"max_window_layers\": 2}", &c, err, sizeof err);
    CHECK(rc == 0 && c.model.sliding_window == 0 && c.partial_window == 8 && c.partial_layers == 2 &&
          strcmp(c.partial_key, "max_window_layers") == 0, "qwen2 max_window_layers 2 of 4: %s (window %d, partial %d of %d, %s)",
          err, c.model.sliding_window, c.partial_window, c.partial_layers, c.partial_key);
    run = (GPTConfig){.seq = 8, .batch = 1};
    CHECK(hf_config_apply(&c, &run, "dir/config.json", err, sizeof err) == 0 && run.sliding_window == 0 && run.seq == 8,
          "qwen2 max_window_layers 2, seq 8: %s (window %d)", err, run.sliding_window);
    run = (GPTConfig){.seq = 9, .batch = 1};
    CHECK(hf_config_apply(&c, &run, "dir/config.json", err, sizeof err) != 0 &&
          strstr(err, "'dir/config.json': field 'max_window_layers' gives 2 of the 4 layers a sliding window of 8 positions "
                 "and the others none: ctron runs one window on every layer or none (use --seq 8 or less)"),
          "qwen2 max_window_layers 2, seq 9: %s", err);
    // max_window_layers at the depth, the window unused, or null: no layer slides
    static const char *const NONE[] = {"\"use_sliding_window\": true, \"sliding_window\": 8, \"max_window_layers\": 4",
                                       "\"use_sliding_window\": false, \"sliding_window\": 8, \"max_window_layers\": 0",
                                       "\"use_sliding_window\": true, \"sliding_window\": null, \"max_window_layers\": 0",
                                       "\"use_sliding_window\": true"};   // (max_window_layers 28 past the 4 layers)
    for (size_t i = 0; i < sizeof NONE / sizeof NONE[0]; i++) {
        char json[600];
        snprintf(json, sizeof json, "{\"model_type\": \"qwen2\", " LLAMA_SIZES4 ", %s}", NONE[i]);
        rc = parse(json, &c, err, sizeof err);
        CHECK(rc == 0 && c.model.sliding_window == 0 && c.partial_window == 0, "qwen2 {%s}: no window: %s (%d, %d)",
              NONE[i], err, c.model.sliding_window, c.partial_window);
    }
    // transformers 5's layer_types decides Qwen2's and Qwen3's layers (over max_window_layers): all sliding is the
    // model's window, a mixed list is a window on some layers
    rc = parse("{\"model_type\": \"qwen3\", " LLAMA_SIZES4 ", \"use_sliding_window\": true, \"sliding_window\": 16, "
               "\"max_window_layers\": 28, \"layer_types\": [\"sliding_attention\", \"sliding_attention\", "
               "\"sliding_attention\", \"sliding_attention\"]}", &c, err, sizeof err);
    run = (GPTConfig){.seq = 64, .batch = 1};
    CHECK(rc == 0 && c.model.sliding_window == 16 && c.partial_window == 0 && c.model.qk_norm &&
          hf_config_apply(&c, &run, "dir/config.json", err, sizeof err) == 0 && run.sliding_window == 16,
          "qwen3 layer_types all sliding: %s (window %d, partial %d)", err, c.model.sliding_window, c.partial_window);
    rc = parse("{\"model_type\": \"qwen3\", " LLAMA_SIZES4 ", \"use_sliding_window\": true, \"sliding_window\": 16, "
               "\"max_window_layers\": 0, \"layer_types\": [\"full_attention\", \"sliding_attention\", "
               "\"full_attention\", \"sliding_attention\"]}", &c, err, sizeof err);
    CHECK(rc == 0 && c.model.sliding_window == 0 && c.partial_window == 16 && c.partial_layers == 2 &&
          strcmp(c.partial_key, "layer_types") == 0, "qwen3 layer_types mixed: %s (window %d, partial %d of %d, %s)", err,
          c.model.sliding_window, c.partial_window, c.partial_layers, c.partial_key);
    run = (GPTConfig){.seq = 16, .batch = 1};
    CHECK(hf_config_apply(&c, &run, "dir/config.json", err, sizeof err) == 0 && run.sliding_window == 0,
          "qwen3 layer_types mixed, seq 16: %s", err);
    run = (GPTConfig){.seq = 17, .batch = 1};
    CHECK(hf_config_apply(&c, &run, "dir/config.json", err, sizeof err) != 0 &&
          strstr(err, "field 'layer_types' gives 2 of the 4 layers a sliding window of 16 positions and the others none: "
                 "ctron runs one window on every layer or none (use --seq 16 or less)"),
          "qwen3 layer_types mixed, seq 17: %s", err);
    // Mistral's and Phi-3's modeling put sliding_window on every layer whatever layer_types says; Llama's on none
    rc = parse("{\"model_type\": \"mistral\", " LLAMA_SIZES4 ", \"sliding_window\": 8, \"layer_types\": "
               "[\"full_attention\", \"sliding_attention\", \"full_attention\", \"full_attention\"]}", &c, err, sizeof err);
    CHECK(rc == 0 && c.model.sliding_window == 8 && c.partial_window == 0, "mistral with a mixed layer_types: %s (%d, %d)",
          err, c.model.sliding_window, c.partial_window);
    rc = parse("{\"model_type\": \"llama\", " LLAMA_SIZES4 ", \"sliding_window\": 8, \"layer_types\": "
               "[\"sliding_attention\", \"sliding_attention\", \"sliding_attention\", \"sliding_attention\"]}", &c, err,
               sizeof err);
    CHECK(rc == 0 && c.model.sliding_window == 0 && c.partial_window == 0, "llama has no window: %s (%d, %d)", err,
          c.model.sliding_window, c.partial_window);
}

static void test_config_refused(void) {
    static const struct { const char *json, *needle; } CASES[] = {
        {"{\"model_type\": \"llama\", ", "not valid JSON"},
        {"[1, 2]", "not a JSON object"},
        {"{\"model_type\": \"bert\", \"vocab_size\": 5}", "'model_type' is \"bert\""},
        {"{\"vocab_size\": 5}", "'model_type' is missing"},
        {"{\"model_type\": \"llama\", \"vocab_size\": 96, \"intermediate_size\": 176, \"num_hidden_layers\": 2, "
         "\"num_attention_heads\": 4}", "'hidden_size' is missing"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"num_key_value_heads\": 3}", "'num_key_value_heads' is 3"},
        {"{\"model_type\": \"qwen2\", " LLAMA_SIZES "}", "'num_key_value_heads' is 32"},   // Qwen2Config's default
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8}}",
         "'rope_scaling.low_freq_factor' is missing"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_parameters\": {\"rope_type\": \"yarn\"}}",
         "'rope_parameters.factor' is missing (expected a number of at least 1, or null"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4, "
         "\"beta_slow\": -1}}", "'rope_parameters.beta_slow' is -1, expected a number in 0..1e+06"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4, "
         "\"attention_factor\": 0}}", "'rope_parameters.attention_factor' is 0"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_scaling\": {\"type\": \"rope\", \"factor\": 2}}",
         "'rope_scaling' has rope_type \"rope\": ctron reads \"default\", \"linear\", \"llama3\" (Llama 3.1's), \"yarn\" and \"dynamic\""},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_scaling\": {\"type\": \"ntk\", \"factor\": 2}}",
         "'rope_scaling' has rope_type \"ntk\""},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_scaling\": {\"type\": \"dynamic\"}}",
         "'rope_scaling.factor' is missing"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"head_dim\": 2, \"rope_scaling\": {\"type\": \"dynamic\", "
         "\"factor\": 2}}", "'rope_scaling' has rope_type \"dynamic\" with heads of 2 dims: its exponent D/(D-2) needs more"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_scaling\": {\"rope_type\": \"linear\"}}",
         "'rope_scaling.factor' is missing"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 0.5}}",
         "'rope_scaling.factor' is 0.5, expected a number in 1..1e+06"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_parameters\": {\"rope_type\": \"llama3\", \"factor\": 8, "
         "\"low_freq_factor\": 4, \"high_freq_factor\": 1, \"original_max_position_embeddings\": 8192}}",
         "'rope_parameters' is not a valid llama3 scaling: RoPE high_freq_factor 1: expected above low_freq_factor 4"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, "
         "\"low_freq_factor\": 1, \"high_freq_factor\": 4, \"original_max_position_embeddings\": 81.5}}",
         "'rope_scaling.original_max_position_embeddings' is 81.5, expected an integer"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"attention_bias\": true}", "'attention_bias' is true"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"head_dim\": 33}", "'head_dim' is 33: RoPE rotates pairs"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"hidden_act\": \"gelu\"}", "'hidden_act' is \"gelu\""},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"hidden_size\": 128}", "'hidden_size' appears twice"},
        {"{\"model_type\": \"llama\", \"vocab_size\": 96, \"hidden_size\": \"64\", \"intermediate_size\": 176, "
         "\"num_hidden_layers\": 2, \"num_attention_heads\": 4}", "'hidden_size' is a string"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rms_norm_eps\": -1}", "'rms_norm_eps' is -1"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"dtype\": \"int8\"}", "'dtype' is \"int8\""},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"quantization_config\": {\"bits\": 4}}", "'quantization_config'"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"layer_types\": [\"full_attention\"]}", "'layer_types' must list 2"},
        {"{\"model_type\": \"gpt2\", \"vocab_size\": 9, \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, "
         "\"layer_norm_epsilon\": 1e-6}", "'layer_norm_epsilon' is 1e-06"},
        {"{\"model_type\": \"gpt2\", \"vocab_size\": 9, \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, "
         "\"activation_function\": \"gelu\"}", "'activation_function' is \"gelu\""},
        {"{\"model_type\": \"gpt2\", \"vocab_size\": 9, \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 2, "
         "\"tie_word_embeddings\": false}", "'tie_word_embeddings' is false"},
        {"{\"model_type\": \"gpt2\", \"vocab_size\": 9, \"n_embd\": 8, \"n_layer\": 1, \"n_head\": 3}", "'n_head' is 3"},
        // Qwen3: attention_bias puts a bias on o_proj too; sliding layers without a window (transformers cannot
        // build their mask); its class defaults
        {"{\"model_type\": \"qwen3\", " LLAMA_SIZES ", \"num_key_value_heads\": 2, \"attention_bias\": true}",
         "'attention_bias' is true: Qwen3's attention_bias puts biases on q, k, v and o_proj"},
        {"{\"model_type\": \"qwen3\", " LLAMA_SIZES ", \"num_key_value_heads\": 2, \"layer_types\": "
         "[\"full_attention\", \"sliding_attention\"]}", "'layer_types' has 1 \"sliding_attention\" layer, but "
         "use_sliding_window is false: model_type qwen3 then gives it no window (transformers cannot build its mask)"},
        {"{\"model_type\": \"qwen2\", " LLAMA_SIZES ", \"num_key_value_heads\": 2, \"use_sliding_window\": true, "
         "\"sliding_window\": null, \"layer_types\": [\"sliding_attention\", \"sliding_attention\"]}",
         "'layer_types' has 2 \"sliding_attention\" layers, but sliding_window is null: model_type qwen2 then gives them"},
        {"{\"model_type\": \"qwen2\", " LLAMA_SIZES ", \"num_key_value_heads\": 2, \"use_sliding_window\": true, "
         "\"sliding_window\": 0, \"max_window_layers\": 0}", "'sliding_window' is 0, expected an integer in 1..1073741824"},
        {"{\"model_type\": \"mistral\", " LLAMA_SIZES ", \"num_key_value_heads\": 4, \"sliding_window\": 2.5}",
         "'sliding_window' is 2.5, expected an integer in 1..1073741824"},
        {"{\"model_type\": \"mistral\", " LLAMA_SIZES ", \"num_key_value_heads\": 4, \"layer_types\": [\"full_attention\", "
         "\"chunked_attention\"]}",
         "'layer_types' holds an entry other than \"full_attention\" or \"sliding_attention\""},
        {"{\"model_type\": \"qwen3\", " LLAMA_SIZES ", \"num_key_value_heads\": 2, \"head_dim\": null}",
         "'head_dim' is null: Qwen3Config takes an integer (128 when absent)"},
        {"{\"model_type\": \"qwen3\", " LLAMA_SIZES ", \"num_key_value_heads\": 2, \"head_dim\": 33}", "'head_dim' is 33"},
        {"{\"model_type\": \"qwen3\", " LLAMA_SIZES "}", "'num_key_value_heads' is 32"},   // Qwen3Config's default
        {"{\"model_type\": \"qwen3\", " LLAMA_SIZES ", \"num_key_value_heads\": 2, \"rope_parameters\": "
         "{\"rope_type\": \"yarn\", \"factor\": 4, \"truncate\": \"yes\"}}", "'rope_parameters.truncate' is a string, expected true or false"},
        {"{\"model_type\": \"qwen3_moe\", " LLAMA_SIZES "}", "'model_type' is \"qwen3_moe\": ctron reads gpt2, llama, "
         "mistral, qwen2, qwen3 and phi3"},
        {"{\"vocab_size\": 5}", "'model_type' is missing (expected gpt2, llama, mistral, qwen2, qwen3 or phi3)"},
        // Phi-3: RoPE default or longrope (4.x's "su" and "yarn" are longrope; one factor per rotated frequency,
        // positive), partial_rotary_factor in (0, 1] giving an even int(head_dim · f) of at least 2, a window that is
        // a number or null; longrope is Phi-3's alone; a scaled RoPE rotates whole heads in the other families
        {"{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"rope_scaling\": {\"type\": \"su\", \"short_factor\": [1], "
         "\"long_factor\": [2]}}", "'rope_scaling.short_factor' is a list of another length, expected a list of 8 numbers"},
        {"{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1, 1, "
         "1, 1, 1, 1, 1, 1], \"long_factor\": [2, 2, 2, 0, 2, 2, 2, 2]}}",
         "'rope_scaling.long_factor' holds a number out of range at 3, expected a number in (0, 1e6]"},
        {"{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1, 1, "
         "1, 1, 1, 1, 1, 1]}}", "'rope_scaling.long_factor' is missing, expected a list of 8 numbers"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_scaling\": {\"type\": \"longrope\", \"short_factor\": [1, 1, "
         "1, 1, 1, 1, 1, 1], \"long_factor\": [2, 2, 2, 2, 2, 2, 2, 2]}}",
         "'rope_scaling' has rope_type \"longrope\": ctron reads \"default\", \"linear\", \"llama3\" (Llama 3.1's), \"yarn\" and \"dynamic\""},
        {"{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 2}}",
         "'rope_parameters' has rope_type \"linear\": ctron reads \"default\" and \"longrope\" for model_type phi3 (its config "
         "class takes no \"linear\" or \"llama3\")"},
        {"{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, "
         "\"low_freq_factor\": 1, \"high_freq_factor\": 4}}", "'rope_scaling' has rope_type \"llama3\": ctron reads \"default\""},
        {"{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"partial_rotary_factor\": 0}",
         "'partial_rotary_factor' is 0, expected a number in (0, 1] (the share of each head RoPE rotates)"},
        {"{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"partial_rotary_factor\": 1.5}",
         "'partial_rotary_factor' is 1.5, expected a number in (0, 1]"},
        {"{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"partial_rotary_factor\": 0.35}",
         "'partial_rotary_factor' is 0.35: int(head_dim 16 x 0.35) = 5 rotated dims, expected an even number of at "
         "least 2 (RoPE rotates pairs j, j + R/2)"},
        {"{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"partial_rotary_factor\": 0.1}",
         "'partial_rotary_factor' is 0.1: int(head_dim 16 x 0.1) = 1 rotated dims, expected an even number of at least 2"},
        // the RoPE dict's wins over the top level's (transformers' setdefault), and is named
        {"{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"partial_rotary_factor\": 0.5, \"rope_parameters\": "
         "{\"rope_type\": \"default\", \"partial_rotary_factor\": \"half\"}}",
         "'rope_parameters.partial_rotary_factor' is a string, expected a number in (0, 1]"},
        // longrope: one factor per rotated frequency (int(16 · 0.5) / 2 = 4)
        {"{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"partial_rotary_factor\": 0.5, \"rope_scaling\": {\"type\": "
         "\"longrope\", \"short_factor\": [1, 1, 1, 1, 1, 1, 1, 1], \"long_factor\": [2, 2, 2, 2, 2, 2, 2, 2]}}",
         "'rope_scaling.short_factor' is a list of another length, expected a list of 4 numbers (one per frequency: the "
         "8 rotated dims / 2)"},
        {"{\"model_type\": \"llama\", " LLAMA_SIZES ", \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2, "
         "\"partial_rotary_factor\": \"half\"}}", "'rope_scaling.partial_rotary_factor' is a string, expected 1"},
        {"{\"model_type\": \"mistral\", " LLAMA_SIZES ", \"num_key_value_heads\": 4, \"partial_rotary_factor\": 0.5, "
         "\"rope_parameters\": "
         "{\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4}}",
         "'partial_rotary_factor' is 0.5, expected 1: with a scaled RoPE (rope_type linear, llama3, yarn or dynamic) model_type "
         "mistral's table would be narrower than the heads it rotates (transformers' forward fails)"},
        {"{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"sliding_window\": \"2047\"}",
         "'sliding_window' is a string, expected an integer in 1..1073741824"},
        {"{\"model_type\": \"phi3\", " LLAMA_SIZES ", \"num_key_value_heads\": 3}", "'num_key_value_heads' is 3"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        HfConfig c;
        char err[512] = "";
        int rc = parse(CASES[i].json, &c, err, sizeof err);
        CHECK(rc != 0 && strstr(err, "dir/config.json") && strstr(err, CASES[i].needle),
              "config case %zu: rc %d, message '%s' lacks \"%s\"", i, rc, err, CASES[i].needle);
    }
}

static void test_index(void) {
    HfIndex ix;
    char err[512] = "";
    const char *ok = "{\"metadata\": {\"total_size\": 10}, \"weight_map\": {\"a\": \"s1.safetensors\", "
                     "\"b\": \"s2.safetensors\", \"c\": \"s1.safetensors\"}}";
    CHECK(hf_index_parse(ok, strlen(ok), "i.json", &ix, err, sizeof err) == 0 && ix.n_shards == 2 && ix.n_tensors == 3 &&
          hf_index_find(&ix, "c") == 0 && hf_index_find(&ix, "b") == 1 && hf_index_find(&ix, "d") == -1, "index: %s", err);
    hf_index_free(&ix);
    static const struct { const char *json, *needle; } BAD[] = {
        {"{\"weight_map\": {\"a\": \"../x.safetensors\"}}", "entry 'a' is not a shard file name"},
        {"{\"weight_map\": {\"a\": \"sub/x.safetensors\"}}", "entry 'a'"},
        {"{\"weight_map\": {\"a\": 3}}", "entry 'a'"},
        {"{\"weight_map\": {\"a\": \"x\", \"a\": \"y\"}}", "names tensor 'a' twice"},
        {"{\"weight_map\": {}}", "'weight_map' is empty"},
        {"{\"metadata\": {}}", "'weight_map' is missing"},
        {"{\"weight_map\": ", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        int rc = hf_index_parse(BAD[i].json, strlen(BAD[i].json), "i.json", &ix, err, sizeof err);
        CHECK(rc != 0 && strstr(err, "i.json") && strstr(err, BAD[i].needle), "index case %zu: '%s' lacks \"%s\"", i,
              err, BAD[i].needle);
    }
}

// ---- export and import -------------------------------------------------------------------------

static GPTConfig small_config(int arch, int tie, int qkv_bias) {
    GPTConfig c = {.layers = 2, .hidden = 32, .heads = 4, .seq = 16, .batch = 2, .vocab = 67, .dropout = 0.0f,
                   .arch = arch, .kv_heads = arch == ARCH_LLAMA ? 2 : 0, .ffn = arch == ARCH_LLAMA ? 80 : 0,
                   .rope_theta = 500000.0f, .tie_embeddings = tie, .qkv_bias = qkv_bias};
    gpt_config_resolve(&c);
    return c;
}

// config.json as export --hf writes it, read back: the same model, and the model_type of its family (llama;
// Qwen2 with q/k/v biases; Qwen3 with q/k norms; Phi-3 with fused projections; Mistral for the plain block with a
// sliding window, and each family's window written so that every layer has it; heads of hidden/heads and of
// another width, tied and untied).
static void test_config_round_trip(void) {
    static const struct { const char *type, *class_name; int qkv, qk, fused, head_dim, tie, window; } CASES[] = {
        {"llama", "LlamaForCausalLM", 0, 0, 0, 0, -1, 0},
        {"qwen2", "Qwen2ForCausalLM", 1, 0, 0, 0, 1, 0},
        {"qwen3", "Qwen3ForCausalLM", 0, 1, 0, 24, 1, 0},
        {"qwen3", "Qwen3ForCausalLM", 0, 1, 0, 0, -1, 0},
        {"phi3", "Phi3ForCausalLM", 0, 0, 1, 0, -1, 0},
        {"phi3", "Phi3ForCausalLM", 0, 0, 1, 24, 1, 0},
        // a window on every layer: LlamaConfig has none, so a plain llama block with one is Mistral's
        {"mistral", "MistralForCausalLM", 0, 0, 0, 0, -1, 8},
        {"mistral", "MistralForCausalLM", 0, 0, 0, 24, 1, 4096},
        {"qwen2", "Qwen2ForCausalLM", 1, 0, 0, 0, -1, 8},
        {"qwen3", "Qwen3ForCausalLM", 0, 1, 0, 24, 1, 8},
        {"phi3", "Phi3ForCausalLM", 0, 0, 1, 0, -1, 2047},
    };
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        GPTConfig w = small_config(ARCH_LLAMA, CASES[k].tie, CASES[k].qkv);
        w.qk_norm = CASES[k].qk;
        w.fused_proj = CASES[k].fused;
        w.head_dim = CASES[k].head_dim;
        w.sliding_window = CASES[k].window;
        w.norm_eps = 1e-6f;
        w.max_positions = 40960;
        gpt_config_resolve(&w);
        char *text = hf_config_json(&w, "bfloat16"), err[512] = "", cls[64];
        snprintf(cls, sizeof cls, "\"%s\"", CASES[k].class_name);
        HfConfig c;
        int rc = parse(text, &c, err, sizeof err);
        const GPTConfig *r = &c.model;
        CHECK(rc == 0 && strcmp(c.model_type, CASES[k].type) == 0 && strstr(text, cls), "%s case %zu: %s, model_type %s",
              CASES[k].type, k, err, c.model_type);
        CHECK(rc == 0 && r->arch == w.arch && r->layers == w.layers && r->hidden == w.hidden && r->heads == w.heads &&
              r->kv_heads == w.kv_heads && gpt_head_dim(r) == gpt_head_dim(&w) && r->ffn == w.ffn && r->vocab == w.vocab &&
              r->norm_eps == w.norm_eps && r->rope_theta == w.rope_theta && r->tie_embeddings == w.tie_embeddings &&
              r->qkv_bias == w.qkv_bias && r->qk_norm == w.qk_norm && r->fused_proj == w.fused_proj &&
              c.max_positions == 40960 &&
              r->max_positions == 40960 && r->sliding_window == w.sliding_window && c.partial_window == 0 &&
              strcmp(c.dtype, "bfloat16") == 0,
              "%s case %zu read back: kv %d/%d d %d/%d eps %g theta %g tie %d/%d qkv %d/%d qk %d/%d pos %d window %d/%d",
              CASES[k].type, k, r->kv_heads, w.kv_heads, gpt_head_dim(r), gpt_head_dim(&w), (double)r->norm_eps,
              (double)r->rope_theta, r->tie_embeddings, w.tie_embeddings, r->qkv_bias, w.qkv_bias, r->qk_norm, w.qk_norm,
              c.max_positions, r->sliding_window, w.sliding_window);
        // the window as its class reads it: Qwen2's and Qwen3's on every layer (use_sliding_window, from layer 0,
        // every layer listed sliding), Mistral's and Phi-3's sliding_window (null: none)
        char window_key[48];
        snprintf(window_key, sizeof window_key, "\"sliding_window\":\t%d", CASES[k].window);
        if (CASES[k].window && (CASES[k].qkv || CASES[k].qk))
            CHECK(strstr(text, "\"use_sliding_window\":\ttrue") && strstr(text, window_key) &&
                  strstr(text, "\"max_window_layers\":\t0") && strstr(text, "\"sliding_attention\"") &&
                  !strstr(text, "\"full_attention\""), "%s case %zu: config.json does not slide every layer:\n%s",
                  CASES[k].type, k, text);
        else if (CASES[k].window)
            CHECK(strstr(text, window_key) && !strstr(text, "layer_types") && !strstr(text, "use_sliding_window"),
                  "%s case %zu: config.json lacks its sliding_window %d:\n%s", CASES[k].type, k, CASES[k].window, text);
        else
            CHECK(!strstr(text, "sliding_window\":\t") || strstr(text, "\"sliding_window\":\tnull"),
                  "%s case %zu: config.json writes a window:\n%s", CASES[k].type, k, text);
        // MistralConfig: head_dim always (its class default, hidden / heads, is not ctron's --head-dim), no bias keys
        if (CASES[k].window && !CASES[k].qkv && !CASES[k].qk && !CASES[k].fused)
            CHECK(strstr(text, "\"head_dim\":") && strstr(text, "\"num_key_value_heads\":\t2") &&
                  !strstr(text, "attention_bias") && !strstr(text, "mlp_bias"),
                  "mistral case %zu: config.json is not MistralConfig's:\n%s", k, text);
        // Qwen3Config's head_dim default is 128: its config.json names the width even where it is hidden/heads
        if (CASES[k].qk)
            CHECK(strstr(text, "\"head_dim\":") && strstr(text, "\"use_sliding_window\":") &&
                  strstr(text, "\"attention_bias\":\tfalse") && !strstr(text, "mlp_bias"),
                  "qwen3 case %zu: config.json lacks head_dim, use_sliding_window or attention_bias false:\n%s", k, text);
        // Phi3Config's keys: its dropouts, the context before long RoPE, no window, no pad token (its default 32000
        // is outside this vocabulary of 67); head_dim only where it is not hidden / heads; no bias keys
        if (CASES[k].fused)
            CHECK(strstr(text, "\"original_max_position_embeddings\":\t40960") && strstr(text, "\"resid_pdrop\":\t0") &&
                  strstr(text, "\"embd_pdrop\":\t0") && strstr(text, "\"sliding_window\":") &&
                  strstr(text, "\"pad_token_id\":\tnull") && !strstr(text, "attention_bias") && !strstr(text, "mlp_bias") &&
                  !strstr(text, "use_sliding_window") && !strstr(text, "layer_types") &&
                  !strstr(text, "\"head_dim\"") == !CASES[k].head_dim,
                  "phi3 case %zu: config.json is not Phi3Config's:\n%s", k, text);
        cJSON_free(text);
    }
}

// partial_rotary_factor f: Phi-3's RoPE rotates R = int(head_dim · f) dims of each head (model.rotary_dim; 0 when
// R is the whole head), its LongRoPE one factor per rotated frequency, R/2; the dict's f wins over the top level's.
// The other families' default RoPE ignores f (transformers' rotates whole heads): so does ctron. Export writes R/d
// back, top-level and in rope_parameters, nudged where Python's int(d · f) would give R − 1; a model with a
// rotary_dim that transformers could only load as Llama, Mistral, Qwen2 or Qwen3 is refused.
static void test_config_rotary(void) {
    HfConfig c;
    char err[512] = "";
    // Phi-4-mini-instruct's config.json (transformers 4.x's form): 24 heads of 128, 96 of them rotated, LongRoPE
    // with 48 short and 48 long factors, tied, its 200064-token vocabulary
    char json[4096], shorts[600] = "", longs[600] = "";
    for (int i = 0; i < 48; i++) {
        size_t ks = strlen(shorts), kl = strlen(longs);
        snprintf(shorts + ks, sizeof shorts - ks, "%s%g", i ? ", " : "", 1.0 + 0.0625 * i);
        snprintf(longs + kl, sizeof longs - kl, "%s%g", i ? ", " : "", 2.0 + 0.5 * i);
    }
    snprintf(json, sizeof json, "{\"architectures\": [\"Phi3ForCausalLM\"], \"model_type\": \"phi3\", \"hidden_size\": "
             "3072, \"intermediate_size\": 8192, \"num_hidden_layers\": 32, \"num_attention_heads\": 24, "
             "\"num_key_value_heads\": 8, \"vocab_size\": 200064, \"max_position_embeddings\": 131072, "
             "\"original_max_position_embeddings\": 4096, \"partial_rotary_factor\": 0.75, \"rope_theta\": 10000.0, "
             "\"rope_scaling\": {\"long_factor\": [%s], \"short_factor\": [%s], \"type\": \"longrope\"}, "
             "\"sliding_window\": 262144, \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\"}", longs, shorts);
    int rc = parse(json, &c, err, sizeof err);
    const RopeScaling *sc = &c.model.rope_scaling;
    CHECK(rc == 0 && gpt_head_dim(&c.model) == 128 && c.model.rotary_dim == 96 && gpt_rotary_dim(&c.model) == 96 &&
          c.model.fused_proj == 1 && c.model.kv_heads == 8 && c.model.tie_embeddings == 1 && c.model.vocab == 200064 &&
          sc->type == ROPE_LONGROPE && sc->n_factors == 48 && sc->short_factor[47] == 1.0f + 0.0625f * 47 &&
          sc->long_factor[47] == 25.5f && sc->original_max_positions == 4096,
          "Phi-4-mini: %s (d %d rotary %d, %d factors)", err, gpt_head_dim(&c.model), c.model.rotary_dim, sc->n_factors);
    // Phi-4-mini's head, 128 dims, with the 64 factors of a whole head: refused naming the list and R
    char *at = strstr(json, "\"partial_rotary_factor\": 0.75");
    if (at) memcpy(at, "\"partial_rotary_factor\": 1.00", strlen("\"partial_rotary_factor\": 1.00"));
    rc = parse(json, &c, err, sizeof err);
    CHECK(rc != 0 && strstr(err, "'rope_scaling.short_factor' is a list of another length, expected a list of 64 numbers "
                            "(one per frequency: the 128 rotated dims / 2)"), "48 factors for a whole head: rc %d, '%s'", rc, err);
    // heads of 16 (LLAMA_SIZES): f 0.5 rotates 8; 0.3 int(4.8) = 4 as Python truncates; 1 and absent all (0); the
    // dict's f (transformers 5's rope_parameters, or 4.x's rope_scaling) wins over the top level's
    static const struct { const char *extra; int rotary; } PHI[] = {
        {", \"partial_rotary_factor\": 0.5", 8},
        {", \"partial_rotary_factor\": 0.3", 4},
        {", \"partial_rotary_factor\": 1", 0},
        {", \"partial_rotary_factor\": null", 0},
        {"", 0},
        {", \"partial_rotary_factor\": 0.75, \"rope_parameters\": {\"rope_type\": \"default\", \"partial_rotary_factor\": 0.5}", 8},
        {", \"partial_rotary_factor\": 0.5, \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e4}", 8},
        {", \"rope_scaling\": {\"type\": \"longrope\", \"partial_rotary_factor\": 0.25, \"short_factor\": [1, 1], "
         "\"long_factor\": [2, 2]}, \"rope_parameters\": {\"rope_type\": \"default\", \"partial_rotary_factor\": 0.5}", 4},
    };
    for (size_t i = 0; i < sizeof PHI / sizeof PHI[0]; i++) {
        snprintf(json, sizeof json, "{\"model_type\": \"phi3\", " LLAMA_SIZES "%s}", PHI[i].extra);
        rc = parse(json, &c, err, sizeof err);
        CHECK(rc == 0 && c.model.rotary_dim == PHI[i].rotary, "phi3 case %zu (%s): %s, rotary %d, expected %d", i,
              PHI[i].extra, err, c.model.rotary_dim, PHI[i].rotary);
    }
    // Llama, Mistral, Qwen2, Qwen3: their default RoPE rotates whole heads whatever f says (top-level or in the dict)
    static const char *const OTHERS[] = {"llama", "mistral", "qwen2", "qwen3"};
    for (size_t i = 0; i < sizeof OTHERS / sizeof OTHERS[0]; i++) {
        snprintf(json, sizeof json, "{\"model_type\": \"%s\", " LLAMA_SIZES ", \"num_key_value_heads\": 4, \"head_dim\": "
                 "16, \"partial_rotary_factor\": 0.5, \"rope_parameters\": {\"rope_type\": \"default\", "
                 "\"partial_rotary_factor\": 0.25}}", OTHERS[i]);
        rc = parse(json, &c, err, sizeof err);
        CHECK(rc == 0 && c.model.rotary_dim == 0, "%s ignores partial_rotary_factor: %s (rotary %d)", OTHERS[i], err,
              c.model.rotary_dim);
    }
    // export: Phi-3 writes R/d (0.75 for 6 of 8; 30 of 44 nudged: 30/44 · 44 is 29.999...) and reads it back, with
    // longrope's R/2 factors; the whole head writes 1 in rope_parameters only, as before
    static const struct { int head_dim, rotary, longrope; const char *needle; } OUT[] = {
        {0, 6, 0, "\"partial_rotary_factor\":\t0.75"},
        {0, 6, 1, "\"partial_rotary_factor\":\t0.75"},
        {44, 30, 0, "\"partial_rotary_factor\":\t0.6818181818181819"},
        {0, 0, 0, NULL},
    };
    for (size_t k = 0; k < sizeof OUT / sizeof OUT[0]; k++) {
        GPTConfig w = small_config(ARCH_LLAMA, -1, 0);
        w.fused_proj = 1;
        w.head_dim = OUT[k].head_dim;
        w.rotary_dim = OUT[k].rotary;
        if (OUT[k].longrope) {
            w.rope_scaling = (RopeScaling){.type = ROPE_LONGROPE, .original_max_positions = 8, .n_factors = 3,
                                           .attention_factor = 1.5, .short_factor = {1, 2, 3}, .long_factor = {4, 5, 6}};
        }
        gpt_config_resolve(&w);
        char *text = hf_config_json(&w, "float32");
        rc = parse(text, &c, err, sizeof err);
        const char *first = OUT[k].needle ? strstr(text, OUT[k].needle) : NULL;
        CHECK(rc == 0 && c.model.rotary_dim == OUT[k].rotary && gpt_head_dim(&c.model) == gpt_head_dim(&w) &&
                  memcmp(&c.model.rope_scaling, &w.rope_scaling, sizeof w.rope_scaling) == 0,
              "export case %zu read back: %s (rotary %d/%d)\n%s", k, err, c.model.rotary_dim, OUT[k].rotary, text);
        if (OUT[k].needle)   // top-level and in rope_parameters
            CHECK(first && strstr(first + 1, OUT[k].needle), "export case %zu lacks %s twice:\n%s", k, OUT[k].needle, text);
        else
            CHECK(strstr(text, "\"partial_rotary_factor\":\t1\n") && !strstr(text, "\"partial_rotary_factor\":\t1,"),
                  "export case %zu: the whole head writes partial_rotary_factor other than rope_parameters' 1:\n%s", k, text);
        CHECK(hf_config_exportable(&w, err, sizeof err) == 0, "export case %zu refused: %s", k, err);
        cJSON_free(text);
    }
    // no class of transformers runs the split-projection block with a partial RoPE: refused, naming the class
    static const struct { int qkv, qk, window; const char *needle; } NO[] = {
        {0, 0, 0, "the model's RoPE rotates 4 of each head's 8 dims (rotary_dim), and transformers' LlamaForCausalLM "
                  "rotates whole heads: only Phi3ForCausalLM (a model with --fused-proj) takes a partial_rotary_factor"},
        {1, 0, 0, "transformers' Qwen2ForCausalLM rotates whole heads: only Phi3ForCausalLM (a model with --fused-proj, "
                  "without q/k/v biases)"},
        {0, 1, 0, "transformers' Qwen3ForCausalLM rotates whole heads"},
        {0, 0, 8, "transformers' MistralForCausalLM rotates whole heads"},
    };
    for (size_t k = 0; k < sizeof NO / sizeof NO[0]; k++) {
        GPTConfig w = small_config(ARCH_LLAMA, -1, NO[k].qkv);
        w.qk_norm = NO[k].qk;
        w.sliding_window = NO[k].window;
        w.rotary_dim = 4;
        CHECK(hf_config_exportable(&w, err, sizeof err) != 0 && strstr(err, NO[k].needle), "refusal %zu: '%s'", k, err);
        w.rotary_dim = 8;   // the whole head: no partial RoPE
        CHECK(hf_config_exportable(&w, err, sizeof err) == 0, "refusal %zu with the whole head: '%s'", k, err);
    }
}

// A model of cfg with random weights (biases and norms too, so that nothing is trivially 1 or 0).
static void make_model(GPT *m, const GPTConfig *cfg, uint64_t seed) {
    gpt_init_params(m, cfg);
    uint32_t x = (uint32_t)seed * 2654435761u + 1;
    for (size_t i = 0; i < m->n_params; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        m->params[i] = ((float)(x >> 8) / 16777216.0f - 0.5f) * 0.2f;
    }
}

static void dir_path(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", work, name); }

static int export_to(const GPT *m, const char *name, StDtype dtype, size_t shard) {
    char out[1100], err[1024];
    dir_path(out, sizeof out, name);
    fs_remove_tree(out);
    HfExportOptions o = {dtype, shard, NULL, 0};
    int rc = hf_export(m, out, &o, err, sizeof err);
    CHECK(rc == 0, "export %s: %s", name, err);
    return rc;
}

// A fresh model from dir's config.json at seq / batch, loaded with hf_load_into.
static int import_from(GPT *m, const char *name, int seq, char *err, size_t errlen) {
    char dir[1100];
    dir_path(dir, sizeof dir, name);
    HfConfig c;
    if (hf_dir_config(dir, &c, err, errlen) != 0) return -1;
    GPTConfig cfg = {.seq = seq, .batch = 2};
    if (hf_config_apply(&c, &cfg, dir, err, errlen) != 0) return -1;
    gpt_init_params(m, &cfg);
    int rc = hf_load_into(m, dir, err, errlen);
    if (rc != 0) gpt_free(m);
    return rc;
}

static void bf16_round(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], 4);
        b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
        memcpy(&x[i], &b, 4);
    }
}

static void test_round_trips(void) {
    static const struct { const char *name; int arch, tie, qkv, qk, fused; StDtype dtype; size_t shard; } CASES[] = {
        {"gpt2", ARCH_GPT2, 1, 0, 0, 0, ST_F32, 0},
        {"llama_untied", ARCH_LLAMA, -1, 0, 0, 0, ST_F32, 0},
        {"llama_tied_sharded", ARCH_LLAMA, 1, 0, 0, 0, ST_F32, 6000},
        {"qwen2_bf16_sharded", ARCH_LLAMA, -1, 1, 0, 0, ST_BF16, 9000},
        {"gpt2_bf16_sharded", ARCH_GPT2, 1, 0, 0, 0, ST_BF16, 5000},
        {"qwen3_tied", ARCH_LLAMA, 1, 0, 1, 0, ST_F32, 0},
        {"qwen3_bf16_sharded", ARCH_LLAMA, -1, 0, 1, 0, ST_BF16, 7000},
        {"phi3_untied", ARCH_LLAMA, -1, 0, 0, 1, ST_F32, 0},
    };
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        GPTConfig cfg = small_config(CASES[k].arch, CASES[k].tie, CASES[k].qkv);
        cfg.qk_norm = CASES[k].qk;
        cfg.fused_proj = CASES[k].fused;
        GPT a, b;
        make_model(&a, &cfg, 11 + k);
        if (export_to(&a, CASES[k].name, CASES[k].dtype, CASES[k].shard) != 0) { gpt_free(&a); continue; }
        char err[1024], index[1200];
        dir_path(index, sizeof index, CASES[k].name);
        strcat(index, "/model.safetensors.index.json");
        struct stat sb;
        CHECK((stat(index, &sb) == 0) == (CASES[k].shard > 0), "%s: an index exactly when sharded", CASES[k].name);
        if (CASES[k].dtype == ST_BF16) bf16_round(a.params, a.n_params);
        int rc = import_from(&b, CASES[k].name, cfg.seq, err, sizeof err);
        CHECK(rc == 0, "%s: import: %s", CASES[k].name, err);
        CHECK(rc != 0 || (b.cfg.qk_norm == CASES[k].qk && b.cfg.fused_proj == CASES[k].fused),
              "%s: the imported model's q/k norms %d, fused projections %d", CASES[k].name, rc ? 0 : b.cfg.qk_norm,
              rc ? 0 : b.cfg.fused_proj);
        if (rc == 0) {
            CHECK(b.n_params == a.n_params && memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0,
                  "%s: the imported weights are %s the exported ones", CASES[k].name,
                  CASES[k].dtype == ST_BF16 ? "not bitwise the bf16-rounded" : "not bitwise");
            gpt_free(&b);
        }
        if (CASES[k].arch == ARCH_GPT2 && CASES[k].dtype == ST_F32) {   // a shorter run takes the first rows of wpe
            rc = import_from(&b, CASES[k].name, 8, err, sizeof err);
            const ParamInfo *pa = gpt_find_param(&a, "wpe.weight"), *pb = rc == 0 ? gpt_find_param(&b, "wpe.weight") : NULL;
            CHECK(pb && pb->numel == 8 * 32 && memcmp(a.params + pa->offset, b.params + pb->offset, pb->numel * 4) == 0,
                  "gpt2 at seq 8: wpe's first 8 rows (%s)", rc ? err : "");
            if (rc == 0) gpt_free(&b);
            rc = import_from(&b, CASES[k].name, 17, err, sizeof err);
            CHECK(rc != 0 && strstr(err, "'n_positions' is 16"), "gpt2 at seq 17 is refused: %s", err);
        }
        gpt_free(&a);
    }
}

// hf_load_into at TP and PP layouts: each rank's parameters are the shards of the whole model.
static void test_layouts(void) {
    GPTConfig cfg = small_config(ARCH_LLAMA, -1, 1);
    cfg.vocab = 67;   // not divisible by t: padded rows
    GPT whole;
    make_model(&whole, &cfg, 5);
    if (export_to(&whole, "layouts", ST_F32, 0) != 0) { gpt_free(&whole); return; }
    char dir[1100], err[1024];
    dir_path(dir, sizeof dir, "layouts");
    for (int layout = 0; layout < 2; layout++)
        for (int rank = 0; rank < 2; rank++) {
            GPT m, ref;
            TPLayout tp = {2, rank, 0, NULL};
            PPLayout pp = {2, rank, 1, cfg.layers / 2, 1, 0, NULL};
            gpt_init_pp(&m, &cfg, NULL, layout == 0 ? &tp : NULL, layout == 1 ? &pp : NULL);
            gpt_init_pp(&ref, &cfg, NULL, layout == 0 ? &tp : NULL, layout == 1 ? &pp : NULL);
            gpt_shard_from_full(&ref, &whole, whole.params, ref.params);
            int rc = hf_load_into(&m, dir, err, sizeof err);
            CHECK(rc == 0, "%s rank %d: %s", layout ? "pp" : "tp", rank, err);
            CHECK(rc == 0 && m.n_params == ref.n_params && m.n_params < whole.n_params &&
                  memcmp(m.params, ref.params, m.n_params * sizeof(float)) == 0,
                  "%s rank %d: the loaded shards are not gpt_shard_from_full's", layout ? "pp" : "tp", rank);
            gpt_free(&m);
            gpt_free(&ref);
        }
    gpt_free(&whole);
}

// ---- bad directories -----------------------------------------------------------------------------

// Rewrites dir/file with tensor `name` changed by edit (NULL: dropped), or with an extra tensor.
typedef enum { EDIT_DTYPE_I32, EDIT_DROP, EDIT_EXTRA } Edit;

static void rewrite(const char *dir, const char *file, const char *name, Edit edit) {
    char path[1200], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    StFile in, out;
    if (st_read(&in, path, err, sizeof err) != 0) { CHECK(0, "rewrite: %s", err); return; }
    st_init(&out);
    st_add_meta(&out, "format", "pt");
    for (int i = 0; i < in.n; i++) {
        const StTensor *t = &in.t[i];
        if (strcmp(t->name, name) == 0 && edit == EDIT_DROP) continue;
        StDtype d = strcmp(t->name, name) == 0 && edit == EDIT_DTYPE_I32 ? ST_I32 : t->dtype;
        st_add(&out, t->name, d, t->ndim, t->shape, t->data);
    }
    static const float extra[3] = {1, 2, 3};
    int64_t three[1] = {3};
    if (edit == EDIT_EXTRA) st_add(&out, name, ST_F32, 1, three, extra);
    CHECK(st_write(&out, path, err, sizeof err) == 0, "rewrite: %s", err);
    st_free(&out);
    st_free(&in);
}

static void copy_dir(const char *from, const char *to) {
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    CHECK(system(cmd) == 0, "%s", cmd);
}

static void test_refusals(void) {
    GPTConfig cfg = small_config(ARCH_LLAMA, -1, 0);
    GPT src;
    make_model(&src, &cfg, 3);
    if (export_to(&src, "good", ST_F32, 7000) != 0) { gpt_free(&src); return; }
    src.params[src.info[3].offset + 5] = NAN;
    export_to(&src, "nan", ST_F32, 7000);
    gpt_free(&src);
    char good[1100], bad[1100], path[1200];
    dir_path(good, sizeof good, "good");
    dir_path(bad, sizeof bad, "bad");
    HfIndex ix;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", good);
    char err[1024];
    if (hf_index_read(path, &ix, err, sizeof err) != 0) { CHECK(0, "%s", err); return; }
    const char *q_shard = ix.shards[hf_index_find(&ix, "model.layers.0.self_attn.q_proj.weight")];
    const char *emb_shard = ix.shards[hf_index_find(&ix, "model.embed_tokens.weight")];
    for (int k = 0; k < 9; k++) {
        copy_dir(good, bad);
        const char *needle = "";
        FILE *f;
        switch (k) {
        case 0:   // a shard the index names is missing
            snprintf(path, sizeof path, "%s/%s", bad, q_shard);
            unlink(path);
            needle = "listed in";
            break;
        case 1:   // a weight in a dtype ctron cannot read as weights
            rewrite(bad, q_shard, "model.layers.0.self_attn.q_proj.weight", EDIT_DTYPE_I32);
            needle = "'model.layers.0.self_attn.q_proj.weight' has dtype I32";
            break;
        case 2:   // a tensor the index places in a shard that lacks it
            rewrite(bad, q_shard, "model.layers.0.self_attn.q_proj.weight", EDIT_DROP);
            needle = "lacks tensor 'model.layers.0.self_attn.q_proj.weight'";
            break;
        case 3:   // a tensor no model of the config has
            rewrite(bad, emb_shard, "model.layers.0.self_attn.o_proj.bias", EDIT_EXTRA);
            needle = "'model.layers.0.self_attn.o_proj.bias'";
            break;
        case 4:   // the config disagrees with the weights' shapes
            snprintf(path, sizeof path, "%s/config.json", bad);
            f = fopen(path, "w");
            fprintf(f, "{\"model_type\": \"llama\", \"vocab_size\": 67, \"hidden_size\": 32, \"intermediate_size\": 96, "
                       "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
                       "\"rms_norm_eps\": 1e-5, \"rope_theta\": 500000}");
            fclose(f);
            needle = "'model.layers.0.mlp.gate_proj.weight' has shape [80, 32], but '";
            break;
        case 5: {   // a header that lies about the data (offsets past the file)
            snprintf(path, sizeof path, "%s/%s", bad, q_shard);
            f = fopen(path, "r+b");
            uint8_t hdr[4096];
            size_t n = fread(hdr, 1, sizeof hdr, f);
            char *at = NULL;
            for (size_t i = 0; !at && i + 18 <= n; i++)
                if (memcmp(hdr + i, "\"data_offsets\":[0,", 18) == 0) at = (char *)hdr + i;
            if (at) at[16] = '9';   // [9, ...: the tensors no longer tile the data
            fseek(f, 0, SEEK_SET);
            fwrite(hdr, 1, n, f);
            fclose(f);
            needle = q_shard;
            CHECK(at != NULL, "the shard's header has data_offsets");
            break;
        }
        case 6:   // NaN weights
            copy_dir(strcat(strcpy(path, work), "/nan"), bad);
            needle = "is nan: a model's weights are finite";
            break;
        case 7:   // malformed config.json
            snprintf(path, sizeof path, "%s/config.json", bad);
            f = fopen(path, "w");
            fprintf(f, "{\"model_type\": \"llama\", \"vocab_size\": 67,");
            fclose(f);
            needle = "config.json' is not valid JSON";
            break;
        case 8:   // unknown model_type
            snprintf(path, sizeof path, "%s/config.json", bad);
            f = fopen(path, "w");
            fprintf(f, "{\"model_type\": \"t5\"}");
            fclose(f);
            needle = "'model_type' is \"t5\"";
            break;
        }
        // the model to load into: the good config's, with weights that must stay as they are
        GPT m;
        GPTConfig mc = cfg;
        if (k == 4) mc.ffn = 96;   // built from the config that disagrees with the files
        make_model(&m, &mc, 99);
        float *before = xmalloc(m.n_params * sizeof(float));
        memcpy(before, m.params, m.n_params * sizeof(float));
        int rc = hf_load_into(&m, bad, err, sizeof err);
        CHECK(rc != 0 && strstr(err, bad) && strstr(err, needle), "refusal %d: rc %d, message '%s' lacks \"%s\"", k, rc,
              err, needle);
        CHECK(memcmp(before, m.params, m.n_params * sizeof(float)) == 0, "refusal %d changed the model", k);
        free(before);
        gpt_free(&m);
    }
    hf_index_free(&ix);
}

// A Qwen3 directory (q/k norms) into a model without them, and a llama one into a model with them; a Phi-3
// one (fused projections) into a model without them, and a llama one into a model with them: refused naming
// the config field, the model left as it was (test_round_trips wrote the directories).
static void test_qk_norm_mismatch(void) {
    static const struct { const char *dir; int tie, qk, fused, window, rotary; const char *needle; } CASES[] = {
        {"qwen3_tied", 1, 0, 0, 0, 0, "field 'model_type qwen3 (q/k norms)' is 1 but the model being loaded has 0"},
        {"llama_tied_sharded", 1, 1, 0, 0, 0, "field 'model_type qwen3 (q/k norms)' is 0 but the model being loaded has 1"},
        {"phi3_untied", -1, 0, 0, 0, 0,
         "field 'model_type phi3 (fused qkv_proj, gate_up_proj)' is 1 but the model being loaded has 0"},
        {"llama_untied", -1, 0, 1, 0, 0,
         "field 'model_type phi3 (fused qkv_proj, gate_up_proj)' is 0 but the model being loaded has 1"},
        // the same tensors, another model: a window the files' config does not have, RoPE on part of each head
        {"llama_untied", -1, 0, 0, 8, 0, "field 'sliding_window (0: none)' is 0 but the model being loaded has 8"},
        {"phi3_untied", -1, 0, 1, 0, 4,
         "field 'partial_rotary_factor (rotated dims; 0: all)' is 0 but the model being loaded has 4"},
    };
    for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
        GPTConfig cfg = small_config(ARCH_LLAMA, CASES[k].tie, 0);
        cfg.qk_norm = CASES[k].qk;
        cfg.fused_proj = CASES[k].fused;
        cfg.sliding_window = CASES[k].window;
        cfg.rotary_dim = CASES[k].rotary;
        GPT m;
        make_model(&m, &cfg, 7);
        float *before = xmalloc(m.n_params * sizeof(float));
        memcpy(before, m.params, m.n_params * sizeof(float));
        char dir[1100], err[1024] = "";
        dir_path(dir, sizeof dir, CASES[k].dir);
        int rc = hf_load_into(&m, dir, err, sizeof err);
        CHECK(rc != 0 && strstr(err, "config.json") && strstr(err, CASES[k].needle),
              "%s into q/k norms %d, fused %d, window %d, rotary %d: rc %d, '%s'", CASES[k].dir, CASES[k].qk,
              CASES[k].fused, CASES[k].window, CASES[k].rotary, rc, err);
        CHECK(memcmp(before, m.params, m.n_params * sizeof(float)) == 0, "%s: the refused load changed the model",
              CASES[k].dir);
        free(before);
        gpt_free(&m);
    }
}

// An export over an existing path writes nothing; a failed export leaves no directory.
static void test_export_atomic(void) {
    GPTConfig cfg = small_config(ARCH_GPT2, 1, 0);
    GPT m;
    make_model(&m, &cfg, 1);
    char out[1100], err[1024];
    dir_path(out, sizeof out, "exists");
    mkdir(out, 0755);
    HfExportOptions o = {ST_F32, 0, NULL, 0};
    CHECK(hf_export(&m, out, &o, err, sizeof err) != 0 && strstr(err, "exists"), "export over a directory: %s", err);
    dir_path(out, sizeof out, "no/such/parent/x");
    CHECK(hf_export(&m, out, &o, err, sizeof err) != 0 && strstr(err, "cannot create"), "export under a missing parent: %s", err);
    gpt_free(&m);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s WORKDIR\n", argv[0]);
        return 2;
    }
    snprintf(work, sizeof work, "%s", argv[1]);
    fs_remove_tree(work);
    mkdir(work, 0755);
    test_dtypes();
    test_bf16_write();
    test_config_ok();
    test_config_qwen3();
    test_config_phi3();
    test_config_window();
    test_config_refused();
    test_config_round_trip();
    test_config_rotary();
    test_index();
    test_round_trips();
    test_qk_norm_mismatch();
    test_layouts();
    test_refusals();
    test_export_atomic();
    return check_summary();
}
