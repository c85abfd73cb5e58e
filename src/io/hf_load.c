#include "io/hf_load.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "io/hf_index.h"
#include "io/hf_names.h"
#include "io/safetensors.h"
#include "io/st_convert.h"
#include "model/params.h"
#include "util/common.h"
#include "util/fileio.h"

#define SINGLE_FILE "model.safetensors"
#define INDEX_FILE "model.safetensors.index.json"

enum { PATH_LEN = 4200 };

// An opened model directory: its config and every weight file, mapped.
typedef struct {
    HfConfig cfg;
    char cfg_path[PATH_LEN];
    int sharded;                  // INDEX_FILE names the shards
    HfIndex ix;
    char index_path[PATH_LEN];
    int n_files;
    StFile *files;
    char (*paths)[PATH_LEN];
} HfDir;

int hf_is_model_dir(const char *dir) {
    char path[PATH_LEN];
    struct stat sb;
    snprintf(path, sizeof path, "%s/config.json", dir);
    return stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode) && stat(path, &sb) == 0;
}

int hf_dir_config(const char *dir, HfConfig *c, char *err, size_t errlen) {
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (hf_config_read(path, c, err, errlen) != 0) return -1;
    // generation_config.json (optional): its bos/eos ids are the ones transformers' generate stops at
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    struct stat sb;
    if (stat(path, &sb) != 0) return 0;
    uint8_t *data;
    size_t n;
    if (fileio_read_bounded(path, (size_t)1 << 20, &data, &n, err, errlen) != 0) return -1;
    int rc = hf_generation_config_parse((const char *)data, n, path, &c->model.tokens, err, errlen);
    free(data);
    return rc;
}

static void close_dir(HfDir *d) {
    for (int i = 0; i < d->n_files; i++) st_free(&d->files[i]);
    free(d->files);
    free(d->paths);
    hf_index_free(&d->ix);
    memset(d, 0, sizeof *d);
}

// config.json, then the index and its shards, or the one model.safetensors.
static int open_dir(HfDir *d, const char *dir, char *err, size_t errlen) {
    memset(d, 0, sizeof *d);
    snprintf(d->cfg_path, sizeof d->cfg_path, "%s/config.json", dir);
    if (hf_config_read(d->cfg_path, &d->cfg, err, errlen) != 0) return -1;
    snprintf(d->index_path, sizeof d->index_path, "%s/%s", dir, INDEX_FILE);
    struct stat sb;
    d->sharded = stat(d->index_path, &sb) == 0;
    if (d->sharded && hf_index_read(d->index_path, &d->ix, err, errlen) != 0) return -1;
    d->n_files = d->sharded ? d->ix.n_shards : 1;
    d->files = xcalloc(sizeof(StFile) * (size_t)d->n_files);
    d->paths = xcalloc(sizeof *d->paths * (size_t)d->n_files);
    for (int i = 0; i < d->n_files; i++) {
        snprintf(d->paths[i], sizeof d->paths[i], "%s/%s", dir, d->sharded ? d->ix.shards[i] : SINGLE_FILE);
        if (st_read(&d->files[i], d->paths[i], err, errlen) != 0) {
            if (d->sharded) {   // say which file listed the missing or broken shard
                char inner[1024];
                snprintf(inner, sizeof inner, "%s", err);
                snprintf(err, errlen, "shard '%s' listed in '%s': %s", d->ix.shards[i], d->index_path, inner);
            } else if (stat(d->paths[i], &sb) != 0) {
                snprintf(err, errlen, "'%s' holds neither %s nor %s", dir, SINGLE_FILE, INDEX_FILE);
            }
            close_dir(d);
            return -1;
        }
    }
    return 0;
}

// Where tensor `name` is: the file (index) and its entry, or -1 with err naming what is wrong.
static int locate(const HfDir *d, const char *name, const StTensor **t, char *err, size_t errlen) {
    int file = d->sharded ? hf_index_find(&d->ix, name) : 0;
    *t = file >= 0 ? st_find(&d->files[file], name) : NULL;
    if (*t) return file;
    if (file < 0) snprintf(err, errlen, "'%s' does not list tensor '%s'", d->index_path, name);
    else snprintf(err, errlen, "'%s' lacks tensor '%s'%s%s", d->paths[file], name, d->sharded ? ", which the index places there: " : "",
                  d->sharded ? d->index_path : "");
    return -1;
}

