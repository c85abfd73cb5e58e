// A run's options before it starts: defaults, the layout check, the up-front memory estimate, the
// memory plan and the policy they describe, and the step's model FLOPs.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "memory/flops.h"
#include "memory/ledger_report.h"
#include "memory/memo_model.h"
#include "memory/planner.h"
#include "train/trainer.h"
#include "train/pipe_schedule.h"
#include "memory/stage_model.h"
#include "memory/stage_planner.h"

void train_options_default(TrainOptions *o) {
    memset(o, 0, sizeof *o);
    GPTConfig c = {.layers = 2, .hidden = 64, .heads = 4, .seq = 64, .batch = 8, .vocab = 256, .dropout = 0.1f};
    o->model = c;
    o->steps = 300;
    o->grad_accum = 1;
    o->warmup = -1;            // -1: min(100, steps/10)
    o->eval_every = 100;
    o->eval_batches = 8;
    o->print_every = 1;
    o->threads = 0;            // 0: all cores
    o->lr = 1e-3f;
    o->min_lr = -1.0f;         // -1: lr/10
    o->weight_decay = 0.1f;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;
    o->clip = 1.0f;
    o->val_frac = 0.1;
    o->seed = 1337;
    o->data_path = "data/kjv.txt";
    o->keep = 3;
    o->recompute = "none";
    o->memo_alpha = -1.0;
    o->recompute_method = "uniform";
    o->recompute_num_layers = 1;
    o->masks = MASKS_BYTES;
    o->act_dtype = ACT_FP32;
    o->show_ledger = 1;
    o->tp = 1;
    o->pp = 1;
    o->pp_schedule = PIPE_1F1B;
    o->world_size = 1;
    o->max_bad_steps = 5;
}

// LoRA: the whole model's adapter parameters, A and B of every targeted site in every layer.
static double lora_adapter_params(const GPTConfig *cfg) {
    GPTConfig c = *cfg;
    gpt_config_resolve(&c);
    double sum = 0;
    for (int s = 0; s < LORA_SITES; s++) {
        if (!(c.lora_targets >> s & 1u)) continue;
        const LoraSiteRow *row = lora_site((LoraSite)s);
        sum += (double)c.lora_rank * (double)(lora_width(row->in, c.hidden, c.hidden, gpt_kv_width(&c), c.ffn) +
                                              lora_width(row->out, c.hidden, c.hidden, gpt_kv_width(&c), c.ffn));
    }
    return sum * c.layers;
}

// LoRA's change to a step's model FLOPs (B sequences): memory/flops.h's flops_lora_delta of the model's shape.
double train_lora_flops_delta(const GPTConfig *cfg, double B) {
    ActShape sh = {.s = cfg->seq, .b = 1, .h = cfg->hidden, .a = cfg->heads, .L = cfg->layers, .v = cfg->vocab, .t = 1};
    gpt_shape_family(cfg, &sh);
    return flops_lora_delta(&sh, B);
}

double train_memory_estimate(const TrainOptions *o, double *state_bytes, double *act_bytes) {
    const GPTConfig *c = &o->model;
    double t = o->tp > 0 ? o->tp : 1, dp = train_dp_groups(o);
    double L = c->layers, h = c->hidden, a = c->heads, s = c->seq, b = c->batch, v = c->vocab;
    double f = c->ffn > 0 ? c->ffn : 4 * h, vl = ceil(v / t);
    double n = (double)gpt_num_params(c) / t;   // the replicated norms, biases and positions are small
    // parameters and gradients, AdamW's two moments (split over dp with ZeRO-1); LoRA: the base's weights,
    // and gradients and moments of the adapters only (all of them counted, an upper bound under LoRA-FA)
    double trained = c->lora_rank > 0 ? lora_adapter_params(c) : n;
    *state_bytes = 4 * (n + (c->lora_rank > 0 ? trained : 0)) + 4 * trained + 8 * trained / (o->zero ? dp : 1);
    // activations: the none-policy fp32 bill with byte masks (an upper bound for every policy),
    // the logits, and the per-layer workspace
    double sbh = s * b * h;
    // (GPT-2 keeps gelu_in and fc2_in, llama gate and up: 8 bytes per FFN element either way)
    *act_bytes = L * (sbh * (34 + 9 * a * s / h) + 8 * s * b * f) / t + s * b * vl * 4 + 4 * (10 * sbh + 4 * s * s);
    return *state_bytes + *act_bytes;
}

