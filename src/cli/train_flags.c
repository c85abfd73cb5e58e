#include "cli/train_passes.h"
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/train_ckpt_args.h"
#include "memory/fusion_search.h"
#include "train/pipe_schedule.h"
#include "train/train_config.h"

// Usage errors (exit 2) through the helpers every subcommand shares (cli/args.h).
#define usage_error(...) args_error("train", __VA_ARGS__)

#define parse_int(flag, text, lo, hi, out) args_int("train", flag, text, lo, hi, out)
#define parse_float(flag, text, lo, hi, hi_open, out) args_double("train", flag, text, lo, hi, hi_open, out)

enum {
    OPT_LAYERS = 1000, OPT_HIDDEN, OPT_HEADS, OPT_SEQ, OPT_BATCH, OPT_VOCAB, OPT_DROPOUT, OPT_STEPS, OPT_LR,
    OPT_MIN_LR, OPT_WARMUP, OPT_WD, OPT_CLIP, OPT_ACCUM, OPT_SEED, OPT_DATA, OPT_VAL_FRAC, OPT_EVAL_EVERY,
    OPT_EVAL_BATCHES, OPT_THREADS, OPT_LOG, OPT_PRINT_EVERY, OPT_LEDGER, OPT_SAMPLE, OPT_PROMPT,
    OPT_RECOMPUTE, OPT_RC_METHOD, OPT_RC_NUM, OPT_RC_LAYERS, OPT_MASKS, OPT_ACT_DTYPE, OPT_PRECISION, OPT_BF16, OPT_PEAK,
    OPT_CKPT_DIR, OPT_SAVE_EVERY, OPT_KEEP, OPT_STOP_AFTER, OPT_RESUME, OPT_NO_LEDGER,
    OPT_TOKENIZER, OPT_VAL_DATA, OPT_DATA_ORDER, OPT_TP, OPT_SP, OPT_ZERO, OPT_PP, OPT_PP_SCHEDULE, OPT_VSTAGES, OPT_RC_MICRO, OPT_MAX_BAD, OPT_TEMPO, OPT_GELU_BITS, OPT_MEM_BUDGET, OPT_MINI_SEQ, OPT_ATTENTION,
    OPT_OFFLOAD, OPT_OFFLOAD_DIR, OPT_STATIC_PLAN, OPT_OFFLOAD_BUDGET, OPT_DEVICE, OPT_LIST_OPTIONS,
    OPT_ARCH, OPT_KV_HEADS, OPT_HEAD_DIM, OPT_FFN, OPT_ROPE_THETA, OPT_ROPE_SCALING, OPT_NORM_EPS, OPT_TIE,
    OPT_QKV_BIAS, OPT_QK_NORM, OPT_FUSED_PROJ, OPT_SLIDING_WINDOW, OPT_ROTARY_DIM, OPT_INIT_FROM, OPT_REVERSIBLE,
    OPT_LORA_OUT, OPT_LORA_FROM,
    OPT_LORA_RANK, OPT_LORA_ALPHA, OPT_LORA_TARGETS, OPT_LORA_FA, OPT_LORA_RSLORA, OPT_BASE_DTYPE, OPT_LORA_DROPOUT,
    OPT_ACT_BUDGET_LAYER, OPT_SEARCH_RATES, OPT_MEMO, OPT_TP_SOLO, OPT_TP_LINK_GBPS
};

