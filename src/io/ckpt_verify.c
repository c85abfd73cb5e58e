#include "io/ckpt_verify.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "io/ckpt_manifest.h"

int ckpt_check_values(const StFile *f, const char *path, char *err, size_t errlen) {
    for (int i = 0; i < f->n; i++) {
        const StTensor *t = &f->t[i];
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

static int verify_tensors(const char *dir, const char *name, int step, int required, char *err, size_t errlen) {
    char path[4200];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!required && stat(path, &sb) != 0) return 0;
    StFile f;
    if (st_read(&f, path, err, errlen) != 0) return -1;
    int rc = ckpt_check_step(&f, path, step, err, errlen) == 0 && ckpt_check_values(&f, path, err, errlen) == 0 ? 0 : -1;
    st_free(&f);
    return rc;
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
    if (verify_tensors(step_dir, "model.safetensors", st.step, 1, err, errlen) != 0) return -1;
    // optimizer.safetensors: generate needs only the weights, so a weights-only directory is usable there
    return verify_tensors(step_dir, "optimizer.safetensors", st.step, 0, err, errlen);
}