int train_dp_groups(const TrainOptions *o) {
    int tp_pp = o->tp * (o->pp > 1 ? o->pp : 1);
    return o->tp >= 1 && o->world_size >= tp_pp && o->world_size % tp_pp == 0 ? o->world_size / tp_pp : 1;
}

int train_check_layout(const TrainOptions *o, int world_size, char *err, size_t errlen) {
    const GPTConfig *c = &o->model;
    if (o->tp_solo) {   // one process standing for the whole TP group (comm_grid_solo)
        const char *no = o->pp > 1 ? "--pp" : o->ckpt_dir ? "--ckpt-dir" : o->resume ? "--resume" :
                         o->lora_out ? "--lora-out" : NULL;
        if (world_size != 1 || o->tp < 2 || no) {
            snprintf(err, errlen, "--tp-solo runs TP rank 0 of --tp T >= 2 alone in one process, for its time and "
                     "memory (got --tp %d on %d rank%s%s%s): its weights are not the model's, so no %s",
                     o->tp, world_size, world_size == 1 ? "" : "s", no ? " with " : "", no ? no : "",
                     "pipeline stages, checkpoints, resume or adapter output");
            return -1;
        }
        world_size = o->tp;
    }
    if (o->tp < 1 || world_size % o->tp != 0) {
        snprintf(err, errlen, "--tp %d does not divide the %d rank%s of this run (ranks = dp x tp; launch with "
                 "mpirun -np N where N is a multiple of %d)", o->tp, world_size, world_size == 1 ? "" : "s", o->tp);
        return -1;
    }
    if (c->heads % o->tp != 0) {
        snprintf(err, errlen, "--tp %d does not divide --heads %d (each TP rank takes whole heads)", o->tp, c->heads);
        return -1;
    }
    if (c->kv_heads > 0 && c->kv_heads % o->tp != 0) {   // replicating k and v heads is not built
        snprintf(err, errlen, "--tp %d does not divide --kv-heads %d (each TP rank takes whole key/value heads; "
                 "choose t dividing %d)", o->tp, c->kv_heads, c->kv_heads);
        return -1;
    }
    if (c->ffn > 0 && c->ffn % o->tp != 0) {
        snprintf(err, errlen, "--tp %d does not divide --ffn-hidden %d (each TP rank takes ffn/t columns of gate, "
                 "up and down)", o->tp, c->ffn);
        return -1;
    }
    if (o->sp && o->tp < 2) {
        snprintf(err, errlen, "--sp splits the sequence over the TP group: it needs --tp 2 or more");
        return -1;
    }
    if (o->sp && c->seq % o->tp != 0) {
        snprintf(err, errlen, "--sp needs --seq %d divisible by --tp %d (each TP rank holds s/t positions)", c->seq,
                 o->tp);
        return -1;
    }
    if (o->pp > 1 && world_size % (o->pp * o->tp) != 0) {
        snprintf(err, errlen, "--pp %d x --tp %d = %d does not divide the %d rank%s of this run (ranks = dp x pp x tp)",
                 o->pp, o->tp, o->pp * o->tp, world_size, world_size == 1 ? "" : "s");
        return -1;
    }
    PipeSpec spec;
    if (train_pipe_spec(o, &spec, err, errlen) != 0) return -1;
    if (train_uses_pipeline(o)) {   // what the pipeline executor does not combine with (yet)
        const char *no = o->static_plan ? "--static-plan" : o->offload ? "--offload" : NULL;
        if (no) {
            snprintf(err, errlen, "%s does not work with a pipeline schedule (--pp %d, --pp-schedule %s): its plan and "
                     "its stage slots are for one micro-batch in flight", no, o->pp, pipe_schedule_name(spec.kind));
            return -1;
        }
    }
    if (o->recompute_microbatches > 0 && !train_uses_pipeline(o)) {
        snprintf(err, errlen, "--recompute-microbatches %d needs a pipeline (--pp 2 or more, or --pp-schedule gpipe or "
                 "layered): with one micro-batch in flight there is nothing to choose from", o->recompute_microbatches);
        return -1;
    }
    return 0;
}

