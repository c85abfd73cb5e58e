// ctron export --hf OUT --ckpt CKPT: a checkpoint as a Hugging Face model directory (io/hf_export.h);
// of a LoRA checkpoint, --merge folds the adapters into the base, --peft OUT writes them as a peft
// adapter directory (io/peft_adapter.h).
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/export_cmd.h"
#include "io/checkpoint.h"
#include "io/hf_config_write.h"
#include "io/hf_export.h"
#include "io/peft_adapter.h"
#include "model/lora_merge.h"
#include "util/common.h"
#include "util/fileio.h"

#define CMD "export"
#define DEFAULT_SHARD 5368709120.0   // 5 GiB, about transformers 4's default shard size

typedef struct {
    const char *out, *ckpt, *peft;
    StDtype dtype;
    double max_shard;
    int merge;
} ExportArgs;

void cli_export_usage(FILE *f) {
    fprintf(f,
        "usage: ctron export --hf OUT --ckpt CKPT [--merge] [--dtype fp32|bf16] [--max-shard-size BYTES]\n"
        "       ctron export --peft OUT --ckpt CKPT\n"
        "\n"
        "  --hf OUT               the Hugging Face model directory to write (it must not exist)\n"
        "  --merge                a LoRA checkpoint: the base with every adapter folded in, W + (alpha/r)·B·A\n"
        "  --peft OUT             a LoRA checkpoint's adapters as a peft directory (adapter_config.json,\n"
        "                         adapter_model.safetensors) for PeftModel.from_pretrained(base, OUT)\n"
        "  --ckpt CKPT            a run directory (its newest checkpoint that verifies) or one step_NNNNNNNN\n"
        "  --dtype fp32|bf16      the weights' dtype in the files (bf16: rounded to nearest even; default fp32)\n"
        "  --max-shard-size SIZE  the most bytes per weight file (6GiB, 512MiB, 2e9; default 5GiB): larger\n"
        "                         models go to model-0000K-of-0000N.safetensors with model.safetensors.index.json\n"
        "  -h, --help             this text\n"
        "\n"
        "OUT gets config.json (GPT2LMHeadModel; LlamaForCausalLM, or Qwen2ForCausalLM for q/k/v biases,\n"
        "Qwen3ForCausalLM for q/k norms, Phi3ForCausalLM for fused projections, MistralForCausalLM for a sliding\n"
        "window alone; every shape and epsilon, rope_theta and any RoPE scaling, the window, Phi-3's\n"
        "partial_rotary_factor, tie_word_embeddings, dtype; RoPE on part of each head is refused off Phi-3's\n"
        "block), generation_config.json,\n"
        "the weights under their Hugging Face names and orientation, and the checkpoint's tokenizer.json when it\n"
        "has one.\n"
        "transformers' AutoModelForCausalLM.from_pretrained(OUT) loads it as it is. The directory appears\n"
        "whole or not at all (written beside it, then renamed). Exit 2 on a usage error, 1 when writing fails.\n");
}

enum { OPT_HF = 1000, OPT_CKPT, OPT_DTYPE, OPT_SHARD, OPT_MERGE, OPT_PEFT };

static int parse(int argc, char **argv, ExportArgs *a) {
    static const struct option opts[] = {
        {"hf", required_argument, 0, OPT_HF}, {"ckpt", required_argument, 0, OPT_CKPT},
        {"dtype", required_argument, 0, OPT_DTYPE}, {"max-shard-size", required_argument, 0, OPT_SHARD},
        {"merge", no_argument, 0, OPT_MERGE}, {"peft", required_argument, 0, OPT_PEFT},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->dtype = ST_F32;
    a->max_shard = DEFAULT_SHARD;
    int rc = 0, ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *flag = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        switch (ch) {
        case OPT_HF: a->out = optarg; break;
        case OPT_CKPT: a->ckpt = optarg; break;
        case OPT_MERGE: a->merge = 1; break;
        case OPT_PEFT: a->peft = optarg; break;
        case OPT_DTYPE:
            if (strcmp(optarg, "fp32") == 0) a->dtype = ST_F32;
            else if (strcmp(optarg, "bf16") == 0) a->dtype = ST_BF16;
            else return args_error(CMD, "--dtype: unknown dtype '%s' (expected fp32 or bf16)", optarg);
            break;
        case OPT_SHARD: rc = args_bytes(CMD, "--max-shard-size", optarg, 1024.0, 1099511627776.0, &a->max_shard); break;
        case 'h': cli_export_usage(stdout); return -1;
        case ':': return args_error(CMD, "%s: missing value", flag);
        default: return args_error(CMD, "unknown option '%s'", flag);
        }
        if (rc) return rc;
    }
    if (optind < argc) return args_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (a->out && a->peft) return args_error(CMD, "--hf and --peft: one export at a time");
    if (a->peft && a->merge) return args_error(CMD, "--merge belongs to --hf (--peft writes the adapters apart)");
    if (!a->out && !a->peft) return args_error(CMD, "--hf OUT or --peft OUT is required (the directory to write)");
    if (!a->ckpt) return args_error(CMD, "--ckpt is required (a run directory or a step_NNNNNNNN directory)");
    struct stat sb;
    const char *out = a->out ? a->out : a->peft;
    if (lstat(out, &sb) == 0)
        return args_error(CMD, "%s: '%s' exists; the export writes a new directory", a->out ? "--hf" : "--peft", out);
    return 0;
}

