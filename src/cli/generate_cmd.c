// ctron generate: load a checkpoint, continue a prompt with the KV-cache inference path.
#include <cjson/cJSON.h>
#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/generate_cmd.h"
#include "backend/cpu/gemm_bf16.h"
#include "io/model_source.h"
#include "memory/ledger_report.h"
#include "model/generate.h"
#include "tokenizer/bpe.h"
#include "tokenizer/text.h"
#include "util/common.h"

#define CMD "generate"

typedef struct {
    const char *ckpt, *model, *prompt, *adapter;
    int tokens, top_k, threads, json, ignore_eos, no_bos;
    Precision precision;
    int precision_given;    // else the checkpoint's (training.precision)
    float temperature;
    uint64_t seed;
    ModelSource src;        // --ckpt or --model
    Bpe bpe;                // the checkpoint's tokenizer.json, when it has one
    int has_bpe;
    int32_t *prompt_ids;    // the prompt, encoded
    int n_prompt;
} GenArgs;

void cli_generate_usage(FILE *f) {
    fprintf(f,
        "usage: ctron generate --ckpt DIR [options]\n"
        "       ctron generate --model PATH [options]\n"
        "\n"
        "  --ckpt DIR        a run directory (its newest checkpoint) or one step_NNNNNNNN directory\n"
        "  --model PATH      the same, or a Hugging Face model directory (config.json + safetensors; its\n"
        "                    window is its positions, at most 1024)\n"
        "  --adapter DIR     a peft LoRA adapter directory for the model, merged into its weights\n"
        "  --prompt TEXT     text to continue (default a newline)\n"
        "  --tokens N        tokens to generate (default 200)\n"
        "  --temperature T   softmax temperature, 0 = greedy (default 0.8)\n"
        "  --top-k K         sample among the K most likely tokens, 0 = all (default 0)\n"
        "  --seed N          sampling seed: the same seed gives the same tokens (default 1337)\n"
        "  --threads N       OpenMP/OpenBLAS threads (default: all cores)\n"
        "  --precision fp32|bf16  mixed precision (bf16): the GEMMs run on a bf16 copy of the weights\n"
        "                    (fp32 accumulation), as `ctron train --precision bf16` does (default: the\n"
        "                    precision the checkpoint was trained in)\n"
        "  --ignore-eos      go on past the model's end-of-sequence ids (generation_config.json's or\n"
        "                    config.json's eos_token_id, kept in checkpoints); by default generation ends\n"
        "                    at one, as transformers' generate does\n"
        "  --no-bos          encode the prompt without the tokenizer's BOS (by default the ids its\n"
        "                    post-processor puts before a text go first, as transformers' tokenizer(prompt))\n"
        "  --json            print one JSON object (token ids and speed) instead of the text\n"
        "  -h, --help        this text\n"
        "\n"
        "The model's family (gpt2, llama) and shape come from the checkpoint's state.json.\n"
        "Text is encoded with the checkpoint's tokenizer.json (BPE) when it has one, else byte by byte.\n"
        "When prompt + output outgrow the model's sequence length the window slides: the newest half\n"
        "is prefilled again and generation goes on.\n"
        "Speed (tokens/s) goes to stderr.\n");
}

enum { OPT_CKPT = 1000, OPT_MODEL, OPT_PROMPT, OPT_TOKENS, OPT_TEMP, OPT_TOPK, OPT_SEED, OPT_THREADS, OPT_JSON, OPT_PRECISION, OPT_ADAPTER,
       OPT_IGNORE_EOS, OPT_NO_BOS };

