#include "train/run.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "parallel/comm_device.h"
#include "train/grad_norm.h"
#include "train/grads_dist.h"
#include "train/guards.h"
#include "model/memo.h"
#include "util/common.h"

// The step's collectives and transfers on all of this rank's groups.
static CommStats step_comm_stats(const CommGroup *world, const CommGrid *grid) {
    CommStats sum = comm_stats(world);
    const CommGroup *groups[4] = {&grid->tp_group, &grid->dp_group, &grid->pp_group, &grid->emb_group};
    for (int i = 0; i < 4; i++) {
        CommStats a = comm_stats(groups[i]);
        for (int k = 0; k < COMM_KINDS; k++) {
            sum.bytes[k] += a.bytes[k];
            sum.calls[k] += a.calls[k];
        }
    }
    return sum;
}

static void reset_comm_stats(CommGroup *world, CommGrid *grid) {
    comm_stats_reset(world);
    comm_stats_reset(&grid->tp_group);
    comm_stats_reset(&grid->dp_group);
    comm_stats_reset(&grid->pp_group);
    comm_stats_reset(&grid->emb_group);
}

// Every stage's seconds waiting for transfers and computing this step, from the ranks of dp group 0
// and TP rank 0 (world rank = stage · tp), for the log. Collective over the world.
static void gather_stage_times(StepTimes *t, const Pipeline *pl, CommGroup *world, int tp, int pp) {
    float mine[2] = {(float)pl->wait_s, (float)(pl->fwd_s + pl->bwd_s)};
    float *all = xmalloc((size_t)world->size * 2 * sizeof(float));
    if (world->size > 1) comm_allgather(world, mine, all, 2);
    else memcpy(all, mine, sizeof mine);
    t->pp = 1;
    t->n_stages = pp < 64 ? pp : 64;
    for (int r = 0; r < t->n_stages; r++) {
        t->stage_wait[r] = all[2 * r * tp];
        t->stage_busy[r] = all[2 * r * tp + 1];
    }
    free(all);
}

// The step's forwards and backwards, gradients accumulating: the pipeline schedule's units on this
// stage with their transfers, or the micro-batches one after another. The step's sequences are
// numbered across dp groups (group r holds r·batch·accum onwards), so data windows and dropout masks
// are those of the one-process run with nranks × accum. The loss stays on the device (m->defer_loss)
// until the step's read-back; each micro-batch's tokens and targets have their own slice of the step's
// host_alloc buffers, which go up without a wait (m->inputs_held); the phases are timed by device marks.
static void forward_backward(TrainRun *r, int step) {
    const TrainOptions *o = r->o;
    const GPTConfig *c = &o->model;
    GPT *m = &r->m;
    float grad_scale = 1.0f / ((float)r->n_tok * (float)o->grad_accum * (float)r->nranks);
    phase_marks_start(&r->marks, m->be);
    m->defer_loss = 1;
    m->inputs_held = 1;
    if (r->pl) {
        PipeStep st = {o->seed, step, (uint32_t)(r->dp_rank * r->seqs_per_rank),
                       (uint32_t)(r->seqs_per_rank * r->nranks), o->data_order, grad_scale, &r->marks};
        pipeline_train_step(r->pl, m, &r->ds, &st);
        guard_test_inject_nan(m, step, r->rank);
    }
    for (int mb = 0; !r->pl && mb < o->grad_accum; mb++) {
        StepCtx ctx = {o->seed, (uint32_t)step, (uint32_t)(r->dp_rank * r->seqs_per_rank + mb * c->batch), 1};
        int32_t *tokens = r->tokens + (size_t)mb * r->n_tok, *targets = r->targets + (size_t)mb * r->n_tok;
        dataset_train_batch(&r->ds, c->seq, c->batch, o->data_order, o->seed, (uint32_t)step, ctx.sample0,
                            (uint32_t)(r->seqs_per_rank * r->nranks), tokens, targets);
        int f0 = phase_mark(&r->marks);
        gpt_forward(m, tokens, targets, c->seq, c->batch, ctx, grad_scale);
        int f1 = phase_end(&r->marks, PHASE_FORWARD, f0);
        gpt_backward(m, tokens, ctx);
        phase_end(&r->marks, PHASE_BACKWARD, f1);
        guard_test_inject_nan(m, step, r->rank);
    }
    m->inputs_held = 0;
}

// After the step's wait: the forward, backward and optimizer seconds the device's marks say (and the
// pipeline's per-stage figures from them).
static void phase_times(TrainRun *r, StepTimes *times) {
    double sec[PHASES];
    phase_marks_seconds(&r->marks, sec);
    times->fwd = sec[PHASE_FORWARD];
    times->bwd = sec[PHASE_BACKWARD];
    times->opt = sec[PHASE_OPTIMIZER];
    if (r->pl) {
        r->pl->fwd_s = times->fwd;
        r->pl->bwd_s = times->bwd;
        gather_stage_times(times, r->pl, r->world, r->o->tp, r->o->pp);
    }
}

