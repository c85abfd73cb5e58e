// What keeps a long run from being lost (docs/RELIABILITY.md): the numerical guard (a step whose
// loss or gradient norm is not finite is skipped, not applied; too many in a row stop the run with
// a diagnostic) and the stop signals (SIGINT/SIGTERM finish the step, save, and exit).
#ifndef CTRON_GUARDS_H
#define CTRON_GUARDS_H
#include <stddef.h>
#include "model/gpt.h"
#include "parallel/comm.h"

// Index in the whole model's list (ParamInfo.full_index; gpt_param_full_name names it) of the first
// parameter whose gradient holds a non-finite value on any rank of world, or -1; collective over world. counts[n_info] (may be NULL) gets this rank's
// non-finite elements per tensor.
int guard_first_nonfinite(const GPT *m, CommGroup *world, size_t *counts);
// Writes the diagnostic of a run stopped by non-finite steps: step, loss, norm, the first tensor,
// this rank's non-finite counts per tensor. 0, or -1 with err.
int guard_write_diagnostic(const char *path, const GPT *m, int step, double loss, double norm, int first,
                           const size_t *counts, int bad_steps, char *err, size_t errlen);
// Test hook: CTRON_TEST_NAN_STEPS="3,5" poisons one gradient element of h.0.mlp.c_fc.weight on
// world rank 0 after the backward of those steps (as an overflow in that layer would).
void guard_test_inject_nan(GPT *m, int step, int world_rank);

// SIGINT, SIGTERM and SIGHUP set a flag the training loop reads at the end of each step; a second one
// while the first is handled acts as the default (ends the process; checkpoints are atomic).
void guard_install_signals(void);
// Test hook: CTRON_TEST_STEP_SLEEP_MS=N makes every step N ms longer (a sleep between the backward and
// the optimizer that signals do not cut short): a step longer than mpirun's kill timeout, cheaply.
void guard_test_slow_step(void);
// The signal received (SIGINT, SIGTERM, SIGHUP) or 0.
int guard_signal_pending(void);
// Collective over w: the signal of the lowest rank that received one, on every rank, or 0.
int guard_signal_agree(CommGroup *w);
const char *guard_signal_name(int sig);   // "SIGINT", "SIGTERM", "SIGHUP"
#endif