// Every long option of ctron train (the command line, and --resume's restoring of recorded options).
static const struct option train_opts[] = {
    {"layers", required_argument, 0, OPT_LAYERS}, {"hidden", required_argument, 0, OPT_HIDDEN},
    {"arch", required_argument, 0, OPT_ARCH}, {"kv-heads", required_argument, 0, OPT_KV_HEADS},
    {"head-dim", required_argument, 0, OPT_HEAD_DIM},
    {"ffn-hidden", required_argument, 0, OPT_FFN}, {"rope-theta", required_argument, 0, OPT_ROPE_THETA},
    {"rope-scaling", required_argument, 0, OPT_ROPE_SCALING},
    {"norm-eps", required_argument, 0, OPT_NORM_EPS}, {"tie-embeddings", no_argument, 0, OPT_TIE},
    {"qkv-bias", no_argument, 0, OPT_QKV_BIAS}, {"qk-norm", no_argument, 0, OPT_QK_NORM},
    {"fused-proj", no_argument, 0, OPT_FUSED_PROJ}, {"sliding-window", required_argument, 0, OPT_SLIDING_WINDOW},
    {"rotary-dim", required_argument, 0, OPT_ROTARY_DIM},
    {"reversible", no_argument, 0, OPT_REVERSIBLE},
    {"lora-rank", required_argument, 0, OPT_LORA_RANK}, {"lora-alpha", required_argument, 0, OPT_LORA_ALPHA},
    {"lora-targets", required_argument, 0, OPT_LORA_TARGETS}, {"lora-fa", no_argument, 0, OPT_LORA_FA},
    {"lora-rslora", no_argument, 0, OPT_LORA_RSLORA},
    {"base-dtype", required_argument, 0, OPT_BASE_DTYPE}, {"lora-dropout", required_argument, 0, OPT_LORA_DROPOUT},
    {"heads", required_argument, 0, OPT_HEADS}, {"seq", required_argument, 0, OPT_SEQ},
    {"batch", required_argument, 0, OPT_BATCH}, {"vocab", required_argument, 0, OPT_VOCAB},
    {"dropout", required_argument, 0, OPT_DROPOUT}, {"steps", required_argument, 0, OPT_STEPS},
    {"lr", required_argument, 0, OPT_LR}, {"min-lr", required_argument, 0, OPT_MIN_LR},
    {"warmup", required_argument, 0, OPT_WARMUP}, {"weight-decay", required_argument, 0, OPT_WD},
    {"clip", required_argument, 0, OPT_CLIP}, {"grad-accum", required_argument, 0, OPT_ACCUM},
    {"seed", required_argument, 0, OPT_SEED}, {"data", required_argument, 0, OPT_DATA},
    {"val-frac", required_argument, 0, OPT_VAL_FRAC}, {"eval-every", required_argument, 0, OPT_EVAL_EVERY},
    {"eval-batches", required_argument, 0, OPT_EVAL_BATCHES}, {"threads", required_argument, 0, OPT_THREADS},
    {"log", required_argument, 0, OPT_LOG}, {"print-every", required_argument, 0, OPT_PRINT_EVERY},
    {"ledger", no_argument, 0, OPT_LEDGER}, {"sample", required_argument, 0, OPT_SAMPLE},
    {"prompt", required_argument, 0, OPT_PROMPT},
    {"recompute", required_argument, 0, OPT_RECOMPUTE}, {"recompute-method", required_argument, 0, OPT_RC_METHOD},
    {"recompute-num-layers", required_argument, 0, OPT_RC_NUM},
    {"recompute-layers", required_argument, 0, OPT_RC_LAYERS}, {"dropout-masks", required_argument, 0, OPT_MASKS},
    {"act-dtype", required_argument, 0, OPT_ACT_DTYPE}, {"precision", required_argument, 0, OPT_PRECISION},
    {"bf16", no_argument, 0, OPT_BF16}, {"peak-gflops", required_argument, 0, OPT_PEAK},
    {"no-ledger", no_argument, 0, OPT_NO_LEDGER},
    {"tokenizer", required_argument, 0, OPT_TOKENIZER}, {"val-data", required_argument, 0, OPT_VAL_DATA},
    {"data-order", required_argument, 0, OPT_DATA_ORDER},
    {"max-bad-steps", required_argument, 0, OPT_MAX_BAD}, {"tempo", required_argument, 0, OPT_TEMPO},
    {"gelu-bits", required_argument, 0, OPT_GELU_BITS}, {"mem-budget", required_argument, 0, OPT_MEM_BUDGET},
    {"mini-seq", required_argument, 0, OPT_MINI_SEQ},
    {"act-budget-layer", required_argument, 0, OPT_ACT_BUDGET_LAYER}, {"search-rates", required_argument, 0, OPT_SEARCH_RATES},
    {"memo", required_argument, 0, OPT_MEMO}, {"tp-link-gbps", required_argument, 0, OPT_TP_LINK_GBPS},
    {"offload", required_argument, 0, OPT_OFFLOAD}, {"offload-dir", required_argument, 0, OPT_OFFLOAD_DIR},
    {"static-plan", no_argument, 0, OPT_STATIC_PLAN}, {"device", required_argument, 0, OPT_DEVICE}, {"offload-budget", required_argument, 0, OPT_OFFLOAD_BUDGET}, {"attention", required_argument, 0, OPT_ATTENTION}, {"tp", required_argument, 0, OPT_TP}, {"tp-solo", no_argument, 0, OPT_TP_SOLO}, {"sp", no_argument, 0, OPT_SP}, {"zero", required_argument, 0, OPT_ZERO},
    {"pp", required_argument, 0, OPT_PP}, {"pp-schedule", required_argument, 0, OPT_PP_SCHEDULE},
    {"virtual-stages", required_argument, 0, OPT_VSTAGES},
    {"recompute-microbatches", required_argument, 0, OPT_RC_MICRO},
    {"ckpt-dir", required_argument, 0, OPT_CKPT_DIR}, {"save-every", required_argument, 0, OPT_SAVE_EVERY},
    {"keep", required_argument, 0, OPT_KEEP}, {"stop-after", required_argument, 0, OPT_STOP_AFTER},
    {"resume", required_argument, 0, OPT_RESUME}, {"init-from", required_argument, 0, OPT_INIT_FROM},
    {"lora-out", required_argument, 0, OPT_LORA_OUT}, {"lora-from", required_argument, 0, OPT_LORA_FROM},
    {"list-options", no_argument, 0, OPT_LIST_OPTIONS}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};