int train_pipe_spec(const TrainOptions *o, PipeSpec *spec, char *err, size_t errlen) {
    return pipe_spec_init(spec, (PipeScheduleKind)o->pp_schedule, o->pp > 1 ? o->pp : 1, o->virtual_stages,
                          o->grad_accum, o->model.layers, err, errlen);
}

int train_uses_pipeline(const TrainOptions *o) { return o->pp > 1 || o->pp_schedule != PIPE_1F1B; }

static ActShape options_shape(const TrainOptions *o);
ActShape train_act_shape(const TrainOptions *o) { return options_shape(o); }

static ActShape options_shape(const TrainOptions *o) {
    GPTConfig c = o->model;
    gpt_config_resolve(&c);
    ActShape sh = {.s = c.seq, .b = c.batch, .h = c.hidden, .a = c.heads, .L = c.layers, .v = c.vocab,
                   .elem_bytes = o->act_dtype == ACT_BF16 ? 2 : 4, .masks = o->masks, .dropout = c.dropout > 0.0f,
                   .t = o->tp, .sp = o->sp};
    // the family's block and its parameter side (untied output layer, biases) for the planner's counts
    act_shape_set_family(&sh, (ArchKind)c.arch, c.kv_heads, c.ffn, c.tie_embeddings, c.qkv_bias, c.qk_norm);
    sh.fused_proj = c.fused_proj != 0;
    sh.head_dim = gpt_shape_head_dim(&c);
    sh.lora_rank = c.lora_rank > 0 ? c.lora_rank : 0;
    sh.lora_sites = c.lora_rank > 0 ? c.lora_targets : 0;
    sh.lora_fa = c.lora_rank > 0 && c.lora_fa;
    return sh;
}

// The OpenMP threads the run will use (each holds its own attention scratch).
static int run_threads(const TrainOptions *o) { return o->threads > 0 ? o->threads : omp_get_max_threads(); }

// The backend that sizes the attention scratch of a plan (planner.h): the run's device when it is not
// the CPU, opened for the question (close it with backend_close); NULL for the CPU backend's sizes at
// run_threads(o), and where the device cannot be opened (the run itself then stops, saying why).
static Backend *plan_device(const TrainOptions *o) {
    if (!o->device || strncmp(o->device, "cpu", 3) == 0) return NULL;
    char err[256];
    return backend_open(o->device, (Precision)o->precision, err, sizeof err);
}

int train_plan(const TrainOptions *o, double budget, MemPlan *plan) {
    ActShape sh = options_shape(o);
    Backend *be = plan_device(o);
    int r = plan_memory_precision(&sh, (Precision)o->precision, be, run_threads(o), budget, o->offload_budget, plan);
    backend_close(be);
    return r;
}

