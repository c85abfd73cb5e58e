// bf16 GEMM, fp32 accumulation: oneDNN matmul, one cached primitive per shape.
//
// Why oneDNN and not OpenBLAS's cblas_sbgemm (bench/results/2026-11-24-gemm-bf16.md, config S and L
// shapes, 2 threads): the same speed overall (419 vs 416 GFLOP/s, 2x sgemm; oneDNN 2-7 % ahead on the
// forward NT and dx NN GEMMs, sbgemm 0-7 % ahead on the accumulating dW TN ones), and Debian's
// OpenBLAS 0.3.21 is built without BUILD_BFLOAT16: it declares cblas_sbgemm but does not export it.
// oneDNN also gives the bf16 output and beta 1 (the sum post-op), and runs, emulated, on AVX-512
// CPUs without BF16.
//
// Why a cache: a primitive descriptor is rebuilt on every call otherwise (~0.02-0.06 ms on a 2.7 ms
// GEMM with oneDNN's own primitive cache warm, ~0.3 ms without it: the JIT). The key holds everything
// the primitive depends on, the OpenMP thread count included: a primitive's partitioning, and so its
// bits, are fixed at creation for a given number of threads.
#include "backend/cpu/gemm_bf16.h"
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/cpu/bf16_convert.h"
#include "util/common.h"

// thread: the OpenMP thread calling from inside a parallel region (attention's per-head GEMMs run
// one head per thread, concurrently), -1 outside one. Each such thread has entries of its own —
// memory objects and a stream — so calls run in parallel and only the lookup takes the lock.
typedef struct {
    int ta, tb, m, n, k, lda, ldb, ldc, beta1, out_bf16, threads, thread;
} Key;

typedef struct Entry {
    Key key;
    dnnl_primitive_t prim;   // NULL: oneDNN has no bf16 matmul here; the call runs widened (run_widened)
    dnnl_memory_t a, b, c;   // made once with no data; each call sets the handles
    dnnl_stream_t stream;    // the entry's own: an entry is used by one thread at a time
    struct Entry *next;
} Entry;

enum { BUCKETS = 256 };
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Entry *table[BUCKETS];
static dnnl_engine_t engine;
static long n_created, n_calls;

static void dnnl_check(dnnl_status_t st, const char *what) {
    if (st != dnnl_success) ctron_fatal("gemm_bf16: oneDNN %s failed (status %d)", what, (int)st);
}

static void release_locked(void) {
    for (int i = 0; i < BUCKETS; i++) {
        for (Entry *e = table[i], *next; e; e = next) {
            next = e->next;
            if (!e->prim) {
                free(e);
                continue;
            }
            dnnl_primitive_destroy(e->prim);
            dnnl_memory_destroy(e->a);
            dnnl_memory_destroy(e->b);
            dnnl_memory_destroy(e->c);
            dnnl_stream_destroy(e->stream);
            free(e);
        }
        table[i] = NULL;
    }
    if (engine) dnnl_engine_destroy(engine);
    engine = NULL;
}

void gemm_bf16_release(void) {
    pthread_mutex_lock(&lock);
    release_locked();
    pthread_mutex_unlock(&lock);
}

// At exit. A fatal error inside gemm_bf16 exits with the lock held: then nothing is freed (no deadlock).
static void release_at_exit(void) {
    if (pthread_mutex_trylock(&lock) != 0) return;
    release_locked();
    pthread_mutex_unlock(&lock);
}

static void init_engine(void) {
    static int registered;
    dnnl_check(dnnl_engine_create(&engine, dnnl_cpu, 0), "engine_create");
    if (!registered) atexit(release_at_exit);   // sanitizer builds see no leak
    registered = 1;
}

static unsigned hash_key(const Key *k) {
    const int *w = (const int *)k;
    unsigned h = 2166136261u;
    for (size_t i = 0; i < sizeof *k / sizeof(int); i++) h = (h ^ (unsigned)w[i]) * 16777619u;
    return h % BUCKETS;
}

// A [rows, cols] matrix stored row-major with row stride ld, or transposed (stored [cols, rows]).
static void md_2d(dnnl_memory_desc_t *md, int rows, int cols, int trans, int ld, dnnl_data_type_t dt) {
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
    dnnl_check(dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides), "memory_desc_init_by_strides");
}

