#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "arch/arch.h"
#include "arch/lora.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/train_ckpt_args.h"
#include "cli/train_passes.h"
#include "io/peft_adapter.h"

#define usage_error(...) args_error("train", __VA_ARGS__)

// --rotary-dim R (given, or a checkpoint's) against the head: RoPE rotates pairs (j, j + R/2) of the first R
// dims, so R is even and at most the head dim d. R = d rotates every dim: stored as 0, so that the model and its
// checkpoints are those of a run without the flag. A head dim that does not divide is check_shapes' to refuse.
static int check_rotary(GPTConfig *c) {
    if (c->rotary_dim <= 0 || (c->head_dim <= 0 && c->hidden % c->heads != 0)) return 0;
    int d = gpt_head_dim(c);
    if (c->rotary_dim % 2 != 0 || c->rotary_dim > d)
        return usage_error("--rotary-dim %d: expected an even number of dims from 2 to the head dim %d (RoPE rotates "
                           "pairs j, j + R/2 of each head's first R dims)", c->rotary_dim, d);
    if (c->rotary_dim == d) c->rotary_dim = 0;
    return 0;
}

// The family's knobs against the family: a flag the other family has no use for is refused (GPT-2's
// LayerNorm epsilon, FFN width and tying are fixed; llama has no GeLU for Tempo or Few-Bit), then the
// defaults are filled in (llama's dropout is 0 unless given). Runs after --resume took the checkpoint's.
static int check_arch(TrainOptions *o, const TrainGiven *given) {
    GPTConfig *c = &o->model;
    const ArchSpec *a = arch_spec((ArchKind)c->arch);
    int rc;
    static const char *const llama_only[] = {"kv-heads", "head-dim", "ffn-hidden", "rope-theta", "rope-scaling", "norm-eps",
                                             "tie-embeddings", "qkv-bias", "qk-norm", "fused-proj"};
    for (size_t i = 0; i < sizeof llama_only / sizeof llama_only[0]; i++)
        if (c->arch == ARCH_GPT2 && train_given(given, llama_only[i]))
            return usage_error("--%s is a llama option (--arch llama): GPT-2 has LayerNorm eps 1e-5, an FFN of 4h, "
                               "learned positions, MHA and a tied output layer", llama_only[i]);
    if (c->arch == ARCH_GPT2 && train_given(given, "sliding-window"))   // (not in the list: its own reason)
        return usage_error("--sliding-window %d is a llama option (--arch llama): GPT-2 attends to its whole causal "
                           "prefix (transformers' GPT-2 has no sliding window)", c->sliding_window);
    if (c->arch == ARCH_GPT2 && train_given(given, "rotary-dim"))
        return usage_error("--rotary-dim %d is a llama option (--arch llama): GPT-2 has learned positions, no RoPE",
                           c->rotary_dim);
    if (c->qkv_bias && c->qk_norm)
        return usage_error("--qk-norm with --qkv-bias: no Hugging Face family has q/k/v biases with q/k norms (Qwen3's "
                           "attention_bias also puts a bias on o_proj, which ctron does not have)");
    if (c->fused_proj && (c->qkv_bias || c->qk_norm))
        return usage_error("--fused-proj with %s: no Hugging Face family has fused q|k|v and gate|up projections "
                           "with %s (Phi-3's qkv_proj has no bias and no q/k norms)",
                           c->qkv_bias ? "--qkv-bias" : "--qk-norm", c->qkv_bias ? "q/k/v biases" : "q/k norms");
    // export --hf could write no config transformers loads: Phi3Config takes longrope only, the others none
    if ((c->rope_scaling.type == ROPE_LONGROPE) != c->fused_proj && c->rope_scaling.type != ROPE_PLAIN)
        return usage_error("--rope-scaling %s%s: %s", rope_scaling_label(&c->rope_scaling, (char[96]){0}, 96),
                           c->fused_proj ? " with --fused-proj" : "",
                           c->fused_proj
                               ? "Phi3Config (model_type phi3) takes no linear, llama3, yarn or dynamic RoPE scaling, "
                                 "only longrope"
                               : "longrope is Phi-3's (--fused-proj, model_type phi3)");
    if ((rc = check_rotary(c)) != 0) return rc;
    if (c->rope_scaling.type == ROPE_DYNAMIC && gpt_rotary_dim(c) <= 2)   // its exponent D / (D − 2)
        return usage_error("--rope-scaling %s: dynamic NTK scaling needs more than 2 rotated dims (its exponent is "
                           "D/(D-2)); heads of %d rotate %d", rope_scaling_label(&c->rope_scaling, (char[96]){0}, 96),
                           gpt_head_dim(c), gpt_rotary_dim(c));
    if (c->rope_scaling.type == ROPE_LONGROPE && c->rope_scaling.n_factors != gpt_rotary_dim(c) / 2)
        return c->rotary_dim
            ? usage_error("--rope-scaling %s: --rotary-dim %d needs %d factors (one per rotated frequency, R/2)",
                          rope_scaling_label(&c->rope_scaling, (char[96]){0}, 96), c->rotary_dim, c->rotary_dim / 2)
            : usage_error("--rope-scaling %s: heads of %d need %d factors (one per frequency, d/2)",
                          rope_scaling_label(&c->rope_scaling, (char[96]){0}, 96), gpt_head_dim(c),
                          gpt_head_dim(c) / 2);
    if (a->mlp != MLP_GELU && (o->gelu_bits || (o->tempo & TEMPO_GELU)))
        return usage_error("%s: --arch %s has no GeLU (its MLP is SwiGLU, whose backward keeps gate and up)",
                           o->gelu_bits ? "--gelu-bits" : "--tempo gelu", a->name);
    if (!o->resume && !train_given(given, "dropout")) c->dropout = a->dropout_default;
    if (c->kv_heads > 0 && c->heads % c->kv_heads != 0)
        return usage_error("--kv-heads %d does not divide --heads %d (each key/value head serves a whole group of "
                           "query heads)", c->kv_heads, c->heads);
    if (a->pos == POS_ROPE && c->head_dim > 0 && c->head_dim % 2 != 0)
        return usage_error("--head-dim %d is odd: RoPE rotates pairs (j, j + d/2)", c->head_dim);
    if (a->pos == POS_ROPE && c->head_dim <= 0 && c->hidden % c->heads == 0 && (c->hidden / c->heads) % 2 != 0)
        return usage_error("--hidden %d / --heads %d = head dimension %d is odd: RoPE rotates pairs (j, j + d/2)",
                           c->hidden, c->heads, c->hidden / c->heads);
    gpt_config_resolve(c);
    return 0;
}

