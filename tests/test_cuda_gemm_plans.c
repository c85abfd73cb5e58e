// How the CUDA GEMMs choose their cuBLASLt algorithms (src/backend/cuda/gemm.cu, attention.cu):
//
// 1. Placement. The same linear_forward and linear_backward, fp32 and bf16, run with every buffer at
//    three placements: 256-byte aligned, one element in (4 bytes for fp32, 2 for bf16 weights) and 16
//    bytes in. y, dx, dW and db must be the same bits at all three: the algorithm is chosen from the shape
//    alone, and an under-aligned operand is staged, never given another algorithm. (Under the host
//    emulation the cuBLASLt stand-in sums in another order for an algorithm chosen at under 16-byte
//    alignment, as another GPU kernel may: a plan keyed on pointer alignment fails here.)
// 2. No algorithm. With CT_EMU_LT_NO_ALGO set (read by the emulation's cuBLASLt stand-in; a real GPU
//    ignores it and runs its usual path, which the same checks hold for):
//    "all"     no algorithm for anything: gemm.cu and attention.cu run gemm_simple instead of aborting;
//    "aligned" none at 16-byte alignment: gemm.cu's relaxed request (the elements' own alignment);
//    "bias"    none with the BIAS epilogue: the bias kernel adds the bias;
//    "splitk", "workspace": only answers a caller must refuse (a split-K reduction despite the mask, a
//              workspace above the limit): gemm.cu and attention.cu take them as none (gemm_simple).
//    Each at a shape not planned before (plans are cached per shape), against a double-precision host
//    reference (relative L2 1e-5: fp32 sums in another order; bf16 operands are rounded on both sides),
//    attention against the CPU backend; the fallback paths too must give the same bits at two placements.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "backend/backend.h"
#include "backend/cpu/bf16.h"
#include "check.h"
#include "cuda_check.h"

#define TOL 1e-5

static float rnd(float x, int bf16) { return bf16 ? bf16_to_f32(bf16_from_f32(x)) : x; }

// A device copy of host[0, n) starting `off_bytes` into a fresh allocation (padded with 64 bytes).
static void *dev_at(Backend *gpu, const void *host, size_t bytes, size_t off_bytes, void **base) {
    *base = gpu->alloc(gpu, bytes + 64);
    gpu->memset(gpu, *base, 0xFF, bytes + 64);
    void *p = (char *)*base + off_bytes;
    gpu->copy(gpu, p, host, bytes, COPY_H2D);
    return p;
}

typedef struct { float *y, *dx, *dw, *db; } LinearOut;

static void linear_free(LinearOut *o) { free(o->y); free(o->dx); free(o->dw); free(o->db); }

// linear_forward (with bias) and linear_backward (dx, dW, db) of x [n, in], W [out, in] on the GPU with every
// buffer `off` elements into its allocation; results downloaded.
static LinearOut linear_run(Backend *gpu, int bf16, int n, int in, int out, const float *x, const float *w,
                            const float *bias, const float *dy, size_t off) {
    const size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out, f = sizeof(float);
    void *bx, *bw, *bw16, *bb, *by, *bdy, *bdx, *bdw, *bdb;
    float *zeros = calloc(nw + nx, f);
    uint16_t *w16 = malloc(nw * sizeof(uint16_t));
    for (size_t i = 0; i < nw; i++) w16[i] = bf16_from_f32(w[i]);
    float *d_x = dev_at(gpu, x, nx * f, off * f, &bx), *d_w = dev_at(gpu, w, nw * f, off * f, &bw);
    uint16_t *d_w16 = bf16 ? dev_at(gpu, w16, nw * sizeof(uint16_t), off * sizeof(uint16_t), &bw16) : NULL;
    float *d_b = dev_at(gpu, bias, out * f, off * f, &bb), *d_y = dev_at(gpu, zeros, ny * f, off * f, &by);
    float *d_dy = dev_at(gpu, dy, ny * f, off * f, &bdy), *d_dx = dev_at(gpu, zeros, nx * f, off * f, &bdx);
    float *d_dw = dev_at(gpu, zeros, nw * f, off * f, &bdw), *d_db = dev_at(gpu, zeros, out * f, off * f, &bdb);
    gpu->linear_forward(gpu, d_y, out, d_x, NULL, in, d_w, d_w16, d_b, n, in, out);
    gpu->linear_backward(gpu, d_dx, in, 0, d_dw, d_db, d_dy, out, d_x, NULL, in, d_w, d_w16, n, in, out);
    LinearOut o = {host_download(gpu, d_y, ny * f), host_download(gpu, d_dx, nx * f), host_download(gpu, d_dw, nw * f),
                   host_download(gpu, d_db, out * f)};
    void *bases[] = {bx, bw, bb, by, bdy, bdx, bdw, bdb};
    for (int i = 0; i < 8; i++) gpu->free(gpu, bases[i]);
    if (bf16) gpu->free(gpu, bw16);
    free(zeros);
    free(w16);
    return o;
}

static double rel(const float *a, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
    }
    return isnan(num) ? INFINITY : sqrt(num / (den > 0 ? den : 1));
}

