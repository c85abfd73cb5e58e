#include "train/trainer.h"
#include <math.h>
#include <stdio.h>
#include "train/guards.h"
#include "train/run.h"
#include "train/train_ckpt.h"
#include "util/common.h"

// After a step: its checkpoint when one is due (rank 0 writes; every rank learns whether it worked).
// A skipped step saves nothing: with --keep, its checkpoint could prune the last good one. 0, or -1.
static int save_due(TrainRun *r, int step) {
    if (!train_ckpt_due(r->o, step, r->last)) return 0;
    if (r->bad_run > 0) {
        printf("no checkpoint at step %d: the step was skipped (not finite); the last one stays\n", step);
        return 0;
    }
    if (run_save(r, step) != 0) return -1;
    r->saved_at = step;
    return 0;
}

// SIGINT/SIGTERM/SIGHUP on any rank: every rank stops after this step, with a checkpoint. Returns 0
// (no signal), 128 + the signal, or 1 when its checkpoint failed.
static int stop_on_signal(TrainRun *r, int step) {
    const TrainOptions *o = r->o;
    int sig = guard_signal_agree(r->world);
    if (!sig) return 0;
    printf("interrupted (%s) after step %d of %d\n", guard_signal_name(sig), step, o->steps);
    fflush(stdout);
    if (o->ckpt_dir && r->saved_at != step && run_save(r, step) != 0) return 1;
    if (o->ckpt_dir) printf("continue with --resume %s\n", o->ckpt_dir);
    return 128 + sig;
}

// The steps after the checkpoint's (or from the first) to the last. Returns 0 when the last ran, 1
// when a checkpoint failed, 3 when the guard stopped the run, 128 + a signal after one.
static int run_steps(TrainRun *r) {
    const TrainOptions *o = r->o;
    for (int step = r->start + 1; step <= r->last; step++) {
        StepResult s;
        if (run_step(r, step, &s) != 0) return 3;
        if ((o->eval_every > 0 && step % o->eval_every == 0) || step == o->steps) s.val = r->last_val = run_evaluate(r);
        r->completed = step;
        report_step(r, step, &s);
        if (save_due(r, step) != 0) return 1;
        int end = stop_on_signal(r, step);
        if (end) return end;
    }
    return 0;
}

int train_run(const TrainOptions *o, Comm *comm) {
    TrainRun r;
    int rc = run_open(&r, o, comm);
    if (rc != 0) {
        run_close(&r);
        return rc;
    }
    run_peak_init(&r.peak, o, r.m.be, r.rank);
    report_header(&r);
    if (o->static_plan) {   // every step's buffers at offsets planned from one recorded step
        StaticPlanReport plan = run_plan_static(&r);
        report_static_plan(&plan);
    }
    fflush(stdout);
    double t_start = now_seconds();
    int end = run_steps(&r);
    double wall = now_seconds() - t_start;
    run_peak_store(&r.peak, o);
    report_done(&r, wall, end);
    if (o->sample_tokens > 0 && end == 0) run_sample(&r);
    report_close_log(&r);
    run_close(&r);
    if (end != 0) return end;
    if (r.log_failed) fprintf(stderr, "ctron: error: the --log file '%s' is incomplete (see above): exit 1\n", o->log_path);
    return r.log_failed ? 1 : 0;
}