// The gradients summed where they are shared (SP's replicated tensors, the tied embedding over the
// first and last stage, the dp groups or ZeRO's pieces), and the step's mean loss on every rank.
static double reduce(TrainRun *r) {
    const TrainOptions *o = r->o;
    const GPTConfig *c = &o->model;
    GPT *m = &r->m;
    grads_reduce_sp(m);
    // The tied token embedding: the first stage's gradient (embedding) and the last's (output layer).
    if (r->grid.emb_group.size > 1 && gpt_tied(&m->cfg) && m->g.wte)   // (a frozen embedding has none: LoRA)
        comm_device_allreduce_sum(&r->grid.emb_group, m->g.wte, m->g.wte, (size_t)m->vl * c->hidden);
    if (r->zero) zero_reduce_scatter(r->zero, m->grads);
    else if (r->pl && r->pl->reduce_layers) pipeline_finish_dp(r->pl, m);   // layered: the layers' sums are under way
    else grads_allreduce_dp(r->dpg, m->grads, m->n_params);
    double loss_sum = gpt_loss_take(m);   // the step's one read-back of the loss
    m->defer_loss = 0;
    double loss_rows = loss_sum;   // the last stage has the loss: a double as two floats, over the pipeline
    if (o->pp > 1) {
        float pair[2] = {(float)loss_sum, (float)(loss_sum - (double)(float)loss_sum)};
        comm_broadcast(&r->grid.pp_group, pair, 2, o->pp - 1);
        loss_rows = (double)pair[0] + (double)pair[1];
    }
    float loss_total = (float)loss_rows;   // every TP rank of a group has the group's loss
    run_sum_over_ranks(r->dpg, &loss_total, 1);
    return (r->nranks > 1 ? (double)loss_total : loss_rows) / ((double)r->n_tok * o->grad_accum * r->nranks);
}

// A step whose loss or gradient norm is not finite is skipped: the parameters and AdamW state stay
// those of the last good step. --max-bad-steps of them in a row stop the run (-1) with a diagnostic.
static int skip_nonfinite(TrainRun *r, int step, const StepResult *s) {
    const TrainOptions *o = r->o;
    r->bad_run++;
    int first = guard_first_nonfinite(&r->m, r->world, r->bad_counts);
    char first_name[48] = "none, the loss itself";
    if (first >= 0) gpt_param_full_name(&o->model, first, first_name, sizeof first_name);
    fprintf(stderr, "ctron train: step %d: %s is not finite (first non-finite gradient: %s); step skipped "
            "(%d in a row, --max-bad-steps %d)\n", step, isfinite(s->loss) ? "the gradient norm" : "the loss",
            first_name, r->bad_run, o->max_bad_steps);
    if (!(o->max_bad_steps > 0 && r->bad_run >= o->max_bad_steps)) return 0;
    char path[1200], gerr[1300];
    snprintf(path, sizeof path, "%s/nonfinite_step_%08d.json", o->ckpt_dir ? o->ckpt_dir : ".", step);
    if (r->rank == 0 && guard_write_diagnostic(path, &r->m, step, s->loss, s->norm, first, r->bad_counts, r->bad_run,
                                               gerr, sizeof gerr) != 0)
        fprintf(stderr, "ctron train: %s\n", gerr);
    if (r->rank == 0)
        fprintf(stderr, "ctron: error: %d steps in a row were not finite; stopping at step %d without "
                "saving (the last checkpoint is the last good state); diagnostic: %s\n", r->bad_run, step, path);
    return -1;
}

// AdamW on the clipped gradients; under ZeRO each rank updates the pieces it owns, then everyone gets
// every piece.
static void update(TrainRun *r, float lr, float clip_scale) {
    if (!r->zero) {
        adamw_step(&r->opt, &r->m, lr, clip_scale);
        return;
    }
    adamw_tick(&r->opt);
    size_t lo, hi, off = 0;
    for (size_t k = 0; zero_piece(r->zero, k, &lo, &hi); k++, off += hi - lo)
        adamw_update_range(&r->opt, &r->m, lr, clip_scale, lo, hi, off);
    zero_allgather(r->zero, r->m.params);
    gpt_params_changed(&r->m);
}

// One process (no TP, no ZeRO, one stage, one dp group): nothing the step decides needs another rank,
// so the loss, the norm, the clipping factor and the guard's verdict stay on the device, and AdamW runs
// or not on the device's word (step_guard); the host reads the loss and the norm once, at the end.
static int device_decides(const TrainRun *r) {
    return r->world->size == 1 && r->o->tp == 1 && r->o->pp == 1 && !r->zero;
}

