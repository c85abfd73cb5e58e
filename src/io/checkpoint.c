#include "io/checkpoint.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "io/ckpt_fs.h"
#include "io/ckpt_manifest.h"
#include "io/ckpt_verify.h"
#include "io/ckpt_state.h"
#include "io/safetensors.h"
#include "io/st_convert.h"
#include "util/common.h"
#include "util/fileio.h"

#define MODEL_FILE "model.safetensors"
#define OPTIM_FILE "optimizer.safetensors"
#define STATE_FILE "state.json"

void ckpt_step_dir(const char *dir, int step, char *out, size_t len) {
    snprintf(out, len, "%s/step_%08d", dir, step);
}

int ckpt_is_conv1d(const ParamInfo *pi) { return pi->ndim == 2 && strncmp(pi->name, "h.", 2) == 0; }

int ckpt_test_crash_in_save(void) {
    const char *s = getenv("CTRON_TEST_CRASH_IN_SAVE");
    return s ? atoi(s) : 0;
}

// ---- save ----------------------------------------------------------------------------------

// The shape a parameter has in the file: Conv1D weights are [in, out].
static void file_shape(const ParamInfo *pi, int64_t shape[2]) {
    int t = ckpt_is_conv1d(pi);
    shape[0] = t ? pi->shape[1] : pi->shape[0];
    shape[1] = t ? pi->shape[0] : pi->shape[1];
}

// LoRA's frozen base of a --base-dtype bf16 run is stored BF16: its values are bf16 numbers (the run holds
// nothing else), so the file holds them exactly in half the bytes. It is the first n_base elements of the
// frozen list; LoRA-FA's frozen A follows it and, an adapter, stays F32 as everything trained does.
static size_t base16_elements(const GPT *m) {
    return m->frozen && m->cfg.lora_rank > 0 && m->cfg.base_bf16 ? m->n_base : 0;
}

// The list's tensors of one dtype: those below element n16 BF16, the others F32 (pass bf16 0 or 1).
static void add_list(StFile *f, const ParamInfo *info, int n, const float *base, const char *prefix, size_t n16,
                     int bf16) {
    char name[128];
    for (int i = 0; i < n; i++) {
        const ParamInfo *pi = &info[i];
        if ((pi->offset < n16) != bf16) continue;
        int64_t shape[2];
        file_shape(pi, shape);
        snprintf(name, sizeof name, "%s%s", prefix, pi->name);
        if (bf16) st_add_converted(f, name, ST_BF16, pi->ndim, shape, base + pi->offset, ckpt_is_conv1d(pi));
        else if (ckpt_is_conv1d(pi)) st_add_transposed(f, name, shape[0], shape[1], base + pi->offset);
        else st_add(f, name, ST_F32, pi->ndim, shape, base + pi->offset);
    }
}

// The trainable tensors laid out as base (the parameters, or an optimizer moment).
static void add_params(StFile *f, const GPT *m, const float *base, const char *prefix) {
    add_list(f, m->info, m->n_info, base, prefix, 0, 0);
}

// The model file: LoRA's frozen tensors (the base, and A under LoRA-FA) too, under their own names. A BF16
// base comes after every F32 tensor (safetensors' own writer orders by element size, so that each F32
// tensor starts 4-byte aligned). m holds fp32 (a bf16 base's model is gathered to a host copy first).
static void add_model(StFile *f, const GPT *m) {
    if (m->base16) ctron_fatal("ckpt_save: a --base-dtype bf16 model is saved from its host copy (gpt_frozen_to_host)");
    size_t n16 = base16_elements(m);
    if (m->frozen) add_list(f, m->frozen_info, m->n_frozen_info, m->frozen, "", n16, 0);
    add_params(f, m, m->params, "");
    if (n16) add_list(f, m->frozen_info, m->n_frozen_info, m->frozen, "", n16, 1);
}

static void crash_hook(void *ctx, int i, int n) {
    // Half the tensors are in the file (and flushed to it): the save is visibly incomplete.
    if (*(const int *)ctx && i == n / 2) raise(SIGKILL);
}

