#define _DEFAULT_SOURCE   // madvise
#include "io/safetensors.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "backend/cpu/bf16_convert.h"
#include "util/common.h"
#include "util/fileio.h"

static const struct { const char *name; size_t size; } DTYPES[ST_NDTYPES] = {
    [ST_F32] = {"F32", 4}, [ST_I32] = {"I32", 4}, [ST_U8] = {"U8", 1},
    [ST_BF16] = {"BF16", 2}, [ST_F16] = {"F16", 2}, [ST_I64] = {"I64", 8},
};

size_t st_dtype_size(StDtype d) { return DTYPES[d].size; }
const char *st_dtype_name(StDtype d) { return d >= 0 && d < ST_NDTYPES ? DTYPES[d].name : "?"; }

void st_init(StFile *f) { memset(f, 0, sizeof *f); }

void st_free(StFile *f) {
    for (int i = 0; i < f->n_meta; i++) { free(f->meta_keys[i]); free(f->meta_vals[i]); }
    free(f->meta_keys);
    free(f->meta_vals);
    free(f->t);
    if (f->blob) munmap(f->blob, f->blob_bytes);
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

void st_add_transposed(StFile *f, const char *name, int64_t rows, int64_t cols, const float *data) {
    int64_t shape[2] = {rows, cols};
    st_add_converted(f, name, ST_F32, 2, shape, data, 1);
}

void st_add_converted(StFile *f, const char *name, StDtype dtype, int ndim, const int64_t *shape, const float *data,
                      int transposed) {
    if (dtype != ST_F32 && dtype != ST_BF16) ctron_fatal("st_add_converted: fp32 is written as F32 or BF16 only");
    if (transposed && ndim != 2) ctron_fatal("st_add_converted: only a matrix is transposed");
    st_add(f, name, dtype, ndim, shape, data);
    f->t[f->n - 1].transposed = transposed;
    f->t[f->n - 1].from_f32 = 1;
}

// Writes fp32 src as t's file tensor: transposed (src is [cols, rows]) or not, in F32 or BF16, a
// block of output rows at a time so that both sides are read and written in long runs.
static int write_converted(FILE *out, const StTensor *t) {
    enum { BLOCK = 32 };
    const float *src = t->data;
    // Transposed: blocks of BLOCK file rows; otherwise the tensor is one long row, written in pieces.
    size_t numel = t->nbytes / st_dtype_size(t->dtype);
    size_t rows = t->transposed ? (size_t)t->shape[0] : 1, cols = t->transposed ? (size_t)t->shape[1] : numel;
    size_t chunk = t->transposed ? BLOCK : 1;
    size_t piece = t->transposed || cols < 65536 ? cols : 65536;
    float *buf = xmalloc((chunk * piece + 1) * sizeof(float));
    uint16_t *b16 = xmalloc((chunk * piece + 1) * sizeof(uint16_t));
    int ok = 1;
    for (size_t r0 = 0; ok && r0 < rows; r0 += chunk) {
        size_t nr = rows - r0 < chunk ? rows - r0 : chunk;
        for (size_t c0 = 0; ok && c0 < cols; c0 += piece) {
            size_t nc = cols - c0 < piece ? cols - c0 : piece, n = nr * nc;
            const float *from = src + c0;
            if (t->transposed) {
                for (size_t c = 0; c < nc; c++)
                    for (size_t r = 0; r < nr; r++) buf[r * nc + c] = src[(c0 + c) * rows + r0 + r];
                from = buf;
            }
            if (t->dtype == ST_BF16) {
                cvt_f32_to_bf16(b16, from, n);
                ok = fwrite(b16, sizeof(uint16_t), n, out) == n;
            } else {
                ok = fwrite(from, sizeof(float), n, out) == n;
            }
        }
    }
    free(buf);
    free(b16);
    return ok;
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
    return st_write_hooked(f, path, NULL, NULL, err, errlen);
}

int st_write_hooked(const StFile *f, const char *path, StWriteHook hook, void *ctx, char *err, size_t errlen) {
    cJSON *hdr = cJSON_CreateObject();
    if (f->n_meta) {
        cJSON *meta = cJSON_AddObjectToObject(hdr, "__metadata__");
        for (int i = 0; i < f->n_meta; i++) cJSON_AddStringToObject(meta, f->meta_keys[i], f->meta_vals[i]);
    }
    size_t off = 0;
    for (int i = 0; i < f->n; i++) {
        const StTensor *t = &f->t[i];
        cJSON *o = cJSON_AddObjectToObject(hdr, t->name);
        cJSON_AddStringToObject(o, "dtype", st_dtype_name(t->dtype));
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
    // Tensors go to regular files only: renaming over a FIFO or device node would replace it.
    if (fileio_out_kind(path, err, errlen) != FILEIO_OUT_REPLACE) {
        if (fileio_out_kind(path, err, errlen) == FILEIO_OUT_IN_PLACE)
            snprintf(err, errlen, "'%s' exists and is not a regular file: safetensors are written only as files", path);
        cJSON_free(json);
        return -1;
    }
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
    for (int i = 0; ok && i < f->n; i++) {
        const StTensor *t = &f->t[i];
        ok = t->from_f32 ? write_converted(out, t) : fwrite(t->data, 1, t->nbytes, out) == t->nbytes;
        if (ok && hook) { ok = fflush(out) == 0; hook(ctx, i, f->n); }   // the bytes are in the file now
    }
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

// A JSON number that is a whole value in 0..2^53 (exactly representable; safetensors uses u64).
static int json_u53(const cJSON *x, uint64_t *out) {
    if (!cJSON_IsNumber(x)) return -1;
    double v = x->valuedouble;
    if (!(v >= 0.0) || v > 9007199254740992.0 || v != (double)(uint64_t)v) return -1;
    *out = (uint64_t)v;
    return 0;
}

typedef struct { uint64_t begin, end; int index; } Span;

static int span_cmp(const void *a, const void *b) {
    const Span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

// Parses one header entry into a new tensor of f; on error fills err and returns -1.
static int read_entry(StFile *f, const cJSON *it, const uint8_t *data, uint64_t data_len, Span *span,
                      const char *path, char *err, size_t errlen) {
    const char *name = it->string;
    if (strlen(name) >= sizeof f->t[0].name) {
        snprintf(err, errlen, "'%s': tensor name '%.40s...' is longer than %zu bytes", path, name,
                 sizeof f->t[0].name - 1);
        return -1;
    }
    if (st_find(f, name)) {
        snprintf(err, errlen, "'%s': tensor '%s' appears twice in the header", path, name);
        return -1;
    }
    if (!cJSON_IsObject(it)) {
        snprintf(err, errlen, "'%s': entry '%s' is not an object {dtype, shape, data_offsets}", path, name);
        return -1;
    }
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype"), *sh = cJSON_GetObjectItemCaseSensitive(it, "shape"),
                *of = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(of)) {
        snprintf(err, errlen, "'%s': tensor '%s' lacks a dtype string, a shape array or a data_offsets array", path,
                 name);
        return -1;
    }
    int di = -1;
    for (int k = 0; k < ST_NDTYPES; k++)
        if (strcmp(dt->valuestring, DTYPES[k].name) == 0) di = k;
    if (di < 0) {
        snprintf(err, errlen, "'%s': tensor '%s' has dtype '%.16s'; ctron reads F32, BF16, F16, I32, I64 and U8", path,
                 name, dt->valuestring);
        return -1;
    }
    int ndim = cJSON_GetArraySize(sh);
    if (ndim > 4) {
        snprintf(err, errlen, "'%s': tensor '%s' has %d dimensions; ctron reads at most 4", path, name, ndim);
        return -1;
    }
    uint64_t dims[4], numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (json_u53(cJSON_GetArrayItem(sh, d), &dims[d]) != 0) {
            snprintf(err, errlen, "'%s': tensor '%s': shape entry %d is not a non-negative integer", path, name, d);
            return -1;
        }
        if (dims[d] && numel > (UINT64_C(1) << 53) / dims[d]) {
            snprintf(err, errlen, "'%s': tensor '%s': shape is too large", path, name);
            return -1;
        }
        numel *= dims[d];
    }
    uint64_t b0, b1;
    if (cJSON_GetArraySize(of) != 2 || json_u53(cJSON_GetArrayItem(of, 0), &b0) != 0 ||
        json_u53(cJSON_GetArrayItem(of, 1), &b1) != 0) {
        snprintf(err, errlen, "'%s': tensor '%s': data_offsets must be two non-negative integers [begin, end]", path,
                 name);
        return -1;
    }
    if (b1 < b0) {
        snprintf(err, errlen, "'%s': tensor '%s': data_offsets [%llu, %llu] are out of order (end before begin)",
                 path, name, (unsigned long long)b0, (unsigned long long)b1);
        return -1;
    }
    if (b1 > data_len) {
        snprintf(err, errlen, "'%s': tensor '%s': data_offsets [%llu, %llu] run past the data section (%llu bytes)",
                 path, name, (unsigned long long)b0, (unsigned long long)b1, (unsigned long long)data_len);
        return -1;
    }
    uint64_t want = numel * st_dtype_size((StDtype)di);
    if (b1 - b0 != want) {
        snprintf(err, errlen, "'%s': tensor '%s': data_offsets [%llu, %llu] hold %llu bytes but its shape and dtype "
                 "need %llu", path, name, (unsigned long long)b0, (unsigned long long)b1,
                 (unsigned long long)(b1 - b0), (unsigned long long)want);
        return -1;
    }
    StTensor *t = st_new(f);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = (StDtype)di;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = (int64_t)dims[d];
    t->data = data + b0;
    t->nbytes = (size_t)(b1 - b0);
    span->begin = b0;
    span->end = b1;
    span->index = f->n - 1;
    return 0;
}

// The tensors, in offset order, must cover [0, data_len) exactly once.
static int check_tiling(const StFile *f, Span *spans, int n, uint64_t data_len, const char *path, char *err,
                        size_t errlen) {
    qsort(spans, (size_t)n, sizeof *spans, span_cmp);
    uint64_t at = 0;
    const char *prev = NULL;
    for (int i = 0; i < n; i++) {
        const char *name = f->t[spans[i].index].name;
        if (spans[i].begin < at) {
            snprintf(err, errlen, "'%s': tensors '%s' and '%s' overlap (byte %llu is claimed by both)", path, prev,
                     name, (unsigned long long)spans[i].begin);
            return -1;
        }
        if (spans[i].begin > at) {
            snprintf(err, errlen, "'%s': bytes %llu..%llu of the data section (before tensor '%s') belong to no tensor",
                     path, (unsigned long long)at, (unsigned long long)spans[i].begin, name);
            return -1;
        }
        at = spans[i].end;
        prev = name;
    }
    if (at != data_len) {
        snprintf(err, errlen, "'%s': the data section has %llu bytes but the tensors cover only %llu", path,
                 (unsigned long long)data_len, (unsigned long long)at);
        return -1;
    }
    return 0;
}

static int read_fail(StFile *f, cJSON *hdr, Span *spans) {
    cJSON_Delete(hdr);
    free(spans);
    st_free(f);
    return -1;
}

int st_read(StFile *f, const char *path, char *err, size_t errlen) {
    st_init(f);
    int fd = fileio_open_regular(path, err, errlen);   // a FIFO is refused, not waited on
    if (fd < 0) return -1;
    struct stat sb;
    fstat(fd, &sb);
    uint64_t size = (uint64_t)sb.st_size;
    if (size < 8) {
        close(fd);
        snprintf(err, errlen, "'%s' is too short for a safetensors file (%llu bytes)", path, (unsigned long long)size);
        return -1;
    }
    if (size > SIZE_MAX / 2) {
        close(fd);
        snprintf(err, errlen, "'%s' is too large to map (%llu bytes)", path, (unsigned long long)size);
        return -1;
    }
    // Mapped, not read: the tensors' pages come from the file when they are used (st_drop_pages).
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "cannot map '%s' (%llu bytes): %s", path, (unsigned long long)size, strerror(errno));
        return -1;
    }
    f->blob = map;
    f->blob_bytes = (size_t)size;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)f->blob[i] << (8 * i);
    if (hlen == 0) {
        snprintf(err, errlen, "'%s': header size is 0 (a header is at least '{}')", path);
        st_free(f);
        return -1;
    }
    if (hlen > size - 8) {
        snprintf(err, errlen, "'%s': header size %llu exceeds the file (%llu bytes after the size field)", path,
                 (unsigned long long)hlen, (unsigned long long)(size - 8));
        st_free(f);
        return -1;
    }
    const char *text = (const char *)f->blob + 8, *end = NULL;
    cJSON *hdr = cJSON_ParseWithLengthOpts(text, (size_t)hlen, &end, 0);
    int trailing = 0;
    for (const char *c = end; hdr && c < text + hlen; c++) trailing |= *c != ' ' && *c != '\n' && *c != '\t';
    if (!cJSON_IsObject(hdr) || trailing) {
        snprintf(err, errlen, "'%s': header (%llu bytes) is not one JSON object", path, (unsigned long long)hlen);
        return read_fail(f, hdr, NULL);
    }
    const uint8_t *data = f->blob + 8 + hlen;
    uint64_t data_len = size - 8 - hlen;
    Span *spans = xmalloc(sizeof(Span) * (size_t)(cJSON_GetArraySize(hdr) + 1));
    int n_spans = 0;
    for (cJSON *it = hdr->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) {
            for (cJSON *kv = it->child; kv; kv = kv->next)
                if (cJSON_IsString(kv)) st_add_meta(f, kv->string, kv->valuestring);
            continue;
        }
        if (read_entry(f, it, data, data_len, &spans[n_spans], path, err, errlen) != 0) return read_fail(f, hdr, spans);
        n_spans++;
    }
    if (check_tiling(f, spans, n_spans, data_len, path, err, errlen) != 0) return read_fail(f, hdr, spans);
    cJSON_Delete(hdr);
    free(spans);
    return 0;
}

const StTensor *st_find(const StFile *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

void st_drop_pages(const StFile *f, const StTensor *t) {
    if (!f->blob || !t->nbytes) return;
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t base = (uintptr_t)f->blob, lo = (uintptr_t)t->data, hi = lo + t->nbytes;
    // Whole pages inside the tensor only: a page shared with a neighbour may still be wanted.
    uintptr_t a = base + align_up(lo - base, (size_t)page), b = base + (hi - base) / (size_t)page * (size_t)page;
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

const char *st_meta(const StFile *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_vals[i];
    return NULL;
}
