// ctron eval: the loss and perplexity of a model (a Hugging Face directory or a ctron checkpoint) on a
// data file; and the parity-debugging dump of one batch's logits, loss and gradients as transformers
// computes them (cli/eval_dump.c).
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/eval_cmd.h"
#include "io/model_source.h"
#include "data/dataset.h"
#include "data/tokenfile.h"
#include "util/common.h"

#define CMD "eval"

typedef struct {
    const char *model, *data, *ids, *dump, *adapter;
    int grads, seq, batch, max_windows, threads, json;
} EvalArgs;

void cli_eval_usage(FILE *f) {
    fprintf(f,
        "usage: ctron eval --model PATH --data FILE [options]\n"
        "       ctron eval --model PATH --ids IDS.safetensors --dump OUT.safetensors [--grads]\n"
        "\n"
        "  --model PATH      a Hugging Face model directory (config.json and model.safetensors or its shards\n"
        "                    with model.safetensors.index.json; model_type gpt2, llama, mistral, qwen2;\n"
        "                    F32, BF16 or F16 weights) or a ctron run or step_NNNNNNNN directory (a LoRA\n"
        "                    run's: its adapters merged)\n"
        "  --adapter DIR     a peft LoRA adapter directory for the model, merged into its weights\n"
        "  --data FILE       a token file, or text encoded with the model's tokenizer.json (byte by byte\n"
        "                    when it has none)\n"
        "  --seq N           tokens a window predicts (default: a checkpoint's seq; an HF model's\n"
        "                    positions, at most 1024)\n"
        "  --batch N         windows per forward pass (default 4)\n"
        "  --max-windows N   evaluate the first N windows only (default: all)\n"
        "  --threads N       OpenMP/OpenBLAS threads (default: all cores)\n"
        "  --json            print one JSON object\n"
        "  --ids FILE        parity dump: input_ids, I32 or I64 [B, T] (T >= 2), in a safetensors file\n"
        "  --dump FILE       writes logits F32 [B, T, V] and loss F32 [1]: the mean cross-entropy over the\n"
        "                    B*(T-1) shifted positions, as transformers computes it with labels=input_ids\n"
        "  --grads           also grad.<HF name>: that loss's gradient for every parameter, under its\n"
        "                    Hugging Face name and orientation (a tied output layer's goes to the embedding)\n"
        "  -h, --help        this text\n"
        "\n"
        "The data is cut into consecutive windows of seq+1 tokens (seq inputs, each predicting the next);\n"
        "the loss is the mean cross-entropy over every predicted token, perplexity its exponential.\n"
        "Evaluation runs in fp32, without dropout. Exit 2 on bad input, naming the file and the field.\n");
}

enum { OPT_MODEL = 1000, OPT_DATA, OPT_IDS, OPT_DUMP, OPT_GRADS, OPT_SEQ, OPT_BATCH, OPT_MAXW, OPT_THREADS, OPT_JSON, OPT_ADAPTER };

static int parse(int argc, char **argv, EvalArgs *a) {
    static const struct option opts[] = {
        {"model", required_argument, 0, OPT_MODEL}, {"adapter", required_argument, 0, OPT_ADAPTER}, {"data", required_argument, 0, OPT_DATA},
        {"ids", required_argument, 0, OPT_IDS}, {"dump", required_argument, 0, OPT_DUMP},
        {"grads", no_argument, 0, OPT_GRADS}, {"seq", required_argument, 0, OPT_SEQ},
        {"batch", required_argument, 0, OPT_BATCH}, {"max-windows", required_argument, 0, OPT_MAXW},
        {"threads", required_argument, 0, OPT_THREADS}, {"json", no_argument, 0, OPT_JSON},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->batch = 4;
    int rc = 0, ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *flag = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        switch (ch) {
        case OPT_MODEL: a->model = optarg; break;
        case OPT_ADAPTER: a->adapter = optarg; break;
        case OPT_DATA: a->data = optarg; break;
        case OPT_IDS: a->ids = optarg; break;
        case OPT_DUMP: a->dump = optarg; break;
        case OPT_GRADS: a->grads = 1; break;
        case OPT_SEQ: rc = args_int(CMD, "--seq", optarg, 1, 1 << 24, &a->seq); break;
        case OPT_BATCH: rc = args_int(CMD, "--batch", optarg, 1, 1 << 16, &a->batch); break;
        case OPT_MAXW: rc = args_int(CMD, "--max-windows", optarg, 1, 2147483647, &a->max_windows); break;
        case OPT_THREADS: rc = args_int(CMD, "--threads", optarg, 1, 4096, &a->threads); break;
        case OPT_JSON: a->json = 1; break;
        case 'h': cli_eval_usage(stdout); return -1;
        case ':': return args_error(CMD, "%s: missing value", flag);
        default: return args_error(CMD, "unknown option '%s'", flag);
        }
        if (rc) return rc;
    }
    if (optind < argc) return args_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (!a->model) return args_error(CMD, "--model is required (an HF model directory or a ctron checkpoint)");
    if (!a->data == !a->ids) return args_error(CMD, "give either --data FILE, or --ids FILE with --dump FILE");
    if (a->ids && !a->dump) return args_error(CMD, "--ids needs --dump OUT.safetensors (where the logits go)");
    if (a->dump && !a->ids) return args_error(CMD, "--dump needs --ids IDS.safetensors (the batch to run)");
    if (a->grads && !a->dump) return args_error(CMD, "--grads belongs to the dump: give --ids and --dump");
    if (a->ids && (a->seq || a->max_windows)) return args_error(CMD, "--seq and --max-windows do not apply to --ids: "
                                                                     "its [B, T] shape is the batch");
    return 0;
}