static int parse(int argc, char **argv, GenArgs *g) {
    static const struct option opts[] = {
        {"ckpt", required_argument, 0, OPT_CKPT}, {"model", required_argument, 0, OPT_MODEL},
        {"adapter", required_argument, 0, OPT_ADAPTER}, {"prompt", required_argument, 0, OPT_PROMPT},
        {"tokens", required_argument, 0, OPT_TOKENS}, {"temperature", required_argument, 0, OPT_TEMP},
        {"top-k", required_argument, 0, OPT_TOPK}, {"seed", required_argument, 0, OPT_SEED},
        {"threads", required_argument, 0, OPT_THREADS}, {"json", no_argument, 0, OPT_JSON},
        {"precision", required_argument, 0, OPT_PRECISION}, {"ignore-eos", no_argument, 0, OPT_IGNORE_EOS},
        {"no-bos", no_argument, 0, OPT_NO_BOS}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    memset(g, 0, sizeof *g);
    g->prompt = "\n";
    g->tokens = 200;
    g->temperature = 0.8f;
    g->seed = 1337;
    double x;
    int rc = 0, seed, ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *flag = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        switch (ch) {
        case OPT_CKPT: g->ckpt = optarg; break;
        case OPT_MODEL: g->model = optarg; break;
        case OPT_ADAPTER: g->adapter = optarg; break;
        case OPT_PROMPT: g->prompt = optarg; break;
        case OPT_TOKENS: rc = args_int(CMD, "--tokens", optarg, 1, 100000000, &g->tokens); break;
        case OPT_TEMP: rc = args_double(CMD, "--temperature", optarg, 0.0, 100.0, 0, &x); g->temperature = (float)x; break;
        case OPT_TOPK: rc = args_int(CMD, "--top-k", optarg, 0, 1 << 30, &g->top_k); break;
        case OPT_SEED: rc = args_int(CMD, "--seed", optarg, 0, 2147483647, &seed); g->seed = (uint64_t)seed; break;
        case OPT_THREADS: rc = args_int(CMD, "--threads", optarg, 1, 4096, &g->threads); break;
        case OPT_JSON: g->json = 1; break;
        case OPT_IGNORE_EOS: g->ignore_eos = 1; break;
        case OPT_NO_BOS: g->no_bos = 1; break;
        case OPT_PRECISION:
            if (precision_parse(optarg, &g->precision) != 0)
                return args_error(CMD, "--precision: unknown precision '%s' (expected fp32 or bf16)", optarg);
            g->precision_given = 1;
            break;
        case 'h': cli_generate_usage(stdout); return -1;
        case ':': return args_error(CMD, "%s: missing value", flag);
        default: return args_error(CMD, "unknown option '%s'", flag);
        }
        if (rc) return rc;
    }
    if (optind < argc) return args_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (g->ckpt && g->model) return args_error(CMD, "give --ckpt or --model, not both");
    if (!g->ckpt && !g->model)
        return args_error(CMD, "--ckpt is required (a run directory or a step_NNNNNNNN directory; or --model PATH)");
    const char *flag = g->ckpt ? "--ckpt" : "--model";
    char err[2048];
    int found = model_source_open(g->ckpt ? g->ckpt : g->model, &g->src, err, sizeof err);
    if (found == -2) {   // checkpoints that fail validation: a runtime error (exit 1, docs/CLI.md), not usage
        fprintf(stderr, "ctron %s: error: %s: %s\n", CMD, flag, err);
        return 1;
    }
    if (found != 0) return args_error(CMD, "%s: %s", flag, err);
    if (g->adapter && model_source_set_adapter(&g->src, g->adapter, err, sizeof err) != 0)
        return args_error(CMD, "--adapter: %s", err);
    if (g->ckpt && g->src.is_hf)
        return args_error(CMD, "--ckpt: '%s' is a Hugging Face model directory: use --model", g->ckpt);
    if (!g->precision_given) g->precision = (Precision)g->src.precision;   // as the run trained
    if (g->precision == PRECISION_BF16) {   // as train: said before any work when the GEMMs are not native
        int support = gemm_bf16_support(err, sizeof err);
        if (support == GEMM_BF16_WIDENED)
            fprintf(stderr, "ctron generate: note: %s; the bf16 GEMMs run widened to fp32 sgemm, slower than fp32\n", err);
        if (support == GEMM_BF16_EMULATED)
            fprintf(stderr, "ctron generate: note: %s; the bf16 GEMMs run emulated, correct but slower than fp32\n", err);
    }
    int v = g->src.cfg.vocab;
    if (g->top_k > v) return args_error(CMD, "--top-k %d exceeds the model's vocabulary of %d", g->top_k, v);
    if (g->prompt[0] == '\0') return args_error(CMD, "--prompt is empty: generation needs at least one token");
    size_t n_bytes = strlen(g->prompt), n_ids = n_bytes;
    if (g->src.tokenizer[0]) {   // a BPE run: its vocabulary was saved beside the weights
        if (bpe_load(&g->bpe, g->src.tokenizer, err, sizeof err) != 0) return args_error(CMD, "%s: %s", flag, err);
        g->has_bpe = 1;
        if (g->bpe.vocab_size > v)
            return args_error(CMD, "%s: tokenizer.json has %d tokens but the model only %d", flag, g->bpe.vocab_size, v);
        // The post-processor's leading ids (Llama's BOS) first, as transformers' tokenizer(prompt)
        // gives them; not its trailing ones (an EOS would end the text being continued).
        BpeEncoder *e = bpe_encoder_new(&g->bpe);
        if (!g->no_bos) bpe_encoder_push(e, g->bpe.bos, (size_t)g->bpe.n_bos);
        bpe_encoder_add(e, (const uint8_t *)g->prompt, n_bytes, 0, NULL, NULL);
        g->prompt_ids = bpe_encoder_take(e, &n_ids);
        bpe_encoder_free(e);
        if (n_ids == 0) return args_error(CMD, "--prompt '%s' encodes to no tokens", g->prompt);
    } else {
        g->prompt_ids = xmalloc(n_bytes * sizeof(int32_t));
        for (size_t i = 0; i < n_bytes; i++) {
            g->prompt_ids[i] = (unsigned char)g->prompt[i];
            if (g->prompt_ids[i] >= v)
                return args_error(CMD, "--prompt: byte %d is outside the model's vocabulary of %d", g->prompt_ids[i], v);
        }
    }
    g->n_prompt = (int)n_ids;
    return 0;
}