static int write_files(const char *tmp, const GPT *m, const AdamW *opt, const CkptState *st,
                       const CkptSaveOptions *so, char *err, size_t errlen) {
    int crash = so->crash_in_save;
    char path[4200], buf[32];
    StFile f;
    st_init(&f);
    st_add_meta(&f, "format", "pt");            // what Hugging Face loaders expect of a PyTorch state dict
    st_add_meta(&f, "ctron_weight_orientation", "conv1d");
    snprintf(buf, sizeof buf, "%d", st->step);
    st_add_meta(&f, "ctron_step", buf);
    add_model(&f, m);
    snprintf(path, sizeof path, "%s/%s", tmp, MODEL_FILE);
    int rc = st_write_hooked(&f, path, crash_hook, &crash, err, errlen);
    st_free(&f);
    if (rc) return -1;

    st_init(&f);
    st_add_meta(&f, "format", "pt");
    st_add_meta(&f, "ctron_weight_orientation", "conv1d");
    st_add_meta(&f, "ctron_step", buf);   // cross-checked against state.json and the model on load
    add_params(&f, m, opt->m, "m.");
    add_params(&f, m, opt->v, "v.");
    snprintf(path, sizeof path, "%s/%s", tmp, OPTIM_FILE);
    rc = st_write(&f, path, err, errlen);
    st_free(&f);
    if (rc) return -1;

    CkptState rec = *st;
    rec.tokenizer_path[0] = '\0';
    if (so->tokenizer_json) {   // the vocabulary travels with the weights it belongs to
        snprintf(path, sizeof path, "%s/tokenizer.json", tmp);
        const void *parts[1] = {so->tokenizer_json};
        if (fileio_write_atomic(path, parts, &so->tokenizer_bytes, 1, err, errlen) != 0) return -1;
        snprintf(rec.tokenizer_path, sizeof rec.tokenizer_path, "tokenizer.json");
    }
    snprintf(path, sizeof path, "%s/%s", tmp, STATE_FILE);
    if (ckpt_state_write(path, &rec, err, errlen) != 0) return -1;
    // Last: the checksums of everything above (read back from the page cache).
    const char *names[4] = {MODEL_FILE, OPTIM_FILE, STATE_FILE, "tokenizer.json"};
    return ckpt_manifest_write(tmp, names, so->tokenizer_json ? 4 : 3, err, errlen);
}

int ckpt_save(const char *dir, const GPT *m, const AdamW *opt, const CkptState *st, const CkptSaveOptions *so,
              char *err, size_t errlen) {
    char tmp[4096], final[4096], old[4096];
    if (fs_mkdir_p(dir, err, errlen) != 0) return -1;
    // Leftovers of a run killed mid-save or mid-prune: incomplete by construction (one writer per DIR).
    fs_remove_prefixed(dir, ".tmp-step_");
    fs_remove_prefixed(dir, ".del-step_");
    snprintf(tmp, sizeof tmp, "%s/.tmp-step_%08d", dir, st->step);
    ckpt_step_dir(dir, st->step, final, sizeof final);
    if (mkdir(tmp, 0755) != 0) {
        snprintf(err, errlen, "cannot create '%s': %s", tmp, strerror(errno));
        return -1;
    }
    if (write_files(tmp, m, opt, st, so, err, errlen) != 0 || fs_fsync_dir(tmp, err, errlen) != 0) {
        fs_remove_tree(tmp);
        return -1;
    }
    // A checkpoint of the same step already there (a run resumed from an earlier step): move it
    // aside first, since rename() cannot replace a non-empty directory.
    struct stat sb;
    old[0] = '\0';
    if (stat(final, &sb) == 0) {
        snprintf(old, sizeof old, "%s/.del-step_%08d", dir, st->step);
        if (rename(final, old) != 0) {
            snprintf(err, errlen, "cannot move the old '%s' aside: %s", final, strerror(errno));
            fs_remove_tree(tmp);
            return -1;
        }
    }
    if (rename(tmp, final) != 0) {
        snprintf(err, errlen, "cannot rename '%s' to '%s': %s", tmp, final, strerror(errno));
        fs_remove_tree(tmp);
        return -1;
    }
    if (fs_fsync_dir(dir, err, errlen) != 0) return -1;
    if (old[0]) fs_remove_tree(old);

    // Prune only now that the new checkpoint is complete and durable.
    if (so->keep > 0) {
        int *steps, n = fs_list_steps(dir, &steps);
        // Only checkpoints up to this one count: a newer step_ left over (say an incomplete copy that
        // --resume skipped) must not make the prune delete the checkpoint just written.
        while (n > 0 && steps[n - 1] > st->step) n--;
        for (int i = 0; i + so->keep < n; i++) {   // steps are ascending: the oldest come first
            char victim[4096], gone[4096];
            ckpt_step_dir(dir, steps[i], victim, sizeof victim);
            // Renamed first so that a half-deleted directory is never mistaken for a checkpoint.
            snprintf(gone, sizeof gone, "%s/.del-step_%08d", dir, steps[i]);
            if (rename(victim, gone) == 0) fs_remove_tree(gone);
            else fprintf(stderr, "ctron: warning: cannot remove old checkpoint '%s': %s\n", victim, strerror(errno));
        }
        free(steps);
    }
    return 0;
}

