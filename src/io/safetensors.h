// safetensors files (Hugging Face format): u64 little-endian header size, a JSON header
// {name: {dtype, shape, data_offsets}}, then the raw little-endian tensor data.
// The reader enforces the format's rules as Hugging Face's own loader does: the tensors, sorted
// by offset, tile the data section exactly (no overlap, no gap, nothing after the last one),
// every name is unique, every shape matches its byte range; any violation is an error that
// names the file and the tensor.
#ifndef CTRON_SAFETENSORS_H
#define CTRON_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

typedef enum { ST_F32, ST_I32, ST_U8 } StDtype;

typedef struct {
    char name[96];
    StDtype dtype;
    int ndim;
    int64_t shape[4];
    const void *data;     // writer: caller's buffer; reader: points into the loaded file
    size_t nbytes;
    int transposed;       // writer: data is the [shape[1], shape[0]] matrix; its transpose is written
} StTensor;

typedef struct {
    StTensor *t;
    int n, cap;
    char **meta_keys, **meta_vals;
    int n_meta;
    uint8_t *blob;        // reader: the whole file
} StFile;

void st_init(StFile *f);
void st_free(StFile *f);
// Writer side: records a tensor (data is not copied; it must live until st_write).
void st_add(StFile *f, const char *name, StDtype dtype, int ndim, const int64_t *shape, const void *data);
// A 2-D F32 tensor written as the transpose of data ([cols, rows] row-major): file shape [rows, cols].
void st_add_transposed(StFile *f, const char *name, int64_t rows, int64_t cols, const float *data);
void st_add_meta(StFile *f, const char *key, const char *value);
// Writes to path via path.tmp + fsync + rename. Returns 0, or -1 with err filled.
int st_write(const StFile *f, const char *path, char *err, size_t errlen);
// Called after tensor i (of n) has been written and flushed to the file: progress reports and
// the checkpoint crash test hook (io/checkpoint.h) use it.
typedef void (*StWriteHook)(void *ctx, int i, int n);
int st_write_hooked(const StFile *f, const char *path, StWriteHook hook, void *ctx, char *err, size_t errlen);
// Reads and validates a file. Returns 0, or -1 with err filled.
int st_read(StFile *f, const char *path, char *err, size_t errlen);
const StTensor *st_find(const StFile *f, const char *name);
const char *st_meta(const StFile *f, const char *key);
size_t st_dtype_size(StDtype d);
#endif