// The step after forward_backward, on one process: one wait (step_take), after AdamW was queued (the
// optimizer phase from mark o0). A step the device skipped (not finite) takes back AdamW's tick: its
// bias corrections stay the last good step's.
static int finish_on_device(TrainRun *r, int step, StepResult *s, int o0) {
    const TrainOptions *o = r->o;
    GPT *m = &r->m;
    m->be->step_guard(m->be, m->grads, m->n_params, o->clip);
    adamw_step_guarded(&r->opt, m, s->lr);
    phase_end(&r->marks, PHASE_OPTIMIZER, o0);
    double loss_sum, sumsq;
    m->be->step_take(m->be, &loss_sum, &sumsq);   // the step's one wait
    m->defer_loss = 0;
    s->loss = loss_sum / ((double)r->n_tok * o->grad_accum * r->nranks);
    s->norm = sqrt(sumsq);
    if (isfinite(s->loss) && isfinite(s->norm)) {
        r->bad_run = 0;
        return 0;
    }
    adamw_untick(&r->opt);
    s->times.skipped = 1;
    return skip_nonfinite(r, step, s) != 0 ? 3 : 0;
}

// The step after forward_backward, with other ranks: the loss and the norm are summed over them on the
// host, which decides (reading the norm waits for the device on every rank). The optimizer phase, from
// mark o0, spans the reductions and the update.
static int finish_on_host(TrainRun *r, int step, StepResult *s, int o0) {
    const TrainOptions *o = r->o;
    GPT *m = &r->m;
    s->loss = reduce(r);
    s->norm = grads_global_norm(m, r->zero, r->tpg, r->dpg, &r->grid.pp_group);
    float clip_scale = grad_clip_scale(s->norm, o->clip);
    if (!isfinite(s->loss) || !isfinite(s->norm)) {
        phase_end(&r->marks, PHASE_OPTIMIZER, o0);
        s->times.skipped = 1;
        return skip_nonfinite(r, step, s) != 0 ? 3 : 0;
    }
    r->bad_run = 0;
    update(r, s->lr, clip_scale);
    phase_end(&r->marks, PHASE_OPTIMIZER, o0);
    return 0;
}

int run_step(TrainRun *r, int step, StepResult *s) {
    const TrainOptions *o = r->o;
    GPT *m = &r->m;
    double t0 = now_seconds();
    memset(s, 0, sizeof *s);
    s->val = NAN;
    s->lr = lr_at(&r->sched, step);
    gpt_zero_grad(m);
    OffloadStats moved_before = {0, 0, 0.0};
    // the host pool of --offload, or of --memo's swapped tokens (the two are exclusive)
    OffloadPool *pool = m->off.pool ? m->off.pool : m->memo ? m->memo->pool : NULL;
    if (pool) moved_before = offload_pool_stats(pool);
    reset_comm_stats(r->world, &r->grid);
    memset(m->comm_bytes, 0, sizeof m->comm_bytes);
    forward_backward(r, step);
    guard_test_slow_step();
    int o0 = phase_mark(&r->marks);
    int rc = device_decides(r) ? finish_on_device(r, step, s, o0) : finish_on_host(r, step, s, o0);
    if (rc != 0) return rc;
    // the device's phase seconds (with other ranks the update is read after its last mark: one more wait)
    phase_times(r, &s->times);
    s->times.comm = step_comm_stats(r->world, &r->grid);   // before validation, which communicates too
    memcpy(s->times.tp_bytes, m->comm_bytes, sizeof s->times.tp_bytes);
    s->step_s = now_seconds() - t0;
    r->train_seconds += s->step_s;
    if (pool) {
        OffloadStats os = offload_pool_stats(pool);
        s->times.offload = 1;
        s->times.offload_out = (double)(os.stored - moved_before.stored);
        s->times.offload_in = (double)(os.loaded - moved_before.loaded);
        s->times.offload_wait = os.wait_s - moved_before.wait_s;
    }
    s->tps = (double)r->n_tok * o->grad_accum * r->nranks / s->step_s;
    return 0;
}

// Validation batches are shared out over the dp groups and their loss sums added up (a TP group
// computes each of its batches together).
double run_evaluate(TrainRun *r) {
    const GPTConfig *c = &r->o->model;
    CommGroup *w = r->dpg;
    int n_batches = r->o->eval_batches;
    double sum = 0.0;
    StepCtx ctx = {0, 0, 0, 0};
    for (int k = w->rank; k < n_batches; k += w->size) {
        dataset_val_batch(&r->ds, c->seq, c->batch, k, n_batches, r->tokens, r->targets);
        if (r->pl) {   // through every stage; each rank of the pipeline gets the loss
            sum += pipeline_eval_batch(r->pl, &r->m, r->tokens, r->targets, c->seq, c->batch);
            continue;
        }
        sum += gpt_forward(&r->m, r->tokens, r->targets, c->seq, c->batch, ctx, 0.0f);
        gpt_release(&r->m);
    }
    float total = (float)sum;
    run_sum_over_ranks(w, &total, 1);
    return (w->size > 1 ? (double)total : sum) / ((double)n_batches * c->seq * c->batch);
}