// --lora-from DIR: the adapter's rank, alpha and targets are the run's; given flags must agree.
static int lora_from_config(TrainOptions *o, const TrainGiven *given) {
    GPTConfig *c = &o->model;
    PeftConfig pc;
    char err[1024], words[128];
    if (o->resume) return usage_error("--lora-from and --resume: a resumed run continues its checkpoint's adapters");
    if (peft_read_config(o->lora_from, gpt_lora_family(c), &pc, err, sizeof err) != 0)
        return usage_error("--lora-from: %s", err);
    if (train_given(given, "lora-rank") && c->lora_rank != pc.rank)
        return usage_error("--lora-rank %d disagrees with --lora-from '%s' (r %d)", c->lora_rank, o->lora_from, pc.rank);
    if (train_given(given, "lora-alpha") && c->lora_alpha != pc.alpha)
        return usage_error("--lora-alpha %g disagrees with --lora-from '%s' (lora_alpha %g)", (double)c->lora_alpha,
                           o->lora_from, (double)pc.alpha);
    if (train_given(given, "lora-rslora") && !pc.rslora)
        return usage_error("--lora-rslora disagrees with --lora-from '%s' (use_rslora false: alpha/r)", o->lora_from);
    unsigned mask = 0;
    if (o->lora_targets && lora_parse_targets(gpt_lora_family(c), o->lora_targets, &mask, err, sizeof err) == 0 &&
        mask != pc.targets)
        return usage_error("--lora-targets %s disagrees with --lora-from '%s' (%s)", o->lora_targets, o->lora_from,
                           lora_describe_targets(pc.targets, words, sizeof words));
    c->lora_rank = pc.rank;
    c->lora_alpha = pc.alpha;
    c->lora_rslora = pc.rslora;
    if (!train_given(given, "lora-dropout")) c->lora_dropout = pc.dropout;   // continuing peft's training
    lora_describe_targets(pc.targets, o->lora_targets_text, sizeof o->lora_targets_text);
    o->lora_targets = o->lora_targets_text;
    return 0;
}