// GPT-2's tensors may come without the "transformer." prefix (GPT2Model's files): the name the files use.
static int locate_param(const HfDir *d, const GPT *m, const ParamInfo *pi, const StTensor **t, char *name, size_t len,
                        char *err, size_t errlen) {
    hf_param_name(&m->cfg, pi, name, len);
    int file = locate(d, name, t, err, errlen);
    if (file < 0 && strcmp(name, pi->name) != 0) {
        char err2[16];
        int bare = locate(d, pi->name, t, err2, sizeof err2);
        if (bare >= 0) { snprintf(name, len, "%s", pi->name); return bare; }
    }
    return file;
}

static int same_field(const HfDir *d, const char *key, double file, double model, char *err, size_t errlen) {
    if (file == model) return 0;
    snprintf(err, errlen, "'%s': field '%s' is %g but the model being loaded has %g", d->cfg_path, key, file, model);
    return -1;
}

// config.json describes m (m was built from it with hf_config_apply).
static int check_config(const HfDir *d, const GPT *m, char *err, size_t errlen) {
    GPTConfig want = m->cfg;
    if (hf_config_apply(&d->cfg, &want, d->cfg_path, err, errlen) != 0) return -1;
    const GPTConfig *a = &want, *b = &m->cfg;
    int gpt2 = a->arch == ARCH_GPT2;
    if (a->arch != b->arch) {
        snprintf(err, errlen, "'%s': field 'model_type' is \"%s\" (ctron --arch %s) but the model being loaded is %s",
                 d->cfg_path, d->cfg.model_type, arch_spec((ArchKind)a->arch)->name, arch_spec((ArchKind)b->arch)->name);
        return -1;
    }
    if (same_field(d, "vocab_size", a->vocab, b->vocab, err, errlen) ||
        same_field(d, gpt2 ? "n_embd" : "hidden_size", a->hidden, b->hidden, err, errlen) ||
        same_field(d, gpt2 ? "n_layer" : "num_hidden_layers", a->layers, b->layers, err, errlen) ||
        same_field(d, gpt2 ? "n_head" : "num_attention_heads", a->heads, b->heads, err, errlen) ||
        same_field(d, "num_key_value_heads", a->kv_heads, b->kv_heads, err, errlen) ||
        same_field(d, gpt2 ? "n_inner" : "intermediate_size", a->ffn, b->ffn, err, errlen) ||
        same_field(d, "tie_word_embeddings", a->tie_embeddings > 0, b->tie_embeddings > 0, err, errlen) ||
        same_field(d, "model_type qwen2 (q/k/v biases)", a->qkv_bias, b->qkv_bias, err, errlen) ||
        same_field(d, "model_type qwen3 (q/k norms)", a->qk_norm, b->qk_norm, err, errlen) ||
        same_field(d, "model_type phi3 (fused qkv_proj, gate_up_proj)", a->fused_proj, b->fused_proj, err, errlen) ||
        same_field(d, "sliding_window (0: none)", a->sliding_window, b->sliding_window, err, errlen) ||
        same_field(d, "partial_rotary_factor (rotated dims; 0: all)", a->rotary_dim, b->rotary_dim, err, errlen) ||
        same_field(d, gpt2 ? "layer_norm_epsilon" : "rms_norm_eps", a->norm_eps, b->norm_eps, err, errlen) ||
        (!gpt2 && same_field(d, "rope_theta", a->rope_theta, b->rope_theta, err, errlen)))
        return -1;
    if (!gpt2 && memcmp(&a->rope_scaling, &b->rope_scaling, sizeof a->rope_scaling)) {
        snprintf(err, errlen, "'%s': its RoPE scaling %s differs from the model being loaded's %s", d->cfg_path,
                 rope_scaling_label(&a->rope_scaling, (char[96]){0}, 96), rope_scaling_label(&b->rope_scaling, (char[96]){0}, 96));
        return -1;
    }
    return 0;
}

