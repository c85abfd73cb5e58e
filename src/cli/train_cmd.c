#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "train/pipe_schedule.h"
#include <unistd.h>
#include "backend/backend.h"
#include "backend/cpu/gemm_bf16.h"
#include "parallel/comm.h"
#include "data/tokenfile.h"
#include "cli/train_ckpt_args.h"
#include "cli/train_run_dir.h"
#include "train/train_config.h"
#include "util/fileio.h"
#include "memory/ledger_report.h"

void cli_train_usage(FILE *f) {
    fprintf(f,
        "usage: ctron train [options]\n"
        "\n"
        "model shape\n"
        "  --layers N        transformer blocks (default 2)\n"
        "  --hidden N        hidden size h, divisible by --heads (default 64)\n"
        "  --heads N         attention heads a (default 4)\n"
        "  --seq N           sequence length s (default 64)\n"
        "  --batch N         micro-batch size b, sequences (default 8)\n"
        "  --vocab N         vocabulary size v, at least 256 for byte-level data (default 256)\n"
        "  --dropout P       dropout probability, 0 <= P < 1 (default 0.1)\n"
        "  --arch gpt2|llama the block (docs/LLAMA.md): GPT-2 (LayerNorm, GeLU MLP, learned positions, tied\n"
        "                    output layer) or Llama (RMSNorm, SwiGLU MLP, RoPE, grouped-query attention, no\n"
        "                    biases, untied output layer, dropout 0 by default) (default gpt2)\n"
        "llama only\n"
        "  --kv-heads N      key/value heads, a divisor of --heads (1: MQA; default --heads: MHA)\n"
        "  --ffn-hidden N    the SwiGLU MLP's width (default 8h/3 rounded up to a multiple of 64)\n"
        "  --rope-theta X    RoPE base (default 10000); rotate_half pairing (Hugging Face), not interleaved\n"
        "  --norm-eps X      RMSNorm epsilon (default 1e-5)\n"
        "  --tie-embeddings  the output layer is the token embedding (default: its own, lm_head)\n"
        "  --qkv-bias        q, k and v projections carry biases (Qwen2)\n"
        "\n"
        "optimisation\n"
        "  --steps N         optimizer steps (default 300)\n"
        "  --lr X            peak learning rate (default 1e-3)\n"
        "  --min-lr X        final learning rate of the cosine decay (default lr/10)\n"
        "  --warmup N        linear warmup steps (default min(100, steps/10))\n"
        "  --weight-decay X  AdamW decoupled weight decay on weight matrices and wte (default 0.1)\n"
        "  --clip X          global gradient-norm clip, 0 disables (default 1.0)\n"
        "  --grad-accum N    micro-batches per step (default 1)\n"
        "  --seed N          seed for initialisation, dropout and data order (default 1337)\n"
        "\n"
        "activation memory (docs/MEMORY.md)\n"
        "  --recompute none|selective|full   what backward recomputes instead of keeping (default none)\n"
        "  --recompute-method uniform|block  full: checkpoint every group of N layers / recompute only the first N\n"
        "  --recompute-num-layers N          N for --recompute-method (default 1)\n"
        "  --recompute-layers LIST           per-layer choice, e.g. 0-3:full,4-11:selective (every layer once)\n"
        "  --dropout-masks bytes|bits|regen  keep masks as bytes, packed bits, or regenerate them (default bytes)\n"
        "  --precision fp32|bf16             compute precision (default fp32). bf16 is mixed precision: fp32\n"
        "                                    master weights, AdamW state and weight gradients; bf16 GEMMs with\n"
        "                                    fp32 accumulation; fp32 LN/softmax/GeLU/loss; activations kept in bf16\n"
        "  --bf16                            the same as --precision bf16 (Megatron's flag)\n"
        "  --device cpu|cuda[:N]|cpu-guarded where the model runs (default cpu). cuda: the N-th GPU (exit 2\n"
        "                                    when none is visible; plain cuda under mpirun: each rank's local\n"
        "                                    GPU); cpu-guarded: the CPU with device memory unreadable to host\n"
        "                                    code (a check that nothing reads tensors directly). Ranks exchange\n"
        "                                    device tensors through NCCL where built, else via host memory\n"
        "  --act-dtype fp32|bf16             precision of kept activations; with --precision fp32 compute stays\n"
        "                                    fp32 (default: fp32, or bf16 under --precision bf16)\n"
        "  --tempo LIST                      Tempo's in-place gelu, layernorm and fused softmax (dropout),\n"
        "                                    comma-separated, or all (default none)\n"
        "  --attention flash|standard        flash: tiled attention with an online softmax, keeping one\n"
        "                                    log-sum-exp per row instead of the s x s tensors (default standard)\n"
        "  --mini-seq M                      Mini-Sequence: the MLP and the output layer + cross-entropy run in\n"
        "                                    M chunks; no GeLU input/output or logits are kept (default off)\n"
        "  --mem-budget BYTES                plan recompute, masks and Tempo for these activation bytes per\n"
        "                                    rank (e.g. 2GiB; see ctron plan) and hold the arena to them\n"
        "  --offload LIST                    keep these per-layer tensors (e.g. fc1_in,gelu_in,fc2_in, or all) in\n"
        "                                    an offload pool, out of the arena, fetched back before backward\n"
        "  --offload-budget BYTES            with --mem-budget: the offload pool may hold this much; the planner\n"
        "                                    then offloads (no FLOPs) before it recomputes\n"
        "  --offload-dir DIR                 the offload pool is a file in DIR (unlinked at once; default: host\n"
        "                                    memory); written and read by an I/O thread overlapped with compute\n"
        "  --static-plan                     record one step's saved tensors and temporaries before training and\n"
        "                                    place every step's at offsets planned from their lifetimes, in one\n"
        "                                    block (reports the plan against the lower bound and the naive sum)\n"
        "  --gelu-bits K                     Few-Bit GeLU: keep a K-bit code (1..4) of the GeLU input and use\n"
        "                                    the optimal piecewise-constant GeLU' in backward (default 0: exact)\n"
        "  --peak-gflops X   peak for MFU/HFU (default: the `ctron peak --precision P` figure of the run's\n"
        "                    precision, measured and cached for 30 days; a step that runs faster raises it)\n"
        "\n"
        "data, evaluation, output\n"
        "  --data FILE       a token file (llm.c format), or text: BPE with --tokenizer, else bytes (default data/kjv.txt)\n"
        "  --tokenizer FILE  BPE vocabulary (ctron tokenize train) for text data; saved with checkpoints\n"
        "  --val-data FILE   validation data (same kinds as --data); default: the tail of --data\n"
        "  --val-frac X      tail fraction of --data held out for validation (default 0.1)\n"
        "  --data-order O    random (windows at Philox-drawn offsets, default) or sequential (consecutive windows)\n"
        "  --eval-every N    validation loss every N steps, 0 = only at the end (default 100)\n"
        "  --eval-batches N  validation batches per evaluation (default 8)\n"
        "  --threads N       OpenMP/OpenBLAS threads (default: all cores)\n"
        "  --log FILE        one JSON object per step (step, loss, val_loss, lr, ms, tokens_per_s, act_bytes, ...)\n"
        "  --print-every N   progress line every N steps when stdout is not a terminal (default 1)\n"
        "  --no-ledger       do not print the activation ledger (measured vs predicted) after the first step\n"
        "  --max-bad-steps N a step with a non-finite loss or gradient norm is skipped; stop after N in a row\n"
        "                    with a diagnostic, keeping the last checkpoint (default 5, 0 = never stop)\n"
        "  --sample N        after training, print N sampled tokens (KV-cache generation)\n"
        "  --prompt TEXT     prompt for --sample (default a newline)\n"
        "\n"
        "parallelism (docs/PARALLEL.md; launch with mpirun -np N, N = dp x pp x tp)\n"
        "  --tp T            tensor-parallel size: T consecutive ranks share each layer (heads split) (default 1)\n"
        "  --sp              sequence parallelism in the TP group: LN, dropout, residual on s/T rows each\n"
        "  --zero 0|1        1: ZeRO-1, AdamW state sharded over the data-parallel ranks (default 0)\n"
        "  --pp P            pipeline stages: stage r holds a contiguous range of layers (default 1)\n"
        "  --pp-schedule S   1f1b (default), interleaved (with --virtual-stages V), gpipe (all forwards, then all\n"
        "                    backwards) or layered (layered gradient accumulation; layer l on stage l mod P);\n"
        "                    the micro-batches of a step are --grad-accum\n"
        "  --virtual-stages V  interleaved: model chunks per stage (chunk v of stage r starts at v·L/V + r·L/(P·V))\n"
        "  --recompute-microbatches N  of the micro-batches a stage keeps in flight, N keep every activation;\n"
        "                    the others follow --recompute (Megatron's micro-batches with partial checkpoints)\n"
        "\n"
        "checkpoints (docs/CHECKPOINTS.md)\n"
        "  --ckpt-dir DIR    save checkpoints to DIR/step_NNNNNNNN (atomically)\n"
        "  --save-every N    save every N steps; always at the last step (default 0: only at the last)\n"
        "  --keep K          keep the newest K checkpoints, 0 = all (default 3)\n"
        "  --stop-after N    stop after step N of --steps (saving there); resume later with --resume\n"
        "  --resume DIR      continue from the newest checkpoint in DIR (or from a step_ directory) up to\n"
        "                    --steps; flags left out take the checkpoint's values (state.json), given ones\n"
        "                    must agree, or differ with a note where only memory or the layout changes\n"
        "  --list-options    print every option with what --resume does with it, and exit\n"
        "  -h, --help        this text\n");
}

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
    OPT_ARCH, OPT_KV_HEADS, OPT_FFN, OPT_ROPE_THETA, OPT_NORM_EPS, OPT_TIE, OPT_QKV_BIAS
};

