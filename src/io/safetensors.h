// safetensors files (Hugging Face format): u64 little-endian header size, a JSON header
// {name: {dtype, shape, data_offsets}}, then the raw little-endian tensor data.
// The reader enforces the format's rules as Hugging Face's own loader does: the tensors, sorted
// by offset, tile the data section exactly (no overlap, no gap, nothing after the last one),
// every name is unique, every shape matches its byte range; any violation is an error that
// names the file and the tensor.
// A file is read through a read-only mapping (mmap), not into memory: a tensor's pages are read when
// it is used, and st_drop_pages lets a loader give them back once converted (importing a model never
// holds a second copy of it in RAM).
#ifndef CTRON_SAFETENSORS_H
#define CTRON_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

// F32, I32, U8 as ctron writes them; BF16 and F16 (Hugging Face weights; io/st_convert.h widens them
// to fp32) and I64 (token ids as torch writes them) are read too. BF16 is also written (ctron export).
typedef enum { ST_F32, ST_I32, ST_U8, ST_BF16, ST_F16, ST_I64, ST_NDTYPES } StDtype;

typedef struct {
    char name[96];
    StDtype dtype;
    int ndim;
    int64_t shape[4];
    const void *data;     // writer: caller's buffer; reader: points into the mapped file (any alignment)
    size_t nbytes;
    int transposed;       // writer: data is the [shape[1], shape[0]] matrix; its transpose is written
    int from_f32;         // writer: data is fp32 whatever dtype says; written rounded to dtype (BF16)
} StTensor;

typedef struct {
    StTensor *t;
    int n, cap;
    char **meta_keys, **meta_vals;
    int n_meta;
    uint8_t *blob;        // reader: the whole file, mapped read-only
    size_t blob_bytes;
} StFile;

void st_init(StFile *f);
void st_free(StFile *f);
// Writer side: records a tensor (data is not copied; it must live until st_write).
void st_add(StFile *f, const char *name, StDtype dtype, int ndim, const int64_t *shape, const void *data);
// The same for fp32 data written as dtype (F32 or BF16, rounded to nearest even), transposed or not
// (transposed: data is [cols, rows], the file holds [rows, cols]; ndim must then be 2).
void st_add_converted(StFile *f, const char *name, StDtype dtype, int ndim, const int64_t *shape, const float *data,
                      int transposed);
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
const char *st_dtype_name(StDtype d);   // "F32", "BF16", ...
// Gives the pages of a tensor of a file read by st_read back to the kernel (they are read again from
// the file if the tensor is used later): resident memory stays one tensor, not the file.
void st_drop_pages(const StFile *f, const StTensor *t);
#endif
