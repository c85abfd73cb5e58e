#include "io/peft_adapter.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/hf_export.h"
#include "io/safetensors.h"
#include "io/st_convert.h"
#include "model/lora_merge.h"
#include "util/common.h"
#include "util/fileio.h"

enum { PATH_LEN = 4200 };

static int is_adapter_name(const char *name) { return strncmp(name, "base_model.model.", 17) == 0; }

// ---- writing

static char *config_json(const GPT *m, const char *base) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "peft_type", "LORA");
    cJSON_AddStringToObject(o, "task_type", "CAUSAL_LM");
    cJSON_AddNumberToObject(o, "r", m->cfg.lora_rank);
    cJSON_AddNumberToObject(o, "lora_alpha", m->cfg.lora_alpha);
    char drop[32];   // training only (--lora-dropout): the float's shortest text, as state.json records it
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(drop, sizeof drop, "%.*g", prec, (double)m->cfg.lora_dropout);
        if (strtof(drop, NULL) == m->cfg.lora_dropout) break;
    }
    cJSON_AddRawToObject(o, "lora_dropout", drop);
    cJSON *t = cJSON_AddArrayToObject(o, "target_modules");
    for (int s = 0; s < LORA_SITES; s++)   // module paths: GPT-2's attn.c_proj and mlp.c_proj differ
        if (m->cfg.lora_targets >> s & 1u) cJSON_AddItemToArray(t, cJSON_CreateString(lora_site_module(gpt_lora_family(&m->cfg), (LoraSite)s)));
    cJSON_AddStringToObject(o, "bias", "none");
    cJSON_AddBoolToObject(o, "fan_in_fan_out", m->cfg.arch == ARCH_GPT2);   // GPT-2's Conv1D base weights
    cJSON_AddBoolToObject(o, "use_rslora", m->cfg.lora_rslora);
    cJSON_AddBoolToObject(o, "use_dora", 0);
    cJSON_AddBoolToObject(o, "init_lora_weights", 1);
    cJSON_AddBoolToObject(o, "inference_mode", 1);
    cJSON_AddNullToObject(o, "layers_to_transform");
    cJSON_AddNullToObject(o, "modules_to_save");
    cJSON_AddItemToObject(o, "rank_pattern", cJSON_CreateObject());
    cJSON_AddItemToObject(o, "alpha_pattern", cJSON_CreateObject());
    if (base) cJSON_AddStringToObject(o, "base_model_name_or_path", base);
    else cJSON_AddNullToObject(o, "base_model_name_or_path");
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    return text;
}

static void add_list(StFile *f, const GPT *m, const ParamInfo *info, int n) {
    for (int i = 0; i < n; i++) {
        const ParamInfo *pi = &info[i];
        if (!is_adapter_name(pi->name)) continue;
        int64_t shape[2] = {pi->full_shape[0], pi->full_shape[1]};
        st_add(f, pi->name, ST_F32, 2, shape, lora_tensor_data(m, pi));
    }
}

typedef struct {
    const GPT *m;
    const char *base;
} WriteCtx;

static int fill(const char *dir, void *ctx, char *err, size_t errlen) {
    const WriteCtx *w = ctx;
    char path[PATH_LEN];
    StFile f;
    st_init(&f);
    st_add_meta(&f, "format", "pt");
    add_list(&f, w->m, w->m->info, w->m->n_info);
    add_list(&f, w->m, w->m->frozen_info, w->m->n_frozen_info);   // LoRA-FA's A
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    int rc = st_write(&f, path, err, errlen);
    st_free(&f);
    if (rc != 0) return -1;
    char *text = config_json(w->m, w->base);
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    const void *parts[2] = {text, "\n"};
    size_t sizes[2] = {strlen(text), 1};
    rc = fileio_write_atomic(path, parts, sizes, 2, err, errlen);
    cJSON_free(text);
    return rc;
}

int peft_write(const GPT *lora, const char *out, const char *base, char *err, size_t errlen) {
    if (lora->cfg.lora_rank <= 0) {
        snprintf(err, errlen, "the model has no LoRA adapters");
        return -1;
    }
    WriteCtx w = {lora, base};
    return hf_write_dir_atomic(out, fill, &w, err, errlen);
}

// ---- reading

#define bad(...) (snprintf(err, errlen, __VA_ARGS__), -1)

// Is module path `path` (arch/lora.h's, e.g. "self_attn.q_proj") matched by target_modules entry e, as
// peft matches a module's full name ("model.layers.3.self_attn.q_proj"): equal, or ending in "." + e?
static int matches(const char *path, const char *e) {
    size_t lp = strlen(path), le = strlen(e);
    if (le > lp) return 0;
    return strcmp(path + lp - le, e) == 0 && (le == lp || path[lp - le - 1] == '.');
}