// LoRA's flags against the family and the model (after check_arch: the family and its widths are known).
static int check_lora(TrainOptions *o, const TrainGiven *given) {
    GPTConfig *c = &o->model;
    static const char *const needs_rank[] = {"lora-alpha", "lora-targets", "lora-fa", "lora-rslora", "lora-dropout"};
    if (!c->lora_rank && c->base_bf16)
        return usage_error("--base-dtype bf16 without --lora-rank: only a frozen base (LoRA) can be stored in bf16; "
                           "full fine-tuning keeps fp32 master weights (use --precision bf16 for bf16 GEMMs)");
    for (size_t i = 0; i < sizeof needs_rank / sizeof needs_rank[0]; i++)
        if (!c->lora_rank && !o->lora_from && train_given(given, needs_rank[i]))
            return usage_error("--%s without --lora-rank: LoRA needs a rank (e.g. --lora-rank 16)", needs_rank[i]);
    if (o->lora_from && lora_from_config(o, given) != 0) return CTRON_EXIT_USAGE;
    if (!c->lora_rank && o->lora_out) return usage_error("--lora-out without --lora-rank: there are no adapters to write");
    if (!c->lora_rank) return 0;
    if (o->lora_out && !o->ckpt_dir)
        return usage_error("--lora-out '%s' writes the final checkpoint's adapters: give --ckpt-dir too", o->lora_out);
    struct stat so;
    if (o->lora_out && lstat(o->lora_out, &so) == 0)
        return usage_error("--lora-out: '%s' exists; the adapters go to a new directory", o->lora_out);
    char err[256];
    unsigned mask = 0;
    if (o->lora_targets && lora_parse_targets(gpt_lora_family(c), o->lora_targets, &mask, err, sizeof err) != 0)
        return usage_error("%s", err);
    c->lora_targets = o->lora_targets ? mask : lora_family_sites(gpt_lora_family(c));
    lora_describe_targets(c->lora_targets, o->lora_targets_text, sizeof o->lora_targets_text);
    o->lora_targets = o->lora_targets_text;   // canonical, as state.json records it
    long q = gpt_q_width(c), kv = gpt_kv_width(c), f = c->ffn;
    for (int s = 0; s < LORA_SITES; s++) {   // the rank cannot exceed the adapted linear's smaller side
        if (!(c->lora_targets >> s & 1u)) continue;
        const LoraSiteRow *row = lora_site((LoraSite)s);
        long in = lora_width(row->in, c->hidden, q, kv, f), out = lora_width(row->out, c->hidden, q, kv, f);
        long lim = in < out ? in : out;
        if (c->lora_rank > lim)
            return usage_error("--lora-rank %d is above the width of target '%s' ([%ld, %ld]: at most %ld)", c->lora_rank,
                               row->target, out, in, lim);
    }
    return 0;
}

// Mixed precision keeps activations in bf16 (the paper's e = 2); fp32 storage would only cost memory.
static int check_precision(TrainOptions *o, const TrainGiven *given) {
    if (o->precision != PRECISION_BF16) return 0;
    if (train_given(given, "act-dtype") && o->act_dtype != ACT_BF16)
        return usage_error("--act-dtype fp32 with --precision bf16: mixed precision keeps activations in bf16 "
                           "(drop --act-dtype, or use --precision fp32)");
    o->act_dtype = ACT_BF16;
    return 0;
}

