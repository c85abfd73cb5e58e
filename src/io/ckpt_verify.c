#include "io/ckpt_verify.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io/ckpt_manifest.h"
#include "io/st_convert.h"
#include "tokenizer/bpe.h"

int ckpt_check_values(const StFile *f, const char *path, char *err, size_t errlen) {
    for (int i = 0; i < f->n; i++) {
        const StTensor *t = &f->t[i];
        if (t->dtype == ST_BF16) {   // a --base-dtype bf16 run's frozen base
            long e = st_find_nonfinite(t);
            if (e < 0) continue;
            float v;
            st_to_f32(t, (size_t)e, 1, &v);
            snprintf(err, errlen, "'%s': tensor '%s' holds %g at element %ld; weights must be finite", path, t->name,
                     (double)v, e);
            return -1;
        }
        if (t->dtype != ST_F32) continue;
        int second_moment = strncmp(t->name, "v.", 2) == 0;
        const float *x = t->data;
        size_t n = t->nbytes / sizeof(float);
        for (size_t e = 0; e < n; e++) {
            float v;
            memcpy(&v, x + e, sizeof v);   // the data section need not be 4-byte aligned
            if (isfinite(v) && !(second_moment && v < 0.0f)) continue;
            snprintf(err, errlen, "'%s': tensor '%s' holds %g at element %zu; %s", path, t->name, (double)v, e,
                     !isfinite(v) ? "weights and optimizer moments must be finite"
                                  : "AdamW second moments (v.*) are averages of squares and must be >= 0");
            return -1;
        }
    }
    return 0;
}

int ckpt_check_step(const StFile *f, const char *path, int step, char *err, size_t errlen) {
    const char *s = st_meta(f, "ctron_step");
    if (!s) return 0;   // files from other tools carry no step
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v != step) {
        snprintf(err, errlen, "'%s' is the state of step %s but state.json says step %d: the files belong to "
                 "different saves", path, s, step);
        return -1;
    }
    return 0;
}

// Checksums: every file of the checkpoint listed and matching. A checkpoint without checksums.txt
// (an older ctron's, or one assembled by hand) is accepted with a note.
static int verify_sums(const char *dir, char *note, size_t notelen, char *err, size_t errlen) {
    CkptManifest m;
    int rc = ckpt_manifest_read(dir, &m, err, errlen);
    if (rc < 0) return -1;
    if (rc == 1) {
        if (note) snprintf(note, notelen, "'%s' has no %s (an older ctron's checkpoint?): its files are not "
                           "checksummed", dir, CKPT_MANIFEST_FILE);
        return 0;
    }
    static const char *const required[] = {"state.json", "model.safetensors", "optimizer.safetensors"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!ckpt_manifest_find(&m, required[i])) {
            snprintf(err, errlen, "'%s/%s' does not list %s", dir, CKPT_MANIFEST_FILE, required[i]);
            return -1;
        }
    return ckpt_manifest_verify(dir, &m, err, errlen);
}

// BF16 only where bf16 allows it: in the model file of a --base-dtype bf16 run (its frozen base; which tensors
// those are is ckpt_load's check, with the model). Other dtypes are left to the loader as before.
static int check_bf16(const StFile *f, const char *path, int bf16, char *err, size_t errlen) {
    for (int i = 0; i < f->n && !bf16; i++) {
        if (f->t[i].dtype != ST_BF16) continue;
        snprintf(err, errlen, "'%s': tensor '%s' is BF16, expected F32 (BF16 is only the frozen base, in "
                 "model.safetensors of a run whose state.json records base-dtype bf16)", path, f->t[i].name);
        return -1;
    }
    return 0;
}

static int verify_tensors(const char *dir, const char *name, int step, int required, int bf16, char *err,
                          size_t errlen) {
    char path[4200];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!required && stat(path, &sb) != 0) return 0;
    StFile f;
    if (st_read(&f, path, err, errlen) != 0) return -1;
    int rc = check_bf16(&f, path, bf16, err, errlen) == 0 && ckpt_check_step(&f, path, step, err, errlen) == 0 &&
                     ckpt_check_values(&f, path, err, errlen) == 0
                 ? 0
                 : -1;
    st_free(&f);
    return rc;
}

