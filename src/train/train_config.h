// The effective configuration of a training run as canonical text, one "flag=value" per option,
// and the check that every MPI rank was given the same one (docs/RELIABILITY.md).
#ifndef CTRON_TRAIN_CONFIG_H
#define CTRON_TRAIN_CONFIG_H
#include <stddef.h>
#include "parallel/comm.h"
#include "train/trainer.h"

typedef struct {
    const char *flag;      // the long option (without --) or, for derived values, a descriptive name
    char value[192];       // canonical text: "%.9g" for floats (exact), names for enums
    int local;             // may differ between ranks (paths on each host, output only rank 0 makes)
} TrainConfigField;

// Fills out[0..max) with every option of o, in one fixed order (the same on every rank). Returns
// how many (TRAIN_CONFIG_MAX at most).
#define TRAIN_CONFIG_MAX 80
int train_config_fields(const TrainOptions *o, TrainConfigField *out, int max);
// The whole list as text, "flag=value\n" per option (local ones marked " (local)").
void train_config_text(const TrainOptions *o, char *buf, size_t len);
// Collective over w, before any other collective of the run: every rank's non-local fields must
// equal rank 0's. Returns 0 on every rank, or -1 on every rank with err naming the first option
// that differs, its values and the ranks that differ.
int train_config_agree(const TrainOptions *o, CommGroup *w, char *err, size_t errlen);
#endif