// The device is opened once here, so that a missing GPU or driver, or an index past the devices
// there are, is a usage error (exit 2) before any data is read.
static int check_device(const TrainOptions *o) {
    if (!o->device || strcmp(o->device, "cpu") == 0) return 0;
    // Several ranks (--tp, --pp, data parallel, ZeRO) exchange device tensors through comm_device.h:
    // NCCL where it is built, else staged through host memory around MPI.
    if (strcmp(o->device, "cpu-guarded") == 0 && o->offload)
        return usage_error("--device cpu-guarded with --offload: the guard locks device memory for the whole "
                           "process and the offload pool copies from its own thread");
    char err[512] = "";
    Backend *be = backend_open(o->device, (Precision)o->precision, err, sizeof err);
    if (!be) return usage_error("--device %s: %s", o->device, err);
    backend_close(be);
    return 0;
}

// Mixed precision keeps activations in bf16 (the paper's e = 2); fp32 storage would only cost memory.
static int check_precision(TrainOptions *o, const char *const *given, int n_given) {
    if (o->precision != PRECISION_BF16) return 0;
    int on_cpu = !o->device || strncmp(o->device, "cpu", 3) == 0;
    for (int j = 0; j < n_given; j++)
        if (strcmp(given[j], "act-dtype") == 0 && o->act_dtype != ACT_BF16)
            return usage_error("--act-dtype fp32 with --precision bf16: mixed precision keeps activations in bf16 "
                               "(drop --act-dtype, or use --precision fp32)");
    o->act_dtype = ACT_BF16;
    if (!on_cpu) return 0;   // the device's own check (check_device)
    // Said up front: below AVX-512 oneDNN 2.6 has no bf16 matmul, and the GEMMs run widened to fp32.
    char why[256];
    int support = gemm_bf16_support(why, sizeof why);
    if (support == GEMM_BF16_WIDENED)
        fprintf(stderr, "ctron train: note: %s; the bf16 GEMMs run widened to fp32 sgemm, correct but slower than fp32\n",
                why);
    if (support == GEMM_BF16_EMULATED)
        fprintf(stderr, "ctron train: note: %s; the bf16 GEMMs run emulated, correct but slower than fp32\n", why);
    return 0;
}