// ---- resolve -------------------------------------------------------------------------------

int ckpt_resolve(const char *path, char *step_dir, size_t len, char *run_dir, size_t run_len, char *err,
                 size_t errlen) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        snprintf(err, errlen, "checkpoint '%s' does not exist", path);
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "checkpoint '%s' is not a directory (expected a run directory or a step_NNNNNNNN "
                 "directory)", path);
        return -1;
    }
    char state[4200], name[4096];
    snprintf(name, sizeof name, "%s", path);
    for (size_t n = strlen(name); n > 1 && name[n - 1] == '/';) name[--n] = '\0';
    const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
    if (strncmp(base, ".tmp-", 5) == 0 || strncmp(base, ".del-", 5) == 0) {
        snprintf(err, errlen, "'%s' is an incomplete save or a deletion in progress; it is never loaded", path);
        return -1;
    }
    snprintf(state, sizeof state, "%s/%s", path, STATE_FILE);
    char note[1200];
    if (stat(state, &sb) == 0) {   // a step directory, named explicitly: it must verify
        if (ckpt_verify(path, note, sizeof note, err, errlen) != 0) return -2;
        if (note[0]) fprintf(stderr, "ctron: note: %s\n", note);
        snprintf(step_dir, len, "%s", path);
        if (run_dir) fs_parent_dir(path, run_dir, run_len);
        return 0;
    }
    if (errno == EACCES) {
        snprintf(err, errlen, "cannot read checkpoint '%s': %s", state, strerror(errno));
        return -1;
    }
    int *steps, n = fs_list_steps(path, &steps);
    if (n < 0) {
        snprintf(err, errlen, "cannot read the run directory '%s': %s", path, strerror(errno));
        free(steps);
        return -1;
    }
    if (n == 0) {
        free(steps);
        snprintf(err, errlen, "no checkpoint in '%s': it holds no step_NNNNNNNN directory and no %s (.tmp-* "
                 "directories are incomplete saves and are never loaded)", path, STATE_FILE);
        return -1;
    }
    // The newest checkpoint that verifies; each one skipped is named with the reason.
    char first_err[1200] = "";
    int found = -1;
    for (int i = n - 1; i >= 0 && found < 0; i--) {
        ckpt_step_dir(path, steps[i], step_dir, len);
        if (ckpt_verify(step_dir, note, sizeof note, err, errlen) == 0) {
            found = i;
            if (note[0]) fprintf(stderr, "ctron: note: %s\n", note);
        } else {
            fprintf(stderr, "ctron: note: skipping %s: %s\n", step_dir, err);
            if (!first_err[0]) snprintf(first_err, sizeof first_err, "%s", err);
        }
    }
    if (found < 0) {
        snprintf(err, errlen, "no checkpoint in '%s' verifies (%d step_ director%s; the newest: %s)", path, n,
                 n == 1 ? "y" : "ies", first_err);
        free(steps);
        return -2;
    }
    if (found < n - 1)
        fprintf(stderr, "ctron: note: using %s, the newest checkpoint that verifies\n", step_dir);
    free(steps);
    if (run_dir) snprintf(run_dir, run_len, "%s", path);
    return 0;
}

