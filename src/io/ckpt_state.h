// state.json of a checkpoint: the run's record besides the tensors (io/checkpoint.h, docs/CHECKPOINTS.md).
#ifndef CTRON_CKPT_STATE_H
#define CTRON_CKPT_STATE_H
#include <stddef.h>
#include "io/checkpoint.h"

// Writes path atomically (temp file, fsync, rename). Returns 0, or -1 with err filled.
int ckpt_state_write(const char *path, const CkptState *st, char *err, size_t errlen);
// Reads and validates path: every field present with its type and range, the format and version
// known. Returns 0, or -1 with a message naming the field.
int ckpt_state_read(const char *path, CkptState *st, char *err, size_t errlen);
#endif