// The model's shapes together, and its layout over the ranks (before anything divides by t or by
// the heads per rank).
static int check_shapes(const TrainOptions *o, const TrainGiven *given) {
    const GPTConfig *c = &o->model;
    if (c->hidden % c->heads != 0)
        return usage_error("--hidden %d is not divisible by --heads %d", c->hidden, c->heads);
    if (c->vocab < 256)   // from the flag, or from a checkpoint's state.json: say which
        return o->resume && !train_given(given, "vocab")
                   ? usage_error("--resume: the checkpoint's model.vocab %d (%s/state.json) is too small: byte-level "
                                 "data needs at least 256 symbols", c->vocab, o->resume_step_dir)
                   : usage_error("--vocab %d is too small: byte-level data needs at least 256 symbols", c->vocab);
    char err[512];
    if (train_check_layout(o, o->world_size, err, sizeof err) != 0) return usage_error("%s", err);
    return 0;
}

// The memory options the planner chooses, and where the offload pool goes.
static int check_memory_flags(const TrainOptions *o, const TrainGiven *given) {
    if (o->mem_budget > 0) {   // the planner chooses these; a flag that also chooses one is ambiguous
        static const char *const chosen[] = {"recompute", "recompute-method", "recompute-num-layers",
                                             "recompute-layers", "dropout-masks", "tempo", "gelu-bits"};
        for (size_t i = 0; i < sizeof chosen / sizeof chosen[0]; i++)
            if (train_given(given, chosen[i])) return usage_error("--mem-budget plans --%s itself: give one of them", chosen[i]);
    }
    if (o->offload_dir && !o->offload && o->memo_alpha == -1.0 && !policy_list_has_memo(o->recompute_layers) && !(o->mem_budget > 0 && o->offload_budget > 0))
        return usage_error("--offload-dir %s without --offload or --memo (or --mem-budget with --offload-budget): nothing would go "
                           "there", o->offload_dir);
    if (o->offload_budget > 0 && !(o->mem_budget > 0))
        return usage_error("--offload-budget is what --mem-budget's planner may offload: give --mem-budget too");
    if (o->offload && o->mem_budget > 0)
        return usage_error("--mem-budget plans --offload itself (give --offload-budget to let it): give one of them");
    return 0;
}

// Techniques that replace the same tensor, or keep nothing for another to act on.
static int check_techniques(const TrainOptions *o) {
    const GPTConfig *c = &o->model;
    if (o->flash && (o->tempo & TEMPO_SOFTMAX))
        return usage_error("--attention flash keeps no softmax output: --tempo softmax has nothing to fuse");
    if (o->mini_seq > 1 && (o->gelu_bits || (o->tempo & TEMPO_GELU)))
        return usage_error("--mini-seq %d keeps no GeLU input at all: --gelu-bits and --tempo gelu have nothing to "
                           "replace", o->mini_seq);
    long long rows = (long long)c->seq * c->batch;   // (the 32-bit index limits are checked later, train_env.c)
    if (o->mini_seq > rows)
        return usage_error("--mini-seq %d: more chunks than the %lld rows of a micro-batch", o->mini_seq, rows);
    if (o->gelu_bits && (o->tempo & TEMPO_GELU))
        return usage_error("--gelu-bits %d and --tempo gelu both replace gelu_in: choose one", o->gelu_bits);
    return 0;
}

// Reversible blocks rebuild every layer in backward: recompute, offload and the planners have nothing to
// act on; pipeline stages and static plans are not built for them.
static int check_reversible(const TrainOptions *o, const TrainGiven *given) {
    if (!o->model.reversible) return 0;
    static const char *const recompute[] = {"recompute-method", "recompute-num-layers", "recompute-layers"};
    if (o->recompute && strcmp(o->recompute, "none") != 0)
        return usage_error("--reversible with --recompute %s: reversible blocks rebuild every layer from its outputs "
                           "in backward and keep none; leave --recompute at none", o->recompute);
    for (size_t i = 0; i < sizeof recompute / sizeof recompute[0]; i++)
        if (train_given(given, recompute[i]))
            return usage_error("--reversible with --%s: reversible blocks keep no layer to recompute", recompute[i]);
    if (o->offload || o->mem_budget > 0)
        return usage_error("--reversible with %s: no layer keeps a tensor through the forward (only the two streams)",
                           o->offload ? "--offload" : "--mem-budget");
    if (o->pp > 1) return usage_error("--reversible with --pp %d: reversible blocks are not built for pipeline stages "
                                      "(the streams would cross stages in both directions)", o->pp);
    if (o->sample_tokens > 0)
        return usage_error("--reversible with --sample %d: generation (the KV-cache block) computes the standard block",
                           o->sample_tokens);
    if (o->static_plan) return usage_error("--reversible with --static-plan: not built (the inversion's lifetimes are "
                                           "not recorded)");
    return 0;
}