// Sets one option from its text (NULL for a flag without a value), as on the command line: 0, -1
// (done, exit 0: not an option here), the usage-error exit code with the message printed, or NOT_MINE
// when ch is another group's option. One function per group of the --help text.
enum { NOT_MINE = -100 };

// The model's shape and family.
static int apply_model(TrainOptions *o, int ch, const char *optarg) {
    GPTConfig *c = &o->model;
    double x;
    int rc = 0;
    switch (ch) {
    case OPT_LAYERS: rc = parse_int("--layers", optarg, 1, 65535, &c->layers); break;
    case OPT_HIDDEN: rc = parse_int("--hidden", optarg, 1, INT_MAX, &c->hidden); break;
    case OPT_HEADS: rc = parse_int("--heads", optarg, 1, INT_MAX, &c->heads); break;
    case OPT_SEQ: rc = parse_int("--seq", optarg, 1, INT_MAX, &c->seq); break;
    case OPT_BATCH: rc = parse_int("--batch", optarg, 1, INT_MAX, &c->batch); break;
    case OPT_VOCAB: rc = parse_int("--vocab", optarg, 1, INT_MAX, &c->vocab); break;
    case OPT_DROPOUT: rc = parse_float("--dropout", optarg, 0.0, 1.0, 1, &x); c->dropout = (float)x; break;
    case OPT_ARCH:
        c->arch = arch_from_name(optarg);
        if (c->arch < 0) return usage_error("--arch '%s': expected one of %s", optarg, arch_choices());
        break;
    case OPT_KV_HEADS: rc = parse_int("--kv-heads", optarg, 1, INT_MAX, &c->kv_heads); break;
    case OPT_HEAD_DIM: rc = parse_int("--head-dim", optarg, 2, 1 << 16, &c->head_dim); break;
    case OPT_FFN: rc = parse_int("--ffn-hidden", optarg, 1, INT_MAX, &c->ffn); break;
    case OPT_ROPE_THETA: rc = parse_float("--rope-theta", optarg, 1.0, 1e12, 0, &x); c->rope_theta = (float)x; break;
    case OPT_ROPE_SCALING: {
        char why[256];
        if (rope_scaling_parse(optarg, &c->rope_scaling, why, sizeof why)) return usage_error("--rope-scaling %s", why);
        break;
    }
    case OPT_NORM_EPS: rc = parse_float("--norm-eps", optarg, 1e-12, 1.0, 0, &x); c->norm_eps = (float)x; break;
    case OPT_TIE: c->tie_embeddings = 1; break;
    case OPT_QKV_BIAS: c->qkv_bias = 1; break;
    case OPT_QK_NORM: c->qk_norm = 1; break;
    case OPT_FUSED_PROJ: c->fused_proj = 1; break;
    case OPT_SLIDING_WINDOW: rc = parse_int("--sliding-window", optarg, 1, 1 << 30, &c->sliding_window); break;
    // even and at most the head dim: checked against the head in train_validate.c, where its width is known
    case OPT_ROTARY_DIM: rc = parse_int("--rotary-dim", optarg, 2, 1 << 16, &c->rotary_dim); break;
    case OPT_REVERSIBLE: c->reversible = 1; break;
    case OPT_LORA_RANK: rc = parse_int("--lora-rank", optarg, 1, INT_MAX, &c->lora_rank); break;
    case OPT_LORA_ALPHA: rc = parse_float("--lora-alpha", optarg, 1e-6, 1e6, 0, &x); c->lora_alpha = (float)x; break;
    case OPT_LORA_TARGETS: o->lora_targets = optarg; break;
    case OPT_LORA_FA: c->lora_fa = 1; break;
    case OPT_LORA_RSLORA: c->lora_rslora = 1; break;
    case OPT_LORA_DROPOUT: rc = parse_float("--lora-dropout", optarg, 0.0, 1.0, 1, &x); c->lora_dropout = (float)x; break;
    case OPT_BASE_DTYPE:
        if (strcmp(optarg, "fp32") != 0 && strcmp(optarg, "bf16") != 0)
            return usage_error("--base-dtype '%s': expected fp32 or bf16", optarg);
        c->base_bf16 = strcmp(optarg, "bf16") == 0;
        break;
    default: return NOT_MINE;
    }
    return rc;
}