static Entry *create(const Key *k) {
    dnnl_memory_desc_t amd, bmd, cmd;
    md_2d(&amd, k->m, k->k, k->ta, k->lda, dnnl_bf16);
    md_2d(&bmd, k->k, k->n, k->tb, k->ldb, dnnl_bf16);
    md_2d(&cmd, k->m, k->n, 0, k->ldc, k->out_bf16 ? dnnl_bf16 : dnnl_f32);
    dnnl_matmul_desc_t desc;
    dnnl_check(dnnl_matmul_desc_init(&desc, &amd, &bmd, NULL, &cmd), "matmul_desc_init");
    dnnl_primitive_attr_t attr;
    dnnl_check(dnnl_primitive_attr_create(&attr), "primitive_attr_create");
    if (k->beta1) {   // C += A·B: oneDNN's sum post-op adds the old C before the store, in fp32
        dnnl_post_ops_t po;
        dnnl_check(dnnl_post_ops_create(&po), "post_ops_create");
        dnnl_check(dnnl_post_ops_append_sum(po, 1.0f), "post_ops_append_sum");
        dnnl_check(dnnl_primitive_attr_set_post_ops(attr, po), "primitive_attr_set_post_ops");
        dnnl_post_ops_destroy(po);
    }
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL);
    dnnl_primitive_attr_destroy(attr);
    Entry *e = xcalloc(sizeof *e);
    e->key = *k;
    n_created++;
    if (st != dnnl_success) return e;   // below AVX-512: widened to fp32 sgemm (gemm_bf16_support says why)
    dnnl_check(dnnl_primitive_create(&e->prim, pd), "primitive_create");
    dnnl_primitive_desc_destroy(pd);
    dnnl_check(dnnl_memory_create(&e->a, &amd, engine, DNNL_MEMORY_NONE), "memory_create");
    dnnl_check(dnnl_memory_create(&e->b, &bmd, engine, DNNL_MEMORY_NONE), "memory_create");
    dnnl_check(dnnl_memory_create(&e->c, &cmd, engine, DNNL_MEMORY_NONE), "memory_create");
    dnnl_check(dnnl_stream_create(&e->stream, engine, dnnl_stream_default_flags), "stream_create");
    return e;
}

// A stored [rows, cols] bf16 matrix with row stride ld, widened to a dense fp32 one (exact).
static float *widen(const uint16_t *x, int rows, int cols, int ld) {
    float *w = xmalloc((size_t)rows * cols * sizeof *w);
    cvt_bf16_to_f32_2d(w, (size_t)cols, x, (size_t)ld, (size_t)rows, (size_t)cols);
    return w;
}

// oneDNN's bf16 matmul needs AVX-512. Below it the same arithmetic, done otherwise: bf16 operands widen
// exactly to fp32, each product of two 8-bit significands is exact in fp32, and sgemm accumulates in fp32
// as oneDNN does; only the summation order differs (deterministic for a thread count, like oneDNN's).
static void run_widened(const Key *k, const uint16_t *a, const uint16_t *b, void *c) {
    float *wa = widen(a, k->ta ? k->k : k->m, k->ta ? k->m : k->k, k->lda);
    float *wb = widen(b, k->tb ? k->n : k->k, k->tb ? k->k : k->n, k->ldb);
    int lda = k->ta ? k->m : k->k, ldb = k->tb ? k->k : k->n;
    CBLAS_TRANSPOSE ta = k->ta ? CblasTrans : CblasNoTrans, tb = k->tb ? CblasTrans : CblasNoTrans;
    if (!k->out_bf16) {
        cblas_sgemm(CblasRowMajor, ta, tb, k->m, k->n, k->k, 1.0f, wa, lda, wb, ldb, k->beta1 ? 1.0f : 0.0f,
                    (float *)c, k->ldc);
    } else {   // one rounding to bf16 from the fp32 accumulator
        float *acc = xmalloc((size_t)k->m * k->n * sizeof *acc);
        cblas_sgemm(CblasRowMajor, ta, tb, k->m, k->n, k->k, 1.0f, wa, lda, wb, ldb, 0.0f, acc, k->n);
        cvt_f32_to_bf16_2d((uint16_t *)c, (size_t)k->ldc, acc, (size_t)k->n, (size_t)k->m, (size_t)k->n);
        free(acc);
    }
    free(wa);
    free(wb);
}

