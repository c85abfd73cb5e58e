// ctron plan --cluster: parses the job, the cluster and the limits; searches or evaluates one
// layout; prints the ranking (cluster_report.c).
#include "cli/cluster_cmd.h"
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/family_args.h"
#include "cli/lora_args.h"
#include "memory/cluster_search.h"
#include "memory/planner.h"
#include "memory/presets.h"
#include "util/fileio.h"

#define CMD "plan --cluster"
#define GIB 1073741824.0

void cli_cluster_usage(FILE *f) {
    fprintf(f,
        "usage: ctron plan --cluster --gpu KIND --gpus-per-node N --nodes N\n"
        "                  (--preset NAME | --layers N --hidden N --heads N --vocab N) --seq S --global-batch B\n"
        "                  [--layout SPEC | --fix SPEC] [--top K] [--json] [--explain] [--svg FILE] [--check FILE]\n"
        "\n"
        "Searches the layouts of a GPU cluster — tensor parallel t (within a node), pipeline p, interleave\n"
        "v, data parallel d = GPUs/(t·p), micro-batch, SP, ZeRO-1, recompute none/selective/full/plan —\n"
        "predicts each one's per-GPU memory (every pipeline stage, from the analytic model) and step time\n"
        "(a physical model: GEMMs, HBM traffic, ring collectives, the schedule's bubble), drops those that\n"
        "do not fit, and ranks the rest by step time. docs/PLANNER.md describes the model.\n"
        "\n"
        "model:    --preset %s\n"
        "          or --layers N --hidden N --heads N --vocab N; --seq S (preset's default), --global-batch B\n"
        "          --precision bf16|fp32  mixed precision (default: bf16 activations and GEMMs) or fp32\n"
        "          --fp8                 the linears' GEMMs in FP8 (Transformer Engine; GPUs with FP8 tensor cores)\n"
        "          --attention standard|flash  the attention core (default standard: the paper's, scores stored)\n"
        "          --arch gpt2|llama, and llama's --kv-heads N --head-dim D --ffn-hidden N --tie-embeddings\n"
        "          --qkv-bias --qk-norm --fused-proj --sliding-window W (the llama3-*, qwen3-* and phi-* presets\n"
        "          are llama; t must divide the key/value heads and the FFN width; a window W < s cuts flash\n"
        "          attention's time and the model FLOPs to W keys a query)\n"
        "          --lora-rank R [--lora-targets LIST] [--lora-fa]  LoRA fine-tuning (docs/LORA.md): the base\n"
        "                                frozen (its weights only), the adapters trained, reduced over DP and\n"
        "                                stepped; no weight-gradient GEMMs of the base; LoRA-FA: A frozen too\n"
        "cluster:  --gpu %s\n"
        "          or all of --peak-tflops X --mem BYTES --hbm-gbs X --nvlink-gbs X --internode-gbs X\n"
        "          (each also overrides the --gpu kind's figure; bandwidths in GB/s, one direction per GPU)\n"
        "          --fp8-tflops X        dense FP8 peak (h100-80g, h200: 1979; a100: none)\n"
        "          --sms N (wave quantisation; 1: none) --gemm-eff F --hbm-eff F --link-eff F --overlap-cost F\n"
        "          --gpus-per-node N --nodes N\n"
        "          --reserve BYTES       per GPU for the framework and fragmentation (default 10%% of memory)\n"
        "          --dp-overlap          the DP gradient reduction overlaps the last backward bucket by bucket, and\n"
        "                                ZeRO-1's weight all-gather the next forward (default: after the backward)\n"
        "          --dp-bucket N         parameters per DP bucket (default Megatron's max(40M, 1M·d))\n"
        "          --grad-reduce fp32|bf16  gradient buffer and DP reduction precision (default fp32)\n"
        "          --tp-overlap backward|none|full  which TP collectives hide under GEMMs (default backward,\n"
        "                                Megatron's; full: the forward's too, as Transformer Engine's userbuffers)\n"
        "          --launch-gap US       microseconds between two kernels (default 2)\n"
        "limits:   --max-t N --max-p N --max-v N (default 8) --max-mb N (default 16)\n"
        "          --fix t=8,p=16,...    search only layouts with these values (keys as --layout's: t, p, v, d,\n"
        "                                mb, sp, recompute, zero, first, last); the rest is searched\n"
        "          p need not divide the layers: the search then gives the first and last stages fewer\n"
        "          layers, the others ⌈L/p⌉ (as Llama 3 405B's 126 layers on p=16: 7, 8, …, 8, 7)\n"
        "          --sp on|off|any --zero 0|1|any --recompute LIST (of none,selective,full,plan; default all)\n"
        "output:   --layout t=8,p=8,v=3,d=1,mb=1,sp=on,recompute=selective,zero=1   evaluate this layout only\n"
        "          (first=N,last=N: uneven stages, Megatron's --decoder-first/last-pipeline-num-layers; first=0,\n"
        "          last=0: the embedding or the head as a stage of its own)\n"
        "          --top K (default 10)  --json  --explain (the first layout: time and memory by part and\n"
        "          stage, the constants)  --svg FILE (the top layouts' time parts)\n"
        "          --check FILE          lines 'LAYOUT SECONDS' (measured step times): predicted vs measured\n",
        preset_names(), gpu_kind_names());
}

