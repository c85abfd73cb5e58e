// Before a run starts, on every rank: the ranks agree on the configuration; rank 0 takes the run
// directory and the log for itself (one writer per run) and checks that the first checkpoint fits.
#ifndef CTRON_TRAIN_RUN_DIR_H
#define CTRON_TRAIN_RUN_DIR_H
#include "parallel/comm.h"
#include "train/trainer.h"

typedef struct {
    int dir_fd, log_fd;   // the flocks held for the run (-1: none)
} RunLocks;

// Collective over comm's world. Returns 0 with the locks held (rank 0), or CTRON_EXIT_USAGE on
// every rank with one message printed (by rank 0, or by the rank that alone failed).
int cli_train_claim(Comm *comm, const TrainOptions *o, RunLocks *locks);
void cli_train_release(RunLocks *locks);
// --lora-out: the adapters of the run's newest checkpoint (the one it just saved) as a peft directory.
// 0, or 1 with the error printed.
int cli_train_lora_out(const TrainOptions *o);
// After a run that ended in an error (rank 0): what the launch created and nothing has written to
// since, --ckpt-dir holding only its lock and an empty --log, is removed; nothing else is touched.
void cli_train_unmake(const TrainOptions *o, RunLocks *locks);
// Bytes one checkpoint of o takes (weights, AdamW moments, state.json, the tokenizer, headers).
double cli_train_ckpt_bytes(const TrainOptions *o);
#endif