static void run(int ta, int tb, int m, int n, int k, const uint16_t *a, int lda, const uint16_t *b, int ldb,
                float beta, void *c, int ldc, int out_bf16) {
    if (m <= 0 || n <= 0) return;
    if (beta != 0.0f && beta != 1.0f) ctron_fatal("gemm_bf16: beta must be 0 or 1, got %g", (double)beta);
    if (k <= 0) {   // oneDNN rejects k = 0; the product is empty
        if (beta == 0.0f)
            for (int i = 0; i < m; i++)
                memset((char *)c + (size_t)i * ldc * (out_bf16 ? 2 : 4), 0, (size_t)n * (out_bf16 ? 2 : 4));
        return;
    }
    Key key = {ta != 0, tb != 0, m, n, k, lda, ldb, ldc, beta == 1.0f, out_bf16, omp_get_max_threads(),
               omp_in_parallel() ? omp_get_thread_num() : -1};
    pthread_mutex_lock(&lock);
    if (!engine) init_engine();
    unsigned h = hash_key(&key);
    Entry *e = table[h];
    while (e && memcmp(&e->key, &key, sizeof key) != 0) e = e->next;
    if (!e) {
        e = create(&key);
        e->next = table[h];
        table[h] = e;
    }
    n_calls++;
    // Outside a parallel region calls come from one thread at a time; inside one, the entry is this
    // thread's own. Either way nobody else uses e while it runs.
    pthread_mutex_unlock(&lock);
    if (!e->prim) {
        run_widened(&key, a, b, c);
        return;
    }
    dnnl_check(dnnl_memory_set_data_handle(e->a, (void *)a), "memory_set_data_handle");
    dnnl_check(dnnl_memory_set_data_handle(e->b, (void *)b), "memory_set_data_handle");
    dnnl_check(dnnl_memory_set_data_handle(e->c, c), "memory_set_data_handle");
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, e->a}, {DNNL_ARG_WEIGHTS, e->b}, {DNNL_ARG_DST, e->c}};
    dnnl_check(dnnl_primitive_execute(e->prim, e->stream, 3, args), "primitive_execute");
    dnnl_check(dnnl_stream_wait(e->stream), "stream_wait");
}

int gemm_bf16_support(char *why, size_t len) {
    int native = gemm_bf16_native(why, len);
    dnnl_engine_t eng;
    dnnl_memory_desc_t md, cmd;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) return GEMM_BF16_WIDENED;
    md_2d(&md, 16, 16, 0, 16, dnnl_bf16);
    md_2d(&cmd, 16, 16, 0, 16, dnnl_f32);
    dnnl_check(dnnl_matmul_desc_init(&desc, &md, &md, NULL, &cmd), "matmul_desc_init");
    int found = dnnl_primitive_desc_create(&pd, &desc, NULL, eng, NULL) == dnnl_success;
    if (found) dnnl_primitive_desc_destroy(pd);
    dnnl_engine_destroy(eng);
    return native ? GEMM_BF16_NATIVE : found ? GEMM_BF16_EMULATED : GEMM_BF16_WIDENED;
}

void gemm_bf16(int trans_a, int trans_b, int m, int n, int k, const uint16_t *a, int lda, const uint16_t *b,
               int ldb, float beta, float *c, int ldc) {
    run(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, 0);
}

void gemm_bf16_out_bf16(int trans_a, int trans_b, int m, int n, int k, const uint16_t *a, int lda,
                        const uint16_t *b, int ldb, uint16_t *c, int ldc) {
    run(trans_a, trans_b, m, n, k, a, lda, b, ldb, 0.0f, c, ldc, 1);
}

void gemm_bf16_stats(long *primitives, long *calls) {
    pthread_mutex_lock(&lock);
    if (primitives) *primitives = n_created;
    if (calls) *calls = n_calls;
    pthread_mutex_unlock(&lock);
}