typedef struct {
    ClusterJob job;
    GpuSpec gpu;
    ClusterLimits lim;
    const char *layout, *svg, *check, *fix, *lora_targets;
    int top, json, explain, have_gpu, have_model, reserve_set;
    double reserve;
    unsigned custom;   // which of the five custom figures were given
    FamilyArgs fam;    // --arch, --kv-heads, --ffn-hidden, --tie-embeddings, --qkv-bias, --qk-norm, --fused-proj
} ClusterArgs;

int cluster_layout_parse(const char *text, const ClusterJob *job, ClusterLayout *lay, unsigned *given, char *err,
                         size_t errlen) {
    *lay = (ClusterLayout){1, 1, 1, 0, 1, 0, 0, CR_SELECTIVE, 0, 0};
    unsigned mask = 0;
    char buf[256];
    if (strlen(text) >= sizeof buf) return snprintf(err, errlen, "layout '%.40s…' is too long", text), -1;
    strcpy(buf, text);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq) return snprintf(err, errlen, "layout item '%s' is not key=value", tok), -1;
        *eq = '\0';
        const char *key = tok, *val = eq + 1;
        if (strcmp(key, "sp") == 0) {
            if (strcmp(val, "on") == 0 || strcmp(val, "1") == 0) lay->sp = 1;
            else if (strcmp(val, "off") == 0 || strcmp(val, "0") == 0) lay->sp = 0;
            else return snprintf(err, errlen, "layout sp=%s: expected on or off", val), -1;
            mask |= FIX_SP;
            continue;
        }
        if (strcmp(key, "recompute") == 0) {
            if (cluster_recompute_parse(val, &lay->rc) != 0)
                return snprintf(err, errlen, "layout recompute=%s: expected none, selective, full or plan", val), -1;
            mask |= FIX_RC;
            continue;
        }
        char *end;
        errno = 0;
        long x = strtol(val, &end, 10);
        if (errno || end == val || *end || x < 0 || x > 1 << 20)
            return snprintf(err, errlen, "layout %s=%s: expected a non-negative integer", key, val), -1;
        if (strcmp(key, "t") == 0) lay->t = (int)x, mask |= FIX_T;
        else if (strcmp(key, "p") == 0) lay->p = (int)x, mask |= FIX_P;
        else if (strcmp(key, "v") == 0) lay->v = (int)x, mask |= FIX_V;
        else if (strcmp(key, "d") == 0) lay->d = (int)x, mask |= FIX_D;
        else if (strcmp(key, "mb") == 0) lay->mb = (int)x, mask |= FIX_MB;
        else if (strcmp(key, "zero") == 0 && x <= 1) lay->zero = (int)x, mask |= FIX_ZERO;
        else if (strcmp(key, "first") == 0) lay->first = x ? (int)x : STAGE_NO_LAYERS, mask |= FIX_FIRST;
        else if (strcmp(key, "last") == 0) lay->last = x ? (int)x : STAGE_NO_LAYERS, mask |= FIX_LAST;
        else return snprintf(err, errlen, "layout key '%s' unknown or out of range (expected t, p, v, d, mb, sp, recompute, "
                             "zero, first, last)", key), -1;
    }
    if (given) *given = mask;
    if (lay->d == 0 && lay->t > 0 && lay->p > 0) lay->d = (int)((long)job->gpus_per_node * job->nodes / ((long)lay->t * lay->p));
    if (lay->d == 0) lay->d = 1;
    return 0;
}

