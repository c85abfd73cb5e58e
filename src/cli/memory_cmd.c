// ctron memory: per-rank activation memory, parameter state and FLOPs of a model and layout,
// beside the paper's Figure 7 comparison. Nothing is allocated or run: it is the analytic model.
#include "cli/memory_cmd.h"
#include "memory/memo_model.h"
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/family_args.h"
#include "memory/fig7_svg.h"
#include "memory/fusion_search.h"
#include "memory/memory_report.h"
#include "memory/pipe_report.h"
#include "memory/presets.h"
#include "memory/lora_report.h"
#include "arch/lora.h"

#define CMD "memory"
#define MAX_MODELS 16

typedef struct {
    const char *preset;                            // comma list; NULL: gpt2 as the base
    int layers, hidden, heads, seq, batch, vocab;  // 0 = from the preset
    int tp, pp, interleave, gpus, global_batch;    // 0 = from the preset
    int virtual_stages, grad_accum, keep_all;      // --virtual-stages, --grad-accum, --recompute-microbatches
    PipeScheduleKind schedule;
    int schedule_given, keep_all_given;
    int sp;
    const char *recompute, *method, *list;
    int num_layers;                                // 0 = not given
    double act_budget_layer, search_gflops, search_gbps, search_link_gbps;   // --recompute search
    const char *act_dtype, *masks, *tempo;
    double dropout, iter_time, peak_tflops;
    int dropout_given;
    int gelu_bits, mini_seq, flash, reversible;
    unsigned offload;
    double memo;                                   // --memo ALPHA (-1: none)
    int json;
    const char *plot;
    int several;                                   // more than one model: errors name the preset
    FamilyArgs fam;                                // --arch, --kv-heads, --ffn-hidden, …
    int lora_rank, lora_fa;                        // --lora-rank (0: none), --lora-fa
    int base_bf16;                                 // --base-dtype bf16: the frozen base's weights at 2 B
    const char *lora_targets;                      // --lora-targets (NULL: the family's every site)
    double lora_alpha;                             // --lora-alpha (no memory term: checked, not used)
    int lora_rslora;                               // --lora-rslora (a scale: no memory term, checked, not used)
    int lora_mode;                                 // the variant build_config makes: LORA_NONE, _ADAPT, _FA
} MemArgs;

enum { LORA_MODE_NONE, LORA_MODE_ADAPT, LORA_MODE_FA };