// A step directory is its checkpoint: step_N must hold step N, and may not be a symbolic link (--keep
// prunes by name, and a link's name says nothing of what it points at). Other names (a copy given
// explicitly, "latest -> step_N") are not step directories and are only checked for their content.
static int check_step_name(const char *step_dir, int step, char *err, size_t errlen) {
    char name[4096];
    snprintf(name, sizeof name, "%s", step_dir);
    for (size_t n = strlen(name); n > 1 && name[n - 1] == '/';) name[--n] = '\0';
    const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
    char *end;
    if (strncmp(base, "step_", 5) != 0 || base[5] < '0' || base[5] > '9') return 0;
    long named = strtol(base + 5, &end, 10);
    if (*end != '\0') return 0;
    struct stat sb;
    if (lstat(name, &sb) == 0 && S_ISLNK(sb.st_mode)) {
        char target[4096];
        ssize_t k = readlink(name, target, sizeof target - 1);
        target[k > 0 ? k : 0] = '\0';
        snprintf(err, errlen, "'%s' is a symbolic link (to '%s'), not a step directory: a checkpoint is never read "
                 "through a link named step_N (its name need not match its content, and --keep prunes by name)",
                 step_dir, target);
        return -1;
    }
    if (named != step) {
        snprintf(err, errlen, "'%s' is named for step %ld but its state.json says step %d (a copied or renamed "
                 "directory?)", step_dir, named, step);
        return -1;
    }
    return 0;
}

// What resume and generate read besides the tensors: a BPE vocabulary that loads (merges refer only to
// earlier tokens, ...) and fits the model's vocabulary.
static int verify_tokenizer(const CkptState *st, char *err, size_t errlen) {
    if (!st->tokenizer_path[0]) return 0;
    Bpe bpe;
    char why[1024];
    if (bpe_load(&bpe, st->tokenizer_path, why, sizeof why) != 0) {
        snprintf(err, errlen, "tokenizer.json: %s", why);
        return -1;
    }
    int n = bpe.vocab_size;
    bpe_free(&bpe);
    if (n > st->model.vocab) {
        snprintf(err, errlen, "'%s' has %d tokens but the model's vocabulary is %d", st->tokenizer_path, n,
                 st->model.vocab);
        return -1;
    }
    return 0;
}

int ckpt_verify(const char *step_dir, char *note, size_t notelen, char *err, size_t errlen) {
    if (note && notelen) note[0] = '\0';
    CkptState st;
    char path[4200];
    snprintf(path, sizeof path, "%s/state.json", step_dir);
    struct stat sb;
    if (stat(path, &sb) != 0) {   // e.g. an empty step_ directory (a copy or a cleanup cut short)
        snprintf(err, errlen, "'%s' holds no state.json (an incomplete copy?)", step_dir);
        return -1;
    }
    if (verify_sums(step_dir, note, notelen, err, errlen) != 0) return -1;
    if (ckpt_read_state(step_dir, &st, err, errlen) != 0) return -1;
    if (check_step_name(step_dir, st.step, err, errlen) != 0) return -1;
    if (verify_tokenizer(&st, err, errlen) != 0) return -1;
    int base16 = 0;   // state.json's record of a LoRA run's --base-dtype
    for (int i = 0; i < st.n_options; i++)
        base16 |= strcmp(st.option_flag[i], "base-dtype") == 0 && strcmp(st.option_value[i], "bf16") == 0;
    if (verify_tensors(step_dir, "model.safetensors", st.step, 1, base16 && st.model.lora_rank > 0, err, errlen) != 0)
        return -1;
    // optimizer.safetensors: generate needs only the weights, so a weights-only directory is usable there
    return verify_tensors(step_dir, "optimizer.safetensors", st.step, 0, 0, err, errlen);
}