// ---- load ----------------------------------------------------------------------------------

int ckpt_read_state(const char *step_dir, CkptState *st, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", step_dir, STATE_FILE);
    return ckpt_state_read(path, st, err, errlen);
}

#define CONFIG_MISMATCH(field, fmt, a, b)                                                                       \
    do {                                                                                                        \
        snprintf(err, errlen, "checkpoint '%s' has %s " fmt " but the model being loaded has " fmt, step_dir,   \
                 field, a, b);                                                                                  \
        return -1;                                                                                              \
    } while (0)

static int check_config(const char *step_dir, const CkptState *st, const GPT *m, const AdamW *opt, char *err,
                        size_t errlen) {
    const GPTConfig *a = &st->model, *b = &m->cfg;
    if (a->layers != b->layers) CONFIG_MISMATCH("layers", "%d", a->layers, b->layers);
    if (a->hidden != b->hidden) CONFIG_MISMATCH("hidden", "%d", a->hidden, b->hidden);
    if (a->heads != b->heads) CONFIG_MISMATCH("heads", "%d", a->heads, b->heads);
    if (a->seq != b->seq) CONFIG_MISMATCH("seq", "%d", a->seq, b->seq);
    if (a->vocab != b->vocab) CONFIG_MISMATCH("vocab", "%d", a->vocab, b->vocab);
    if (!opt) return 0;
    // Resuming training: the step must also be the same step.
    if (a->batch != b->batch) CONFIG_MISMATCH("batch", "%d", a->batch, b->batch);
    if (a->dropout != b->dropout) CONFIG_MISMATCH("dropout", "%g", (double)a->dropout, (double)b->dropout);
    if (st->beta1 != opt->beta1) CONFIG_MISMATCH("AdamW beta1", "%g", (double)st->beta1, (double)opt->beta1);
    if (st->beta2 != opt->beta2) CONFIG_MISMATCH("AdamW beta2", "%g", (double)st->beta2, (double)opt->beta2);
    if (st->eps != opt->eps) CONFIG_MISMATCH("AdamW eps", "%g", (double)st->eps, (double)opt->eps);
    if (st->weight_decay != opt->weight_decay)
        CONFIG_MISMATCH("weight decay", "%g", (double)st->weight_decay, (double)opt->weight_decay);
    return 0;
}

static void shape_text(const int64_t *shape, int ndim, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && k < len; d++) k += (size_t)snprintf(buf + k, len - k, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (k < len) snprintf(buf + k, len - k, "]");
}

// HF GPT-2 files may carry the causal-mask buffers of GPT2Attention; they hold no parameters.
static int is_known_buffer(const char *name) {
    const char *dot = strstr(name, ".attn.");
    if (strncmp(name, "h.", 2) != 0 || !dot) return 0;
    return strcmp(dot, ".attn.bias") == 0 || strcmp(dot, ".attn.masked_bias") == 0;
}

// What a tensor of the list may be stored as: F32; BF16 too for the frozen base (the frozen list's elements
// below n_base) of a checkpoint whose state.json records base-dtype bf16.
typedef struct {
    size_t n_base;            // the frozen list's base elements (0: a list of trained tensors)
    const char *base_dtype;   // the checkpoint's recorded base-dtype ("fp32" when none)
} StoredDtypes;