// The windows of ds (all of it is one split here) evaluated in batches: Σ loss over the predicted tokens.
static double eval_windows(GPT *m, const Dataset *ds, int seq, int batch, long windows, size_t *tokens_out) {
    int32_t *tok = xmalloc((size_t)seq * batch * sizeof(int32_t)), *tgt = xmalloc((size_t)seq * batch * sizeof(int32_t));
    double sum = 0.0;
    StepCtx ctx = {0, 0, 0, 0};
    for (long w0 = 0; w0 < windows; w0 += batch) {
        int b = (int)(windows - w0 < batch ? windows - w0 : batch);
        for (int bi = 0; bi < b; bi++) {   // sequence-major [s, b]: window w0 + bi starts at (w0 + bi)·seq
            const int32_t *src = ds->tokens + (size_t)(w0 + bi) * seq;
            for (int s = 0; s < seq; s++) {
                tok[s * b + bi] = src[s];
                tgt[s * b + bi] = src[s + 1];
            }
        }
        sum += gpt_forward(m, tok, tgt, seq, b, ctx, 1.0f);
    }
    free(tok);
    free(tgt);
    *tokens_out = (size_t)windows * (size_t)seq;
    return sum;
}

static int run_data(const EvalArgs *a, const ModelSource *src) {
    char err[2048];
    int seq = a->seq ? a->seq : src->is_hf ? (src->cfg.seq < 1024 ? src->cfg.seq : 1024) : src->cfg.seq;
    GPTConfig cfg;
    if (model_source_config(src, seq, a->batch, &cfg, err, sizeof err) != 0) return args_error(CMD, "--seq: %s", err);
    // Text goes through the model's tokenizer; a token file is read as stored.
    int is_tokens = tokenfile_sniff(a->data, err, sizeof err);
    if (is_tokens < 0) return args_error(CMD, "--data: %s", err);
    Dataset ds;
    const char *tok = !is_tokens && src->tokenizer[0] ? src->tokenizer : NULL;
    if (dataset_load(&ds, a->data, tok, 0.0, cfg.vocab, err, sizeof err) != 0)
        return args_error(CMD, "--data: %s%s", err, tok ? " (a token file needs no tokenizer)" : "");
    long windows = ds.n > 1 ? (long)((ds.n - 1) / (size_t)seq) : 0;
    if (windows < 1) {
        dataset_free(&ds);
        return args_error(CMD, "--data: '%s' holds %zu tokens, fewer than one window of --seq %d + 1", a->data, ds.n, seq);
    }
    if (a->max_windows && windows > a->max_windows) windows = a->max_windows;
    GPT m;
    gpt_init(&m, &cfg, NULL);
    if (model_source_load(src, &m, err, sizeof err) != 0) {
        gpt_free(&m);
        dataset_free(&ds);
        return args_error(CMD, "--model: %s", err);
    }
    size_t n_tok;
    double t0 = now_seconds(), sum = eval_windows(&m, &ds, seq, a->batch, windows, &n_tok), secs = now_seconds() - t0;
    double loss = sum / (double)n_tok;
    if (a->json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "model", src->path);
        cJSON_AddStringToObject(o, "data", a->data);
        cJSON_AddNumberToObject(o, "loss", loss);
        cJSON_AddNumberToObject(o, "perplexity", exp(loss));
        cJSON_AddNumberToObject(o, "tokens", (double)n_tok);
        cJSON_AddNumberToObject(o, "windows", (double)windows);
        cJSON_AddNumberToObject(o, "seq", seq);
        cJSON_AddNumberToObject(o, "seconds", secs);
        char *text = cJSON_PrintUnformatted(o);
        printf("%s\n", text);
        cJSON_free(text);
        cJSON_Delete(o);
    } else {
        printf("loss %.6f  perplexity %.4f  over %zu tokens (%ld windows of %d) of %s, model %s (%.1f s)\n", loss,
               exp(loss), n_tok, windows, seq, a->data, src->path, secs);
    }
    gpt_free(&m);
    dataset_free(&ds);
    return 0;
}

int cli_eval_main(int argc, char **argv) {
    EvalArgs a;
    int rc = parse(argc, argv, &a);
    if (rc == -1) return 0;
    if (rc) return rc;
    if (a.threads > 0) omp_set_num_threads(a.threads);
    ModelSource src;
    char err[2048];
    int found = model_source_open(a.model, &src, err, sizeof err);
    if (found == -2) {   // checkpoints that fail validation: a runtime error, as generate and --resume
        fprintf(stderr, "ctron %s: error: --model: %s\n", CMD, err);
        return 1;
    }
    if (found != 0) return args_error(CMD, "--model: %s", err);
    if (a.adapter && model_source_set_adapter(&src, a.adapter, err, sizeof err) != 0)
        return args_error(CMD, "--adapter: %s", err);
    return a.ids ? eval_dump(&src, a.ids, a.dump, a.grads) : run_data(&a, &src);
}