// Optimisation, data, evaluation and output.
static int apply_run(TrainOptions *o, int ch, const char *optarg) {
    double x;
    int rc = 0, seed;
    switch (ch) {
    case OPT_STEPS: rc = parse_int("--steps", optarg, 1, INT_MAX, &o->steps); break;
    case OPT_LR: rc = parse_float("--lr", optarg, 1e-12, 10.0, 0, &x); o->lr = (float)x; break;
    case OPT_MIN_LR: rc = parse_float("--min-lr", optarg, 0.0, 10.0, 0, &x); o->min_lr = (float)x; break;
    case OPT_WARMUP: rc = parse_int("--warmup", optarg, 0, INT_MAX, &o->warmup); break;
    case OPT_WD: rc = parse_float("--weight-decay", optarg, 0.0, 10.0, 0, &x); o->weight_decay = (float)x; break;
    case OPT_CLIP: rc = parse_float("--clip", optarg, 0.0, 1e9, 0, &x); o->clip = (float)x; break;
    case OPT_ACCUM: rc = parse_int("--grad-accum", optarg, 1, 65535, &o->grad_accum); break;
    case OPT_SEED: rc = parse_int("--seed", optarg, 0, INT_MAX, &seed); o->seed = (uint64_t)seed; break;
    case OPT_DATA: o->data_path = optarg; break;
    case OPT_VAL_FRAC: rc = parse_float("--val-frac", optarg, 0.0, 1.0, 1, &x); o->val_frac = x; break;
    case OPT_EVAL_EVERY: rc = parse_int("--eval-every", optarg, 0, INT_MAX, &o->eval_every); break;
    case OPT_EVAL_BATCHES: rc = parse_int("--eval-batches", optarg, 1, 1000000, &o->eval_batches); break;
    case OPT_THREADS: rc = parse_int("--threads", optarg, 1, 4096, &o->threads); break;
    case OPT_LOG: o->log_path = optarg; break;
    case OPT_PRINT_EVERY: rc = parse_int("--print-every", optarg, 1, INT_MAX, &o->print_every); break;
    case OPT_LEDGER: o->show_ledger = 1; break;   // the default; kept for scripts that ask for it
    case OPT_NO_LEDGER: o->show_ledger = 0; break;
    case OPT_TOKENIZER: o->tokenizer_path = optarg; break;
    case OPT_VAL_DATA: o->val_path = optarg; break;
    case OPT_DATA_ORDER:
        if (strcmp(optarg, "random") == 0) o->data_order = DATA_RANDOM;
        else if (strcmp(optarg, "sequential") == 0) o->data_order = DATA_SEQUENTIAL;
        else return usage_error("--data-order: unknown order '%s' (expected random or sequential)", optarg);
        break;
    case OPT_SAMPLE: rc = parse_int("--sample", optarg, 0, 1000000, &o->sample_tokens); break;
    case OPT_PROMPT: o->sample_prompt = optarg; break;
    case OPT_MAX_BAD: rc = parse_int("--max-bad-steps", optarg, 0, INT_MAX, &o->max_bad_steps); break;
    default: return NOT_MINE;
    }
    return rc;
}