// --recompute search picks the kind and the parts for every layer itself: the flags that choose what a
// layer keeps are refused beside it (masks, dtype, precision and TP/SP are the run's, and priced).
static int check_search(TrainOptions *o, const TrainGiven *given) {
    if (!o->recompute || strcmp(o->recompute, "search") != 0) {   // (a resumed search run's, restored: ignored)
        if (train_given(given, "act-budget-layer") || train_given(given, "search-rates"))
            return usage_error("--%s is for --recompute search (given: --recompute %s)",
                               train_given(given, "act-budget-layer") ? "act-budget-layer" : "search-rates",
                               o->recompute ? o->recompute : "none");
        return 0;
    }
    if (!(o->act_budget_layer > 0))
        return usage_error("--recompute search needs --act-budget-layer BYTES: what one layer may keep for backward");
    static const char *const chosen[] = {"recompute-method", "recompute-num-layers", "recompute-layers"};
    for (size_t i = 0; i < sizeof chosen / sizeof chosen[0]; i++)
        if (train_given(given, chosen[i])) return usage_error("--recompute search chooses --%s itself", chosen[i]);
    const char *other = o->tempo ? "--tempo" : o->gelu_bits ? "--gelu-bits" : o->mini_seq > 1 ? "--mini-seq"
                        : o->offload ? "--offload" : o->mem_budget > 0 ? "--mem-budget"
                        : o->model.reversible ? "--reversible" : NULL;
    if (other)
        return usage_error("--recompute search with %s: the search chooses among none, selective, full, Tempo's "
                           "softmax fusion and the parts that make a tensor again, for the standard or flash block, with or "
                           "without LoRA (give one or the other)", other);
    if (train_uses_pipeline(o))
        return usage_error("--recompute search with a pipeline (--pp %d): not built; the search plans one process's layers",
                           o->pp);
    if (o->device && strncmp(o->device, "cuda", 4) == 0 && !(o->search_gflops > 0))
        return usage_error("--recompute search with --device %s needs --search-rates GFLOPS,GBPS (the GPU's GEMM rate "
                           "and memory bandwidth; the measured ones are this CPU's)", o->device);
    if (o->world_size > 1 && !(o->search_gflops > 0))
        return usage_error("--recompute search on %d ranks needs --search-rates GFLOPS,GBPS: each rank would measure "
                           "its own rates and could pick another mode", o->world_size);
    if (o->tp > 1 && !(o->search_link_gbps > 0))
        return usage_error("--recompute search with --tp %d needs the TP link's rate too: --search-rates "
                           "GFLOPS,GBPS,LINK_GBPS (it prices the all-gathers and reductions a remade GEMM repeats)", o->tp);
    train_search_rates(o);   // measured once (and recorded for --resume): every later question gets the same pick
    return 0;
}