void cli_memory_usage(FILE *f) {
    fprintf(f,
        "usage: ctron memory [--preset NAME[,NAME…]] [options]\n"
        "\n"
        "Per-rank activation memory of the first pipeline stage (the analytic model of ctron's\n"
        "ledger), parameter and optimizer state, FLOPs and MFU/HFU — beside the paper's Table 2 /\n"
        "Figure 7 comparison of tensor parallelism, sequence parallelism and recomputation.\n"
        "\n"
        "model (a preset's fields, overridden by any flag given)\n"
        "  --preset LIST            22B, 175B, 530B, 1T (the paper's Table 3 models and layouts),\n"
        "                           gpt2, gpt2-medium, gpt2-large, gpt2-xl, llama3-8b, llama3-70b,\n"
        "                           llama3-405b, llama3.2-1b, llama3.2-3b (tied), qwen3-0.6b, qwen3-1.7b,\n"
        "                           qwen3-4b (tied), qwen3-8b, qwen3-14b, qwen3-32b (heads 128 wide, q/k\n"
        "                           norms), phi-3-mini, phi-3-medium, phi-4, phi-4-mini (tied) (fused\n"
        "                           projections), 'paper' (the four Table 3 models), 'llama3' (the three\n"
        "                           Llama 3 models), 'llama3.2' (its two), 'qwen3' (the six Qwen3 models) or\n"
        "                           'phi3' (the four Phi models);\n"
        "                           several names print them side by side (default gpt2)\n"
        "  --layers N --hidden N --heads N --seq N --vocab N\n"
        "                           L, h, a, s, v (under --tp each rank holds ⌈v/t⌉ rows)\n"
        "  --batch N                micro-batch b (sequences)\n"
        "%s"
        "layout\n"
        "  --tp T                   tensor-parallel size; must divide heads (llama: kv-heads and ffn too)\n"
        "  --sp                     sequence parallelism (T must divide the sequence)\n"
        "  --pp P                   pipeline stages; must divide layers\n"
        "  --interleave M           virtual stages per rank (interleaved 1F1B; P·M must divide layers)\n"
        "  --virtual-stages V       the same as --interleave (give one, or the same value)\n"
        "  --pp-schedule S          1f1b, interleaved, gpipe or layered (default 1f1b; interleaved when\n"
        "                           V > 1 is given or the preset interleaves)\n"
        "  --grad-accum M           micro-batches per step through the pipeline (default the global\n"
        "                           batch's B / (b·dp), from the preset or --global-batch; P when --pp is\n"
        "                           given and the preset's global batch gives fewer: the batch follows)\n"
        "  --recompute-microbatches N  the first N activation contexts keep every activation\n"
        "                           (Megatron's micro-batches without partial activation checkpointing)\n"
        "                           With P > 1 or any of these flags, every stage's activation peak is\n"
        "                           printed from the schedule, beside the paper's Eq. 5 for the first\n"
        "  --gpus N                 GPUs in all (default the preset's data-parallel size × T × P)\n"
        "  --global-batch B         sequences per iteration (default the preset's micro-batches per\n"
        "                           pipeline × b × dp)\n"
        "what is kept\n"
        "  --recompute none|selective|full|search   (default none); search: the fusion-aware search's pick\n"
        "  --act-budget-layer BYTES                 search: what one layer may keep\n"
        "  --search-rates GFLOPS,GBPS[,LINK]        search: the rates that price a recompute (required here; LINK,\n"
        "                                           the TP link's GB/s, with --tp > 1)\n"
        "  --recompute-method uniform|block         full: groups of N, or the first N layers (default uniform)\n"
        "  --recompute-num-layers N                 full: N (default 1); per model chunk when pipelined\n"
        "  --recompute-layers LIST                  per layer, e.g. 0-3:full,4-47:selective (every layer;\n"
        "                                           memo layers may carry their own α: 0-3:memo@0.25)\n"
        "  --act-dtype fp32|bf16                    stored activations (default bf16, as the paper)\n"
        "  --precision fp32|bf16                    the same: train --precision bf16 keeps activations in bf16\n"
        "  --dropout-masks bytes|bits|regen         mask storage (default bytes)\n"
        "  --dropout P                              dropout probability (default 0.1, llama 0; 0 keeps no masks)\n"
        "  --tempo LIST                             Tempo parts: gelu, layernorm, softmax, all (default none)\n"
        "  --gelu-bits K                            Few-Bit GeLU codes of K bits (1..4) instead of gelu_in\n"
        "  --attention flash                        tiled attention: attn_lse instead of the s x s tensors\n"
        "  --mini-seq M                             MLP and output layer in M sequence chunks (keeps no\n"
        "                                           gelu_in, fc2_in, lm_in or logits; lm_grad instead)\n"
        "  --offload LIST                           per-layer tensors kept in an offload pool, not on the\n"
        "                                           device (e.g. fc1_in,gelu_in or all); two layers' worth\n"
        "                                           stay as stage slots\n"
        "  --memo ALPHA                             MEMO: every layer (or --recompute-layers' memo layers)\n"
        "                                           keeps its input; the first ALPHA of its tokens swapped\n"
        "                                           to host memory (memo_stage + the pool), the rest\n"
        "                                           recomputed in backward (per rank with --tp T; no --sp,\n"
        "                                           no --pp; with --lora-rank: lora_* kept whole)\n"
        "  --reversible                             reversible blocks: no layer keeps anything; the two fp32\n"
        "                                           streams and one half-layer rebuilt in backward\n"
        "fine-tuning (LoRA, docs/LORA.md)\n"
        "  --lora-rank R            print full fine-tuning vs LoRA vs LoRA-FA of rank R side by side: the\n"
        "                           frozen base has no gradient or AdamW state; activations as the ledger\n"
        "  --lora-targets LIST      adapted linears: q,k,v,o,gate,up,down (llama), qkv,o,gate_up,down (llama\n"
        "                           --fused-proj: Phi-3) or qkv,proj,fc,fc2 (GPT-2);\n"
        "                           default all of the family's\n"
        "  --lora-fa                the standard report is LoRA-FA's (A frozen: only x·Aᵀ kept)\n"
        "  --lora-alpha A, --lora-rslora  accepted as ctron train takes them (no memory term)\n"
        "  --base-dtype fp32|bf16   the frozen base's weights at 4 B (default) or 2 B per element (LoRA only)\n"
        "work\n"
        "  --iter-time SECONDS      measured iteration time, for MFU and HFU (the paper presets default to\n"
        "                           Table 5's time when the policy is full or SP + selective)\n"
        "  --peak-tflops X          per-GPU peak (default 312, A100 bf16)\n"
        "output\n"
        "  --json                   one JSON object ({\"models\": […]} for several presets)\n"
        "  --plot FILE.svg          a Figure-7-style bar chart of the model(s)\n"
        "  -h, --help               this text\n", family_args_usage);
}

enum {
    OPT_PRESET = 1000, OPT_LAYERS, OPT_HIDDEN, OPT_HEADS, OPT_SEQ, OPT_BATCH, OPT_VOCAB, OPT_TP, OPT_SP, OPT_PP,
    OPT_INTERLEAVE, OPT_GPUS, OPT_GLOBAL_BATCH, OPT_RECOMPUTE, OPT_METHOD, OPT_NUM_LAYERS, OPT_LIST, OPT_DTYPE,
    OPT_MASKS, OPT_DROPOUT, OPT_ITER_TIME, OPT_PEAK, OPT_JSON, OPT_PLOT, OPT_TEMPO, OPT_GELU_BITS, OPT_MINI_SEQ, OPT_ATTENTION,
    OPT_OFFLOAD, OPT_VIRTUAL_STAGES, OPT_PP_SCHEDULE, OPT_GRAD_ACCUM, OPT_KEEP_ALL, OPT_REVERSIBLE, OPT_MEMO,
    OPT_LORA_RANK, OPT_LORA_ALPHA, OPT_LORA_TARGETS, OPT_LORA_FA, OPT_LORA_RSLORA, OPT_BASE_DTYPE, OPT_ACT_BUDGET_LAYER,
    OPT_SEARCH_RATES
};