static int check_dtype(const StTensor *t, const ParamInfo *pi, const StoredDtypes *d, const char *path,
                       const char *name, int moment, char *err, size_t errlen) {
    int base = pi->offset < d->n_base, base16 = strcmp(d->base_dtype, "bf16") == 0;
    if (t->dtype == ST_F32 || (t->dtype == ST_BF16 && base && base16)) return 0;
    if (t->dtype != ST_BF16)
        snprintf(err, errlen, "'%s': tensor '%s' is %s, expected F32 (ctron checkpoints are F32; only a --base-dtype "
                 "bf16 run's frozen base is BF16)", path, name, st_dtype_name(t->dtype));
    else if (base)
        snprintf(err, errlen, "'%s': tensor '%s' is BF16, expected F32: the checkpoint's frozen base is fp32 "
                 "(state.json records base-dtype %s)", path, name, d->base_dtype);
    else
        snprintf(err, errlen, "'%s': tensor '%s' is BF16, expected F32: %s stays fp32 (only a --base-dtype bf16 run's "
                 "frozen base is BF16)", path, name,
                 d->n_base ? "LoRA-FA's frozen A, an adapter," : moment ? "an optimizer moment" : "a trained tensor");
    return -1;
}

// Every tensor of the list is in f under prefix+name, F32 (or a BF16 base: d), with its file shape.
static int check_list(const StFile *f, const ParamInfo *info, int n, const StoredDtypes *d, const char *path,
                      const char *prefix, char *err, size_t errlen) {
    char name[128], want[64], got[64];
    for (int i = 0; i < n; i++) {
        const ParamInfo *pi = &info[i];
        snprintf(name, sizeof name, "%s%s", prefix, pi->name);
        const StTensor *t = st_find(f, name);
        if (!t) {
            snprintf(err, errlen, "'%s' lacks tensor '%s'", path, name);
            return -1;
        }
        if (check_dtype(t, pi, d, path, name, prefix[0] != '\0', err, errlen) != 0) return -1;
        int64_t shape[2];
        file_shape(pi, shape);
        int same = t->ndim == pi->ndim;
        for (int d = 0; same && d < pi->ndim; d++) same = t->shape[d] == shape[d];
        if (!same) {
            shape_text(shape, pi->ndim, want, sizeof want);
            shape_text(t->shape, t->ndim, got, sizeof got);
            snprintf(err, errlen, "'%s': tensor '%s' has shape %s, the model needs %s%s", path, name, got, want,
                     ckpt_is_conv1d(pi) ? " (Conv1D [in, out] orientation)" : "");
            return -1;
        }
    }
    return 0;
}

// Every parameter of m (with the frozen ones in the model file) is in f under prefix+name, F32 (a frozen base
// recorded as base-dtype bf16: BF16 or F32), with its file shape; f holds nothing else.
static int check_tensors(const StFile *f, const GPT *m, const char *base_dtype, const char *path, const char *prefix,
                         int n_prefixes, char *err, size_t errlen) {
    StoredDtypes trained = {0, base_dtype}, frozen = {m->n_base, base_dtype};
    if (check_list(f, m->info, m->n_info, &trained, path, prefix, err, errlen) != 0) return -1;
    if (n_prefixes == 1 && m->frozen &&
        check_list(f, m->frozen_info, m->n_frozen_info, &frozen, path, prefix, err, errlen) != 0)
        return -1;
    for (int i = 0; i < f->n; i++) {
        const char *n = f->t[i].name, *base = n;
        size_t plen = strlen(prefix);
        if (n_prefixes > 1) {   // optimizer file: "m." or "v."
            if (strncmp(n, "m.", 2) == 0 || strncmp(n, "v.", 2) == 0) base = n + 2;
            else base = NULL;
        } else if (plen) {
            base = strncmp(n, prefix, plen) == 0 ? n + plen : NULL;
        }
        if (base && gpt_find_param(m, base)) continue;
        if (!plen && n_prefixes == 1 && is_known_buffer(n)) continue;
        snprintf(err, errlen, "'%s' holds tensor '%s', which this model does not have (%d layers, %s names)", path,
                 n, m->cfg.layers, n_prefixes > 1 ? "m.<param>/v.<param>" : "GPT-2 state-dict");
        return -1;
    }
    return 0;
}

