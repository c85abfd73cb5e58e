// The effective configuration of a training run as canonical text, one "flag=value" per option,
// and the check that every MPI rank was given the same one (docs/RELIABILITY.md).
#ifndef CTRON_TRAIN_CONFIG_H
#define CTRON_TRAIN_CONFIG_H
#include <stddef.h>
#include <stdio.h>
#include "io/checkpoint.h"
#include "parallel/comm.h"
#include "train/trainer.h"

// What --resume does with an option (docs/CLI.md, "Checkpoints and resume"). Every option of the
// list has one, so a new flag cannot be left out of state.json by forgetting it.
typedef enum {
    RESUME_FREE,    // changes no number (output, run control, a path): this run's value
    RESUME_STATE,   // in state.json's own sections: restored or checked by train_ckpt_merge
    RESUME_KEEP,    // recorded in state.json "options"; left out: the checkpoint's; another value: exit 2
    RESUME_NOTE,    // recorded; left out: the checkpoint's; another value: allowed, with a note
    RESUME_LAYOUT,  // recorded; left out: the checkpoint's when this launch has its ranks, else this
                    // launch's (a note); another value: allowed, with a note (resharding, docs/PARALLEL.md)
    RESUME_RECORD,  // recorded for the others' sake (the ranks), never restored
} ResumeClass;

typedef struct {
    const char *flag;      // the long option (without --) or, for derived values, a descriptive name
    char value[192];       // canonical text: what the command line takes for recorded options, exact floats
    int local;             // may differ between ranks (paths on each host, output only rank 0 makes)
    int resume;            // ResumeClass
} TrainConfigField;

// Fills out[0..max) with every option of o, in one fixed order (the same on every rank). Returns
// how many (TRAIN_CONFIG_MAX at most).
#define TRAIN_CONFIG_MAX 96
int train_config_fields(const TrainOptions *o, TrainConfigField *out, int max);
// The whole list as text, "flag=value\n" per option (local ones marked " (local)").
void train_config_text(const TrainOptions *o, char *buf, size_t len);
// Collective over w, before any other collective of the run: every rank's non-local fields must
// equal rank 0's. Returns 0 on every rank, or -1 on every rank with err naming the first option
// that differs, its values and the ranks that differ.
int train_config_agree(const TrainOptions *o, CommGroup *w, char *err, size_t errlen);
// Is an option of this class written to state.json's "options"?
int train_config_recorded(int resume_class);
// Every option and its ResumeClass, one "flag class" line each (ctron train --list-options; the tests
// generate their resume cases from it).
void train_config_list(FILE *f);
// --resume: the options st recorded, onto o. Left out (not in given): the checkpoint's value, set through
// apply (the command line's parser); given with another value: refused (RESUME_KEEP: -1, err naming the
// option, both values and the state.json) or a note on stderr. Call before train_ckpt_merge (the
// layout decides how the checkpoint's micro-batches split). 0, -1 with err, or apply's exit code.
typedef int (*TrainOptionApply)(TrainOptions *o, const char *flag, const char *value);
int train_config_resume(TrainOptions *o, const CkptState *st, const char *const *given, int n_given,
                        TrainOptionApply apply, char *err, size_t errlen);
#endif