static int was_given(const char *const *given, int n, const char *flag) {
    for (int i = 0; i < n; i++)
        if (strcmp(given[i], flag) == 0) return 1;
    return 0;
}

// Every long option of ctron train (the command line, and --resume's restoring of recorded options).
static const struct option train_opts[] = {
    {"layers", required_argument, 0, OPT_LAYERS}, {"hidden", required_argument, 0, OPT_HIDDEN},
    {"arch", required_argument, 0, OPT_ARCH}, {"kv-heads", required_argument, 0, OPT_KV_HEADS},
    {"ffn-hidden", required_argument, 0, OPT_FFN}, {"rope-theta", required_argument, 0, OPT_ROPE_THETA},
    {"norm-eps", required_argument, 0, OPT_NORM_EPS}, {"tie-embeddings", no_argument, 0, OPT_TIE},
    {"qkv-bias", no_argument, 0, OPT_QKV_BIAS},
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
    {"offload", required_argument, 0, OPT_OFFLOAD}, {"offload-dir", required_argument, 0, OPT_OFFLOAD_DIR},
    {"static-plan", no_argument, 0, OPT_STATIC_PLAN}, {"device", required_argument, 0, OPT_DEVICE}, {"offload-budget", required_argument, 0, OPT_OFFLOAD_BUDGET}, {"attention", required_argument, 0, OPT_ATTENTION}, {"tp", required_argument, 0, OPT_TP}, {"sp", no_argument, 0, OPT_SP}, {"zero", required_argument, 0, OPT_ZERO},
    {"pp", required_argument, 0, OPT_PP}, {"pp-schedule", required_argument, 0, OPT_PP_SCHEDULE},
    {"virtual-stages", required_argument, 0, OPT_VSTAGES},
    {"recompute-microbatches", required_argument, 0, OPT_RC_MICRO},
    {"ckpt-dir", required_argument, 0, OPT_CKPT_DIR}, {"save-every", required_argument, 0, OPT_SAVE_EVERY},
    {"keep", required_argument, 0, OPT_KEEP}, {"stop-after", required_argument, 0, OPT_STOP_AFTER},
    {"resume", required_argument, 0, OPT_RESUME},
    {"list-options", no_argument, 0, OPT_LIST_OPTIONS}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};

