#include "cli/train_ckpt_args.h"
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "cli/args.h"
#include "cli/cli.h"
#include "io/checkpoint.h"
#include "io/ckpt_fs.h"
#include "io/run_lock.h"
#include "tokenizer/bpe.h"
#include "train/train_ckpt.h"
#include "util/fileio.h"

static int given_flag(const char *const *given, int n, const char *flag) {
    for (int i = 0; i < n; i++)
        if (strcmp(given[i], flag) == 0) return 1;
    return 0;
}

// Do two vocabulary files define the same tokens? 1 yes, 0 no (why in what), -1 unreadable (err).
static int same_vocab(const char *a, const char *b, char *what, size_t wlen, char *err, size_t errlen) {
    Bpe x, y;
    if (bpe_load(&x, a, err, errlen) != 0) return -1;
    if (bpe_load(&y, b, err, errlen) != 0) { bpe_free(&x); return -1; }
    int same = bpe_same(&x, &y, what, wlen);
    bpe_free(&x);
    bpe_free(&y);
    return same;
}

// --resume with --tokenizer: the weights' token ids mean what the checkpoint's vocabulary says
// (train_ckpt_merge left its path in o->resume_tokenizer_path; empty: trained on bytes).
static int check_resume_tokenizer(const TrainOptions *o, char *err, size_t errlen) {
    const char *theirs = o->resume_tokenizer_path;
    if (!theirs[0]) {
        snprintf(err, errlen, "--resume: the checkpoint %s was trained on bytes (no tokenizer.json); --tokenizer '%s' "
                 "would give its token ids other meanings; leave --tokenizer out", o->resume_step_dir, o->tokenizer_path);
        return -1;
    }
    char what[96] = "", lerr[1024];
    int same = same_vocab(o->tokenizer_path, theirs, what, sizeof what, lerr, sizeof lerr);
    if (same == 1) return 0;
    if (same < 0) snprintf(err, errlen, "--tokenizer: %s", lerr);
    else snprintf(err, errlen, "--resume: --tokenizer '%s' is not the vocabulary the checkpoint was trained with "
                  "('%s': %s); leave --tokenizer out to use the checkpoint's", o->tokenizer_path, theirs, what);
    return -1;
}

int cli_train_resume(TrainOptions *o, const char *const *given, int n_given, TrainOptionApply apply) {
    if (!o->resume) return 0;
    char err[2048];
    CkptState st;
    char who[200];
    // A run in progress may not have saved yet ("no checkpoint" would mislead): name the holder.
    if (run_lock_holder(o->resume, who, sizeof who))
        return args_error("train", "--resume: '%s' is in use by another ctron run (%s); wait for it to end or "
                          "stop it (SIGTERM saves a checkpoint), then resume", o->resume, who[0] ? who : "holder unknown");
    if (ckpt_resolve(o->resume, o->resume_step_dir, sizeof o->resume_step_dir, o->resume_run_dir,
                     sizeof o->resume_run_dir, err, sizeof err) != 0 ||
        ckpt_read_state(o->resume_step_dir, &st, err, sizeof err) != 0)
        return args_error("train", "--resume: %s", err);
    // The memory, algorithm and layout options first: the layout decides how the checkpoint's
    // micro-batches split over data-parallel groups (train_ckpt_merge).
    if (train_config_resume(o, &st, given, n_given, apply, err, sizeof err) != 0)
        return args_error("train", "%s", err);
    if (train_ckpt_merge(o, &st, given, n_given, err, sizeof err) != 0) return args_error("train", "%s", err);
    return 0;
}

int cli_train_ckpt_check(const TrainOptions *o, const char *const *given, int n_given) {
    if (!o->ckpt_dir) {
        for (int i = 0; i < n_given; i++)
            if (strcmp(given[i], "save-every") == 0 || strcmp(given[i], "keep") == 0)
                return args_error("train", "--%s needs --ckpt-dir (where checkpoints go)", given[i]);
    }
    if (o->stop_after > o->steps)
        return args_error("train", "--stop-after %d is beyond --steps %d", o->stop_after, o->steps);
    return 0;
}

int cli_train_resume_tokenizer(const TrainOptions *o, const char *const *given, int n_given) {
    char err[2048];
    if (o->resume && given_flag(given, n_given, "tokenizer") && check_resume_tokenizer(o, err, sizeof err) != 0)
        return args_error("train", "%s", err);
    return 0;
}

int cli_train_ckpt_dir(TrainOptions *o) {
    char err[2048];
    struct stat sb;
    if (!o->ckpt_dir) return 0;
    int existed = stat(o->ckpt_dir, &sb) == 0;
    if (fs_mkdir_p(o->ckpt_dir, err, sizeof err) != 0) return args_error("train", "--ckpt-dir: %s", err);
    o->ckpt_dir_made = o->ckpt_dir_made || !existed;   // the second parse of a failed launch finds it made
    return 0;
}