// What is kept for backward, precision, device, the planner.
static int apply_memory(TrainOptions *o, int ch, const char *optarg) {
    double x;
    int rc = 0;
    switch (ch) {
    case OPT_RECOMPUTE: o->recompute = optarg; break;
    case OPT_RC_METHOD: o->recompute_method = optarg; break;
    case OPT_RC_NUM: rc = parse_int("--recompute-num-layers", optarg, 1, 65535, &o->recompute_num_layers); break;
    case OPT_RC_LAYERS: o->recompute_layers = optarg; break;
    case OPT_MASKS:
        if (policy_parse_masks(optarg, &o->masks) != 0)
            return usage_error("--dropout-masks: unknown mode '%s' (expected bytes, bits or regen)", optarg);
        break;
    case OPT_ACT_DTYPE:
        if (policy_parse_dtype(optarg, &o->act_dtype) != 0)
            return usage_error("--act-dtype: unknown type '%s' (expected fp32 or bf16)", optarg);
        break;
    case OPT_PRECISION: {
        Precision pr;
        if (precision_parse(optarg, &pr) != 0)
            return usage_error("--precision: unknown precision '%s' (expected fp32 or bf16)", optarg);
        o->precision = (int)pr;
        break;
    }
    case OPT_BF16: o->precision = PRECISION_BF16; break;
    case OPT_DEVICE: o->device = optarg; break;
    case OPT_PEAK: rc = parse_float("--peak-gflops", optarg, 1e-3, 1e12, 0, &x); o->peak_gflops = x; break;
    case OPT_TEMPO: {
        char err[256];
        if (policy_parse_tempo(optarg, &o->tempo, err, sizeof err) != 0) return usage_error("%s", err);
        break;
    }
    case OPT_ATTENTION:
        if (strcmp(optarg, "flash") == 0) o->flash = 1;
        else if (strcmp(optarg, "standard") == 0) o->flash = 0;
        else return usage_error("--attention: unknown kind '%s' (expected standard or flash)", optarg);
        break;
    case OPT_MINI_SEQ: rc = parse_int("--mini-seq", optarg, 0, 65536, &o->mini_seq); break;
    case OPT_OFFLOAD: {
        char err[320];
        if (policy_parse_offload(optarg, &o->offload, err, sizeof err) != 0) return usage_error("%s", err);
        break;
    }
    case OPT_OFFLOAD_DIR: o->offload_dir = optarg; break;
    case OPT_MEMO:
        if (strcmp(optarg, "auto") == 0) o->memo_alpha = -2.0;
        else rc = parse_float("--memo", optarg, 0.0, 1.0, 0, &o->memo_alpha);
        break;
    case OPT_TP_LINK_GBPS: rc = parse_float("--tp-link-gbps", optarg, 1e-6, 1e9, 0, &o->tp_link_gbps); break;
    case OPT_STATIC_PLAN: o->static_plan = 1; break;
    case OPT_OFFLOAD_BUDGET:
        rc = args_bytes("train", "--offload-budget", optarg, 1, PARSE_BYTES_MAX, &o->offload_budget);
        break;
    case OPT_MEM_BUDGET:
        rc = args_bytes("train", "--mem-budget", optarg, 1, PARSE_BYTES_MAX, &o->mem_budget);
        break;
    case OPT_GELU_BITS: rc = parse_int("--gelu-bits", optarg, 0, 4, &o->gelu_bits); break;
    case OPT_ACT_BUDGET_LAYER:
        rc = args_bytes("train", "--act-budget-layer", optarg, 1, PARSE_BYTES_MAX, &o->act_budget_layer);
        break;
    case OPT_SEARCH_RATES: {   // GFLOPS,GBPS[,LINK_GBPS]: positive and finite
        FusionRates r;
        if (fusion_parse_rates(optarg, &r) != 0)
            return usage_error("--search-rates '%s': expected GFLOPS,GBPS or GFLOPS,GBPS,LINK_GBPS (positive numbers, "
                               "e.g. 100,10 or 100,10,5)", optarg);
        o->search_gflops = r.gemm_gflops;
        o->search_gbps = r.mem_gbps;
        o->search_link_gbps = r.link_gbps;
        break;
    }
    default: return NOT_MINE;
    }
    return rc;
}