static int parse(int argc, char **argv, MemArgs *a) {
    static const struct option opts[] = {
        {"preset", required_argument, 0, OPT_PRESET}, {"layers", required_argument, 0, OPT_LAYERS},
        {"hidden", required_argument, 0, OPT_HIDDEN}, {"heads", required_argument, 0, OPT_HEADS},
        {"seq", required_argument, 0, OPT_SEQ}, {"batch", required_argument, 0, OPT_BATCH},
        {"vocab", required_argument, 0, OPT_VOCAB}, {"tp", required_argument, 0, OPT_TP},
        {"sp", no_argument, 0, OPT_SP}, {"pp", required_argument, 0, OPT_PP},
        {"interleave", required_argument, 0, OPT_INTERLEAVE}, {"gpus", required_argument, 0, OPT_GPUS},
        {"global-batch", required_argument, 0, OPT_GLOBAL_BATCH}, {"recompute", required_argument, 0, OPT_RECOMPUTE},
        {"act-budget-layer", required_argument, 0, OPT_ACT_BUDGET_LAYER}, {"search-rates", required_argument, 0, OPT_SEARCH_RATES},
        {"recompute-method", required_argument, 0, OPT_METHOD},
        {"recompute-num-layers", required_argument, 0, OPT_NUM_LAYERS},
        {"recompute-layers", required_argument, 0, OPT_LIST}, {"act-dtype", required_argument, 0, OPT_DTYPE},
        {"precision", required_argument, 0, OPT_DTYPE},
        {"dropout-masks", required_argument, 0, OPT_MASKS}, {"dropout", required_argument, 0, OPT_DROPOUT},
        {"tempo", required_argument, 0, OPT_TEMPO}, {"gelu-bits", required_argument, 0, OPT_GELU_BITS},
        {"mini-seq", required_argument, 0, OPT_MINI_SEQ}, {"attention", required_argument, 0, OPT_ATTENTION},
        {"offload", required_argument, 0, OPT_OFFLOAD}, {"reversible", no_argument, 0, OPT_REVERSIBLE},
        {"memo", required_argument, 0, OPT_MEMO},
        {"virtual-stages", required_argument, 0, OPT_VIRTUAL_STAGES}, {"pp-schedule", required_argument, 0, OPT_PP_SCHEDULE},
        {"grad-accum", required_argument, 0, OPT_GRAD_ACCUM}, {"recompute-microbatches", required_argument, 0, OPT_KEEP_ALL},
        {"iter-time", required_argument, 0, OPT_ITER_TIME}, {"peak-tflops", required_argument, 0, OPT_PEAK},
        {"json", no_argument, 0, OPT_JSON}, {"plot", required_argument, 0, OPT_PLOT},
        {"lora-rank", required_argument, 0, OPT_LORA_RANK}, {"lora-alpha", required_argument, 0, OPT_LORA_ALPHA},
        {"lora-rslora", no_argument, 0, OPT_LORA_RSLORA},
        {"lora-targets", required_argument, 0, OPT_LORA_TARGETS}, {"lora-fa", no_argument, 0, OPT_LORA_FA},
        {"base-dtype", required_argument, 0, OPT_BASE_DTYPE},
        FAMILY_LONG_OPTIONS, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    family_args_init(&a->fam);
    a->act_dtype = "bf16";
    a->masks = "bytes";
    a->dropout = 0.1;
    a->memo = -1.0;
    a->peak_tflops = 312.0;
    const int big = 1 << 30;
    int rc = 0, ch;
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *flag = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        switch (ch) {
        case OPT_PRESET: a->preset = optarg; break;
        case OPT_LAYERS: rc = args_int(CMD, "--layers", optarg, 1, 65535, &a->layers); break;
        case OPT_HIDDEN: rc = args_int(CMD, "--hidden", optarg, 1, 1 << 20, &a->hidden); break;
        case OPT_HEADS: rc = args_int(CMD, "--heads", optarg, 1, 1 << 20, &a->heads); break;
        case OPT_SEQ: rc = args_int(CMD, "--seq", optarg, 1, 1 << 24, &a->seq); break;
        case OPT_BATCH: rc = args_int(CMD, "--batch", optarg, 1, 1 << 20, &a->batch); break;
        case OPT_VOCAB: rc = args_int(CMD, "--vocab", optarg, 1, big, &a->vocab); break;
        case OPT_TP: rc = args_int(CMD, "--tp", optarg, 1, 1 << 16, &a->tp); break;
        case OPT_SP: a->sp = 1; break;
        case OPT_PP: rc = args_int(CMD, "--pp", optarg, 1, 65535, &a->pp); break;
        case OPT_INTERLEAVE: rc = args_int(CMD, "--interleave", optarg, 1, 65535, &a->interleave); break;
        case OPT_VIRTUAL_STAGES: rc = args_int(CMD, "--virtual-stages", optarg, 1, 65535, &a->virtual_stages); break;
        case OPT_PP_SCHEDULE:
            if (pipe_schedule_parse(optarg, &a->schedule) != 0)
                return args_error(CMD, "--pp-schedule: unknown schedule '%s' (expected 1f1b, interleaved, gpipe or layered)",
                                  optarg);
            a->schedule_given = 1;
            break;
        case OPT_GRAD_ACCUM: rc = args_int(CMD, "--grad-accum", optarg, 1, 1 << 20, &a->grad_accum); break;
        case OPT_KEEP_ALL:
            rc = args_int(CMD, "--recompute-microbatches", optarg, 0, 1 << 20, &a->keep_all);
            a->keep_all_given = 1;
            break;
        case OPT_GPUS: rc = args_int(CMD, "--gpus", optarg, 1, big, &a->gpus); break;
        case OPT_GLOBAL_BATCH: rc = args_int(CMD, "--global-batch", optarg, 1, big, &a->global_batch); break;
        case OPT_RECOMPUTE: a->recompute = optarg; break;
        case OPT_ACT_BUDGET_LAYER:
            rc = args_bytes(CMD, "--act-budget-layer", optarg, 1, PARSE_BYTES_MAX, &a->act_budget_layer);
            break;
        case OPT_SEARCH_RATES: {
            FusionRates r;
            if (fusion_parse_rates(optarg, &r) != 0)
                return args_error(CMD, "--search-rates '%s': expected GFLOPS,GBPS or GFLOPS,GBPS,LINK_GBPS (positive "
                                  "numbers, e.g. 100,10 or 100,10,5)", optarg);
            a->search_gflops = r.gemm_gflops;
            a->search_gbps = r.mem_gbps;
            a->search_link_gbps = r.link_gbps;
            break;
        }
        case OPT_METHOD: a->method = optarg; break;
        case OPT_NUM_LAYERS: rc = args_int(CMD, "--recompute-num-layers", optarg, 1, 65535, &a->num_layers); break;
        case OPT_LIST: a->list = optarg; break;
        case OPT_DTYPE: a->act_dtype = optarg; break;
        case OPT_TEMPO: a->tempo = optarg; break;
        case OPT_GELU_BITS: rc = args_int(CMD, "--gelu-bits", optarg, 0, 4, &a->gelu_bits); break;
        case OPT_MINI_SEQ: rc = args_int(CMD, "--mini-seq", optarg, 0, 65536, &a->mini_seq); break;
        case OPT_ATTENTION:
            if (strcmp(optarg, "flash") && strcmp(optarg, "standard"))
                return args_error(CMD, "--attention: unknown kind '%s' (expected standard or flash)", optarg);
            a->flash = strcmp(optarg, "flash") == 0;
            break;
        case OPT_OFFLOAD: {
            char oerr[320];
            if (policy_parse_offload(optarg, &a->offload, oerr, sizeof oerr) != 0) return args_error(CMD, "%s", oerr);
            break;
        }
        case OPT_MASKS: a->masks = optarg; break;
        case OPT_DROPOUT: rc = args_double(CMD, "--dropout", optarg, 0.0, 1.0, 1, &a->dropout); a->dropout_given = 1; break;
        case OPT_ITER_TIME: rc = args_double(CMD, "--iter-time", optarg, 1e-9, 1e12, 0, &a->iter_time); break;
        case OPT_PEAK: rc = args_double(CMD, "--peak-tflops", optarg, 1e-9, 1e12, 0, &a->peak_tflops); break;
        case OPT_JSON: a->json = 1; break;
        case OPT_LORA_RANK: rc = args_int(CMD, "--lora-rank", optarg, 1, 1 << 20, &a->lora_rank); break;
        case OPT_LORA_ALPHA: rc = args_double(CMD, "--lora-alpha", optarg, 1e-6, 1e6, 0, &a->lora_alpha); break;
        case OPT_LORA_RSLORA: a->lora_rslora = 1; break;
        case OPT_LORA_TARGETS: a->lora_targets = optarg; break;
        case OPT_LORA_FA: a->lora_fa = 1; break;
        case OPT_BASE_DTYPE:
            if (strcmp(optarg, "fp32") != 0 && strcmp(optarg, "bf16") != 0)
                return args_error(CMD, "--base-dtype '%s': expected fp32 or bf16", optarg);
            a->base_bf16 = strcmp(optarg, "bf16") == 0;
            break;
        case OPT_REVERSIBLE: a->reversible = 1; break;
        case OPT_MEMO: rc = args_double(CMD, "--memo", optarg, 0.0, 1.0, 0, &a->memo); break;
        case OPT_PLOT: a->plot = optarg; break;
        FAMILY_OPT_CASES:
            rc = family_args_apply(&a->fam, CMD, ch, optarg);
            break;
        case 'h': cli_memory_usage(stdout); return -1;
        case ':': return args_error(CMD, "%s: missing value", flag);
        default: return args_error(CMD, "unknown option '%s'", flag);
        }
        if (rc) return rc;
    }
    if (optind < argc) return args_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (a->virtual_stages && a->interleave && a->virtual_stages != a->interleave)
        return args_error(CMD, "--virtual-stages %d and --interleave %d disagree: they are the same setting (give one)",
                          a->virtual_stages, a->interleave);

    ActDtype dt;
    MaskMode mm;
    if (policy_parse_dtype(a->act_dtype, &dt) != 0)
        return args_error(CMD, "--act-dtype: unknown type '%s' (expected fp32 or bf16)", a->act_dtype);
    if (policy_parse_masks(a->masks, &mm) != 0)
        return args_error(CMD, "--dropout-masks: unknown mode '%s' (expected bytes, bits or regen)", a->masks);
    unsigned tempo;
    char terr[256];
    if (a->tempo && policy_parse_tempo(a->tempo, &tempo, terr, sizeof terr) != 0) return args_error(CMD, "%s", terr);
    if (a->tempo && a->gelu_bits && (tempo & TEMPO_GELU))
        return args_error(CMD, "--gelu-bits %d and --tempo gelu both replace gelu_in: choose one", a->gelu_bits);
    if (a->list && a->recompute)
        return args_error(CMD, "--recompute-layers replaces --recompute: give one of them");
    int full = a->recompute && strcmp(a->recompute, "full") == 0;
    if ((a->method || a->num_layers) && !full)
        return args_error(CMD, "%s is only for --recompute full", a->method ? "--recompute-method" : "--recompute-num-layers");
    if (!a->recompute && !a->list) a->recompute = "none";
    if (full && !a->num_layers) a->num_layers = 1;
    if (a->plot && a->plot[0] == '\0') return args_error(CMD, "--plot: empty file name");
    if (!a->lora_rank && (a->lora_fa || a->lora_targets || a->lora_alpha > 0 || a->lora_rslora))
        return args_error(CMD, "%s without --lora-rank: LoRA needs a rank (e.g. --lora-rank 16)",
                          a->lora_fa ? "--lora-fa" : a->lora_targets ? "--lora-targets"
                          : a->lora_rslora ? "--lora-rslora" : "--lora-alpha");
    if (!a->lora_rank && a->base_bf16)
        return args_error(CMD, "--base-dtype bf16 without --lora-rank: only a frozen base (LoRA) is stored in bf16");
    a->lora_mode = !a->lora_rank ? LORA_MODE_NONE : a->lora_fa ? LORA_MODE_FA : LORA_MODE_ADAPT;
    return 0;
}