// A bandwidth or a rate: a positive number, or exit 2 naming what a link or GPU needs.
static int positive(const char *flag, const char *text, const char *what, double scale, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v)) return args_error(CMD, "%s: expected a number, got '%s'", flag, text);
    if (v <= 0) return args_error(CMD, "%s %s: %s must be positive (e.g. %s)", flag, text, what,
                                  strstr(flag, "gbs") ? "300 for NVLink 3, 25 for HDR InfiniBand" : "312 for an A100");
    *out = v * scale;
    return 0;
}

static int fraction(const char *flag, const char *text, double *out) {
    return args_double(CMD, flag, text, 1e-3, 1.0, 0, out);
}

static int parse_recompute_list(const char *text, unsigned *out) {
    char buf[128];
    if (strlen(text) >= sizeof buf) return -1;
    strcpy(buf, text);
    *out = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        ClusterRecompute r;
        if (cluster_recompute_parse(tok, &r) != 0) return -1;
        *out |= 1u << r;
    }
    return *out ? 0 : -1;
}

static int tri(const char *flag, const char *text, const char *on, const char *off, int *out) {
    if (strcmp(text, on) == 0) *out = 1;
    else if (strcmp(text, off) == 0) *out = 0;
    else if (strcmp(text, "any") == 0) *out = -1;
    else return args_error(CMD, "%s: '%s' (expected %s, %s or any)", flag, text, on, off);
    return 0;
}

enum {
    O_CLUSTER = 1000, O_GPU, O_PEAK, O_MEM, O_HBM, O_NVLINK, O_INTER, O_SMS, O_GEFF, O_HEFF, O_LEFF, O_OVL, O_GPN,
    O_NODES, O_PRESET, O_LAYERS, O_HIDDEN, O_HEADS, O_VOCAB, O_SEQ, O_GB, O_PREC, O_RESERVE, O_DPOVL, O_MAXT,
    O_MAXP, O_MAXV, O_MAXMB, O_SP, O_ZERO, O_RC, O_LAYOUT, O_TOP, O_JSON, O_EXPLAIN, O_SVG, O_CHECK, O_GRAD, O_TPOVL,
    O_BUCKET, O_GAP, O_FIX, O_FP8, O_FP8PEAK, O_ATTN, O_LORA_RANK, O_LORA_TARGETS, O_LORA_FA
};

// --lora-rank/--lora-targets/--lora-fa against the family and its widths (as ctron train checks them).
static int check_lora(ClusterArgs *a) {
    ClusterJob *j = &a->job;
    char err[256];
    if (lora_args_check(lora_family(j->arch, j->fused_proj), j->lora_rank, a->lora_targets, j->lora_fa, j->h, j->h, j->kv * (j->h / j->a), j->ffn,
                        &j->lora_sites, err, sizeof err) != 0)
        return args_error(CMD, "%s", err);
    return 0;
}

