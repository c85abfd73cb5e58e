#include "io/hf_export.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "io/ckpt_fs.h"
#include "io/hf_config_write.h"
#include "io/hf_names.h"
#include "util/common.h"
#include "util/fileio.h"

enum { PATH_LEN = 4200 };

int hf_tokenizer_is_hf(const void *json, size_t bytes) {
    cJSON *root = cJSON_ParseWithLength(json, bytes);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    int hf = cJSON_IsObject(model) && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(model, "type"));
    cJSON_Delete(root);
    return hf;
}

static int write_text(const char *dir, const char *name, const char *text, char *err, size_t errlen) {
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const void *parts[2] = {text, "\n"};
    size_t sizes[2] = {strlen(text), 1};
    return fileio_write_atomic(path, parts, sizes, 2, err, errlen);
}

static int write_json(const char *dir, const char *name, char *json, char *err, size_t errlen) {
    int rc = write_text(dir, name, json, err, errlen);
    cJSON_free(json);
    return rc;
}

// A parameter's bytes in the file (GPT-2's position table has its seq rows: n_positions = seq).
static size_t file_bytes(const ParamInfo *pi, StDtype dtype) { return pi->numel * st_dtype_size(dtype); }

// Shard k of n holds parameters [first[k], first[k + 1]): greedy in checkpoint order.
static int plan_shards(const GPT *m, const HfExportOptions *o, int *first) {
    int n = 0;
    size_t in_shard = 0;
    for (int i = 0; i < m->n_info; i++) {
        size_t b = file_bytes(&m->info[i], o->dtype);
        if (i == 0 || (o->max_shard_bytes && in_shard > 0 && in_shard + b > o->max_shard_bytes)) {
            first[n++] = i;
            in_shard = 0;
        }
        in_shard += b;
    }
    first[n] = m->n_info;
    return n;
}

static void shard_name(int k, int n, char *buf, size_t len) {
    if (n == 1) snprintf(buf, len, "model.safetensors");
    else snprintf(buf, len, "model-%05d-of-%05d.safetensors", k + 1, n);
}

static int write_shard(const GPT *m, const char *dir, const HfExportOptions *o, int i0, int i1, const char *file,
                       char *err, size_t errlen) {
    StFile f;
    st_init(&f);
    st_add_meta(&f, "format", "pt");
    char name[128], path[PATH_LEN];
    for (int i = i0; i < i1; i++) {
        const ParamInfo *pi = &m->info[i];
        int64_t shape[2];
        hf_param_shape(&m->cfg, pi, m->cfg.seq, shape);
        hf_param_name(&m->cfg, pi, name, sizeof name);
        st_add_converted(&f, name, o->dtype, pi->ndim, shape, m->params + pi->offset, hf_param_transposed(&m->cfg, pi));
    }
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int rc = st_write(&f, path, err, errlen);
    st_free(&f);
    return rc;
}

static char *index_json(const GPT *m, const HfExportOptions *o, const int *first, int n) {
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_AddObjectToObject(root, "metadata");
    size_t total = 0, params = 0;
    for (int i = 0; i < m->n_info; i++) {
        total += file_bytes(&m->info[i], o->dtype);
        params += m->info[i].numel;
    }
    cJSON_AddNumberToObject(meta, "total_parameters", (double)params);
    cJSON_AddNumberToObject(meta, "total_size", (double)total);
    cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
    char name[128], file[64];
    for (int k = 0; k < n; k++) {
        shard_name(k, n, file, sizeof file);
        for (int i = first[k]; i < first[k + 1]; i++) {
            hf_param_name(&m->cfg, &m->info[i], name, sizeof name);
            cJSON_AddStringToObject(map, name, file);
        }
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

static int write_all(const GPT *m, const char *dir, const HfExportOptions *o, char *err, size_t errlen) {
    const char *dtype = o->dtype == ST_BF16 ? "bfloat16" : "float32";
    if (hf_config_exportable(&m->cfg, err, errlen) != 0) return -1;
    if (write_json(dir, "config.json", hf_config_json(&m->cfg, dtype), err, errlen) != 0 ||
        write_json(dir, "generation_config.json", hf_generation_config_json(&m->cfg), err, errlen) != 0)
        return -1;
    int *first = xmalloc(sizeof(int) * (size_t)(m->n_info + 1)), n = plan_shards(m, o, first), rc = 0;
    char file[64];
    for (int k = 0; k < n && rc == 0; k++) {
        shard_name(k, n, file, sizeof file);
        rc = write_shard(m, dir, o, first[k], first[k + 1], file, err, errlen);
    }
    if (rc == 0 && n > 1) rc = write_json(dir, "model.safetensors.index.json", index_json(m, o, first, n), err, errlen);
    free(first);
    if (rc != 0 || !o->tokenizer_json) return rc;
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    const void *parts[1] = {o->tokenizer_json};
    if (fileio_write_atomic(path, parts, &o->tokenizer_bytes, 1, err, errlen) != 0) return -1;
    if (!hf_tokenizer_is_hf(o->tokenizer_json, o->tokenizer_bytes)) return 0;
    cJSON *tc = cJSON_CreateObject();   // AutoTokenizer: the fast tokenizer of tokenizer.json
    cJSON_AddStringToObject(tc, "tokenizer_class", "PreTrainedTokenizerFast");
    cJSON_AddNumberToObject(tc, "model_max_length", m->cfg.seq);
    char *text = cJSON_Print(tc);
    cJSON_Delete(tc);
    return write_json(dir, "tokenizer_config.json", text, err, errlen);
}

typedef struct {
    const GPT *m;
    const HfExportOptions *o;
} ExportCtx;

static int fill_export(const char *dir, void *ctx, char *err, size_t errlen) {
    const ExportCtx *e = ctx;
    return write_all(e->m, dir, e->o, err, errlen);
}

int hf_export(const GPT *m, const char *out, const HfExportOptions *o, char *err, size_t errlen) {
    ExportCtx e = {m, o};
    return hf_write_dir_atomic(out, fill_export, &e, err, errlen);
}

int hf_write_dir_atomic(const char *out, int (*fill)(const char *dir, void *ctx, char *err, size_t errlen), void *ctx,
                        char *err, size_t errlen) {
    struct stat sb;
    if (stat(out, &sb) == 0 || errno != ENOENT) {
        snprintf(err, errlen, "'%s' %s: the export writes a new directory and replaces nothing", out,
                 errno == ENOENT || stat(out, &sb) == 0 ? "exists" : strerror(errno));
        return -1;
    }
    if (strlen(out) > 4000) {
        snprintf(err, errlen, "the output path is longer than 4000 bytes");
        return -1;
    }
    char tmp[4096], parent[4096];
    snprintf(tmp, sizeof tmp, "%.4000s.tmp-%ld", out, (long)getpid());
    fs_parent_dir(out, parent, sizeof parent);
    if (mkdir(tmp, 0755) != 0) {
        snprintf(err, errlen, "cannot create '%s': %s", tmp, strerror(errno));
        return -1;
    }
    int rc = fill(tmp, ctx, err, errlen);
    if (rc == 0) rc = fs_fsync_dir(tmp, err, errlen);
    if (rc == 0 && rename(tmp, out) != 0) {
        snprintf(err, errlen, "cannot rename '%s' to '%s': %s", tmp, out, strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        fs_remove_tree(tmp);
        return -1;
    }
    return fs_fsync_dir(parent, err, errlen);
}
