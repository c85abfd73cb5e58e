#include "io/safetensors.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "util/common.h"

static const char *dtype_name[] = {"F32", "I32", "U8"};

size_t st_dtype_size(StDtype d) { return d == ST_U8 ? 1 : 4; }

void st_init(StFile *f) { memset(f, 0, sizeof *f); }

void st_free(StFile *f) {
    for (int i = 0; i < f->n_meta; i++) { free(f->meta_keys[i]); free(f->meta_vals[i]); }
    free(f->meta_keys);
    free(f->meta_vals);
    free(f->t);
    free(f->blob);
    memset(f, 0, sizeof *f);
}

static StTensor *st_new(StFile *f) {
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 16;
        StTensor *grown = realloc(f->t, (size_t)f->cap * sizeof(StTensor));
        if (!grown) ctron_fatal("out of memory");
        f->t = grown;
    }
    StTensor *t = &f->t[f->n++];
    memset(t, 0, sizeof *t);
    return t;
}

void st_add(StFile *f, const char *name, StDtype dtype, int ndim, const int64_t *shape, const void *data) {
    StTensor *t = st_new(f);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = ndim;
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) { t->shape[i] = shape[i]; numel *= (size_t)shape[i]; }
    t->data = data;
    t->nbytes = numel * st_dtype_size(dtype);
}

static char *xstrdup(const char *s) {
    char *d = xmalloc(strlen(s) + 1);
    strcpy(d, s);
    return d;
}

void st_add_meta(StFile *f, const char *key, const char *value) {
    f->meta_keys = realloc(f->meta_keys, (size_t)(f->n_meta + 1) * sizeof(char *));
    f->meta_vals = realloc(f->meta_vals, (size_t)(f->n_meta + 1) * sizeof(char *));
    if (!f->meta_keys || !f->meta_vals) ctron_fatal("out of memory");
    f->meta_keys[f->n_meta] = xstrdup(key);
    f->meta_vals[f->n_meta] = xstrdup(value);
    f->n_meta++;
}

int st_write(const StFile *f, const char *path, char *err, size_t errlen) {
    cJSON *hdr = cJSON_CreateObject();
    if (f->n_meta) {
        cJSON *meta = cJSON_AddObjectToObject(hdr, "__metadata__");
        for (int i = 0; i < f->n_meta; i++) cJSON_AddStringToObject(meta, f->meta_keys[i], f->meta_vals[i]);
    }
    size_t off = 0;
    for (int i = 0; i < f->n; i++) {
        const StTensor *t = &f->t[i];
        cJSON *o = cJSON_AddObjectToObject(hdr, t->name);
        cJSON_AddStringToObject(o, "dtype", dtype_name[t->dtype]);
        cJSON *shape = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        cJSON *offs = cJSON_AddArrayToObject(o, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + t->nbytes)));
        off += t->nbytes;
    }
    char *json = cJSON_PrintUnformatted(hdr);
    cJSON_Delete(hdr);
    size_t jlen = strlen(json), padded = align_up(jlen, 8);   // data starts 8-byte aligned
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create '%s': %s", tmp, strerror(errno));
        cJSON_free(json);
        return -1;
    }
    FILE *out = fdopen(fd, "wb");
    uint64_t hlen = padded;
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(hlen >> (8 * i));
    int ok = fwrite(le, 1, 8, out) == 8 && fwrite(json, 1, jlen, out) == jlen;
    for (size_t i = jlen; ok && i < padded; i++) ok = fputc(' ', out) != EOF;
    for (int i = 0; ok && i < f->n; i++) ok = fwrite(f->t[i].data, 1, f->t[i].nbytes, out) == f->t[i].nbytes;
    cJSON_free(json);
    ok = ok && fflush(out) == 0 && fsync(fd) == 0;
    if (fclose(out) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int st_read(StFile *f, const char *path, char *err, size_t errlen) {
    st_init(f);
    FILE *in = fopen(path, "rb");
    if (!in) { snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno)); return -1; }
    fseek(in, 0, SEEK_END);
    long size = ftell(in);
    rewind(in);
    if (size < 8) { fclose(in); snprintf(err, errlen, "'%s' is too short for a safetensors file", path); return -1; }
    f->blob = xmalloc((size_t)size);
    size_t got = fread(f->blob, 1, (size_t)size, in);
    fclose(in);
    if (got != (size_t)size) { snprintf(err, errlen, "short read of '%s'", path); st_free(f); return -1; }
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)f->blob[i] << (8 * i);
    if (hlen > (uint64_t)size - 8) {
        snprintf(err, errlen, "'%s': header size %llu exceeds the file", path, (unsigned long long)hlen);
        st_free(f);
        return -1;
    }
    cJSON *hdr = cJSON_ParseWithLength((const char *)f->blob + 8, (size_t)hlen);
    if (!cJSON_IsObject(hdr)) {
        snprintf(err, errlen, "'%s': header is not a JSON object", path);
        cJSON_Delete(hdr);
        st_free(f);
        return -1;
    }
    const uint8_t *data = f->blob + 8 + hlen;
    size_t data_len = (size_t)size - 8 - hlen;
    int rc = 0;
    for (cJSON *it = hdr->child; it && rc == 0; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) {
            for (cJSON *kv = it->child; kv; kv = kv->next)
                if (cJSON_IsString(kv)) st_add_meta(f, kv->string, kv->valuestring);
            continue;
        }
        cJSON *dt = cJSON_GetObjectItem(it, "dtype"), *sh = cJSON_GetObjectItem(it, "shape"),
              *of = cJSON_GetObjectItem(it, "data_offsets");
        int di = -1;
        for (int k = 0; k < 3 && cJSON_IsString(dt); k++)
            if (strcmp(dt->valuestring, dtype_name[k]) == 0) di = k;
        if (di < 0 || !cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > 4 || !cJSON_IsArray(of) ||
            cJSON_GetArraySize(of) != 2 || strlen(it->string) >= sizeof f->t[0].name) {
            snprintf(err, errlen, "'%s': tensor '%s' has a malformed or unsupported entry", path, it->string);
            rc = -1;
            break;
        }
        StTensor *t = st_new(f);
        snprintf(t->name, sizeof t->name, "%s", it->string);
        t->dtype = (StDtype)di;
        t->ndim = cJSON_GetArraySize(sh);
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            double v = cJSON_GetArrayItem(sh, d)->valuedouble;
            if (v < 0 || v > 1e15) { rc = -1; break; }
            t->shape[d] = (int64_t)v;
            numel *= (size_t)v;
        }
        double b0 = cJSON_GetArrayItem(of, 0)->valuedouble, b1 = cJSON_GetArrayItem(of, 1)->valuedouble;
        if (rc || b0 < 0 || b1 < b0 || b1 > (double)data_len || (size_t)(b1 - b0) != numel * st_dtype_size(t->dtype)) {
            snprintf(err, errlen, "'%s': tensor '%s' has offsets that do not match its shape or the file", path,
                     it->string);
            rc = -1;
            break;
        }
        t->data = data + (size_t)b0;
        t->nbytes = (size_t)(b1 - b0);
    }
    cJSON_Delete(hdr);
    if (rc) st_free(f);
    return rc;
}

const StTensor *st_find(const StFile *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

const char *st_meta(const StFile *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_vals[i];
    return NULL;
}