// "paper" → the four Table 3 models; otherwise each comma-separated name must be a preset.
static int resolve_presets(const char *list, const ModelPreset **out, int *n) {
    *n = 0;
    if (!list) { out[(*n)++] = preset_find("gpt2"); return 0; }
    char buf[512];
    if (strlen(list) >= sizeof buf) return args_error(CMD, "--preset: list too long");
    strcpy(buf, list);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const char *names[PRESET_GROUP_MAX] = {tok};
        int k = preset_group(tok, names);   // "paper", "llama3", "llama3.2", "qwen3", "phi3"
        if (!k) k = 1;
        for (int i = 0; i < k; i++) {
            const ModelPreset *p = preset_find(names[i]);
            if (!p) return args_error(CMD, "--preset: unknown model '%s' (expected %s, or a group: paper, llama3, llama3.2, qwen3, phi3)", names[i], preset_names());
            if (*n == MAX_MODELS) return args_error(CMD, "--preset: at most %d models", MAX_MODELS);
            out[(*n)++] = p;
        }
    }
    if (*n == 0) return args_error(CMD, "--preset: empty list");
    return 0;
}

static int pick(int given, int preset) { return given ? given : preset; }

// A usage error in one model's configuration; with several presets the message says which.
__attribute__((format(printf, 3, 4))) static int cfg_error(const MemArgs *a, const ModelPreset *p, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return a->several ? args_error(CMD, "preset %s: %s", p->name, msg) : args_error(CMD, "%s", msg);
}