// Sets one option from its text (NULL for a flag without a value), as on the command line: 0, -1
// (done, exit 0: not an option here), or the usage-error exit code with the message printed.
static int apply_option(TrainOptions *o, int ch, const char *optarg, const char *flag) {
    GPTConfig *c = &o->model;
    double x;
    int rc = 0, seed;
    (void)flag;
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
    case OPT_FFN: rc = parse_int("--ffn-hidden", optarg, 1, INT_MAX, &c->ffn); break;
    case OPT_ROPE_THETA: rc = parse_float("--rope-theta", optarg, 1.0, 1e12, 0, &x); c->rope_theta = (float)x; break;
    case OPT_NORM_EPS: rc = parse_float("--norm-eps", optarg, 1e-12, 1.0, 0, &x); c->norm_eps = (float)x; break;
    case OPT_TIE: c->tie_embeddings = 1; break;
    case OPT_QKV_BIAS: c->qkv_bias = 1; break;
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
    case OPT_CKPT_DIR: o->ckpt_dir = optarg; break;
    case OPT_SAVE_EVERY: rc = parse_int("--save-every", optarg, 0, INT_MAX, &o->save_every); break;
    case OPT_KEEP: rc = parse_int("--keep", optarg, 0, INT_MAX, &o->keep); break;
    case OPT_STOP_AFTER: rc = parse_int("--stop-after", optarg, 1, INT_MAX, &o->stop_after); break;
    case OPT_RESUME: o->resume = optarg; break;
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
    case OPT_STATIC_PLAN: o->static_plan = 1; break;
    case OPT_OFFLOAD_BUDGET:
        rc = args_bytes("train", "--offload-budget", optarg, 1, PARSE_BYTES_MAX, &o->offload_budget);
        break;
    case OPT_MEM_BUDGET:
        rc = args_bytes("train", "--mem-budget", optarg, 1, PARSE_BYTES_MAX, &o->mem_budget);
        break;
    case OPT_GELU_BITS: rc = parse_int("--gelu-bits", optarg, 0, 4, &o->gelu_bits); break;
    case OPT_MAX_BAD: rc = parse_int("--max-bad-steps", optarg, 0, INT_MAX, &o->max_bad_steps); break;
    case OPT_TP: rc = parse_int("--tp", optarg, 1, 4096, &o->tp); break;
    case OPT_SP: o->sp = 1; break;
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
    default: return usage_error("unknown option '%s'", flag);
    }
    return rc;
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