int train_print_plan(FILE *f, const TrainOptions *o, double budget) {
    MemPlan p;
    int ok = train_plan(o, budget, &p) == 0;
    const GPTConfig *c = &o->model;
    char b1[32], b2[32], flags[256];
    plan_flags(&p, c->layers, flags, sizeof flags);
    if (!ok) {
        fprintf(f, "no plan fits %s of activations per rank (L=%d h=%d a=%d s=%d b=%d v=%d, t=%d%s, %s): the least "
                "any plan needs is %s (%s); raise the budget, shorten --seq or --batch, or add TP ranks with --sp\n",
                format_bytes(budget, b1, sizeof b1), c->layers, c->hidden, c->heads, c->seq, c->batch, c->vocab, o->tp,
                o->sp ? " +SP" : "", act_dtype_name(o->act_dtype),
                format_bytes((double)(p.arena_bytes + p.scratch_bytes + p.gemm_scratch_bytes), b2, sizeof b2),
                flags);
        return -1;
    }
    fprintf(f, "plan for %s of activations per rank: %d layers full, %d selective, %d none; masks %s; tempo %s%s\n",
            format_bytes(budget, b1, sizeof b1), p.n_full, p.n_sel, c->layers - p.n_full - p.n_sel,
            mask_mode_name(p.masks), tempo_describe(p.tempo, b2, sizeof b2),
            p.tempo & MINI_SEQ ? "; mini-seq 4" : "");
    fprintf(f, "  predicted activation peak %s (%zu bytes; the arena with alignment %zu) + attention scratch %s "
            "(%d threads)\n", format_bytes((double)p.act_peak, b1, sizeof b1), p.act_peak, p.arena_bytes,
            format_bytes((double)p.scratch_bytes, b2, sizeof b2), run_threads(o));
    if (o->precision == PRECISION_BF16) {   // mixed precision's bytes that the ledger does not count
        fprintf(f, "  + bf16 GEMM operand scratch %s (%zu bytes, the backend's; in the budget)\n",
                format_bytes((double)p.gemm_scratch_bytes, b1, sizeof b1), p.gemm_scratch_bytes);
        fprintf(f, "  outside the budget: bf16 weight copy %s (%zu bytes: 2 per parameter of the rank, beside the fp32 "
                "weights, gradients and AdamW moments)\n", format_bytes((double)p.weight_copy_bytes, b1, sizeof b1),
                p.weight_copy_bytes);
    }
    fprintf(f, "  recompute %.3g GFLOP per micro-batch per rank = %.1f %% of the model's %.3g GFLOP\n",
            p.extra_flops * 1e-9, 100.0 * p.extra_flops / p.model_flops, p.model_flops * 1e-9);
    if (p.offload) {
        char what[160];
        fprintf(f, "  offload %s: %s in the pool per micro-batch (the --offload-budget is %s)\n",
                offload_describe(p.offload, what, sizeof what), format_bytes((double)p.pool_bytes, b1, sizeof b1),
                format_bytes(o->offload_budget, b2, sizeof b2));
    }
    fprintf(f, "  ctron train flags: %s\n", flags);
    return 0;
}