// LoRA's part of a configuration (a->lora_mode): the shape's adapters and the policy's keep bits, as ctron
// train's model sets them; the rank and the targets are checked against the family and its widths.
static int apply_lora(const MemArgs *a, const ModelPreset *p, MemoryConfig *c, int mode) {
    ActShape *sh = &c->lay.sh;
    if (mode == LORA_MODE_NONE) return 0;
    LoraFamily family = lora_family(sh->arch, sh->fused_proj);
    unsigned sites = lora_family_sites(family);
    char err[256];
    if (a->lora_targets && lora_parse_targets(family, a->lora_targets, &sites, err, sizeof err) != 0)
        return cfg_error(a, p, "%s", err);
    long qw = act_q_width(sh), kvw = act_kv_width(sh), f = sh->ffn;
    for (int s = 0; s < LORA_SITES; s++) {
        if (!(sites >> s & 1u)) continue;
        const LoraSiteRow *row = lora_site((LoraSite)s);
        long in = lora_width(row->in, sh->h, qw, kvw, f), out = lora_width(row->out, sh->h, qw, kvw, f);
        if (a->lora_rank > (in < out ? in : out))
            return cfg_error(a, p, "--lora-rank %d is above the width of target '%s' ([%ld, %ld])", a->lora_rank,
                             row->target, out, in);
    }
    sh->lora_rank = a->lora_rank;
    sh->lora_sites = sites;
    sh->base_bf16 = a->base_bf16;
    sh->lora_fa = mode == LORA_MODE_FA;
    c->policy.tempo |= act_keep_bits(sh);
    return 0;
}