static int parse(int argc, char **argv, ClusterArgs *a) {
    static const struct option opts[] = {
        {"cluster", no_argument, 0, O_CLUSTER}, {"gpu", required_argument, 0, O_GPU},
        {"peak-tflops", required_argument, 0, O_PEAK}, {"mem", required_argument, 0, O_MEM},
        {"hbm-gbs", required_argument, 0, O_HBM}, {"nvlink-gbs", required_argument, 0, O_NVLINK},
        {"internode-gbs", required_argument, 0, O_INTER}, {"sms", required_argument, 0, O_SMS},
        {"gemm-eff", required_argument, 0, O_GEFF}, {"hbm-eff", required_argument, 0, O_HEFF},
        {"link-eff", required_argument, 0, O_LEFF}, {"overlap-cost", required_argument, 0, O_OVL},
        {"gpus-per-node", required_argument, 0, O_GPN}, {"nodes", required_argument, 0, O_NODES},
        {"preset", required_argument, 0, O_PRESET}, {"layers", required_argument, 0, O_LAYERS},
        {"hidden", required_argument, 0, O_HIDDEN}, {"heads", required_argument, 0, O_HEADS},
        {"vocab", required_argument, 0, O_VOCAB}, {"seq", required_argument, 0, O_SEQ},
        {"global-batch", required_argument, 0, O_GB}, {"precision", required_argument, 0, O_PREC},
        {"reserve", required_argument, 0, O_RESERVE}, {"dp-overlap", no_argument, 0, O_DPOVL},
        {"max-t", required_argument, 0, O_MAXT}, {"max-p", required_argument, 0, O_MAXP},
        {"max-v", required_argument, 0, O_MAXV}, {"max-mb", required_argument, 0, O_MAXMB},
        {"sp", required_argument, 0, O_SP}, {"zero", required_argument, 0, O_ZERO},
        {"recompute", required_argument, 0, O_RC}, {"layout", required_argument, 0, O_LAYOUT},
        {"top", required_argument, 0, O_TOP}, {"json", no_argument, 0, O_JSON}, {"explain", no_argument, 0, O_EXPLAIN},
        {"svg", required_argument, 0, O_SVG}, {"check", required_argument, 0, O_CHECK},
        {"grad-reduce", required_argument, 0, O_GRAD}, {"tp-overlap", required_argument, 0, O_TPOVL},
        {"dp-bucket", required_argument, 0, O_BUCKET}, {"launch-gap", required_argument, 0, O_GAP},
        {"fix", required_argument, 0, O_FIX}, {"fp8", no_argument, 0, O_FP8},
        {"fp8-tflops", required_argument, 0, O_FP8PEAK}, {"attention", required_argument, 0, O_ATTN},
        {"lora-rank", required_argument, 0, O_LORA_RANK}, {"lora-targets", required_argument, 0, O_LORA_TARGETS},
        {"lora-fa", no_argument, 0, O_LORA_FA}, FAMILY_LONG_OPTIONS, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int ch, rc = 0, x;
    family_args_init(&a->fam);
    long L = 0, h = 0, heads = 0, v = 0, s = 0, B = 0;
    const ModelPreset *pr = NULL;
    a->top = 10;
    a->job.e = 2;
    a->job.gpus_per_node = 8;
    a->job.nodes = 0;
    cluster_limits_default(&a->lim);
    memset(&a->gpu, 0, sizeof a->gpu);
    const GpuSpec *ref = gpu_kind_find("a100-80g");   // the efficiency constants of custom GPUs
    a->gpu.sms = 1;
    a->gpu.tile_m = ref->tile_m;
    a->gpu.tile_n = ref->tile_n;
    a->gpu.gemm_eff = ref->gemm_eff;
    a->gpu.hbm_eff = ref->hbm_eff;
    a->gpu.link_eff = ref->link_eff;
    a->gpu.link_latency = ref->link_latency;
    a->gpu.overlap_cost = ref->overlap_cost;
    a->gpu.launch_gap = ref->launch_gap;
    snprintf(a->gpu.name, sizeof a->gpu.name, "custom");
    // The GPU kind first, so that the figures given override it whatever the order.
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--gpu") == 0) {
            const GpuSpec *k = gpu_kind_find(argv[i + 1]);
            if (!k) return args_error(CMD, "--gpu: unknown kind '%s' (expected %s, or --peak-tflops, --mem, --hbm-gbs, "
                                      "--nvlink-gbs and --internode-gbs)", argv[i + 1], gpu_kind_names());
            a->gpu = *k;
            a->have_gpu = 1;
        }
    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *flag = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        switch (ch) {
        case O_CLUSTER: case O_GPU: break;
        case O_PEAK: rc = positive("--peak-tflops", optarg, "a GPU's peak", 1e12, &a->gpu.peak_flops); a->custom |= 1; break;
        case O_MEM:
            // A GPU of less than 1 GiB holds no model this planner is for (--mem 1 once asked for 3.5e12 GPUs).
            if ((rc = args_bytes(CMD, "--mem", optarg, 1073741824.0, 1125899906842624.0, &a->gpu.mem_bytes)) != 0)
                return rc;
            a->custom |= 2;
            break;
        case O_HBM: rc = positive("--hbm-gbs", optarg, "a memory bandwidth", 1e9, &a->gpu.hbm_bw); a->custom |= 4; break;
        case O_NVLINK: rc = positive("--nvlink-gbs", optarg, "a link bandwidth", 1e9, &a->gpu.nvlink_bw); a->custom |= 8; break;
        case O_INTER: rc = positive("--internode-gbs", optarg, "a link bandwidth", 1e9, &a->gpu.internode_bw); a->custom |= 16; break;
        case O_SMS: rc = args_int(CMD, "--sms", optarg, 1, 100000, &a->gpu.sms); break;
        case O_GEFF: rc = fraction("--gemm-eff", optarg, &a->gpu.gemm_eff); break;
        case O_HEFF: rc = fraction("--hbm-eff", optarg, &a->gpu.hbm_eff); break;
        case O_LEFF: rc = fraction("--link-eff", optarg, &a->gpu.link_eff); break;
        case O_OVL: rc = args_double(CMD, "--overlap-cost", optarg, 0.0, 1.0, 0, &a->gpu.overlap_cost); break;
        case O_GPN: rc = args_int(CMD, "--gpus-per-node", optarg, 1, 1024, &a->job.gpus_per_node); break;
        case O_NODES: rc = args_int(CMD, "--nodes", optarg, 1, 1 << 20, &a->job.nodes); break;
        case O_PRESET:
            if (!(pr = preset_find(optarg))) return args_error(CMD, "--preset: unknown model '%s' (expected %s)", optarg, preset_names());
            break;
        case O_LAYERS: rc = args_int(CMD, "--layers", optarg, 1, 65535, &x); L = x; break;
        case O_HIDDEN: rc = args_int(CMD, "--hidden", optarg, 1, 1 << 20, &x); h = x; break;
        case O_HEADS: rc = args_int(CMD, "--heads", optarg, 1, 1 << 20, &x); heads = x; break;
        case O_VOCAB: rc = args_int(CMD, "--vocab", optarg, 1, 1 << 24, &x); v = x; break;
        case O_SEQ: rc = args_int(CMD, "--seq", optarg, 1, 1 << 24, &x); s = x; break;
        case O_GB: rc = args_int(CMD, "--global-batch", optarg, 1, 1 << 30, &x); B = x; break;
        case O_PREC:
            if (strcmp(optarg, "bf16") == 0) a->job.e = 2;
            else if (strcmp(optarg, "fp32") == 0) a->job.e = 4;
            else return args_error(CMD, "--precision: '%s' (expected bf16 or fp32)", optarg);
            break;
        case O_RESERVE:
            if (parse_bytes(optarg, &a->reserve) != 0) return args_error(CMD, "--reserve: '%s' is not a size (e.g. 8GiB)", optarg);
            a->reserve_set = 1;
            break;
        case O_DPOVL: a->job.dp_overlap = 1; break;
        case O_GRAD:
            if (strcmp(optarg, "fp32") == 0) a->job.grad_bytes = 4;
            else if (strcmp(optarg, "bf16") == 0) a->job.grad_bytes = 2;
            else return args_error(CMD, "--grad-reduce: '%s' (expected fp32 or bf16)", optarg);
            break;
        case O_TPOVL: {
            TpOverlap o;
            if (cluster_tp_overlap_parse(optarg, &o) != 0)
                return args_error(CMD, "--tp-overlap: '%s' (expected backward, none or full)", optarg);
            a->job.tp_overlap = (int)o;
            break;
        }
        case O_BUCKET: rc = args_double(CMD, "--dp-bucket", optarg, 1e3, 1e12, 0, &a->job.dp_bucket); break;
        case O_GAP:
            rc = args_double(CMD, "--launch-gap", optarg, 0.0, 1e4, 0, &a->gpu.launch_gap);
            a->gpu.launch_gap *= 1e-6;
            break;
        case O_FIX: a->fix = optarg; break;
        case O_FP8: a->job.fp8 = 1; break;
        case O_LORA_RANK: rc = args_int(CMD, "--lora-rank", optarg, 1, 1 << 20, &a->job.lora_rank); break;
        case O_LORA_TARGETS: a->lora_targets = optarg; break;
        case O_LORA_FA: a->job.lora_fa = 1; break;
        case O_FP8PEAK: rc = positive("--fp8-tflops", optarg, "a GPU's peak", 1e12, &a->gpu.fp8_flops); break;
        case O_ATTN:
            if (strcmp(optarg, "flash") == 0) a->job.flash = 1;
            else if (strcmp(optarg, "standard") == 0) a->job.flash = 0;
            else return args_error(CMD, "--attention: '%s' (expected standard or flash)", optarg);
            break;
        case O_MAXT: rc = args_int(CMD, "--max-t", optarg, 1, 1 << 20, &a->lim.max_t); break;
        case O_MAXP: rc = args_int(CMD, "--max-p", optarg, 1, 1 << 20, &a->lim.max_p); break;
        case O_MAXV: rc = args_int(CMD, "--max-v", optarg, 1, 1024, &a->lim.max_v); break;
        case O_MAXMB: rc = args_int(CMD, "--max-mb", optarg, 1, 1 << 20, &a->lim.max_mb); break;
        case O_SP: rc = tri("--sp", optarg, "on", "off", &a->lim.sp); break;
        case O_ZERO: rc = tri("--zero", optarg, "1", "0", &a->lim.zero); break;
        case O_RC:
            if (parse_recompute_list(optarg, &a->lim.recompute) != 0)
                return args_error(CMD, "--recompute: '%s' (expected a list of none, selective, full, plan)", optarg);
            break;
        case O_LAYOUT: a->layout = optarg; break;
        case O_TOP: rc = args_int(CMD, "--top", optarg, 1, 1000000, &a->top); break;
        case O_JSON: a->json = 1; break;
        case O_EXPLAIN: a->explain = 1; break;
        case O_SVG: a->svg = optarg; break;
        case O_CHECK: a->check = optarg; break;
        FAMILY_OPT_CASES:
            rc = family_args_apply(&a->fam, CMD, ch, optarg);
            break;
        case 'h': cli_cluster_usage(stdout); return -1;
        case ':': return args_error(CMD, "%s: missing value", flag);
        default: return args_error(CMD, "unknown option '%s'", flag);
        }
        if (rc) return rc;
    }
    if (optind < argc) return args_error(CMD, "unexpected argument '%s'", argv[optind]);
    if (!a->have_gpu && a->custom != 31)
        return args_error(CMD, "--gpu is required (%s), or all of --peak-tflops, --mem, --hbm-gbs, --nvlink-gbs and "
                          "--internode-gbs", gpu_kind_names());
    if (a->job.nodes <= 0) return args_error(CMD, "--nodes is required (the cluster has --gpus-per-node × --nodes GPUs)");
    if (pr) {
        a->job.L = L ? L : pr->L;
        a->job.h = h ? h : pr->h;
        a->job.a = heads ? heads : pr->a;
        a->job.v = v ? v : pr->v;
        a->job.s = s ? s : pr->s;
        a->job.B = B ? B : pr->global_batch;
    } else {
        if (!L || !h || !heads || !v)
            return args_error(CMD, "the model: --preset NAME (%s), or all of --layers, --hidden, --heads and --vocab", preset_names());
        if (!s || !B) return args_error(CMD, "--seq and --global-batch are required with a model shape");
        a->job.s = s, a->job.h = h, a->job.a = heads, a->job.L = L, a->job.v = v, a->job.B = B;
    }
    if (a->job.h % a->job.a) return args_error(CMD, "--hidden %ld is not divisible by --heads %ld", a->job.h, a->job.a);
    Family fam;
    char ferr[256];
    if (family_args_resolve(&a->fam, pr, a->job.h, a->job.a, &fam, ferr, sizeof ferr) != 0)
        return args_error(CMD, "%s", ferr);
    a->job.arch = (int)fam.arch;
    a->job.head_dim = fam.head_dim;   // --head-dim, the preset's (Qwen3's 128), or hidden/heads
    a->job.kv = fam.kv;
    a->job.ffn = fam.ffn;
    a->job.tie = fam.tie;
    a->job.qkv_bias = fam.qkv_bias;
    a->job.qk_norm = fam.qk_norm;
    a->job.fused_proj = fam.fused_proj;
    a->job.window = fam.window;
    if (check_lora(a) != 0) return CTRON_EXIT_USAGE;
    a->job.reserve_bytes = a->reserve_set ? a->reserve : 0.10 * a->gpu.mem_bytes;
    if (a->job.reserve_bytes >= a->gpu.mem_bytes)
        return args_error(CMD, "--reserve %.1f GiB leaves nothing of the GPU's %.1f GiB", a->job.reserve_bytes / GIB,
                          a->gpu.mem_bytes / GIB);
    if (a->lim.max_t > a->job.gpus_per_node && a->lim.max_t != 1 << 20)
        return args_error(CMD, "--max-t %d is larger than the %d GPUs per node: tensor parallelism stays within a node's "
                          "NVLink (needs --gpus-per-node %d or more)", a->lim.max_t, a->job.gpus_per_node, a->lim.max_t);
    if (a->job.fp8 && a->gpu.fp8_flops <= 0)
        return args_error(CMD, "--fp8: the %s has no FP8 tensor cores (an H100 or H200 has; or give --fp8-tflops)",
                          a->gpu.name);
    if (a->job.fp8 && a->job.e != 2)
        return args_error(CMD, "--fp8 runs the linears in FP8 under bf16 mixed precision, not with --precision fp32");
    if (a->fix) {
        char err[256];
        if (cluster_layout_parse(a->fix, &a->job, &a->lim.fix, &a->lim.fix_mask, err, sizeof err) != 0)
            return args_error(CMD, "--fix: %s", err);
        if (a->layout) return args_error(CMD, "--fix searches the layouts with those values; --layout evaluates one: not both");
    }
    return 0;
}