int train_build_policy(const TrainOptions *o, MemoryPolicy *p, char *err, size_t errlen) {
    memset(p, 0, sizeof *p);
    p->precision = o->precision;
    p->device = o->device;
    PipeSpec spec;
    if (o->mem_budget > 0 && train_uses_pipeline(o) && train_pipe_spec(o, &spec, err, errlen) == 0) {
        // Each stage planned for the budget on its own (memory/stage_planner.h): every rank computes the
        // same whole-model policy; the first stage, holding the most micro-batches, may recompute more.
        ActShape sh = options_shape(o);
        StagePlan rep;
        Backend *be = plan_device(o);
        int r = stage_plan_memory(&spec, &sh, (Precision)o->precision, be, run_threads(o), o->mem_budget, p, &rep,
                                  err, errlen);
        backend_close(be);
        if (r != 0) {
            char why[400];
            snprintf(why, sizeof why, "%s", err);
            snprintf(err, errlen, "--mem-budget: %s (see ctron plan --pp)", why);
            return -1;
        }
        p->precision = o->precision;
        p->device = o->device;
        return 0;
    }
    if (o->mem_budget > 0 && o->memo_alpha == -2.0) {   // --memo auto: MEMO's α for the budget (memo_options.c)
        if (train_memo_policy(o, p, err, errlen) != 0) return -1;
        p->precision = o->precision;
        p->device = o->device;
        p->offload_dir = o->offload_dir;
        return 0;
    }
    if (o->mem_budget > 0) {   // the planner decides what is kept; the arena holds to the budget
        MemPlan plan;
        ActShape sh = options_shape(o);
        Backend *be = plan_device(o);
        int r = plan_memory_precision(&sh, (Precision)o->precision, be, run_threads(o), o->mem_budget,
                                      o->offload_budget, &plan);
        backend_close(be);
        if (r != 0) {
            char b1[32], b2[32];
            snprintf(err, errlen, "--mem-budget %s: no plan fits; the least any needs is %s (see ctron plan)",
                     format_bytes(o->mem_budget, b1, sizeof b1),
                     format_bytes((double)(plan.arena_bytes + plan.scratch_bytes + plan.gemm_scratch_bytes), b2,
                                  sizeof b2));
            return -1;
        }
        plan_policy(&plan, &sh, p);
        p->precision = o->precision;
        p->device = o->device;
        p->offload_dir = o->offload_dir;
        // the attention and GEMM scratch live outside the arena
        p->arena_budget = (size_t)o->mem_budget - plan.scratch_bytes - plan.gemm_scratch_bytes;
        return 0;
    }
    p->act_dtype = o->act_dtype;
    p->masks = o->masks;
    p->tempo = o->tempo | (o->gelu_bits > 0 ? GELU_FEWBIT : 0) | (o->mini_seq > 1 ? MINI_SEQ : 0) |
               (o->flash ? ATTN_FLASH : 0) | gpt_keep_bits(&o->model);
    p->gelu_bits = o->gelu_bits;
    p->mini_seq = o->mini_seq > 1 ? o->mini_seq : 0;
    p->offload = o->offload;
    p->offload_dir = o->offload_dir;
    if (o->recompute && strcmp(o->recompute, "search") == 0) {   // the fusion search's mode for every layer
        FusionGraph g;
        FusionMode md;
        FusionCut cut, best;
        if (train_search_pick(o, &g, &md, &cut, &best, err, errlen) != 0) return -1;
        p->tempo |= md.parts;
        return policy_build(p, o->model.layers, recompute_name(md.kind), "uniform", 1, NULL, err, errlen);
    }
    p->memo_alpha = o->memo_alpha >= 0.0 ? (float)o->memo_alpha : 0.0f;
    if (!train_uses_pipeline(o)) {   // --memo alone: every layer a memo layer
        const char *rc = o->memo_alpha >= 0.0 && !o->recompute_layers ? "memo" : o->recompute;
        int r = policy_build(p, o->model.layers, rc, o->recompute_method, o->recompute_num_layers, o->recompute_layers,
                             err, errlen);
        if (r == 0 && policy_memo_needs_alpha(p) && o->memo_alpha < 0.0) {
            snprintf(err, errlen, "--recompute-layers: a memo layer needs --memo ALPHA or its own memo@ALPHA (the "
                     "fraction of its tokens swapped to host memory)");
            return -1;
        }
        return r;
    }
    // Pipelines: Megatron's --recompute-method/--recompute-num-layers count within each model chunk, and
    // no full-recompute group straddles two chunks (each chunk runs its backward on its own).
    if (train_pipe_spec(o, &spec, err, errlen) != 0)   // a bad layout: train_check_layout names the rule
        return policy_build(p, o->model.layers, o->recompute, o->recompute_method, o->recompute_num_layers,
                            o->recompute_layers, err, errlen);
    StageLayout lay = {options_shape(o), spec.p, spec.V, spec.m};
    if (stage_policy_build(p, &lay, o->recompute, o->recompute_method, o->recompute_num_layers, o->recompute_layers,
                           err, errlen) != 0)
        return -1;
    policy_cut_groups(p, pipe_layers_per_chunk(&spec));
    return 0;
}

FlopBlock train_flop_block(const GPTConfig *cfg) {
    GPTConfig c = *cfg;
    gpt_config_resolve(&c);
    FlopBlock b = {(double)gpt_kv_width(&c), (double)c.ffn, arch_spec((ArchKind)c.arch)->mlp == MLP_SWIGLU ? 2 : 1,
                   (double)gpt_q_width(&c), (double)c.sliding_window};
    return b;
}

double train_flops_per_step(const GPTConfig *c, int grad_accum) {
    FlopBlock b = train_flop_block(c);
    return flops_model_block((double)c->batch * grad_accum, c->layers, c->seq, c->hidden, c->vocab, &b);
}