// One preset with the flags applied, validated; fills c (its policy is allocated).
static int build_config(const MemArgs *a, const ModelPreset *p, MemoryConfig *c) {
    memset(c, 0, sizeof *c);
    int L = pick(a->layers, p->L), h = pick(a->hidden, p->h), heads = pick(a->heads, p->a), s = pick(a->seq, p->s);
    int b = pick(a->batch, p->micro_batch), v = pick(a->vocab, p->v);
    int vflag = a->virtual_stages ? a->virtual_stages : a->interleave;   // the same setting
    const char *vname = a->virtual_stages ? "--virtual-stages" : "--interleave";
    int t = pick(a->tp, p->t), pp = pick(a->pp, p->p), m = pick(vflag, p->m);
    if (a->pp && !vflag) m = 1;   // a preset's interleaving belongs to its own pipeline size
    if (a->schedule_given && a->schedule != PIPE_INTERLEAVED && !vflag) m = 1;   // and to its schedule
    int dp0 = p->gpus / (p->t * p->p), nmb0 = p->global_batch / (p->micro_batch * dp0);
    long gpus = a->gpus ? a->gpus : (long)t * pp * dp0;

    if (h % heads) return cfg_error(a, p, "--hidden %d is not divisible by --heads %d", h, heads);
    if (heads % t)
        return cfg_error(a, p, "--tp %d does not divide --heads %d (heads are split across tensor-parallel ranks)", t, heads);
    Family fam;
    char ferr[256];
    if (family_args_resolve(&a->fam, p, h, heads, &fam, ferr, sizeof ferr) != 0 ||
        family_check_tp(&fam, t, ferr, sizeof ferr) != 0)
        return cfg_error(a, p, "%s", ferr);
    const ArchSpec *spec = arch_spec(fam.arch);
    if (a->sp && t < 2)   // SP splits the sequence over the TP group: with one rank it changes nothing
        return cfg_error(a, p, "--sp splits the sequence over the tensor-parallel group: it needs --tp 2 or more "
                         "(this layout has --tp %d)", t);
    if (a->sp && s % t)
        return cfg_error(a, p, "--sp: --seq %d is not divisible by --tp %d (each rank keeps s/t rows)", s, t);
    if (L % pp) return cfg_error(a, p, "--pp %d does not divide --layers %d", pp, L);
    if (m > 1 && pp == 1) return cfg_error(a, p, "%s %d needs --pp > 1 (it splits each stage's layers)", vname, m);
    if (L % (pp * m))
        return cfg_error(a, p, "%s %d: --layers %d is not divisible by pp × interleave = %d", vname, m, L, pp * m);
    if (gpus % ((long)t * pp))
        return cfg_error(a, p, "--gpus %ld is not a multiple of tp × pp = %d", gpus, t * pp);
    long dp = gpus / ((long)t * pp);
    long B = a->global_batch ? a->global_batch : (long)nmb0 * b * dp;
    if (a->grad_accum) {   // micro-batches per pipeline: the global batch follows
        if (a->global_batch && a->global_batch != (long)a->grad_accum * b * dp)
            return cfg_error(a, p, "--grad-accum %d and --global-batch %ld disagree: the global batch is micro-batches × "
                             "micro-batch × data-parallel size = %d × %d × %ld", a->grad_accum, (long)a->global_batch,
                             a->grad_accum, b, dp);
        B = (long)a->grad_accum * b * dp;
    } else if (!a->global_batch && a->pp && nmb0 < pp) {
        B = (long)pp * b * dp;   // the preset's batch cannot fill the pipeline: P micro-batches
    }
    if (B % (b * dp))
        return cfg_error(a, p, "--global-batch %ld is not a multiple of micro-batch × data-parallel size = %d × %ld",
                          B, b, dp);
    // Every count must fit the 64-bit byte arithmetic of the model (as²b and sbv are the largest).
    double biggest = 4.0 * heads * (double)s * s * b + 4.0 * (double)s * b * v + 34.0 * (double)s * b * h * L;
    if (biggest > 4e18) return cfg_error(a, p, "the shape is too large to count: a·s²·b = %.3g", (double)heads * s * s * b);

    int shaped = a->layers || a->hidden || a->heads || a->seq || a->vocab || (int)fam.arch != p->arch || a->fam.kv_heads ||
                 a->fam.head_dim || a->fam.ffn || a->fam.tie || a->fam.qkv_bias || a->fam.qk_norm || a->fam.fused_proj || a->fam.window;
    int pristine = !shaped && !a->batch && !a->tp && !a->pp && !vflag && !a->gpus && !a->global_batch &&
                   !a->grad_accum && !a->schedule_given && !a->keep_all_given;
    snprintf(c->name, sizeof c->name, "%s", !a->preset && shaped ? "custom" : p->name);
    snprintf(c->label, sizeof c->label, "%s%s", !a->preset && shaped ? "custom shape, other fields from gpt2" : p->label,
             pristine || !a->preset ? "" : ", with flags overriding it");
    ActDtype dt = ACT_BF16;
    MaskMode mm = MASKS_BYTES;
    char err_unused[256];
    policy_parse_dtype(a->act_dtype, &dt);
    policy_parse_masks(a->masks, &mm);
    c->lay.sh = (ActShape){.s = s, .b = b, .h = h, .a = heads, .L = L, .v = v, .elem_bytes = dt == ACT_BF16 ? 2 : 4,
                           .masks = mm, .dropout = a->dropout > 0, .t = t, .sp = a->sp, .gelu_bits = a->gelu_bits,
                           .mini_seq = a->mini_seq > 1 ? a->mini_seq : 0};
    act_shape_set_family(&c->lay.sh, fam.arch, fam.kv, fam.ffn, fam.tie, fam.qkv_bias, fam.qk_norm);
    c->lay.sh.fused_proj = fam.fused_proj;
    c->lay.sh.window = fam.window;
    c->lay.sh.head_dim = fam.head_dim * heads != h ? fam.head_dim : 0;
    // the family's dropout unless given (llama: 0); GPT-2 keeps the paper's 0.1
    double dropout = a->dropout_given || fam.arch == ARCH_GPT2 ? a->dropout : (double)spec->dropout_default;
    c->lay.sh.dropout = dropout > 0;
    c->lay.p = pp;
    c->lay.m = m;
    c->lay.microbatches = B / (b * dp);
    c->dropout = dropout;
    c->global_batch = B;
    c->gpus = (int)gpus;
    c->peak_tflops = a->peak_tflops;
    c->policy.act_dtype = dt;
    c->policy.masks = mm;
    c->policy.tempo = 0;
    if (a->tempo) policy_parse_tempo(a->tempo, &c->policy.tempo, err_unused, sizeof err_unused);
    if (a->gelu_bits) c->policy.tempo |= GELU_FEWBIT;
    c->policy.gelu_bits = a->gelu_bits;
    if (a->mini_seq > 1) c->policy.tempo |= MINI_SEQ;
    if (a->flash) c->policy.tempo |= ATTN_FLASH;
    c->policy.mini_seq = a->mini_seq > 1 ? a->mini_seq : 0;
    c->policy.offload = a->offload;
    int lrc = apply_lora(a, p, c, a->lora_mode);
    if (lrc) return lrc;
    c->policy.tempo |= act_keep_bits(&c->lay.sh);   // the family's (Qwen3's q/k from the norms' inputs), as the model's
    if (!act_tempo_applies(&c->lay.sh, c->policy.tempo))   // as ctron train refuses them
        return cfg_error(a, p, "%s%s%s: --arch %s has no GeLU MLP (its MLP is SwiGLU, whose backward keeps gate and up)",
                         a->gelu_bits ? "--gelu-bits" : "--tempo ", a->gelu_bits ? "" : a->tempo,
                         a->gelu_bits ? "" : " (its gelu part)", spec->name);
    c->lay.sh.reversible = a->reversible;
    if (a->reversible && (pp > 1 || a->offload || (a->recompute && strcmp(a->recompute, "none") != 0) || a->list))
        return cfg_error(a, p, "--reversible with %s: reversible blocks keep no layer (nothing to recompute or "
                         "offload) and are not built for pipeline stages", pp > 1 ? "--pp > 1" : a->offload ? "--offload"
                                                                                                   : "--recompute");
    char err[512];
    const char *recompute = a->recompute;
    if (recompute && strcmp(recompute, "search") == 0) {   // the fusion search's mode for every layer
        if (!(a->act_budget_layer > 0) || !(a->search_gflops > 0))
            return cfg_error(a, p, "--recompute search needs --act-budget-layer BYTES and --search-rates GFLOPS,GBPS "
                             "(ctron train measures the rates; here they are given)");
        if (t > 1 && !(a->search_link_gbps > 0))
            return cfg_error(a, p, "--recompute search with --tp %d needs the TP link's rate too: --search-rates "
                             "GFLOPS,GBPS,LINK_GBPS (it prices the all-gathers and reductions a remade GEMM repeats)", t);
        if (pp > 1 || a->tempo || a->gelu_bits || a->mini_seq > 1 || a->offload)
            return cfg_error(a, p, "--recompute search picks for the standard or flash block (with or without LoRA) on "
                             "one stage: not with --pp, --tempo, --gelu-bits, --mini-seq or --offload");
        FusionGraph g;
        FusionMode md;
        FusionCut cut;
        FusionRates rates = {a->search_gflops, a->search_gbps, a->search_link_gbps};
        fusion_graph_build(&g, &c->lay.sh, c->policy.tempo & FUSION_BASE_BITS);
        if (fusion_search_modes(&g, &rates, (size_t)a->act_budget_layer, &md, &cut) != 0)
            return cfg_error(a, p, "--act-budget-layer %.0f: no recompute mode fits; the least a layer keeps is %zu bytes",
                             a->act_budget_layer, cut.bytes);
        c->policy.tempo |= md.parts;
        recompute = recompute_name(md.kind);
    } else if (a->act_budget_layer > 0 || a->search_gflops > 0) {
        return cfg_error(a, p, "--act-budget-layer and --search-rates are for --recompute search");
    }
    int memo = a->memo >= 0.0 || policy_list_has_memo(a->list);
    unsigned memo_parts = ATTN_FLASH | act_keep_bits(&c->lay.sh);   // LoRA's adapters run in the token ranges
    if (memo && (pp > 1 || (t > 1 && a->sp) || a->offload || a->reversible || c->policy.tempo & ~memo_parts ||
                 (a->recompute && strcmp(a->recompute, "none") != 0 && strcmp(a->recompute, "memo") != 0)))
        return cfg_error(a, p, "--memo is built for one pipeline stage (no --pp) and TP without --sp, without --offload, --reversible, "
                         "Tempo, Few-Bit, mini-seq or another --recompute (mark layers with --recompute-layers "
                         "FIRST-LAST:memo)");
    c->policy.memo_alpha = a->memo >= 0.0 ? (float)a->memo : 0.0f;
    const char *rc = memo && !a->list ? "memo" : recompute;
    int searched = recompute != a->recompute;   // the search's kind for every layer: full is one layer a group
    if (stage_policy_build(&c->policy, &c->lay, rc, searched ? "uniform" : a->method, searched ? 1 : a->num_layers, a->list,
                           err, sizeof err) != 0)
        return cfg_error(a, p, "%s", err);
    if (a->memo < 0.0 && policy_memo_needs_alpha(&c->policy))
        return cfg_error(a, p, "a memo layer needs --memo ALPHA or its own memo@ALPHA");

    // Table 5's iteration time applies only to the preset's own shape and layout.
    int all_sel = 1, all_full = 1;
    for (int l = 0; l < L; l++) {
        all_sel &= c->policy.kind[l] == RECOMPUTE_SELECTIVE;
        all_full &= c->policy.kind[l] == RECOMPUTE_FULL;
    }
    c->iter_time = a->iter_time;
    if (!a->iter_time && pristine) {
        double paper = all_sel && a->sp ? p->iter_sel_s : all_full ? p->iter_full_s : 0.0;
        if (paper > 0) { c->iter_time = paper; c->iter_time_from_paper = 1; }
    }
    return 0;
}