static int is_eos(const GenArgs *g, int32_t tok) {
    const SpecialTokens *t = &g->src.cfg.tokens;
    for (int k = 0; k < t->n_eos && !g->ignore_eos; k++)
        if (tok == t->eos[k]) return 1;
    return 0;
}

// Writes one token's text as soon as it is drawn (the end-of-sequence token that ends it is not text).
// Ids past the tokenizer's (or the 256 bytes) are unused rows of a larger model vocabulary: '?'.
static void emit_token(void *ctx, int32_t tok) {
    const GenArgs *g = ctx;
    if (is_eos(g, tok)) return;
    text_write_token(g->has_bpe ? &g->bpe : NULL, tok, stdout);
    fflush(stdout);
}

static void free_args(GenArgs *g) {
    if (g->has_bpe) bpe_free(&g->bpe);
    free(g->prompt_ids);
}

// The family and shape the checkpoint's state.json gave (resolved: every knob explicit).
static void describe_model(const GPTConfig *c, char *buf, size_t len) {
    snprintf(buf, len, "%s: %d layers, hidden %d, %d heads, %d kv heads, ffn %d, %s output layer",
             arch_spec((ArchKind)c->arch)->name, c->layers, c->hidden, c->heads, c->kv_heads, c->ffn,
             gpt_tied(c) ? "tied" : "untied");
}