// The family's knobs against the family: a flag the other family has no use for is refused (GPT-2's
// LayerNorm epsilon, FFN width and tying are fixed; llama has no GeLU for Tempo or Few-Bit), then the
// defaults are filled in (llama's dropout is 0 unless given). Runs after --resume took the checkpoint's.
static int check_arch(TrainOptions *o, const char *const *given, int n_given) {
    GPTConfig *c = &o->model;
    const ArchSpec *a = arch_spec((ArchKind)c->arch);
    static const char *const llama_only[] = {"kv-heads", "ffn-hidden", "rope-theta", "norm-eps", "tie-embeddings",
                                             "qkv-bias"};
    for (size_t i = 0; i < sizeof llama_only / sizeof llama_only[0]; i++)
        if (c->arch == ARCH_GPT2 && was_given(given, n_given, llama_only[i]))
            return usage_error("--%s is a llama option (--arch llama): GPT-2 has LayerNorm eps 1e-5, an FFN of 4h, "
                               "learned positions, MHA and a tied output layer", llama_only[i]);
    if (a->mlp != MLP_GELU && (o->gelu_bits || (o->tempo & TEMPO_GELU)))
        return usage_error("%s: --arch %s has no GeLU (its MLP is SwiGLU, whose backward keeps gate and up)",
                           o->gelu_bits ? "--gelu-bits" : "--tempo gelu", a->name);
    if (a->mlp != MLP_GELU && o->mini_seq > 1)
        return usage_error("--mini-seq %d: the chunked MLP is GPT-2's GeLU MLP; --arch %s (SwiGLU) does not have it "
                           "yet", o->mini_seq, a->name);
    if (!o->resume && !was_given(given, n_given, "dropout")) c->dropout = a->dropout_default;
    if (c->kv_heads > 0 && c->heads % c->kv_heads != 0)
        return usage_error("--kv-heads %d does not divide --heads %d (each key/value head serves a whole group of "
                           "query heads)", c->kv_heads, c->heads);
    if (a->pos == POS_ROPE && c->hidden % c->heads == 0 && (c->hidden / c->heads) % 2 != 0)
        return usage_error("--hidden %d / --heads %d = head dimension %d is odd: RoPE rotates pairs (j, j + d/2)",
                           c->hidden, c->heads, c->hidden / c->heads);
    gpt_config_resolve(c);
    return 0;
}

