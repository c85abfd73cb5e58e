#include "cli/train_run_dir.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "cli/cli.h"
#include "io/run_lock.h"
#include "memory/ledger_report.h"
#include "memory/param_count.h"
#include "model/gpt.h"
#include "train/train_config.h"

double cli_train_ckpt_bytes(const TrainOptions *o) {
    struct stat sb;
    double tok = o->tokenizer_path && stat(o->tokenizer_path, &sb) == 0 ? (double)sb.st_size : 0.0;
    // 3 fp32 copies of the parameters (the weights, AdamW's m and v), plus headers and state.json (a few KiB per
    // tensor name list). LoRA: the frozen base once (F32, or BF16 under --base-dtype bf16) and the adapters,
    // with moments for those that train (LoRA-FA's A has none).
    const GPTConfig *c = &o->model;
    double base = (double)gpt_num_params(c), tensors = 12.0 * base;
    if (c->lora_rank > 0) {
        ActShape sh = {.s = c->seq, .b = c->batch, .h = c->hidden, .a = c->heads, .L = c->layers, .v = c->vocab,
                       .t = 1};
        gpt_shape_family(c, &sh);
        double a = (double)c->layers * (double)param_lora_layer_count(&sh, 0);
        double b = (double)c->layers * (double)param_lora_layer_count(&sh, 1);
        tensors = (sh.base_bf16 ? 2.0 : 4.0) * base + 4.0 * (a + b) + 8.0 * (sh.lora_fa ? b : a + b);
    }
    return tensors + tok + 64.0 * 1024 + 256.0 * (o->model.layers + 4);
}

// Free bytes for an unprivileged writer in dir; CTRON_TEST_FREE_BYTES stands in for a full disk.
static double free_bytes(const char *dir) {
    const char *fake = getenv("CTRON_TEST_FREE_BYTES");
    if (fake) return atof(fake);
    struct statvfs vs;
    if (statvfs(dir, &vs) != 0) return -1.0;
    return (double)vs.f_bavail * (double)vs.f_frsize;
}

// Is there room for the first checkpoint? Refuse when not (the run's work would be lost at its
// first save); warn when --keep K cannot hold K + 1 (a save is written before old ones are pruned),
// since other files may still be deleted by then.
static int check_room(const TrainOptions *o, char *err, size_t errlen) {
    double need = cli_train_ckpt_bytes(o), have = free_bytes(o->ckpt_dir);
    char b1[32], b2[32];
    if (have < 0) return 0;   // no figure (statvfs unsupported): the save reports its own error
    if (have < need) {
        snprintf(err, errlen, "--ckpt-dir '%s': %s free, but one checkpoint of this model needs %s; free space or "
                 "choose another directory", o->ckpt_dir, format_bytes(have, b1, sizeof b1),
                 format_bytes(need, b2, sizeof b2));
        return -1;
    }
    int copies = o->keep > 0 ? o->keep + 1 : 2;
    if (have < need * copies)
        fprintf(stderr, "ctron train: warning: --ckpt-dir '%s' has %s free, room for %d checkpoint%s of %s; %s\n",
                o->ckpt_dir, format_bytes(have, b1, sizeof b1), (int)(have / need), (int)(have / need) == 1 ? "" : "s",
                format_bytes(need, b2, sizeof b2),
                o->keep > 0 ? "--keep K needs K + 1 at the moment of a save" : "--keep 0 keeps every one");
    return 0;
}

static int claim_rank0(const TrainOptions *o, RunLocks *l, char *err, size_t errlen) {
    if (o->ckpt_dir) {
        if ((l->dir_fd = run_lock_dir(o->ckpt_dir, err, errlen)) < 0) return -1;
        if (check_room(o, err, errlen) != 0) return -1;
    }
    if (o->log_path && (l->log_fd = run_lock_file(o->log_path, err, errlen)) < 0) {
        snprintf(err + strlen(err), errlen - strlen(err), " (--log)");
        return -1;
    }
    return 0;
}

int cli_train_claim(Comm *comm, const TrainOptions *o, RunLocks *l) {
    CommGroup *w = &comm->world;
    char err[2048] = "";
    l->dir_fd = l->log_fd = -1;
    if (train_config_agree(o, w, err, sizeof err) != 0) {
        if (w->rank == 0) fprintf(stderr, "ctron train: %s\n", err);
        return CTRON_EXIT_USAGE;
    }
    // Only rank 0 writes checkpoints and the log.
    float bad = w->rank == 0 && claim_rank0(o, l, err, sizeof err) != 0 ? 1.0f : 0.0f;
    if (bad > 0.0f) fprintf(stderr, "ctron train: %s\n", err);
    if (w->size > 1) comm_allreduce_sum(w, &bad, &bad, 1);
    if (bad > 0.0f) {
        cli_train_release(l);
        return CTRON_EXIT_USAGE;
    }
    return 0;
}

// Does dir hold nothing but the run lock?
static int only_lock(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int other = 0;
    for (struct dirent *e; !other && (e = readdir(d));)
        other = strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && strcmp(e->d_name, RUN_LOCK_FILE) != 0;
    closedir(d);
    return !other;
}

void cli_train_unmake(const TrainOptions *o, RunLocks *l) {
    struct stat sb;
    if (l->log_fd >= 0 && o->log_made && fstat(l->log_fd, &sb) == 0 && sb.st_size == 0) unlink(o->log_path);
    if (l->dir_fd >= 0 && o->ckpt_dir_made && only_lock(o->ckpt_dir)) {
        char lock[4200];
        snprintf(lock, sizeof lock, "%s/%s", o->ckpt_dir, RUN_LOCK_FILE);
        if (unlink(lock) == 0) rmdir(o->ckpt_dir);
    }
}

void cli_train_release(RunLocks *l) {
    run_lock_release(l->dir_fd);
    run_lock_release(l->log_fd);
    l->dir_fd = l->log_fd = -1;
}