static void format_bytes_h(double b, char *buf, size_t len) {
    if (b >= 1e12) snprintf(buf, len, "%.1f TB", b / 1e12);
    else snprintf(buf, len, "%.1f GB", b / 1e9);
}

// Why nothing fits, in what would be needed: more GPUs when the model states alone overflow.
static int explain_nothing_fits(const ClusterArgs *a, const ClusterResults *r) {
    double params = cluster_param_count(&a->job), per = cluster_state_bytes_per_param(&a->job);
    double usable = a->gpu.mem_bytes - a->job.reserve_bytes;
    long gpus = (long)a->job.gpus_per_node * a->job.nodes;
    double need = ceil(params * per / usable);
    char states[32];
    format_bytes_h(params * per, states, sizeof states);
    if (need > (double)gpus)
        return args_error(CMD, "no layout fits: needs at least %.0f GPUs of %.0f GiB (have %ld): weights, gradients and "
                          "optimizer state alone are %s (%.3g parameters × %.0f bytes), and each GPU keeps %.1f GiB after "
                          "the %.1f GiB reserve", need, a->gpu.mem_bytes / GIB, gpus, states, params, per, usable / GIB,
                          a->job.reserve_bytes / GIB);
    if (r->n == 0)
        return args_error(CMD, "no layout divides the job: %ld GPUs, %ld layers, %ld heads, global batch %ld%s%s (t must "
                          "divide the heads and the GPUs per node, t·p the GPUs, d·mb the global batch; p·v the layers, "
                          "or first and last stages leave the others an even split)", gpus, a->job.L, a->job.a, a->job.B,
                          a->fix ? ", --fix " : "", a->fix ? a->fix : "");
    const ClusterPrediction *least = &r->c[0];
    for (int i = 1; i < r->n; i++)
        if (r->c[i].mem_max < least->mem_max) least = &r->c[i];
    char lay[128];
    cluster_layout_str(&least->lay, lay, sizeof lay);
    return args_error(CMD, "no layout fits in %.0f GiB per GPU: the smallest (%s) needs %.1f GiB on stage %d (reserve "
                      "included); it needs GPUs of %.0f GiB, more GPUs, or a shorter sequence", a->gpu.mem_bytes / GIB, lay,
                      least->mem_max / GIB, least->worst_stage, ceil(least->mem_max / GIB));
}