int cli_parse_train(int argc, char **argv, TrainOptions *o, int world_size) {
    train_options_default(o);
    o->world_size = world_size;
    enum { N_OPTS = sizeof train_opts / sizeof train_opts[0] };
    const char *given[N_OPTS];   // long names of the flags given (--resume merges by them)
    int n_given = 0, li = -1, rc = 0;
    GPTConfig *c = &o->model;
    optind = 1;
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, ":h", train_opts, &li)) != -1) {
        if (ch >= 1000 && li >= 0 && n_given < N_OPTS) given[n_given++] = train_opts[li].name;
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
    if ((rc = cli_train_ckpt_flags(o, given, n_given, apply_recorded)) != 0) return rc;
    if ((rc = check_arch(o, given, n_given)) != 0) return rc;
    if ((rc = check_precision(o, given, n_given)) != 0) return rc;
    if ((rc = check_device(o)) != 0) return rc;

    // Shapes that make sense together.
    if (c->hidden % c->heads != 0)
        return usage_error("--hidden %d is not divisible by --heads %d", c->hidden, c->heads);
    if (c->vocab < 256)   // from the flag, or from a checkpoint's state.json: say which
        return o->resume && !was_given(given, n_given, "vocab")
                   ? usage_error("--resume: the checkpoint's model.vocab %d (%s/state.json) is too small: byte-level "
                                 "data needs at least 256 symbols", c->vocab, o->resume_step_dir)
                   : usage_error("--vocab %d is too small: byte-level data needs at least 256 symbols", c->vocab);
    {   // before anything below (the memory estimate, the --mem-budget planner) divides by t or by the heads per rank
        char err[512];
        if (train_check_layout(o, o->world_size, err, sizeof err) != 0) return usage_error("%s", err);
    }
    {   // Absurd sizes are refused with what they would need, before anything is allocated.
        double state, act, need = train_memory_estimate(o, &state, &act);
        double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
        char b1[32], b2[32], b3[32], b4[32];
        if (ram > 0 && need > ram)
            return usage_error("the model (--layers %d --hidden %d --heads %d --seq %d --batch %d --vocab %d) would "
                               "need about %s per rank (%s of parameters, gradients and AdamW state, up to %s of "
                               "activations), more than this machine's %s of memory", c->layers, c->hidden, c->heads,
                               c->seq, c->batch, c->vocab, format_bytes(need, b1, sizeof b1),
                               format_bytes(state, b2, sizeof b2), format_bytes(act, b3, sizeof b3),
                               format_bytes(ram, b4, sizeof b4));
    }
    if ((long long)c->seq * c->batch * 4 * c->hidden > INT_MAX || (long long)c->vocab * c->hidden > INT_MAX ||
        (long long)c->seq * c->batch * c->vocab > INT_MAX || (long long)c->seq * c->seq * c->heads > (1LL << 34))
        return usage_error("model too large for 32-bit BLAS indices: --seq %d --batch %d --hidden %d --vocab %d",
                           c->seq, c->batch, c->hidden, c->vocab);
    {
        char err[256];
        MemoryPolicy pol;
        if (train_build_policy(o, &pol, err, sizeof err) != 0) { policy_free(&pol); return usage_error("%s", err); }
        policy_free(&pol);
    }
    if (o->mem_budget > 0) {   // the planner chooses these; a flag that also chooses one is ambiguous
        static const char *const chosen[] = {"recompute", "recompute-method", "recompute-num-layers",
                                             "recompute-layers", "dropout-masks", "tempo", "gelu-bits"};
        for (size_t i = 0; i < sizeof chosen / sizeof chosen[0]; i++)
            for (int j = 0; j < n_given; j++)
                if (strcmp(given[j], chosen[i]) == 0)
                    return usage_error("--mem-budget plans --%s itself: give one of them", chosen[i]);
    }
    if (o->offload_dir && !o->offload && !(o->mem_budget > 0 && o->offload_budget > 0))
        return usage_error("--offload-dir %s without --offload (or --mem-budget with --offload-budget): nothing would go "
                           "there", o->offload_dir);
    if (o->offload_budget > 0 && !(o->mem_budget > 0))
        return usage_error("--offload-budget is what --mem-budget's planner may offload: give --mem-budget too");
    if (o->offload_dir) {
        struct stat sd;
        if (stat(o->offload_dir, &sd) != 0 || !S_ISDIR(sd.st_mode) || access(o->offload_dir, W_OK | X_OK) != 0)
            return usage_error("--offload-dir: '%s' is not a writable directory", o->offload_dir);
    }
    if (o->offload && o->mem_budget > 0)
        return usage_error("--mem-budget plans --offload itself (give --offload-budget to let it): give one of them");
    if (o->flash && (o->tempo & TEMPO_SOFTMAX))
        return usage_error("--attention flash keeps no softmax output: --tempo softmax has nothing to fuse");
    if (o->mini_seq > 1 && (o->gelu_bits || (o->tempo & TEMPO_GELU)))
        return usage_error("--mini-seq %d keeps no GeLU input at all: --gelu-bits and --tempo gelu have nothing to "
                           "replace", o->mini_seq);
    if (o->mini_seq > c->seq * c->batch)
        return usage_error("--mini-seq %d: more chunks than the %d rows of a micro-batch", o->mini_seq,
                           c->seq * c->batch);
    if (o->gelu_bits && (o->tempo & TEMPO_GELU))
        return usage_error("--gelu-bits %d and --tempo gelu both replace gelu_in: choose one", o->gelu_bits);
    if (o->min_lr > o->lr) return usage_error("--min-lr %g is above --lr %g", (double)o->min_lr, (double)o->lr);
    if (o->warmup > o->steps) return usage_error("--warmup %d is longer than --steps %d", o->warmup, o->steps);
    if (o->val_frac <= 0.0) return usage_error("--val-frac must be > 0 (validation needs held-out data)");

    // The data must exist and hold a full window (seq+1 tokens) in both splits.
    struct stat st;
    if (stat(o->data_path, &st) != 0)
        return usage_error("--data: cannot read '%s': %s", o->data_path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return usage_error("--data: '%s' is not a regular file", o->data_path);
    if (st.st_size == 0) return usage_error("--data: '%s' is empty", o->data_path);
    if (o->val_path) {
        if (stat(o->val_path, &st) != 0) return usage_error("--val-data: cannot read '%s': %s", o->val_path, strerror(errno));
        if (!S_ISREG(st.st_mode) || st.st_size == 0)
            return usage_error("--val-data: '%s' is not a non-empty regular file", o->val_path);
    }
    if (o->tokenizer_path && stat(o->tokenizer_path, &st) != 0)
        return usage_error("--tokenizer: cannot read '%s': %s", o->tokenizer_path, strerror(errno));
    if (o->tokenizer_path && !S_ISREG(st.st_mode))   // a FIFO would block the first read forever
        return usage_error("--tokenizer: '%s' is %s, expected a regular file", o->tokenizer_path,
                           fileio_kind(st.st_mode));
    // Byte-level text: its size is its token count, so a too-long --seq is caught here; token files
    // and BPE text are checked once loaded (train_run, also exit 2).
    char err[256];
    int is_tokens = tokenfile_sniff(o->data_path, err, sizeof err);
    if (is_tokens < 0) return usage_error("--data: %s", err);
    if (!is_tokens && !o->tokenizer_path && !o->val_path) {
        stat(o->data_path, &st);
        long long n = st.st_size, n_val = (long long)((double)n * o->val_frac), n_train = n - n_val;
        if (n_train < (long long)c->seq + 1 || n_val < (long long)c->seq + 1)
            return usage_error("--seq %d is longer than the data: '%s' has %lld tokens (%lld train, %lld validation), "
                               "each split needs at least %d", c->seq, o->data_path, n, n_train, n_val, c->seq + 1);
    }
    if (o->log_path) {
        FILE *f = fileio_fopen_out(o->log_path, 1, err, sizeof err);
        if (!f) return usage_error("--log: %s", err);
        fclose(f);
    }
    return cli_train_ckpt_dir(o);
}

// Every rank parses the same flags; all must agree that they are good before any rank starts
// (one rank going on alone would wait forever in its first collective). Rank 0 prints the usual
// message; a rank that alone rejects its inputs (say --data missing on its host) prints its own.
static int parse_on_all_ranks(Comm *comm, int argc, char **argv, TrainOptions *o) {
    CommGroup *w = &comm->world;
    int saved = -1;
    if (w->rank != 0) {   // the same message from every rank would be noise
        fflush(stderr);
        saved = dup(fileno(stderr));
        if (!freopen("/dev/null", "w", stderr)) saved = -1;
    }
    int rc = cli_parse_train(argc, argv, o, w->size);   // checks the layout against the world's size too
    if (saved >= 0) { fflush(stderr); dup2(saved, fileno(stderr)); close(saved); }
    float flags[2] = {rc != 0 && rc != -1 ? 1.0f : 0.0f, w->rank == 0 && rc != 0 && rc != -1 ? 1.0f : 0.0f};
    if (w->size > 1) comm_allreduce_sum(w, flags, flags, 2);
    if (flags[0] > 0.0f) {
        if (rc > 0 && w->rank != 0 && flags[1] == 0.0f) {   // only here: say why, once per such rank
            fprintf(stderr, "ctron train (rank %d of %d): ", w->rank, w->size);
            cli_parse_train(argc, argv, o, w->size);
        }
        // No rank exits before every message is out: mpirun ends the job at the first non-zero exit.
        fflush(stderr);
        if (w->size > 1) comm_barrier(w);
        return CTRON_EXIT_USAGE;
    }
    return rc;
}

int cli_train_main(int argc, char **argv) {
    Comm comm;
    char err[256];
    if (comm_init(&comm, COMM_AUTO, &argc, &argv, err, sizeof err) != 0) {
        fprintf(stderr, "ctron train: %s\n", err);
        return 1;
    }
    TrainOptions o;
    RunLocks locks = {-1, -1};
    int rc = parse_on_all_ranks(&comm, argc, argv, &o);
    if (rc == 0) rc = cli_train_claim(&comm, &o, &locks);   // before any collective of the run
    // Open MPI's mpirun follows its SIGTERM to the ranks with SIGKILL a second later: a preempted run
    // saves only when launched through scripts/ctron-mpirun (docs/RELIABILITY.md).
    if (rc == 0 && comm.world.rank == 0 && comm.world.size > 1 && o.ckpt_dir && getenv("OMPI_COMM_WORLD_SIZE") &&
        !getenv("CTRON_LAUNCHER"))
        fprintf(stderr, "ctron train: note: a SIGTERM to mpirun reaches the ranks with a SIGKILL one second behind it, "
                "before a step can finish and save; launch with scripts/ctron-mpirun (it turns SIGTERM into "
                "SIGUSR1, which every rank saves on) so that a preemption loses nothing\n");
    if (rc == 0) rc = train_run(&o, &comm);
    cli_train_release(&locks);
    comm_finalize(&comm);
    return rc == -1 ? 0 : rc;
}