static int read_targets(const cJSON *t, LoraFamily lf, const char *file, unsigned *mask, char *err, size_t errlen) {
    if (cJSON_IsString(t))
        return bad("'%s': field 'target_modules' is the regular expression \"%.60s\": ctron reads a list of module "
                   "names", file, t->valuestring);
    if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) == 0)
        return bad("'%s': field 'target_modules' is not a list of module names", file);
    unsigned family = lora_family_sites(lf);
    *mask = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, t) {
        if (!cJSON_IsString(e)) return bad("'%s': field 'target_modules' holds a value that is not a string", file);
        unsigned hit = 0;
        for (int s = 0; s < LORA_SITES; s++)
            if ((family >> s & 1u) && matches(lora_site_module(lf, (LoraSite)s), e->valuestring)) hit |= 1u << s;
        if (!hit) {
            char words[256];
            return bad("'%s': field 'target_modules' names '%.60s', which is no linear of a %s block that ctron adapts "
                       "(%s)", file, e->valuestring, lora_family_name(lf), lora_describe_targets(family, words, sizeof words));
        }
        *mask |= hit;
    }
    return 0;
}

// A key that must be absent, null, false or empty (or the given string) for ctron to run the adapter exactly.
static int must_be_off(const cJSON *root, const char *key, const char *why, const char *file, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return 0;
    if ((cJSON_IsObject(v) || cJSON_IsArray(v)) && cJSON_GetArraySize(v) == 0) return 0;
    return bad("'%s': field '%s' is set: %s", file, key, why);
}

static int parse_config(const cJSON *root, LoraFamily lf, const char *file, PeftConfig *pc, char *err, size_t errlen) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "peft_type");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "LORA") != 0)
        return bad("'%s': field 'peft_type' is %s%.40s%s: ctron reads LoRA adapters (\"LORA\")", file,
                   cJSON_IsString(type) ? "\"" : "", cJSON_IsString(type) ? type->valuestring : "missing",
                   cJSON_IsString(type) ? "\"" : "");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(root, "r"), *a = cJSON_GetObjectItemCaseSensitive(root, "lora_alpha");
    if (!cJSON_IsNumber(r) || r->valuedouble < 1 || r->valuedouble > 65536 || r->valuedouble != (int)r->valuedouble)
        return bad("'%s': field 'r' is not a rank from 1 to 65536", file);
    if (a && !(cJSON_IsNumber(a) && a->valuedouble > 0 && isfinite(a->valuedouble)))
        return bad("'%s': field 'lora_alpha' is not a positive number", file);
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(root, "bias");
    if (bias && !(cJSON_IsString(bias) && strcmp(bias->valuestring, "none") == 0))
        return bad("'%s': field 'bias' is not \"none\": ctron's adapters have no bias terms", file);
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "use_rslora");
    if (rs && !cJSON_IsBool(rs) && !cJSON_IsNull(rs)) return bad("'%s': field 'use_rslora' is not true or false", file);
    if (must_be_off(root, "use_dora", "DoRA's magnitude vectors are not built", file, err, errlen) ||
        must_be_off(root, "layers_to_transform", "ctron adapts every layer", file, err, errlen) ||
        must_be_off(root, "modules_to_save", "ctron trains and saves the adapters only", file, err, errlen) ||
        must_be_off(root, "rank_pattern", "ctron has one rank for every adapted linear", file, err, errlen) ||
        must_be_off(root, "alpha_pattern", "ctron has one alpha for every adapted linear", file, err, errlen))
        return -1;
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(root, "lora_dropout");
    if (drop && !(cJSON_IsNumber(drop) && drop->valuedouble >= 0.0 && drop->valuedouble < 1.0))
        return bad("'%s': field 'lora_dropout' is not a probability in [0, 1)", file);
    memset(pc, 0, sizeof *pc);
    pc->dropout = drop ? (float)drop->valuedouble : 0.0f;   // training only: eval and generate ignore it
    pc->rank = (int)r->valuedouble;
    pc->alpha = a ? (float)a->valuedouble : 8.0f;   // peft's LoraConfig default
    pc->rslora = cJSON_IsTrue(rs);
    const cJSON *base = cJSON_GetObjectItemCaseSensitive(root, "base_model_name_or_path");
    if (cJSON_IsString(base)) snprintf(pc->base, sizeof pc->base, "%s", base->valuestring);
    return read_targets(cJSON_GetObjectItemCaseSensitive(root, "target_modules"), lf, file, &pc->targets, err, errlen);
}