// --check reads a short text file: one line per measured layout.
enum { CHECK_MAX_BYTES = 1 << 20, CHECK_MAX_LINE = 511 };

// The whole file, refused unless it is text: no NUL byte, no line longer than CHECK_MAX_LINE.
static int read_check_file(const char *path, char **text, size_t *len) {
    uint8_t *data;
    char err[1200];
    if (fileio_read_bounded(path, CHECK_MAX_BYTES, &data, len, err, sizeof err) != 0)
        return args_error(CMD, "--check: %s", err);
    size_t line_start = 0;
    long line = 1;
    for (size_t i = 0; i < *len; i++) {
        if (data[i] == '\0') {
            free(data);
            return args_error(CMD, "--check %s:%ld: a NUL byte at offset %zu: expected text lines 'LAYOUT SECONDS'",
                              path, line, i);
        }
        if (data[i] == '\n') { line++; line_start = i + 1; }
        else if (i - line_start >= CHECK_MAX_LINE) {
            free(data);
            return args_error(CMD, "--check %s:%ld: a line longer than %d characters: expected 'LAYOUT SECONDS'", path,
                              line, CHECK_MAX_LINE);
        }
    }
    *text = (char *)data;
    return 0;
}

static int run_check(const ClusterArgs *a) {
    char *text = NULL;
    size_t len = 0;
    int rc = read_check_file(a->check, &text, &len);
    if (rc) return rc;
    long lineno = 0;
    int n = 0;
    double sum_abs = 0;
    printf("%-58s %10s %10s %8s\n", "layout", "measured s", "predicted", "error");
    for (size_t at = 0; at < len;) {
        char line[CHECK_MAX_LINE + 2];
        size_t k = 0;
        while (at < len && text[at] != '\n') line[k++] = text[at++];
        at++;   // the newline
        line[k] = '\0';
        lineno++;
        char *p = line;
        while (isspace((unsigned char)*p)) p++;
        if (!*p || *p == '#') continue;
        char spec[256];
        double measured;
        if (sscanf(p, "%255s %lf", spec, &measured) != 2 || !(measured > 0)) {
            free(text);
            return args_error(CMD, "--check %s:%ld: expected 'LAYOUT SECONDS', got '%.60s'", a->check, lineno, p);
        }
        ClusterLayout lay;
        char err[256];
        if (cluster_layout_parse(spec, &a->job, &lay, NULL, err, sizeof err) != 0 ||
            cluster_layout_check(&a->job, &a->gpu, &lay, err, sizeof err) != 0) {
            free(text);
            return args_error(CMD, "--check %s:%ld: %s", a->check, lineno, err);
        }
        ClusterPrediction pr;
        cluster_predict(&a->job, &a->gpu, &lay, 0, &pr);
        char ls[128];
        cluster_layout_str(&lay, ls, sizeof ls);
        double e = 100.0 * (pr.step_s / measured - 1.0);
        printf("%-58s %10.4g %10.4g %+7.1f%%\n", ls, measured, pr.step_s, e);
        sum_abs += fabs(e);
        n++;
    }
    free(text);
    if (!n) return args_error(CMD, "--check %s: no layouts", a->check);
    printf("mean |error| %.1f%% over %d layouts\n", sum_abs / n, n);
    return 0;
}