// The pipeline of one model for the per-stage section (pr->spec.p = 0: none to report): validated by
// pipe_spec_init, so the errors are ctron train's.
static int build_pipe(const MemArgs *a, const ModelPreset *p, const MemoryConfig *c, PipeReport *pr) {
    memset(pr, 0, sizeof *pr);
    int vflag = a->virtual_stages ? a->virtual_stages : a->interleave;
    if (c->lay.p == 1 && !a->pp && !a->schedule_given && !vflag && !a->grad_accum && !a->keep_all_given) return 0;
    PipeScheduleKind kind = a->schedule_given ? a->schedule : c->lay.m > 1 ? PIPE_INTERLEAVED : PIPE_1F1B;
    // --interleave 1 always meant "not interleaved"; --virtual-stages is checked as train checks it
    int vs = a->virtual_stages ? a->virtual_stages : c->lay.m > 1 ? c->lay.m : 0;
    long m = c->lay.microbatches;
    if (m > 1 << 20) return cfg_error(a, p, "%ld micro-batches per pipeline: at most %d (lower --global-batch)", m, 1 << 20);
    char err[512];
    if (pipe_spec_init(&pr->spec, kind, c->lay.p, vs, (int)m, (int)c->lay.sh.L, err, sizeof err) != 0)
        return cfg_error(a, p, "%s", err);
    // the section walks every unit of every rank (~0.4 µs each): keep it to seconds
    double units = (double)pr->spec.p * pipe_units_per_rank(&pr->spec);
    if (units > 2e7)
        return cfg_error(a, p, "the per-stage model would walk %.3g units (pp × 2·m·V); at most 2e7: lower --pp or "
                         "--grad-accum", units);
    pr->keep_all = a->keep_all;
    int dp0 = p->gpus / (p->t * p->p), nmb0 = p->global_batch / (p->micro_batch * dp0);
    if (a->grad_accum) snprintf(pr->m_from, sizeof pr->m_from, "--grad-accum");
    else if (a->global_batch) snprintf(pr->m_from, sizeof pr->m_from, "from --global-batch");
    else if (nmb0 < c->lay.p) snprintf(pr->m_from, sizeof pr->m_from, "= P: the preset's global batch gives %d", nmb0);
    else snprintf(pr->m_from, sizeof pr->m_from, "from the preset's global batch");
    return 0;
}