int peft_read_config(const char *dir, LoraFamily lf, PeftConfig *pc, char *err, size_t errlen) {
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    uint8_t *text = NULL;
    size_t n = 0;
    if (fileio_read_all(path, &text, &n, err, errlen) != 0) return -1;
    cJSON *root = cJSON_ParseWithLength((const char *)text, n);
    int rc = root && cJSON_IsObject(root) ? parse_config(root, lf, path, pc, err, errlen)
                                          : bad("'%s' is not a JSON object", path);
    cJSON_Delete(root);
    free(text);
    return rc;
}

// One adapter tensor from the file into pi's place: its shape, a float dtype, finite values.
static int load_one(const StFile *f, const char *file, GPT *m, const ParamInfo *pi, char *err, size_t errlen) {
    const StTensor *t = st_find(f, pi->name);
    if (!t) return bad("'%s' has no tensor '%s' (the adapter config targets it)", file, pi->name);
    if (t->dtype != ST_F32 && t->dtype != ST_BF16 && t->dtype != ST_F16)
        return bad("'%s': tensor '%s' is %s: expected F32, BF16 or F16", file, pi->name, st_dtype_name(t->dtype));
    if (t->ndim != 2 || t->shape[0] != pi->full_shape[0] || t->shape[1] != pi->full_shape[1])
        return bad("'%s': tensor '%s' has shape [%lld, %lld], the base model's linear needs [%d, %d]", file, pi->name,
                   (long long)t->shape[0], (long long)(t->ndim > 1 ? t->shape[1] : 0), pi->full_shape[0],
                   pi->full_shape[1]);
    float *dst = lora_tensor_data(m, pi);
    st_to_f32(t, 0, pi->numel, dst);
    for (size_t i = 0; i < pi->numel; i++)
        if (!isfinite(dst[i])) return bad("'%s': tensor '%s' element %zu is not finite", file, pi->name, i);
    return 0;
}

static int count_adapters(const GPT *m) {
    int n = 0;
    for (int i = 0; i < m->n_info; i++) n += is_adapter_name(m->info[i].name);
    for (int i = 0; i < m->n_frozen_info; i++) n += is_adapter_name(m->frozen_info[i].name);
    return n;
}

int peft_load_adapters(GPT *m, const char *dir, char *err, size_t errlen) {
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    StFile f;
    st_init(&f);
    if (st_read(&f, path, err, errlen) != 0) return -1;
    int rc = 0;
    for (int i = 0; rc == 0 && i < m->n_info; i++)
        if (is_adapter_name(m->info[i].name)) rc = load_one(&f, path, m, &m->info[i], err, errlen);
    for (int i = 0; rc == 0 && i < m->n_frozen_info; i++)
        if (is_adapter_name(m->frozen_info[i].name)) rc = load_one(&f, path, m, &m->frozen_info[i], err, errlen);
    if (rc == 0 && f.n != count_adapters(m)) {
        for (int i = 0; i < f.n; i++)
            if (!gpt_find_param(m, f.t[i].name)) {
                rc = bad("'%s' holds tensor '%s', which the adapter config's targets do not make", path, f.t[i].name);
                break;
            }
    }
    st_free(&f);
    if (rc == 0) gpt_params_changed(m);
    return rc;
}

int peft_merge_into(GPT *m, const char *dir, char *err, size_t errlen) {
    PeftConfig pc;
    if (m->cfg.lora_rank > 0) return bad("the model has adapters of its own");
    if (peft_read_config(dir, gpt_lora_family(&m->cfg), &pc, err, errlen) != 0) return -1;
    GPTConfig lc = m->cfg;
    lc.lora_rank = pc.rank;
    lc.lora_alpha = pc.alpha;
    lc.lora_rslora = pc.rslora;
    lc.lora_targets = pc.targets;
    GPT lora;
    gpt_init_params(&lora, &lc);
    int rc = peft_load_adapters(&lora, dir, err, errlen);
    if (rc == 0) {
        float *host = xmalloc(m->n_params * sizeof(float));
        m->be->copy(m->be, host, m->params, m->n_params * sizeof(float), COPY_D2H);
        lora_merge_adapters(&lora, m, host);
        m->be->copy(m->be, m->params, host, m->n_params * sizeof(float), COPY_H2D);
        free(host);
        gpt_params_changed(m);
    }
    gpt_free(&lora);
    return rc;
}
