#include "train/run.h"
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include "io/hf_load.h"
#include "memory/reversible_model.h"
#include "train/guards.h"
#include "train/train_ckpt.h"
#include "train/train_dist.h"
#include "util/common.h"
#include "util/fileio.h"
#include "io/model_source.h"
#include "io/peft_adapter.h"

void run_sum_over_ranks(CommGroup *w, float *x, size_t n) {
    if (w->size > 1) comm_allreduce_sum(w, x, x, n);
}

int run_all_ok(CommGroup *w, int ok) {
    float bad = ok ? 0.0f : 1.0f;
    run_sum_over_ranks(w, &bad, 1);
    return bad == 0.0f;
}

// The dp × pp × tp grid (the CLI checked the layout). Rank 0 speaks for the run: progress, ledger
// report, log, checkpoints, sample.
static int open_grid(TrainRun *r) {
    const TrainOptions *o = r->o;
    char err[512];
    int grid_rc = o->tp_solo ? comm_grid_solo(r->comm, o->tp, &r->grid, err, sizeof err)
                             : comm_grid_pp(r->comm, o->tp, o->pp, &r->grid, err, sizeof err);
    if (grid_rc != 0) {
        if (r->rank == 0) fprintf(stderr, "ctron: error: %s\n", err);
        return 2;
    }
    r->has_grid = 1;
    r->dpg = &r->grid.dp_group;
    r->tpg = &r->grid.tp_group;
    guard_install_signals();
    r->nranks = r->grid.dp;
    r->dp_rank = r->dpg->rank;
    if (o->threads > 0) omp_set_num_threads(o->threads);
    if (r->rank != 0 && !freopen("/dev/null", "w", stdout)) return 1;
    return 0;
}

// Data and vocabulary are user input: a problem with them is a usage error (exit 2), on every rank at
// once when any rank has it.
static int open_data(TrainRun *r) {
    const TrainOptions *o = r->o;
    const GPTConfig *c = &o->model;
    char err[512];
    r->has_data = 1;   // a failed load leaves the dataset to dataset_free
    int data_ok = dataset_load_split(&r->ds, o->data_path, o->val_path, o->tokenizer_path, o->val_frac, c->vocab, err,
                                     sizeof err) == 0 &&
                  dataset_check_windows(&r->ds, c->seq, err, sizeof err) == 0;
    if (data_ok && o->tokenizer_path) {
        if (bpe_load(&r->bpe, o->tokenizer_path, err, sizeof err) != 0) data_ok = 0;
        else if (fileio_read_all(o->tokenizer_path, &r->tokenizer_json, &r->tokenizer_bytes, err, sizeof err) != 0) {
            bpe_free(&r->bpe);
            data_ok = 0;
        } else r->has_bpe = 1;
    }
    if (!data_ok) {
        if (r->world->size > 1) fprintf(stderr, "ctron train (rank %d of %d): %s\n", r->rank, r->world->size, err);
        else fprintf(stderr, "ctron train: %s\n", err);
    }
    return run_all_ok(r->world, data_ok) ? 0 : 2;
}

// The memory policy, and the log (rank 0). A resumed run appends: the log of the steps before the
// checkpoint is not lost.
static int open_policy_log(TrainRun *r) {
    const TrainOptions *o = r->o;
    char err[512];
    int policy_ok = train_build_policy(o, &r->policy, err, sizeof err) == 0;
    r->has_policy = policy_ok;
    if (!policy_ok) fprintf(stderr, "ctron: error: %s\n", err);
    else if (r->rank == 0 && o->log_path && !(r->log = fileio_fopen_out(o->log_path, o->resume != NULL, err, sizeof err)))
        fprintf(stderr, "ctron: error: --log: %s\n", err);
    return !policy_ok || (r->rank == 0 && o->log_path && !r->log) ? 1 : 0;
}

// --init-from: the weights of the model the CLI took the architecture from, this rank's shards of
// them. Its files are user input: a problem is a usage error (exit 2) on every rank at once.
// With LoRA the source is the frozen base: it is read into a whole host model without adapters, and the
// adapters start from the seed (peft's initialisation) as in a run without --init-from.
static int load_init_from(TrainRun *r) {
    static ModelSource src;   // 12 KB of paths: not on the stack
    char err[1024];
    int ok = model_source_open(r->o->init_from, &src, err, sizeof err) == 0;
    if (ok && r->o->model.lora_rank > 0 && src.is_hf && r->o->tp <= 1 && r->o->pp <= 1) {
        gpt_init_weights(&r->m, r->o->seed);   // the adapters; the base straight from the files, a tensor at a time
        ok = hf_load_frozen_base(&r->m, src.path, err, sizeof err) == 0;
    } else if (ok && r->o->model.lora_rank > 0) {
        GPTConfig bc = r->o->model;
        bc.lora_rank = 0;
        bc.lora_alpha = 0.0f;
        bc.lora_targets = 0;
        bc.lora_fa = 0;
        bc.lora_rslora = 0;
        GPT base;
        gpt_init_params(&base, &bc);
        gpt_init_weights(&r->m, r->o->seed);
        ok = model_source_load(&src, &base, err, sizeof err) == 0;
        if (ok) gpt_set_frozen_base(&r->m, &base);
        gpt_free(&base);
    } else if (ok) {
        ok = model_source_load(&src, &r->m, err, sizeof err) == 0;
    }
    if (!ok) fprintf(stderr, "ctron train: --init-from: %s\n", err);
    return run_all_ok(r->world, ok) ? 0 : 2;
}