int cli_cluster_main(int argc, char **argv) {
    ClusterArgs a;
    memset(&a, 0, sizeof a);
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    if (a.check) return run_check(&a);
    ClusterResults r = {0};
    if (a.layout) {
        ClusterLayout lay;
        char err[256];
        if (cluster_layout_parse(a.layout, &a.job, &lay, NULL, err, sizeof err) != 0) return args_error(CMD, "--layout: %s", err);
        if (cluster_layout_check(&a.job, &a.gpu, &lay, err, sizeof err) != 0) return args_error(CMD, "--layout: %s", err);
        r.c = calloc(1, sizeof *r.c);
        if (!r.c) return args_error(CMD, "out of memory");
        cluster_predict(&a.job, &a.gpu, &lay, 1, &r.c[0]);
        r.n = 1;
        r.n_fit = r.c[0].fits;
    } else {
        if (cluster_search(&a.job, &a.gpu, &a.lim, &r) != 0) return args_error(CMD, "out of memory");
        if (r.n_fit == 0) {
            rc = explain_nothing_fits(&a, &r);
            cluster_results_free(&r);
            return rc;
        }
    }
    int shown = a.layout ? 1 : (a.top < r.n_fit ? a.top : r.n_fit);
    // --explain and --json give the memory of every stage: predict the layouts shown again keeping them.
    for (int i = 0; !a.layout && i < (a.json ? shown : 1); i++) {
        ClusterLayout lay = r.c[i].lay;
        cluster_predict(&a.job, &a.gpu, &lay, 1, &r.c[i]);
    }
    if (a.json) cluster_print_json(stdout, r.c, shown);
    else {
        if (!a.layout)
            printf("%d of %d layouts fit (%ld combinations do not divide the job); the %d fastest:\n", r.n_fit, r.n,
                   r.invalid, shown);
        cluster_print_table(stdout, &a.job, &a.gpu, r.c, shown);
    }
    if (a.explain) cluster_print_explain(a.json ? stderr : stdout, &a.job, &a.gpu, &r.c[0]);
    if (a.svg) {
        char err[256];
        if (cluster_svg_save(a.svg, &a.job, &a.gpu, r.c, shown < 8 ? shown : 8, err, sizeof err) != 0) {
            cluster_results_free(&r);
            return args_error(CMD, "%s", err);
        }
    }
    cluster_results_free(&r);
    return 0;
}
