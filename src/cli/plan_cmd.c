#include "cli/plan_cmd.h"
#include <getopt.h>
#include <string.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/cluster_cmd.h"
#include "cli/family_args.h"
#include "cli/lora_args.h"
#include "cli/plan_pipe.h"
#include "memory/ledger_report.h"
#include "memory/planner.h"
#include "memory/stage_planner.h"

#define CMD "plan"

void cli_plan_usage(FILE *f) {
    fprintf(f,
        "usage: ctron plan --budget BYTES [model and layout flags]\n"
        "       ctron plan --pp P [--pp-schedule S] [--virtual-stages V] [--grad-accum M] --budget BYTES …\n"
        "       ctron plan --cluster …   the fastest layout that fits on a GPU cluster (ctron plan --cluster --help)\n"
        "\n"
        "Chooses, from the analytic model, the per-layer recompute policy (none / selective / full),\n"
        "dropout-mask storage and Tempo parts with the fewest recompute FLOPs whose activation peak per\n"
        "rank (and the attention scratch of its threads) fits BYTES (e.g. 6GiB, 512MiB); prints the plan,\n"
        "its bytes and FLOPs, and the train flags.\n"
        "`ctron train --mem-budget BYTES` plans the same way and holds the arena to BYTES.\n"
        "\n"
        "  --budget BYTES      activation budget per rank (B, KiB, MiB, GiB, or KB/MB/GB); --mem-budget\n"
        "                      is the same (train's name)\n"
        "  --layers N --hidden N --heads N --seq N --batch N --vocab N --dropout P   (train's defaults;\n"
        "                      llama's dropout is 0)\n"
        "%s"
        "  --tp T --sp         the rank's share under tensor / sequence parallelism (t divides the heads,\n"
        "                      and llama's kv-heads and FFN width)\n"
        "  --act-dtype fp32|bf16   stored precision (default fp32, as train)\n"
        "  --precision fp32|bf16   compute precision as train's: bf16 keeps activations in bf16 (e = 2),\n"
        "                      and the budget also holds the backend's bf16 GEMM operand scratch; the\n"
        "                      bf16 weight copy (2 bytes per parameter) is printed beside it\n"
        "  --threads N         OpenMP threads of the run: each holds the attention backward's scratch,\n"
        "                      which the budget counts (default: all cores, as train)\n"
        "  --lora-rank R [--lora-targets LIST] [--lora-fa]  LoRA / LoRA-FA fine-tuning (docs/LORA.md): what\n"
        "                      the adapters keep (x·Aᵀ per site; LoRA also the sites' inputs), no mini-seq\n"
        "  --offload-budget BYTES  the offload pool (host memory or --offload-dir's disk) may hold this\n"
        "                      much: offload is then an option, preferred to recompute (no FLOPs), the\n"
        "                      least traffic first (default 0: no offload)\n"
        "  --memo              MEMO instead (docs/MEMORY.md): every layer swaps the first α of its tokens\n"
        "                      to host memory and recomputes the rest; chooses α per layer of least\n"
        "                      predicted step time that fits (one α, or a faster one on the even layers\n"
        "                      where one stage slot of it fits, or as many as --offload-budget's pool\n"
        "                      holds) and prints the time's parts and full recompute's beside it\n"
        "                      (with --tp T: a rank's bytes and share of the work; not with --sp or --pp;\n"
        "                      with --lora-rank the adapters' kept x·Aᵀ counted, their GEMMs timed and\n"
        "                      the frozen base's backward without weight gradients)\n"
        "  --host-gbps X --gemm-gflops Y   --memo's machine: host-link GB/s one way, FLOP/s of the layer's\n"
        "                      work (default: measured here, the link through the offload pool and the\n"
        "                      GEMM rate of `ctron peak`)\n"
        "  --tp-link-gbps X    --memo with --tp T > 1 (required there): the TP link's GB/s, pricing the\n"
        "                      all-reduce each layer's recompute repeats (printed per layer)\n"
        "  --attention flash|standard   --memo's attention (default flash)\n"
        "pipeline: each stage planned for its own peak under the schedule (the first holds the most\n"
        "micro-batches, so it may recompute more); masks and Tempo are one choice for the whole model,\n"
        "offload is not planned; prints every stage and the whole model's --recompute-layers list\n"
        "  --pp P              pipeline stages (at most 64); must divide the layers\n"
        "  --pp-schedule S     1f1b (default), interleaved, gpipe or layered\n"
        "  --virtual-stages V  model chunks per rank (interleaved only)\n"
        "  --grad-accum M      micro-batches per step (default P: the pipeline filled)\n", family_args_usage);
}