// Element i of a stored F32 or BF16 tensor as fp32 (exactly), read at any alignment.
static float stored_element(const StTensor *t, size_t i) {
    float x;
    if (t->dtype == ST_F32) {
        memcpy(&x, (const uint8_t *)t->data + 4 * i, sizeof x);
    } else {
        uint16_t h;
        memcpy(&h, (const uint8_t *)t->data + 2 * i, sizeof h);
        uint32_t bits = (uint32_t)h << 16;
        memcpy(&x, &bits, sizeof x);
    }
    return x;
}

static void copy_list(float *dst, const StFile *f, const ParamInfo *info, int n, const char *prefix) {
    char name[128];
    for (int i = 0; i < n; i++) {
        const ParamInfo *pi = &info[i];
        snprintf(name, sizeof name, "%s%s", prefix, pi->name);
        const StTensor *t = st_find(f, name);
        float *d = dst + pi->offset;
        if (!ckpt_is_conv1d(pi)) { st_to_f32(t, 0, pi->numel, d); continue; }   // F32 copied, a BF16 base widened
        size_t out = (size_t)pi->shape[0], in = (size_t)pi->shape[1];   // file: [in, out]
        for (size_t r = 0; r < out; r++)
            for (size_t c = 0; c < in; c++) d[r * in + c] = stored_element(t, c * out + r);
    }
}

static void copy_params(float *dst, const StFile *f, const GPT *m, const char *prefix) {
    copy_list(dst, f, m->info, m->n_info, prefix);
}

int ckpt_load(const char *step_dir, GPT *m, AdamW *opt, CkptState *st_out, char *err, size_t errlen) {
    CkptState st;
    if (ckpt_read_state(step_dir, &st, err, errlen) != 0) return -1;
    if (check_config(step_dir, &st, m, opt, err, errlen) != 0) return -1;
    char mpath[4200], opath[4200];
    snprintf(mpath, sizeof mpath, "%s/%s", step_dir, MODEL_FILE);
    snprintf(opath, sizeof opath, "%s/%s", step_dir, OPTIM_FILE);
    StFile mf, of;
    st_init(&of);
    if (st_read(&mf, mpath, err, errlen) != 0) return -1;
    const char *base_dtype = "fp32";   // a LoRA run's frozen base: BF16 in the file when it was bf16 in the run
    for (int i = 0; i < st.n_options; i++)
        if (strcmp(st.option_flag[i], "base-dtype") == 0) base_dtype = st.option_value[i];
    int rc = check_tensors(&mf, m, base_dtype, mpath, "", 1, err, errlen);
    // The three records of the step agree, and nothing non-finite (or a negative v) is loaded.
    if (rc == 0) rc = ckpt_check_step(&mf, mpath, st.step, err, errlen);
    if (rc == 0) rc = ckpt_check_values(&mf, mpath, err, errlen);
    if (rc == 0 && opt) {
        rc = st_read(&of, opath, err, errlen);
        if (rc == 0) rc = check_tensors(&of, m, "fp32", opath, "m.", 2, err, errlen);
        if (rc == 0) rc = check_tensors(&of, m, "fp32", opath, "v.", 2, err, errlen);
        if (rc == 0) rc = ckpt_check_step(&of, opath, st.step, err, errlen);
        if (rc == 0) rc = ckpt_check_values(&of, opath, err, errlen);
    }
    if (rc == 0) {   // everything is valid: only now is anything overwritten
        copy_params(m->params, &mf, m, "");
        if (m->frozen) copy_list(m->frozen, &mf, m->frozen_info, m->n_frozen_info, "");
        m->params16_stale = 1;
        if (opt) {
            copy_params(opt->m, &of, m, "m.");
            copy_params(opt->v, &of, m, "v.");
            opt->t = st.adam_t;
        }
        if (st_out) *st_out = st;
    }
    st_free(&mf);
    st_free(&of);
    return rc;
}