// Parallel layout and checkpoints.
static int apply_layout(TrainOptions *o, int ch, const char *optarg) {
    int rc = 0;
    switch (ch) {
    case OPT_CKPT_DIR: o->ckpt_dir = optarg; break;
    case OPT_SAVE_EVERY: rc = parse_int("--save-every", optarg, 0, INT_MAX, &o->save_every); break;
    case OPT_KEEP: rc = parse_int("--keep", optarg, 0, INT_MAX, &o->keep); break;
    case OPT_STOP_AFTER: rc = parse_int("--stop-after", optarg, 1, INT_MAX, &o->stop_after); break;
    case OPT_RESUME: o->resume = optarg; break;
    case OPT_INIT_FROM: o->init_from = optarg; break;
    case OPT_LORA_OUT: o->lora_out = optarg; break;
    case OPT_LORA_FROM: o->lora_from = optarg; break;
    case OPT_TP: rc = parse_int("--tp", optarg, 1, 4096, &o->tp); break;
    case OPT_SP: o->sp = 1; break;
    case OPT_TP_SOLO: o->tp_solo = 1; break;
    case OPT_ZERO: rc = parse_int("--zero", optarg, 0, 1, &o->zero); break;
    case OPT_PP: rc = parse_int("--pp", optarg, 1, 4096, &o->pp); break;
    case OPT_PP_SCHEDULE: {
        PipeScheduleKind k;
        if (pipe_schedule_parse(optarg, &k) != 0)
            return usage_error("--pp-schedule: unknown schedule '%s' (expected 1f1b, interleaved, gpipe or layered)",
                               optarg);
        o->pp_schedule = (int)k;
        break;
    }
    case OPT_VSTAGES: rc = parse_int("--virtual-stages", optarg, 1, 65535, &o->virtual_stages); break;
    case OPT_RC_MICRO: rc = parse_int("--recompute-microbatches", optarg, 0, 65535, &o->recompute_microbatches); break;
    default: return NOT_MINE;
    }
    return rc;
}

static int apply_option(TrainOptions *o, int ch, const char *optarg, const char *flag) {
    static int (*const groups[])(TrainOptions *, int, const char *) = {apply_model, apply_run, apply_memory,
                                                                         apply_layout};
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        int rc = groups[i](o, ch, optarg);
        if (rc != NOT_MINE) return rc;
    }
    return usage_error("unknown option '%s'", flag);
}

// apply_option by long name, for --resume (train_config_resume): value is the recorded text.
static int apply_recorded(TrainOptions *o, const char *name, const char *value) {
    if (o->n_resume_options == (int)(sizeof o->resume_options / sizeof o->resume_options[0]))
        return usage_error("--resume: the checkpoint records more options than this ctron restores");
    char *kept = o->resume_options[o->n_resume_options++];   // string options keep pointing at it
    snprintf(kept, sizeof o->resume_options[0], "%s", value);
    value = kept;
    for (size_t i = 0; train_opts[i].name; i++)
        if (strcmp(train_opts[i].name, name) == 0) {
            char flag[64];
            snprintf(flag, sizeof flag, "--%s", name);
            return apply_option(o, train_opts[i].val, train_opts[i].has_arg == no_argument ? NULL : value, flag);
        }
    return usage_error("--resume: the checkpoint records an option --%s this ctron does not have", name);
}

int train_given(const TrainGiven *g, const char *flag) {
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->name[i], flag) == 0) return 1;
    return 0;
}

int train_flags_parse(int argc, char **argv, TrainOptions *o, TrainGiven *given) {
    enum { N_OPTS = sizeof train_opts / sizeof train_opts[0] };
    _Static_assert(N_OPTS <= sizeof given->name / sizeof given->name[0], "TrainGiven holds every option");
    given->n = 0;
    given->cap = N_OPTS;
    int li = -1, rc = 0;
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, ":h", train_opts, &li)) != -1) {
        if (ch >= 1000 && li >= 0 && given->n < given->cap) given->name[given->n++] = train_opts[li].name;
        li = -1;
        const char *flag = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        switch (ch) {
        case 'h': cli_train_usage(stdout); return -1;
        case OPT_LIST_OPTIONS: train_config_list(stdout); return -1;
        case ':': return usage_error("%s: missing value", flag);
        default: rc = apply_option(o, ch, optarg, flag);
        }
        if (rc) return rc;
    }
    if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
    return 0;
}

int train_flags_resume(TrainOptions *o, const TrainGiven *given) {
    return cli_train_resume(o, given->name, given->n, apply_recorded);
}