// MEMO (--memo, model/memo.h) is built for one pipeline stage (TP without SP, DP) on the CPU backend, with the
// standard block: what it is not built with is refused here, with the reason, before anything is allocated.
static int check_memo(const TrainOptions *o, const TrainGiven *given) {
    int memo = o->memo_alpha != -1.0 || policy_list_has_memo(o->recompute_layers);
    if (o->tp_link_gbps > 0 && o->memo_alpha != -2.0)
        return usage_error("--tp-link-gbps is for --memo auto (the planner's TP link; given: --memo %s)",
                           !memo ? "off" : o->memo_alpha >= 0.0 ? "ALPHA" : "off, memo layers in --recompute-layers");
    if (!memo) return 0;
    if (o->memo_alpha == -2.0 && !(o->mem_budget > 0))
        return usage_error("--memo auto: the fraction is chosen by --mem-budget's planner; give --mem-budget, or a "
                           "fraction between 0 and 1");
    if (o->memo_alpha >= 0.0 && o->mem_budget > 0)
        return usage_error("--mem-budget chooses --memo's fraction itself (--memo auto): give one of them");
    if (o->recompute && strcmp(o->recompute, "none") != 0 && strcmp(o->recompute, "memo") != 0)
        return usage_error("--memo with --recompute %s: a memo layer keeps only its input and recomputes what it does "
                           "not swap; mark layers with --recompute-layers FIRST-LAST:memo instead", o->recompute);
    if (o->tp > 1 && o->sp)
        return usage_error("--memo with --tp %d --sp: not built (under SP a rank holds s/%d of the positions of a layer's "
                           "input, and a memo token range spans the ranks' shards); drop --sp", o->tp, o->tp);
    if (train_uses_pipeline(o)) return usage_error("--memo with a pipeline: not built (one process, --pp 1)");
    if (o->model.reversible) return usage_error("--memo with --reversible: reversible blocks keep no layer to swap");
    if (o->tempo || o->gelu_bits || o->mini_seq > 1)
        return usage_error("--memo with %s: not built (a memo layer keeps what a selective layer keeps)",
                           o->tempo ? "--tempo" : o->gelu_bits ? "--gelu-bits" : "--mini-seq");
    if (o->offload) return usage_error("--memo with --offload: both own the host pool; MEMO already swaps its tokens");
    if (o->device && strcmp(o->device, "cpu-guarded") == 0)
        return usage_error("--memo with --device cpu-guarded: the guard locks memory the pool's thread copies");
    if (o->memo_alpha == -2.0 && o->tp > 1 && !(o->tp_link_gbps > 0))
        return usage_error("--memo auto with --tp %d needs the TP link's rate: --tp-link-gbps X (GB/s; it prices the "
                           "attention projection's all-reduce that each layer's recompute repeats over its rows)", o->tp);
    if (o->device && strncmp(o->device, "cuda", 4) == 0 && o->memo_alpha == -2.0)
        return usage_error("--memo auto with --device %s: the planner's host link and GEMM rate are this CPU's; give "
                           "--memo ALPHA (ctron plan --memo --host-gbps X --gemm-gflops Y plans it for the GPU)", o->device);
    (void)given;
    return 0;
}

int train_validate(TrainOptions *o, const TrainGiven *given) {
    int rc;
    if ((rc = cli_train_ckpt_check(o, given->name, given->n)) != 0) return rc;
    if ((rc = check_arch(o, given)) != 0) return rc;
    if ((rc = check_lora(o, given)) != 0) return rc;
    if ((rc = check_precision(o, given)) != 0) return rc;
    if (o->device && strcmp(o->device, "cpu-guarded") == 0 && o->offload)
        return usage_error("--device cpu-guarded with --offload: the guard locks device memory for the whole "
                           "process and the offload pool copies from its own thread");
    if ((rc = check_shapes(o, given)) != 0) return rc;
    if ((rc = check_search(o, given)) != 0) return rc;
    if (!(o->mem_budget > 0)) {   // the flags' policy (--mem-budget's is planned for the device: train_env.c)
        char err[256];
        MemoryPolicy pol;
        if (train_build_policy(o, &pol, err, sizeof err) != 0) { policy_free(&pol); return usage_error("%s", err); }
        policy_free(&pol);
    }
    if ((rc = check_memory_flags(o, given)) != 0) return rc;
    if ((rc = check_techniques(o)) != 0) return rc;
    if ((rc = check_reversible(o, given)) != 0) return rc;
    if ((rc = check_memo(o, given)) != 0) return rc;
    if (o->min_lr > o->lr) return usage_error("--min-lr %g is above --lr %g", (double)o->min_lr, (double)o->lr);
    if (o->warmup > o->steps) return usage_error("--warmup %d is longer than --steps %d", o->warmup, o->steps);
    if (o->val_frac <= 0.0) return usage_error("--val-frac must be > 0 (validation needs held-out data)");
    return 0;
}
