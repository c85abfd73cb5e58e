#include "cli/train_ckpt_args.h"
#include <stdio.h>
#include <string.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "io/checkpoint.h"
#include "io/ckpt_fs.h"
#include "train/train_ckpt.h"

int cli_train_ckpt_flags(TrainOptions *o, const char *const *given, int n_given) {
    char err[2048];
    if (o->resume) {
        CkptState st;
        if (ckpt_resolve(o->resume, o->resume_step_dir, sizeof o->resume_step_dir, o->resume_run_dir,
                         sizeof o->resume_run_dir, err, sizeof err) != 0 ||
            ckpt_read_state(o->resume_step_dir, &st, err, sizeof err) != 0)
            return args_error("train", "--resume: %s", err);
        if (train_ckpt_merge(o, &st, given, n_given, err, sizeof err) != 0) return args_error("train", "%s", err);
    }
    if (!o->ckpt_dir) {
        for (int i = 0; i < n_given; i++)
            if (strcmp(given[i], "save-every") == 0 || strcmp(given[i], "keep") == 0)
                return args_error("train", "--%s needs --ckpt-dir (where checkpoints go)", given[i]);
    }
    if (o->stop_after > o->steps)
        return args_error("train", "--stop-after %d is beyond --steps %d", o->stop_after, o->steps);
    return 0;
}

int cli_train_ckpt_dir(const TrainOptions *o) {
    char err[2048];
    if (o->ckpt_dir && fs_mkdir_p(o->ckpt_dir, err, sizeof err) != 0) return args_error("train", "--ckpt-dir: %s", err);
    return 0;
}