// y, dx, dW, db within TOL of the double reference over the bf16-rounded operands (when bf16).
static void linear_check(const LinearOut *o, int bf16, int n, int in, int out, const float *x, const float *w,
                         const float *bias, const float *dy, const char *what) {
    double *y = calloc((size_t)n * out, sizeof(double)), *dx = calloc((size_t)n * in, sizeof(double));
    double *dw = calloc((size_t)out * in, sizeof(double)), *db = calloc(out, sizeof(double));
    for (int r = 0; r < n; r++)
        for (int c = 0; c < out; c++) {
            double s = bias[c], g = rnd(dy[(size_t)r * out + c], bf16);
            for (int i = 0; i < in; i++) {
                double xv = rnd(x[(size_t)r * in + i], bf16), wv = rnd(w[(size_t)c * in + i], bf16);
                s += xv * wv;
                dx[(size_t)r * in + i] += g * wv;
                dw[(size_t)c * in + i] += g * xv;
            }
            y[(size_t)r * out + c] = s;
            db[c] += dy[(size_t)r * out + c];
        }
    double e[4] = {rel(o->y, y, (size_t)n * out), rel(o->dx, dx, (size_t)n * in), rel(o->dw, dw, (size_t)out * in),
                   rel(o->db, db, out)};
    const char *names[4] = {"y", "dx", "dW", "db"};
    for (int i = 0; i < 4; i++) CHECK(e[i] <= TOL, "%s: %s off the reference by %.3g (relative L2)", what, names[i], e[i]);
    free(y); free(dx); free(dw); free(db);
}

static void same_bits(const LinearOut *a, const LinearOut *b, int n, int in, int out, const char *what) {
    const float *pa[4] = {a->y, a->dx, a->dw, a->db}, *pb[4] = {b->y, b->dx, b->dw, b->db};
    size_t len[4] = {(size_t)n * out, (size_t)n * in, (size_t)out * in, (size_t)out};
    const char *names[4] = {"y", "dx", "dW", "db"};
    for (int i = 0; i < 4; i++) {
        size_t bad = 0;
        for (size_t j = 0; j < len[i]; j++) bad += memcmp(&pa[i][j], &pb[i][j], sizeof(float)) != 0;
        CHECK(bad == 0, "%s: %s: %zu of %zu floats differ between placements", what, names[i], bad, len[i]);
    }
}

// One shape at the given placements (element offsets): checked against the reference at the first, the
// same bits at the others.
static void linear_placements(Backend *gpu, int bf16, int n, int in, int out, const size_t *offs, int noffs,
                              const char *tag) {
    float *x = host_random((size_t)n * in, -1, 1), *w = host_random((size_t)out * in, -1, 1);
    float *bias = host_random(out, -1, 1), *dy = host_random((size_t)n * out, -1, 1);
    char what[200];
    snprintf(what, sizeof what, "%s %s n=%d in=%d out=%d", tag, bf16 ? "bf16" : "fp32", n, in, out);
    LinearOut first = linear_run(gpu, bf16, n, in, out, x, w, bias, dy, offs[0]);
    linear_check(&first, bf16, n, in, out, x, w, bias, dy, what);
    for (int i = 1; i < noffs; i++) {
        LinearOut o = linear_run(gpu, bf16, n, in, out, x, w, bias, dy, offs[i]);
        char w2[240];
        snprintf(w2, sizeof w2, "%s, offsets %zu and %zu elements", what, offs[0], offs[i]);
        same_bits(&first, &o, n, in, out, w2);
        linear_free(&o);
    }
    linear_free(&first);
    free(x); free(w); free(bias); free(dy);
}