static void shape_text(const int64_t *shape, int ndim, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && k < len; i++) k += (size_t)snprintf(buf + k, len - k, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
}

// One parameter's tensor: a float dtype, its HF shape, finite values.
static int check_param(const HfDir *d, const GPT *m, const ParamInfo *pi, char *err, size_t errlen) {
    char name[128], want[64], got[64];
    const StTensor *t;
    int file = locate_param(d, m, pi, &t, name, sizeof name, err, errlen);
    if (file < 0) return -1;
    const char *path = d->paths[file];
    if (!st_is_float(t->dtype)) {
        snprintf(err, errlen, "'%s': tensor '%s' has dtype %s; ctron reads weights in F32, BF16 or F16", path, name,
                 st_dtype_name(t->dtype));
        return -1;
    }
    int64_t shape[2];
    hf_param_shape(&m->cfg, pi, d->cfg.max_positions, shape);
    int same = t->ndim == pi->ndim && t->shape[0] == shape[0] && (pi->ndim == 1 || t->shape[1] == shape[1]);
    if (!same) {
        shape_text(shape, pi->ndim, want, sizeof want);
        shape_text(t->shape, t->ndim, got, sizeof got);
        snprintf(err, errlen, "'%s': tensor '%s' has shape %s, but '%s' gives %s", path, name, got, d->cfg_path, want);
        return -1;
    }
    long bad = st_find_nonfinite(t);
    st_drop_pages(&d->files[file], t);
    if (bad >= 0) {
        float v;
        st_to_f32(t, (size_t)bad, 1, &v);
        snprintf(err, errlen, "'%s': tensor '%s' element %ld is %g: a model's weights are finite", path, name, bad,
                 (double)v);
        return -1;
    }
    return 0;
}

// A tensor of a file that is no parameter of m: a known buffer, or a tied output layer that is the
// embedding itself (then it is skipped: the embedding is the output layer).
static int check_extra(const HfDir *d, const GPT *m, int file, const StTensor *t, char *err, size_t errlen) {
    if (d->sharded && hf_index_find(&d->ix, t->name) != file) {
        snprintf(err, errlen, "'%s' holds tensor '%s', which '%s' does not place there", d->paths[file], t->name,
                 d->index_path);
        return -1;
    }
    if (hf_find_param(m, t->name) || hf_is_buffer(t->name)) return 0;
    if (strcmp(t->name, "lm_head.weight") == 0 && gpt_tied(&m->cfg)) {
        const ParamInfo *emb = &m->info[0];   // wte / embed_tokens: the first of either family
        const StTensor *e;
        char name[128];
        if (locate_param(d, m, emb, &e, name, sizeof name, err, errlen) >= 0 && e->dtype == t->dtype &&
            e->nbytes == t->nbytes && memcmp(e->data, t->data, t->nbytes) == 0)
            return 0;
        snprintf(err, errlen, "'%s': tensor 'lm_head.weight' differs from the embedding, but field "
                 "'tie_word_embeddings' of '%s' is true", d->paths[file], d->cfg_path);
        return -1;
    }
    snprintf(err, errlen, "'%s' holds tensor '%s', which a %s model with these sizes has not", d->paths[file],
             t->name, d->cfg.model_type);
    return -1;
}

static int check_all(const HfDir *d, const GPT *m, char *err, size_t errlen) {
    if (check_config(d, m, err, errlen) != 0) return -1;
    for (int i = 0; i < m->n_info; i++)
        if (check_param(d, m, &m->info[i], err, errlen) != 0) return -1;
    for (int f = 0; f < d->n_files; f++)
        for (int i = 0; i < d->files[f].n; i++)
            if (check_extra(d, m, f, &d->files[f].t[i], err, errlen) != 0) return -1;
    if (d->sharded)   // every tensor the index lists is where it says
        for (int i = 0; i < d->ix.n_tensors; i++)
            if (!st_find(&d->files[d->ix.shard_of[i]], d->ix.names[i])) {
                snprintf(err, errlen, "'%s' lists tensor '%s' in shard '%s', which does not hold it", d->index_path,
                         d->ix.names[i], d->ix.shards[d->ix.shard_of[i]]);
                return -1;
            }
    return 0;
}

