// How often a training step on the CUDA backend makes the host wait for the device (issue 30, "per-step
// host synchronisations"), counted by the emulated runtime (emu_waits.h: every synchronisation, copy to
// pageable memory, cudaFree ... counts once). On one process the step keeps its loss, gradient norm,
// clipping factor and non-finite verdict on the device and reads them back once, after AdamW is queued
// (backend.h's step_guard / step_take); its phases are timed by device events read after that wait
// (be->mark); its tokens go up from pinned memory without a wait (copy_enqueue). So, from the second
// step on (the first also allocates scratch and uploads the multi-tensor tables once):
//   - exactly 1 wait per step, for GPT-2 tiny, with --grad-accum 2, and for a pipeline schedule run in
//     one process (--pp-schedule gpipe, 2 micro-batches);
//   - 0 waits in a micro-batch's forward and backward;
//   - the step's fwd, bwd and opt seconds are the device's (> 0, within the step).
// Main's code waited 7 times a step here (backend_clock's 3 per micro-batch, the tokens' and targets'
// synchronous copies, the loss and the norm read back before AdamW), 12 with --grad-accum 2, 15 in the
// pipeline (2 clocks a unit, the losses read back per micro-batch), and twice in a forward and backward.
// usage: test_emu_host_waits DATA
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "cli/cli.h"
#include "emu_waits.h"
#include "train/run.h"

// Runs `steps` steps of ctron train with the flags; waits[k] = the host waits of step k+1.
static int count_steps(const char *data, const char *const *flags, int n_flags, int steps, unsigned long long *waits,
                       unsigned long long *fwd_bwd, StepResult *last) {
    char *argv[48];
    const char *base[] = {"train", "--data", data, "--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32",
                          "--batch", "2", "--seed", "7", "--threads", "1", "--device", "cuda", "--peak-gflops", "100"};
    int argc = 0;
    for (size_t i = 0; i < sizeof base / sizeof *base; i++) argv[argc++] = (char *)base[i];
    for (int i = 0; i < n_flags; i++) argv[argc++] = (char *)flags[i];
    char steps_text[16];
    snprintf(steps_text, sizeof steps_text, "%d", steps + 1);
    argv[argc++] = (char *)"--steps";
    argv[argc++] = steps_text;
    argv[argc] = NULL;
    TrainOptions o;
    if (cli_parse_train(argc, argv, &o, 1) != 0) return -1;
    Comm comm;
    char err[256];
    if (comm_init(&comm, COMM_SINGLE, NULL, NULL, err, sizeof err) != 0) return -1;
    TrainRun r;
    int rc = run_open(&r, &o, &comm);
    for (int k = 0; rc == 0 && k < steps; k++) {
        unsigned long long w0 = ct_emu_host_waits();
        rc = run_step(&r, k + 1, last);
        waits[k] = ct_emu_host_waits() - w0;
    }
    if (rc == 0 && !r.pl) {   // one micro-batch's forward and backward as the step runs them
        const GPTConfig *c = &o.model;
        StepCtx ctx = {o.seed, (uint32_t)steps + 1, 0, 1};
        dataset_train_batch(&r.ds, c->seq, c->batch, o.data_order, o.seed, ctx.step, 0, (uint32_t)c->batch, r.tokens,
                            r.targets);
        r.m.defer_loss = r.m.inputs_held = 1;
        unsigned long long w0 = ct_emu_host_waits();
        gpt_forward(&r.m, r.tokens, r.targets, c->seq, c->batch, ctx, 1.0f);
        gpt_backward(&r.m, r.tokens, ctx);
        *fwd_bwd = ct_emu_host_waits() - w0;
        r.m.inputs_held = 0;
        gpt_loss_take(&r.m);
        r.m.defer_loss = 0;
    }
    run_close(&r);
    comm_finalize(&comm);
    return rc;
}

static void expect(const char *data, const char *name, const char *const *flags, int n_flags) {
    enum { STEPS = 3 };
    unsigned long long waits[STEPS] = {0}, fwd_bwd = ~0ull;
    StepResult last;
    int rc = count_steps(data, flags, n_flags, STEPS, waits, &fwd_bwd, &last);
    CHECK(rc == 0, "%s: the run failed (%d)", name, rc);
    if (rc != 0) return;
    printf("%s: host waits per step %llu, %llu, %llu", name, waits[0], waits[1], waits[2]);
    if (fwd_bwd != ~0ull) printf("; in a forward and backward %llu", fwd_bwd);
    printf("; step 3: fwd %.3g s, bwd %.3g s, opt %.3g s of %.3g s\n", last.times.fwd, last.times.bwd,
           last.times.opt, last.step_s);
    for (int k = 1; k < STEPS; k++)
        CHECK(waits[k] == 1, "%s: step %d waited for the device %llu times, expected 1 (the step's read-back)", name,
              k + 1, waits[k]);
    if (fwd_bwd != ~0ull) CHECK(fwd_bwd == 0, "%s: a forward and backward waited %llu times, expected 0", name, fwd_bwd);
    const StepTimes *t = &last.times;
    CHECK(t->fwd > 0.0 && t->bwd > 0.0 && t->opt > 0.0 && t->fwd + t->bwd + t->opt <= last.step_s,
          "%s: the device's phase times fwd %g s, bwd %g s, opt %g s are not within the step's %g s", name, t->fwd,
          t->bwd, t->opt, last.step_s);
    CHECK(isfinite(last.loss) && last.loss > 0.0 && isfinite(last.norm) && last.norm > 0.0,
          "%s: step 3's loss %g and norm %g", name, last.loss, last.norm);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_emu_host_waits DATA\n");
        return 2;
    }
    expect(argv[1], "gpt2 tiny", NULL, 0);
    const char *accum[] = {"--grad-accum", "2"};
    expect(argv[1], "gpt2 tiny --grad-accum 2", accum, 2);
    const char *pipe[] = {"--pp-schedule", "gpipe", "--grad-accum", "2"};
    expect(argv[1], "gpt2 tiny --pp-schedule gpipe --grad-accum 2", pipe, 4);
    return check_summary();
}