// Causal attention forward (no dropout) and backward on the GPU against the CPU backend.
static void attention_against_cpu(Backend *cpu, Backend *gpu, int s, int b, int a, int d, const char *tag) {
    const int h = a * d;
    const size_t n = (size_t)s * b * h, nss = (size_t)b * a * s * s, f = sizeof(float);
    const DropoutSite site = {philox_key_from_seed(7), 1, 0, SITE_ATTN, 0.0f};
    float *q = host_random(n, -2, 2), *k = host_random(n, -2, 2), *v = host_random(n, -1, 1), *g = host_random(n, -1, 1);
    float *r_ctx = malloc(n * f), *r_prob = malloc(nss * f), *r_dq = malloc(n * f), *r_dk = malloc(n * f),
          *r_dv = malloc(n * f);
    size_t cs = cpu->attention_scratch_floats(cpu, ATTN_SCRATCH_BACKWARD, s, b, a, a, h);
    float *r_scr = malloc((cs ? cs : 1) * f);
    cpu->attention_forward(cpu, r_ctx, r_prob, NULL, NULL, q, k, v, s, b, a, a, h, 0, 0, site, 0, 0);
    cpu->attention_backward(cpu, r_dq, r_dk, r_dv, g, r_prob, NULL, NULL, q, k, v, r_scr, s, b, a, a, h, 0.0f, 0);
    float *d_q = dev_upload(gpu, q, n * f), *d_k = dev_upload(gpu, k, n * f), *d_v = dev_upload(gpu, v, n * f);
    float *d_g = dev_upload(gpu, g, n * f), *d_ctx = dev_poisoned(gpu, n * f), *d_prob = dev_poisoned(gpu, nss * f);
    float *d_dq = dev_poisoned(gpu, n * f), *d_dk = dev_poisoned(gpu, n * f), *d_dv = dev_poisoned(gpu, n * f);
    size_t gs = gpu->attention_scratch_floats(gpu, ATTN_SCRATCH_BACKWARD, s, b, a, a, h);
    float *d_scr = gpu->alloc(gpu, (gs ? gs : 1) * f);
    gpu->attention_forward(gpu, d_ctx, d_prob, NULL, NULL, d_q, d_k, d_v, s, b, a, a, h, 0, 0, site, 0, 0);
    gpu->attention_backward(gpu, d_dq, d_dk, d_dv, d_g, d_prob, NULL, NULL, d_q, d_k, d_v, d_scr, s, b, a, a, h, 0.0f, 0);
    const float *dev[5] = {d_ctx, d_prob, d_dq, d_dk, d_dv}, *ref[5] = {r_ctx, r_prob, r_dq, r_dk, r_dv};
    const size_t len[5] = {n, nss, n, n, n};
    const char *names[5] = {"ctx", "prob", "dq", "dk", "dv"};
    for (int i = 0; i < 5; i++) {
        float *got = host_download(gpu, dev[i], len[i] * f);
        double e = rel_l2(got, ref[i], len[i]);
        CHECK(e <= TOL, "%s attention s=%d b=%d a=%d d=%d: %s off the CPU by %.3g", tag, s, b, a, d, names[i], e);
        free(got);
    }
    float *devs[] = {d_q, d_k, d_v, d_g, d_ctx, d_prob, d_dq, d_dk, d_dv, d_scr};
    for (int i = 0; i < 10; i++) gpu->free(gpu, devs[i]);
    float *hs[] = {q, k, v, g, r_ctx, r_prob, r_dq, r_dk, r_dv, r_scr};
    for (int i = 0; i < 10; i++) free(hs[i]);
}

int main(void) {
    char err[512] = "";
    unsetenv("CT_EMU_LT_NO_ALGO");
    Backend *cpu = backend_open("cpu", PRECISION_FP32, err, sizeof err);
    if (!cpu) {
        fprintf(stderr, "FAIL: cannot open the CPU backend: %s\n", err);
        return 1;
    }
    Backend *gpu = cuda_or_skip(PRECISION_FP32);
    Backend *gpu16 = cuda_or_skip(PRECISION_BF16);
    const size_t offs[3] = {0, 1, 4};        // fp32: 256-, 4- and 16-byte aligned views
    const size_t offs16[3] = {0, 1, 8};      // with bf16 weights at 0, 2 and 16 bytes (x, y at 0, 4, 32)
    // 1. placement
    linear_placements(gpu, 0, 37, 45, 29, offs, 3, "placement");
    linear_placements(gpu16, 1, 37, 45, 29, offs16, 3, "placement");
    linear_placements(gpu, 0, 64, 128, 96, offs, 3, "placement");
    // 2. no algorithm: each hook at fresh shapes (a cached plan would hide it)
    setenv("CT_EMU_LT_NO_ALGO", "all", 1);
    linear_placements(gpu, 0, 19, 23, 17, offs, 2, "no algorithm at all");
    linear_placements(gpu16, 1, 19, 23, 17, offs16, 2, "no algorithm at all");
    attention_against_cpu(cpu, gpu, 13, 2, 3, 5, "no algorithm at all:");
    setenv("CT_EMU_LT_NO_ALGO", "aligned", 1);
    linear_placements(gpu, 0, 21, 27, 11, offs, 3, "none at 16 bytes");
    linear_placements(gpu16, 1, 21, 27, 11, offs16, 3, "none at 16 bytes");
    setenv("CT_EMU_LT_NO_ALGO", "bias", 1);
    linear_placements(gpu, 0, 22, 26, 14, offs, 3, "no BIAS epilogue");
    setenv("CT_EMU_LT_NO_ALGO", "splitk", 1);
    linear_placements(gpu, 0, 15, 18, 10, offs, 2, "split-K answers only");
    attention_against_cpu(cpu, gpu, 11, 1, 2, 4, "split-K answers only:");
    setenv("CT_EMU_LT_NO_ALGO", "workspace", 1);
    linear_placements(gpu16, 1, 16, 20, 12, offs16, 2, "answers above the workspace only");
    attention_against_cpu(cpu, gpu, 10, 1, 2, 3, "answers above the workspace only:");
    unsetenv("CT_EMU_LT_NO_ALGO");
    attention_against_cpu(cpu, gpu, 13, 2, 3, 5, "cuBLASLt:");   // the same shape, its plan now simple
    attention_against_cpu(cpu, gpu, 17, 2, 2, 6, "cuBLASLt:");
    backend_close(gpu16);
    backend_close(gpu);
    backend_close(cpu);
    return check_summary();
}