// Parameter pi, widened to fp32 in ctron's orientation, into host memory dst (tmp: scratch of its size).
static void convert_param(const HfDir *d, const GPT *m, const ParamInfo *pi, float *dst, float *tmp) {
    char name[128], err[256];
    const StTensor *t;
    int file = locate_param(d, m, pi, &t, name, sizeof name, err, sizeof err);
    if (!hf_param_transposed(&m->cfg, pi)) {
        st_to_f32(t, 0, pi->numel, dst);   // GPT-2's position table: its first seq rows
    } else {
        size_t out = (size_t)pi->shape[0], in = (size_t)pi->shape[1];   // the file holds [in, out]
        st_to_f32(t, 0, pi->numel, tmp);
        for (size_t r = 0; r < out; r++)
            for (size_t c = 0; c < in; c++) dst[r * in + c] = tmp[c * out + r];
    }
    st_drop_pages(&d->files[file], t);
}

static size_t largest_param(const GPT *m) {
    size_t n = 0;
    for (int i = 0; i < m->n_info; i++)
        if (m->info[i].numel > n) n = m->info[i].numel;
    return n;
}

// The whole model, tensor by tensor: into host parameters directly, or through one tensor's staging
// buffer onto the model's device.
static void copy_whole(const HfDir *d, GPT *m) {
    size_t n = largest_param(m);
    float *tmp = xmalloc(n * sizeof(float)), *stage = m->be ? xmalloc(n * sizeof(float)) : NULL;
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *pi = &m->info[i];
        float *dst = m->params + pi->offset;
        convert_param(d, m, pi, stage ? stage : dst, tmp);
        if (stage) m->be->copy(m->be, dst, stage, pi->numel * sizeof(float), COPY_H2D);
    }
    free(tmp);
    free(stage);
    gpt_params_changed(m);
}

int hf_load_frozen_base(GPT *m, const char *dir, char *err, size_t errlen) {
    HfDir d;
    if (open_dir(&d, dir, err, errlen) != 0) return -1;
    int n_base = base_tensor_count(&m->cfg), k = 0;
    while (k < m->n_frozen_info && m->frozen_info[k].full_index < n_base) k++;   // the base's come first
    GPT view = *m;   // the base's tensors as a model's list: what the checks and the conversion walk
    view.info = m->frozen_info;
    view.n_info = k;
    int rc = check_all(&d, &view, err, errlen);
    if (rc == 0) {
        size_t n = largest_param(&view);
        float *tmp = xmalloc(n * sizeof(float)), *stage = xmalloc(n * sizeof(float));
        for (int i = 0; i < k; i++) {
            convert_param(&d, &view, &view.info[i], stage, tmp);
            gpt_frozen_put(m, &view.info[i], stage);
        }
        free(tmp);
        free(stage);
        gpt_params_changed(m);
    }
    close_dir(&d);
    return rc;
}

int hf_load_into(GPT *m, const char *dir, char *err, size_t errlen) {
    HfDir d;
    if (open_dir(&d, dir, err, errlen) != 0) return -1;
    int whole = m->tp.t <= 1 && m->pp.p <= 1;
    GPT full;
    const GPT *names = m;
    if (!whole) {   // the whole model's tensors are checked and converted, then this rank's cut out
        gpt_init_params(&full, &m->cfg);
        names = &full;
    }
    int rc = check_all(&d, names, err, errlen);
    if (rc == 0 && whole) copy_whole(&d, m);
    if (rc == 0 && !whole) {
        copy_whole(&d, &full);
        gpt_shard_from_full(m, &full, full.params, m->params);
    }
    if (!whole) gpt_free(&full);
    close_dir(&d);
    return rc;
}