static void print_json(const GenArgs *g, const GPTConfig *c, const int32_t *out, const GenStats *st) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "checkpoint", g->src.path);
    cJSON_AddStringToObject(o, "arch", arch_spec((ArchKind)c->arch)->name);
    cJSON_AddNumberToObject(o, "step", g->src.is_hf ? 0 : g->src.state.step);
    cJSON_AddNumberToObject(o, "prompt_tokens", st->prompt_tokens);
    cJSON_AddNumberToObject(o, "prompt_used", st->prompt_used);
    cJSON *t = cJSON_AddArrayToObject(o, "tokens");
    for (int i = 0; i < st->generated; i++) cJSON_AddItemToArray(t, cJSON_CreateNumber(out[i]));
    cJSON_AddNumberToObject(o, "seconds", st->total_seconds);
    cJSON_AddNumberToObject(o, "tokens_per_s", st->generated / st->total_seconds);
    cJSON_AddNumberToObject(o, "decode_tokens_per_s", st->decode_tokens ? st->decode_tokens / st->decode_seconds : 0.0);
    cJSON_AddNumberToObject(o, "slides", st->slides);
    cJSON_AddStringToObject(o, "stop", st->stopped ? "eos" : "length");   // transformers' words: eos, or max tokens
    char *text = cJSON_PrintUnformatted(o);
    printf("%s\n", text);
    cJSON_free(text);
    cJSON_Delete(o);
}

int cli_generate_main(int argc, char **argv) {
    GenArgs g;
    int rc = parse(argc, argv, &g);
    if (rc) free_args(&g);
    if (rc == -1) return 0;
    if (rc) return rc;
    if (g.threads > 0) omp_set_num_threads(g.threads);

    // inference runs one sequence (the training batch is irrelevant here) in the model's window
    int seq = g.src.is_hf && g.src.cfg.seq > 1024 ? 1024 : g.src.cfg.seq;
    GPTConfig cfg;
    char err[2048];
    if (model_source_config(&g.src, seq, 1, &cfg, err, sizeof err) != 0) {
        free_args(&g);
        return args_error(CMD, "--model: %s", err);
    }
    GPT m;
    MemoryPolicy pol;   // no recompute (nothing is trained); bf16: the model keeps a bf16 weight copy
    policy_default(&pol, cfg.layers);
    pol.precision = g.precision;
    gpt_init(&m, &cfg, &pol);
    policy_free(&pol);
    if (model_source_load(&g.src, &m, err, sizeof err) != 0) {
        // a checkpoint that verified and does not load: a runtime error; an HF directory: bad input
        int rc = g.src.is_hf ? args_error(CMD, "--model: %s", err) : 1;
        if (!g.src.is_hf) fprintf(stderr, "ctron generate: error: %s\n", err);
        gpt_free(&m);
        free_args(&g);
        return rc;
    }
    int n_prompt = g.n_prompt;
    int32_t *out = xmalloc((size_t)g.tokens * sizeof(int32_t));
    if (n_prompt > cfg.seq)
        fprintf(stderr, "ctron generate: note: the prompt has %d tokens, the model %d positions: using its last %d\n",
                n_prompt, cfg.seq, cfg.seq);
    const SpecialTokens *ids = &g.src.cfg.tokens;
    GenOptions go = {g.tokens, g.temperature, g.top_k, g.seed, ids->eos, g.ignore_eos ? 0 : ids->n_eos};
    GenStats st;
    if (!g.json) fputs(g.prompt, stdout);
    generate(&m, g.prompt_ids, n_prompt, &go, out, g.json ? NULL : emit_token, &g, &st);
    if (g.json) print_json(&g, &m.cfg, out, &st);
    else printf("\n");
    fflush(stdout);
    char b1[32], model[160];
    describe_model(&m.cfg, model, sizeof model);
    fprintf(stderr, "ctron generate: %d tokens in %.3f s: %.0f tokens/s (decode %.0f tokens/s; prefill %d tokens in "
            "%.1f ms; window slid %d times; KV cache %s%s) from %s (step %d; %s)\n", st.generated, st.total_seconds,
            st.generated / st.total_seconds, st.decode_tokens ? st.decode_tokens / st.decode_seconds : 0.0,
            st.prefill_tokens, st.prefill_seconds * 1e3, st.slides, format_bytes((double)st.cache_bytes, b1, sizeof b1),
            st.stopped ? "; ended at an end-of-sequence token" : "", g.src.path, g.src.is_hf ? 0 : g.src.state.step, model);
    free(out);
    free_args(&g);
    gpt_free(&m);
    return 0;
}