// --lora-from: the adapters of a peft directory over the ones drawn, at any layout: the whole model is
// gathered to a host copy (a TP collective), the file's adapters written into it, and the rank's shards
// cut again (the base rides along unchanged).
static int load_lora_from(TrainRun *r) {
    char err[1024];
    GPT full;
    gpt_init_params(&full, &r->o->model);
    gpt_gather_to_full(&r->m, &full, r->m.params, full.params);
    int ok = peft_load_adapters(&full, r->o->lora_from, err, sizeof err) == 0;
    if (ok) gpt_shard_from_full(&r->m, &full, full.params, r->m.params);
    else fprintf(stderr, "ctron train: --lora-from: %s\n", err);
    gpt_free(&full);
    return run_all_ok(r->world, ok) ? 0 : 2;
}

// This rank's part of the model (TP shards; under a pipeline schedule, DESIGN.md §9, this stage's
// units and the activation contexts they need), initialised from the seed or from --init-from.
static int open_model(TrainRun *r) {
    const TrainOptions *o = r->o;
    const GPTConfig *c = &o->model;
    TPLayout tpl = {o->tp, r->tpg->rank, o->sp, r->tpg};
    r->has_model = 1;
    if (train_uses_pipeline(o)) {
        char err[512];
        if (train_pipe_spec(o, &r->spec, err, sizeof err) != 0) ctron_fatal("%s", err);   // the CLI checked it
        r->pl = &r->pipe;
        CommGroup *ppg = &r->grid.pp_group;
        int s_rank = o->sp ? c->seq / o->tp : c->seq;
        pipeline_init(r->pl, &r->spec, ppg->rank, ppg, r->dpg, r->spec.kind == PIPE_LAYERED && !o->zero, c->seq,
                      c->batch, (size_t)s_rank * c->batch * c->hidden);
        PPLayout ppl = {r->spec.p, ppg->rank, r->spec.V, pipe_layers_per_chunk(&r->spec), r->pl->contexts,
                        o->recompute_microbatches < r->pl->contexts ? o->recompute_microbatches : r->pl->contexts,
                        ppg};
        gpt_init_pp(&r->m, c, &r->policy, &tpl, &ppl);
    } else {
        gpt_init_tp(&r->m, c, &r->policy, &tpl);
    }
    int rc = 0;
    if (o->init_from) rc = load_init_from(r);
    else gpt_init_weights(&r->m, o->seed);
    if (rc == 0 && o->lora_from) rc = load_lora_from(r);
    return rc;
}

// What the step needs beside the model: the device path of the collectives, ZeRO's pieces, AdamW,
// the learning-rate schedule.
static void open_optimizer(TrainRun *r) {
    const TrainOptions *o = r->o;
    const GPTConfig *c = &o->model;
    GPT *m = &r->m;
    // Collectives on device tensors (NULL on the CPU): staged through a host buffer as large as the
    // largest of them (ZeRO's reduce-scatter region, the gradient buckets, an activation), or NCCL.
    size_t stage_floats = m->n_params + m->n_params / (size_t)r->nranks + (size_t)r->nranks + 1;
    if ((size_t)c->seq * c->batch * c->hidden > stage_floats) stage_floats = (size_t)c->seq * c->batch * c->hidden;
    r->cdev = comm_device_open(&r->grid, m->be, stage_floats);
    // ZeRO-1: this rank keeps the AdamW moments of its pieces only.
    if (o->zero) {
        zero_init(&r->zero_state, r->dpg, m->n_params, m->be);
        r->zero = &r->zero_state;
    }
    adamw_init(&r->opt, m->be, r->zero ? r->zero->n_owned : m->n_params, o->beta1, o->beta2, 1e-8f, o->weight_decay);
    int warmup = o->warmup >= 0 ? o->warmup : (o->steps / 10 < 100 ? o->steps / 10 : 100);
    LRSchedule sched = {o->lr, o->min_lr >= 0.0f ? o->min_lr : o->lr / 10.0f, warmup, o->steps};
    r->sched = sched;
    // A resumed run continues after the checkpoint's step; last < steps when --stop-after cuts it short.
    r->last = train_ckpt_last_step(o);
    r->saved_at = -1;
    r->bad_counts = xcalloc((size_t)m->n_info * sizeof(size_t));
}