int cli_export_main(int argc, char **argv) {
    ExportArgs a;
    int rc = parse(argc, argv, &a);
    if (rc == -1) return 0;
    if (rc) return rc;
    char step_dir[4096], err[2048];
    int found = ckpt_resolve(a.ckpt, step_dir, sizeof step_dir, NULL, 0, err, sizeof err);
    if (found == -2) {
        fprintf(stderr, "ctron %s: error: --ckpt: %s\n", CMD, err);
        return 1;
    }
    CkptState st;
    if (found != 0 || ckpt_read_state(step_dir, &st, err, sizeof err) != 0) return args_error(CMD, "--ckpt: %s", err);
    if (st.model.reversible)
        return args_error(CMD, "--ckpt %s is a reversible-block model: Hugging Face has no such architecture", step_dir);
    if (a.out && hf_config_exportable(&st.model, err, sizeof err) != 0)
        return args_error(CMD, "--ckpt %s: %s", step_dir, err);
    int lora = st.model.lora_rank > 0;
    if (lora && a.out && !a.merge)
        return args_error(CMD, "--ckpt '%s' is a LoRA checkpoint (rank %d): --merge writes its base with the adapters "
                          "folded in; --peft OUT writes the adapters for peft", step_dir, st.model.lora_rank);
    if (!lora && (a.peft || a.merge))
        return args_error(CMD, "%s: --ckpt '%s' has no LoRA adapters", a.peft ? "--peft" : "--merge", step_dir);
    GPT m;
    gpt_init_params(&m, &st.model);
    uint8_t *tok = NULL;
    size_t tok_bytes = 0;
    rc = ckpt_load(step_dir, &m, NULL, NULL, err, sizeof err);
    if (rc == 0 && st.tokenizer_path[0]) rc = fileio_read_all(st.tokenizer_path, &tok, &tok_bytes, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "ctron %s: error: --ckpt: %s\n", CMD, err);
        gpt_free(&m);
        return 1;
    }
    if (a.peft) {
        rc = peft_write(&m, a.peft, NULL, err, sizeof err);
        if (rc != 0) fprintf(stderr, "ctron %s: error: %s\n", CMD, err);
        else printf("exported the LoRA adapters of %s (step %d, rank %d, %zu trained parameters) to %s\n", step_dir,
                    st.step, m.cfg.lora_rank, m.n_params, a.peft);
        free(tok);
        gpt_free(&m);
        return rc ? 1 : 0;
    }
    GPT *src = &m, merged;
    if (lora) {   // the base with the adapters folded in: a plain model of the same architecture
        GPTConfig pc = lora_base_config(&m.cfg);
        gpt_init_params(&merged, &pc);
        lora_to_plain(&m, &merged, 1);
        src = &merged;
    }
    HfExportOptions o = {a.dtype, (size_t)a.max_shard, tok, tok_bytes};
    rc = hf_export(src, a.out, &o, err, sizeof err);
    if (rc != 0) fprintf(stderr, "ctron %s: error: %s\n", CMD, err);
    else printf("exported %s (step %d, %zu parameters%s, %s%s) to %s\n", step_dir, st.step, src->n_params,
                lora ? ", LoRA adapters merged" : "", a.dtype == ST_BF16 ? "bf16" : "fp32", tok ? ", tokenizer.json" : "",
                a.out);
    if (lora) gpt_free(&merged);
    free(tok);
    gpt_free(&m);
    return rc ? 1 : 0;
}