// Full fine-tuning, LoRA and LoRA-FA of one preset, side by side (the same layout and policy otherwise).
static int lora_side_by_side(const MemArgs *a, const ModelPreset *p) {
    MemoryConfig v[3];
    MemArgs each = *a;
    int built = 0, rc = 0;
    for (; built < 3 && rc == 0; built++) {
        each.lora_mode = built;
        rc = build_config(&each, p, &v[built]);
    }
    if (rc == 0) lora_report_text(stdout, v);
    for (int i = 0; i < built - (rc != 0); i++) policy_free(&v[i].policy);
    return rc;
}

int cli_memory_main(int argc, char **argv) {
    MemArgs a;
    int rc = parse(argc, argv, &a);
    if (rc == -1) return 0;
    if (rc) return rc;
    const ModelPreset *presets[MAX_MODELS];
    int n;
    if ((rc = resolve_presets(a.preset, presets, &n)) != 0) return rc;
    a.several = n > 1;
    MemoryConfig cfgs[MAX_MODELS];
    PipeReport pipes[MAX_MODELS];
    int built = 0;
    for (; built < n && rc == 0; built++) {
        rc = build_config(&a, presets[built], &cfgs[built]);
        if (rc == 0) rc = build_pipe(&a, presets[built], &cfgs[built], &pipes[built]);
    }
    if (rc == 0 && a.plot) {
        char err[512];
        if (fig7_svg_save(a.plot, cfgs, n, err, sizeof err) != 0) rc = args_error(CMD, "%s", err);
        else fprintf(stderr, "ctron memory: wrote %s\n", a.plot);
    }
    if (rc == 0 && a.json) {
        cJSON *root;
        if (n == 1) {
            root = memory_report_json(&cfgs[0]);
            if (pipes[0].spec.p) pipe_report_json(root, &cfgs[0], &pipes[0]);
        } else {
            root = cJSON_CreateObject();
            cJSON *arr = cJSON_AddArrayToObject(root, "models");
            for (int i = 0; i < n; i++) {
                cJSON *model = memory_report_json(&cfgs[i]);
                if (pipes[i].spec.p) pipe_report_json(model, &cfgs[i], &pipes[i]);
                cJSON_AddItemToArray(arr, model);
            }
        }
        char *text = cJSON_Print(root);
        printf("%s\n", text);
        cJSON_free(text);
        cJSON_Delete(root);
    } else if (rc == 0) {
        if (n == 1) memory_report_text(stdout, &cfgs[0]);
        else memory_report_compare(stdout, cfgs, n);
        if (n == 1 && pipes[0].spec.p) pipe_report_text(stdout, &cfgs[0], &pipes[0]);
        for (int i = 0; i < n && a.lora_rank && rc == 0; i++) rc = lora_side_by_side(&a, presets[i]);
    }
    for (int i = 0; i < built; i++) policy_free(&cfgs[i].policy);
    return rc;
}
