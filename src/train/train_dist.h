// The whole model from its shards and back (checkpoints hold the unsharded model, DESIGN.md §4),
// and the per-rank activation report of a parallel run.
#ifndef CTRON_TRAIN_DIST_H
#define CTRON_TRAIN_DIST_H
#include <stdio.h>
#include "model/gpt.h"
#include "parallel/comm.h"
#include "train/adamw.h"
#include "train/zero.h"
#include "train/pipe_schedule.h"

// Fills full (gpt_init_params) and, when opt is not NULL, the whole AdamW state into full_opt
// (adamw_init with full.n_params), on the ranks of dp group 0 (grid->dp_group.rank == 0; other
// ranks' full and full_opt are untouched and need not be allocated). Collective over the world: ZeRO pieces are gathered
// over dp, TP shards over tp. zero NULL: the state is not sharded over dp.
void dist_gather_whole(const GPT *m, const AdamW *opt, Zero *zero, CommGrid *grid, GPT *full, AdamW *full_opt);
// Sets this rank's parameters (and optimizer state when opt) from the whole model (no communication).
void dist_load_whole(GPT *m, AdamW *opt, const Zero *zero, const GPT *full, const AdamW *full_opt);
// Rank 0 prints every rank's activation bytes (layer 0, end of forward, peak) next to the
// prediction for its layout; returns the number of ranks that differ (on every rank). Collective.
int dist_ledger_report(FILE *f, const GPT *m, CommGroup *world);
// With memo layers (model/memo.h): rank 0 prints, for every rank, how many layer-and-name cells of its
// ledger and of its memo pool differ from the model, its pool's bytes against the prediction and its
// memo_stage; returns the number of ranks that differ (on every rank). Collective.
int dist_memo_report(FILE *f, const GPT *m, CommGroup *world);
// The same under a pipeline schedule: every rank's measured activation peak next to its schedule's
// prediction (memory/pipe_memory.h), and this rank's peak by context. Returns the ranks that differ.
int dist_pipeline_ledger_report(FILE *f, const GPT *m, const PipeSpec *spec, CommGroup *world, int stage);
#endif