// --resume: the checkpoint's model and AdamW state, through a whole host copy for sharded layouts and
// a device the host cannot write (a GPU). 0, or 1 on every rank when any rank failed (printed).
static int resume(TrainRun *r) {
    const TrainOptions *o = r->o;
    int sharded = o->tp > 1 || o->pp > 1 || r->zero || !r->m.be->host_addressable || r->m.base16;
    r->start = 0;
    if (o->resume && !sharded) {
        r->start = train_ckpt_resume(o, &r->m, &r->opt);
    } else if (o->resume) {   // every rank reads the whole checkpoint and keeps its shards
        GPT full;
        AdamW full_opt;
        gpt_init_params(&full, &o->model);
        adamw_init(&full_opt, NULL, full.n_params, o->beta1, o->beta2, 1e-8f, o->weight_decay);
        r->start = train_ckpt_resume(o, &full, &full_opt);
        if (r->start >= 0) dist_load_whole(&r->m, &r->opt, r->zero, &full, &full_opt);
        adamw_free(&full_opt);
        gpt_free(&full);
    }
    return run_all_ok(r->world, r->start >= 0) ? 0 : 1;
}

// A step's batch buffers and its FLOPs: batch × grad_accum sequences on each of the nranks dp groups.
static void open_batches(TrainRun *r) {
    const TrainOptions *o = r->o;
    const GPTConfig *c = &o->model;
    r->n_tok = (size_t)c->seq * c->batch;
    // a slice per micro-batch, in host memory the device copies from without a wait (m->inputs_held)
    r->tokens = r->m.be->host_alloc(r->m.be, r->n_tok * o->grad_accum * sizeof(int32_t));
    r->targets = r->m.be->host_alloc(r->m.be, r->n_tok * o->grad_accum * sizeof(int32_t));
    r->seqs_per_rank = c->batch * o->grad_accum;
    r->flops = train_flops_per_step(c, o->grad_accum * r->nranks);
    FlopBlock blk = train_flop_block(c);
    r->hw_flops = flops_hardware_block((double)r->seqs_per_rank * r->nranks, c->seq, c->hidden, c->vocab, &r->policy,
                                       c->layers, 1, &blk) +
                  flops_rev_recompute((double)r->seqs_per_rank * r->nranks, &r->m.shape, &r->policy);
    double lora = train_lora_flops_delta(c, (double)r->seqs_per_rank * r->nranks);   // LoRA: no dW of the base
    r->flops += lora;
    r->hw_flops += lora;
}

int run_open(TrainRun *r, const TrainOptions *o, Comm *comm) {
    memset(r, 0, sizeof *r);
    r->o = o;
    r->comm = comm;
    r->world = &comm->world;
    r->rank = r->world->rank;
    r->last_val = NAN;
    int rc = open_grid(r);
    if (rc == 0) rc = open_data(r);
    if (rc == 0) rc = open_policy_log(r);
    if (rc != 0) return rc;
    rc = open_model(r);
    open_optimizer(r);   // also on failure: run_close frees what the model's owner holds
    if (rc != 0) return rc;
    if ((rc = resume(r)) != 0) return rc;
    open_batches(r);
    return 0;
}

void run_close(TrainRun *r) {
    if (r->tokens) {   // (open_batches ran: the model's backend is open)
        r->m.be->host_free(r->m.be, r->tokens);
        r->m.be->host_free(r->m.be, r->targets);
    }
    phase_marks_free(&r->marks);
    if (r->has_model) {
        adamw_free(&r->opt);
        if (r->zero) zero_free(r->zero);   // before the model: its stage may be on the model's backend
        if (r->pl) pipeline_free(r->pl);
        comm_device_close(r->cdev);        // after the pipeline's last sends, before the backend closes
        gpt_free(&r->m);
    }
    if (r->has_policy) policy_free(&r->policy);
    if (r->has_data) dataset_free(&r->ds);
    if (r->has_bpe) bpe_free(&r->bpe);
    free(r->tokenizer_json);
    if (r->log) fclose(r->log);
    if (r->has_grid) comm_grid_free(&r->grid);
    free(r->bad_counts);
}

StaticPlanReport run_plan_static(TrainRun *r) {
    int32_t *zeros = xcalloc(r->n_tok * sizeof(int32_t));
    StepCtx ctx0 = {r->o->seed, 0, 0, 1};
    StaticPlanReport p = gpt_plan_memory(&r->m, zeros, zeros, ctx0);
    free(zeros);
    return p;
}