int cli_plan_main(int argc, char **argv) {
    // --cluster: the layout search on a GPU cluster, its own flags (cluster_cmd.c).
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--cluster") == 0) return cli_cluster_main(argc, argv);
    enum { O_BUDGET = 1000, O_LAYERS, O_HIDDEN, O_HEADS, O_SEQ, O_BATCH, O_VOCAB, O_DROPOUT, O_TP, O_SP, O_DTYPE, O_THREADS,
           O_OFFLOAD_BUDGET, O_PRECISION, O_PP, O_SCHEDULE, O_VIRTUAL, O_ACCUM, O_MEMO, O_HOST_GBPS, O_GEMM_GFLOPS,
           O_ATTENTION, O_LORA_RANK, O_LORA_TARGETS, O_LORA_FA, O_TP_LINK_GBPS };
    static const struct option opts[] = {
        {"budget", required_argument, 0, O_BUDGET}, {"mem-budget", required_argument, 0, O_BUDGET},
        {"layers", required_argument, 0, O_LAYERS},
        {"pp", required_argument, 0, O_PP}, {"pp-schedule", required_argument, 0, O_SCHEDULE},
        {"virtual-stages", required_argument, 0, O_VIRTUAL}, {"grad-accum", required_argument, 0, O_ACCUM},
        {"hidden", required_argument, 0, O_HIDDEN}, {"heads", required_argument, 0, O_HEADS},
        {"seq", required_argument, 0, O_SEQ}, {"batch", required_argument, 0, O_BATCH},
        {"vocab", required_argument, 0, O_VOCAB}, {"dropout", required_argument, 0, O_DROPOUT},
        {"tp", required_argument, 0, O_TP}, {"sp", no_argument, 0, O_SP}, {"act-dtype", required_argument, 0, O_DTYPE},
        {"precision", required_argument, 0, O_PRECISION},
        {"threads", required_argument, 0, O_THREADS}, {"offload-budget", required_argument, 0, O_OFFLOAD_BUDGET},
        {"memo", no_argument, 0, O_MEMO}, {"host-gbps", required_argument, 0, O_HOST_GBPS},
        {"gemm-gflops", required_argument, 0, O_GEMM_GFLOPS}, {"tp-link-gbps", required_argument, 0, O_TP_LINK_GBPS},
        {"attention", required_argument, 0, O_ATTENTION},
        {"lora-rank", required_argument, 0, O_LORA_RANK}, {"lora-targets", required_argument, 0, O_LORA_TARGETS},
        {"lora-fa", no_argument, 0, O_LORA_FA}, FAMILY_LONG_OPTIONS, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    TrainOptions o;
    train_options_default(&o);
    GPTConfig *c = &o.model;
    double budget = 0, p;
    int rc = 0, ch, pp = 0, virtual_stages = 0, accum = 0, schedule_given = 0, dropout_given = 0, memo = 0;
    double host_gbps = 0.0, gemm_gflops = 0.0;
    int flash = 1, attention_given = 0;   // --memo: MEMO is built on flash attention (--attention standard: without)
    const char *lora_targets = NULL;
    FamilyArgs fa;
    family_args_init(&fa);
    PipeScheduleKind schedule = PIPE_1F1B;
    optind = 1;
    opterr = 0;
    int li = 0;   // the long option matched: --budget and --mem-budget share a case
    while ((ch = getopt_long(argc, argv, ":h", opts, &li)) != -1) {
        const char *flag = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        switch (ch) {
        case O_BUDGET:
            if ((rc = args_bytes(CMD, li == 0 ? "--budget" : "--mem-budget", optarg, 1, PARSE_BYTES_MAX, &budget)) != 0)
                return rc;
            break;
        case O_PP: rc = args_int(CMD, "--pp", optarg, 1, 65535, &pp); break;
        case O_VIRTUAL: rc = args_int(CMD, "--virtual-stages", optarg, 1, 65535, &virtual_stages); break;
        case O_ACCUM: rc = args_int(CMD, "--grad-accum", optarg, 1, 1 << 20, &accum); break;
        case O_SCHEDULE:
            if (pipe_schedule_parse(optarg, &schedule) != 0)
                return args_error(CMD, "--pp-schedule: unknown schedule '%s' (expected 1f1b, interleaved, gpipe or layered)",
                                  optarg);
            schedule_given = 1;
            break;
        case O_LAYERS: rc = args_int(CMD, "--layers", optarg, 1, 65535, &c->layers); break;
        case O_HIDDEN: rc = args_int(CMD, "--hidden", optarg, 1, 1 << 20, &c->hidden); break;
        case O_HEADS: rc = args_int(CMD, "--heads", optarg, 1, 1 << 20, &c->heads); break;
        case O_SEQ: rc = args_int(CMD, "--seq", optarg, 1, 1 << 24, &c->seq); break;
        case O_BATCH: rc = args_int(CMD, "--batch", optarg, 1, 1 << 20, &c->batch); break;
        case O_VOCAB: rc = args_int(CMD, "--vocab", optarg, 1, 1 << 24, &c->vocab); break;
        case O_DROPOUT:
            rc = args_double(CMD, "--dropout", optarg, 0.0, 1.0, 1, &p);
            c->dropout = (float)p;
            dropout_given = 1;
            break;
        FAMILY_OPT_CASES:
            rc = family_args_apply(&fa, CMD, ch, optarg);
            break;
        case O_TP: rc = args_int(CMD, "--tp", optarg, 1, 4096, &o.tp); break;
        case O_SP: o.sp = 1; break;
        case O_LORA_RANK: rc = args_int(CMD, "--lora-rank", optarg, 1, 1 << 20, &c->lora_rank); break;
        case O_LORA_TARGETS: lora_targets = optarg; break;
        case O_LORA_FA: c->lora_fa = 1; break;
        case O_THREADS: rc = args_int(CMD, "--threads", optarg, 1, 4096, &o.threads); break;
        case O_OFFLOAD_BUDGET:
            if ((rc = args_bytes(CMD, "--offload-budget", optarg, 1, PARSE_BYTES_MAX, &o.offload_budget)) != 0) return rc;
            break;
        case O_DTYPE:
            if (policy_parse_dtype(optarg, &o.act_dtype) != 0)
                return args_error(CMD, "--act-dtype: unknown type '%s' (expected fp32 or bf16)", optarg);
            break;
        case O_PRECISION: {
            Precision pr;
            if (precision_parse(optarg, &pr) != 0)
                return args_error(CMD, "--precision: unknown precision '%s' (expected fp32 or bf16)", optarg);
            o.precision = pr;
            o.act_dtype = pr == PRECISION_BF16 ? ACT_BF16 : ACT_FP32;   // as train: mixed precision keeps bf16
            break;
        }
        case O_MEMO: memo = 1; break;
        case O_HOST_GBPS: rc = args_double(CMD, "--host-gbps", optarg, 1e-6, 1e9, 0, &host_gbps); break;
        case O_GEMM_GFLOPS: rc = args_double(CMD, "--gemm-gflops", optarg, 1e-6, 1e12, 0, &gemm_gflops); break;
        case O_TP_LINK_GBPS: rc = args_double(CMD, "--tp-link-gbps", optarg, 1e-6, 1e9, 0, &o.tp_link_gbps); break;
        case O_ATTENTION:
            if (strcmp(optarg, "flash") != 0 && strcmp(optarg, "standard") != 0)
                return args_error(CMD, "--attention: unknown kind '%s' (expected standard or flash)", optarg);
            flash = strcmp(optarg, "flash") == 0;
            attention_given = 1;
            break;
        case 'h': cli_plan_usage(stdout); return 0;
        case ':': return args_error(CMD, "%s: missing value", flag);
        default: return args_error(CMD, "unknown option '%s'", flag);
        }
        if (rc) return rc;
    }
    if (optind < argc) return args_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (budget <= 0) return args_error(CMD, "--budget is required (e.g. --budget 6GiB)");
    if (c->hidden % c->heads) return args_error(CMD, "--hidden %d is not divisible by --heads %d", c->hidden, c->heads);
    Family fam;
    char ferr[256];
    if (family_args_resolve(&fa, NULL, c->hidden, c->heads, &fam, ferr, sizeof ferr) != 0)
        return args_error(CMD, "%s", ferr);
    c->arch = (int)fam.arch;
    c->kv_heads = (int)fam.kv;
    c->head_dim = (int)fam.head_dim;
    c->ffn = (int)fam.ffn;
    c->tie_embeddings = fam.tie;
    c->qkv_bias = fam.qkv_bias;
    c->qk_norm = fam.qk_norm;
    c->fused_proj = fam.fused_proj;
    c->sliding_window = (int)fam.window;
    if (!dropout_given) c->dropout = arch_spec(fam.arch)->dropout_default;   // llama: 0, as train
    char lerr[256];
    unsigned sites;
    if (lora_args_check(lora_family(fam.arch, fam.fused_proj), c->lora_rank, lora_targets, c->lora_fa, c->hidden, gpt_q_width(c), gpt_kv_width(c),
                        fam.ffn, &sites, lerr, sizeof lerr) != 0)
        return args_error(CMD, "%s", lerr);
    c->lora_targets = sites;
    o.world_size = o.tp;
    char err[512];
    if (train_check_layout(&o, o.tp, err, sizeof err) != 0) return args_error(CMD, "%s", err);
    if ((host_gbps > 0 || gemm_gflops > 0 || attention_given || o.tp_link_gbps > 0) && !memo)
        return args_error(CMD, "--%s is for --memo's plan: give --memo",
                          host_gbps > 0 ? "host-gbps" : gemm_gflops > 0 ? "gemm-gflops" : attention_given ? "attention"
                                                                                                 : "tp-link-gbps");
    if (memo) {   // MEMO's α for the budget (train/memo_options.c)
        o.flash = flash;
        if (pp || o.sp) return args_error(CMD, "--memo is built for one pipeline stage, TP without SP (no --pp, no --sp)");
        if (o.tp > 1 && !(o.tp_link_gbps > 0))
            return args_error(CMD, "--memo with --tp %d needs the TP link's rate: --tp-link-gbps X (GB/s; it prices the "
                              "attention projection's all-reduce that each layer's recompute repeats over its rows)", o.tp);
        return train_print_memo_plan(stdout, &o, budget, host_gbps, gemm_gflops) == 0 ? 0 : CTRON_EXIT_USAGE;
    }
    if (!pp) {
        if (schedule_given || virtual_stages || accum)
            return args_error(CMD, "--%s needs --pp P (the per-stage plan)",
                              schedule_given ? "pp-schedule" : virtual_stages ? "virtual-stages" : "grad-accum");
        return train_print_plan(stdout, &o, budget) == 0 ? 0 : CTRON_EXIT_USAGE;
    }
    PipeSpec spec;
    if (pipe_spec_init(&spec, schedule, pp, virtual_stages, accum ? accum : pp, c->layers, err, sizeof err) != 0)
        return args_error(CMD, "%s", err);
    if (pp > STAGE_PLAN_MAX_STAGES)
        return args_error(CMD, "--pp %d: the per-stage planner handles at most %d stages", pp, STAGE_PLAN_MAX_STAGES);
    // the search walks the schedule for every candidate of every stage: keep it to seconds
    double walk = (double)pipe_units_per_rank(&spec) * pp * (c->layers / pp + 1);
    if (walk > 5e6)
        return args_error(CMD, "--pp %d --grad-accum %d: too large to plan per stage (%.3g unit-layers, at most 5e6); "
                          "plan with fewer micro-batches (1f1b's peak stops growing at m = p)", pp, spec.m, walk);
    return plan_print_stages(stdout, &o, &spec, budget) == 0 ? 0 : CTRON_EXIT_USAGE;
}
