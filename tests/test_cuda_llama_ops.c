// The CUDA backend's Llama ops (RMSNorm, RoPE, SwiGLU; docs/LLAMA-OPS.md) against the CPU backend,
// from the same inputs:
// - RoPE and SwiGLU: the CPU's bits (fp32 and bf16), the whole buffers (columns past the heads in a
//   row stride, and v in a fused qkv buffer, untouched), in place and out of place.
// - RMSNorm: dw the CPU's bits (both sum each column over the rows in order); y, rstd and dx within
//   RMS_TOL (the row sums run in another order); bf16 y the rounding of the fp32 y, bitwise.
// - Every GPU output poisoned first (or, for outputs that must keep bytes, filled with the CPU's
//   starting bytes); each op run twice gives the same bits; odd sizes (h, f, d/2 not multiples of
//   4 or 32; rows not multiples of a tile), misaligned views, accumulate on and off, ld > width.
// - A position past the table, or an odd head dimension, stops with the CPU's message (run as a
//   child process: the fatal error exits).
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "backend/cpu/bf16.h"
#include "backend/cpu/rope.h"
#include "check.h"
#include "cuda_check.h"

extern char **environ;

static Backend *cpu, *gpu;

// RMSNorm's y, rstd and dx against the CPU (relative L2): the GPU sums a row as a block tree, the CPU
// in SIMD lanes; the two fp32 sums differ by a few ulps: measured ≤ 1.1e-7 (printed per case).
#define RMS_TOL 1e-6

static float *fdup(const float *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}
static float bf16r(float x) { return bf16_to_f32(bf16_from_f32(x)); }
static void check_same_dev(const void *a, const void *b, size_t bytes, const char *what) {
    uint8_t *ha = host_download(gpu, a, bytes), *hb = host_download(gpu, b, bytes);
    size_t bad = 0;
    for (size_t i = 0; i < bytes; i++) bad += ha[i] != hb[i];
    CHECK(bad == 0, "%s: a second run differs in %zu of %zu bytes", what, bad, bytes);
    free(ha);
    free(hb);
}
// Download n floats and require the CPU's bits; names the first element that differs.
static void check_bits(const float *dev, const float *ref, size_t n, const char *what) {
    float *got = host_download(gpu, dev, n * sizeof(float));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &ref[i], sizeof(float))) {
            if (!bad) first = i;
            bad++;
        }
    CHECK(bad == 0, "%s: %zu of %zu floats differ from the CPU's bits (first [%zu]: %.9g vs %.9g)", what, bad, n,
          first, bad ? got[first] : 0.0f, bad ? ref[first] : 0.0f);
    free(got);
}
// Download n floats and compare with the CPU's within RMS_TOL (relative L2), printing the error.
static void check_rms_close(const float *dev, const float *ref, size_t n, const char *what) {
    float *got = host_download(gpu, dev, n * sizeof(float));
    double e = rel_l2(got, ref, n);
    printf("  %-58s rel L2 %.2e\n", what, e);
    CHECK(e <= RMS_TOL, "%s: relative L2 error %.3g, tolerance %.1g", what, e, RMS_TOL);
    free(got);
}

// ---- RMSNorm

// Forward at n×h with `off` floats of offset on every tensor (off = 1 with h % 4 == 0: the scalar
// path); fp32 against the CPU, then bf16: y the bf16 rounding of the GPU's fp32 y, rstd the same.
static void test_rmsnorm_forward(int n, int h, int off) {
    char what[128];
    size_t nh = (size_t)n * h;
    float eps = 1e-5f;
    float *x = host_random(nh + off, -2.0f, 3.0f), *w = host_random(h + off, -1.5f, 1.5f);
    float *y = malloc((nh + off) * sizeof(float)), *rs = malloc(((size_t)n + off) * sizeof(float));
    cpu->rmsnorm_forward(cpu, y + off, rs + off, x + off, w + off, eps, n, h, 0);

    float *gx = dev_upload(gpu, x, (nh + off) * sizeof(float)), *gw = dev_upload(gpu, w, (h + off) * sizeof(float));
    float *gy[2], *grs[2], *gyb = dev_poisoned(gpu, (nh + off) * sizeof(float));
    float *grsb = dev_poisoned(gpu, ((size_t)n + off) * sizeof(float));
    for (int run = 0; run < 2; run++) {
        gy[run] = dev_poisoned(gpu, (nh + off) * sizeof(float));
        grs[run] = dev_poisoned(gpu, ((size_t)n + off) * sizeof(float));
        gpu->rmsnorm_forward(gpu, gy[run] + off, grs[run] + off, gx + off, gw + off, eps, n, h, 0);
    }
    snprintf(what, sizeof what, "rmsnorm_forward y n=%d h=%d off=%d", n, h, off);
    check_rms_close(gy[0] + off, y + off, nh, what);
    check_same_dev(gy[0], gy[1], (nh + off) * sizeof(float), what);
    snprintf(what, sizeof what, "rmsnorm_forward rstd n=%d h=%d off=%d", n, h, off);
    check_rms_close(grs[0] + off, rs + off, (size_t)n, what);
    check_same_dev(grs[0], grs[1], ((size_t)n + off) * sizeof(float), what);

    gpu->rmsnorm_forward(gpu, gyb + off, grsb + off, gx + off, gw + off, eps, n, h, 1);
    float *yf = host_download(gpu, gy[0] + off, nh * sizeof(float));
    for (size_t i = 0; i < nh; i++) yf[i] = bf16r(yf[i]);
    snprintf(what, sizeof what, "rmsnorm_forward bf16 y = bf16(fp32 y) n=%d h=%d off=%d", n, h, off);
    check_bits(gyb + off, yf, nh, what);
    snprintf(what, sizeof what, "rmsnorm_forward bf16 rstd n=%d h=%d off=%d", n, h, off);
    check_same_dev(grsb, grs[0], ((size_t)n + off) * sizeof(float), what);
    // and the CPU's bf16 y within one bf16 step of the GPU's (a rounding boundary may split them)
    float *yb = malloc((nh + off) * sizeof(float)), *rsb = malloc(((size_t)n + off) * sizeof(float));
    cpu->rmsnorm_forward(cpu, yb + off, rsb + off, x + off, w + off, eps, n, h, 1);
    float *gotb = host_download(gpu, gyb + off, nh * sizeof(float));
    size_t far = 0;
    for (size_t i = 0; i < nh; i++) far += fabsf(gotb[i] - yb[off + i]) > fabsf(yb[off + i]) * (1.0f / 128);
    CHECK(far == 0, "rmsnorm_forward bf16 n=%d h=%d: %zu of %zu y more than a bf16 step from the CPU's", n, h, far, nh);

    for (int run = 0; run < 2; run++) { gpu->free(gpu, gy[run]); gpu->free(gpu, grs[run]); }
    gpu->free(gpu, gx); gpu->free(gpu, gw); gpu->free(gpu, gyb); gpu->free(gpu, grsb);
    free(x); free(w); free(y); free(rs); free(yf); free(yb); free(rsb); free(gotb);
}

// Backward (from_output: from y) at n×h with accumulate 0/1, on the CPU's forward outputs: dx within
// RMS_TOL, dw (added to a random start) the CPU's bits.
static void test_rmsnorm_backward(int n, int h, int from_output, int accumulate, int off) {
    char what[128];
    size_t nh = (size_t)n * h;
    float *x = host_random(nh + off, -2.0f, 3.0f), *w = host_random(h + off, 0.5f, 1.5f);
    for (int c = 0; c < h; c += 3) w[off + c] = -w[off + c];   // signs mixed, never 0 (from the output: y / w)
    float *y = malloc((nh + off) * sizeof(float)), *rs = malloc(((size_t)n + off) * sizeof(float));
    cpu->rmsnorm_forward(cpu, y + off, rs + off, x + off, w + off, 1e-6f, n, h, 0);
    float *dy = host_random(nh + off, -1.0f, 1.0f), *dx0 = host_random(nh + off, -1.0f, 1.0f);
    float *dw0 = host_random(h + off, -1.0f, 1.0f);
    float *dx = fdup(dx0, nh + off), *dw = fdup(dw0, h + off);
    const float *in = from_output ? y : x;
    if (from_output)
        cpu->rmsnorm_backward_from_output(cpu, dx + off, accumulate, dw + off, dy + off, y + off, rs + off, w + off, n, h);
    else
        cpu->rmsnorm_backward(cpu, dx + off, accumulate, dw + off, dy + off, x + off, rs + off, w + off, n, h);

    float *g_in = dev_upload(gpu, in, (nh + off) * sizeof(float));
    float *g_rs = dev_upload(gpu, rs, ((size_t)n + off) * sizeof(float));
    float *g_w = dev_upload(gpu, w, (h + off) * sizeof(float)), *g_dy = dev_upload(gpu, dy, (nh + off) * sizeof(float));
    float *gdx[2], *gdw[2];
    for (int run = 0; run < 2; run++) {
        gdx[run] = accumulate ? dev_upload(gpu, dx0, (nh + off) * sizeof(float))
                              : dev_poisoned(gpu, (nh + off) * sizeof(float));
        gdw[run] = dev_upload(gpu, dw0, (h + off) * sizeof(float));
        if (from_output)
            gpu->rmsnorm_backward_from_output(gpu, gdx[run] + off, accumulate, gdw[run] + off, g_dy + off, g_in + off,
                                              g_rs + off, g_w + off, n, h);
        else
            gpu->rmsnorm_backward(gpu, gdx[run] + off, accumulate, gdw[run] + off, g_dy + off, g_in + off, g_rs + off,
                                  g_w + off, n, h);
    }
    const char *name = from_output ? "rmsnorm_backward_from_output" : "rmsnorm_backward";
    snprintf(what, sizeof what, "%s dx n=%d h=%d acc=%d off=%d", name, n, h, accumulate, off);
    check_rms_close(gdx[0] + off, dx + off, nh, what);
    check_same_dev(gdx[0], gdx[1], (nh + off) * sizeof(float), what);
    snprintf(what, sizeof what, "%s dw n=%d h=%d acc=%d off=%d", name, n, h, accumulate, off);
    check_bits(gdw[0] + off, dw + off, (size_t)h, what);
    check_same_dev(gdw[0], gdw[1], (h + off) * sizeof(float), what);
    for (int run = 0; run < 2; run++) { gpu->free(gpu, gdx[run]); gpu->free(gpu, gdw[run]); }
    gpu->free(gpu, g_in); gpu->free(gpu, g_rs); gpu->free(gpu, g_w); gpu->free(gpu, g_dy);
    free(x); free(w); free(y); free(rs); free(dy); free(dx0); free(dw0); free(dx); free(dw);
}

// ---- RoPE

typedef struct {
    int rows, b, heads, d, ld, pos0, positions;
    float theta;
    int rot;   // the rotated dims (partial rotary); 0: all d
} RopeCase;

// Forward (bf16 or not) and backward, in place and out of place, on rows of stride ld ≥ heads·d:
// the whole buffer (the columns past the heads included) must be the CPU's bits. `off` floats of
// offset on the tensors (misaligned float4 rows).
static void test_rope(RopeCase k, int round_bf16, int off) {
    char what[176];
    if (!k.rot) k.rot = k.d;
    size_t all = (size_t)k.rows * k.ld + off, tf = rope_table_floats(k.positions, k.rot);
    float *cs = malloc(tf * sizeof(float));
    rope_table(cs, k.positions, k.rot, k.theta, NULL);
    float *x = host_random(all, -3.0f, 3.0f), *y0 = host_random(all, -1.0f, 1.0f);
    float *y = fdup(y0, all), *xi = fdup(x, all), *dx = fdup(y0, all), *dyi = fdup(x, all);
    cpu->rope_forward(cpu, y + off, x + off, k.ld, cs, k.positions, k.rows, k.b, k.heads, k.d, k.rot, k.pos0, round_bf16);
    cpu->rope_forward(cpu, xi + off, xi + off, k.ld, cs, k.positions, k.rows, k.b, k.heads, k.d, k.rot, k.pos0, round_bf16);
    cpu->rope_backward(cpu, dx + off, x + off, k.ld, cs, k.positions, k.rows, k.b, k.heads, k.d, k.rot, k.pos0);
    cpu->rope_backward(cpu, dyi + off, dyi + off, k.ld, cs, k.positions, k.rows, k.b, k.heads, k.d, k.rot, k.pos0);

    float *gcs = dev_upload(gpu, cs, tf * sizeof(float)), *gx = dev_upload(gpu, x, all * sizeof(float));
    float *gy[2], *gxi = dev_upload(gpu, x, all * sizeof(float));
    float *gdx = dev_upload(gpu, y0, all * sizeof(float)), *gdyi = dev_upload(gpu, x, all * sizeof(float));
    for (int run = 0; run < 2; run++) {
        gy[run] = dev_upload(gpu, y0, all * sizeof(float));
        gpu->rope_forward(gpu, gy[run] + off, gx + off, k.ld, gcs, k.positions, k.rows, k.b, k.heads, k.d, k.rot, k.pos0,
                          round_bf16);
    }
    gpu->rope_forward(gpu, gxi + off, gxi + off, k.ld, gcs, k.positions, k.rows, k.b, k.heads, k.d, k.rot, k.pos0, round_bf16);
    gpu->rope_backward(gpu, gdx + off, gx + off, k.ld, gcs, k.positions, k.rows, k.b, k.heads, k.d, k.rot, k.pos0);
    gpu->rope_backward(gpu, gdyi + off, gdyi + off, k.ld, gcs, k.positions, k.rows, k.b, k.heads, k.d, k.rot, k.pos0);
    char shape[112];
    snprintf(shape, sizeof shape, "rows=%d b=%d heads=%d d=%d rot=%d ld=%d pos0=%d bf16=%d off=%d", k.rows, k.b, k.heads,
             k.d, k.rot, k.ld, k.pos0, round_bf16, off);
    snprintf(what, sizeof what, "rope_forward %s", shape);
    check_bits(gy[0], y, all, what);
    check_same_dev(gy[0], gy[1], all * sizeof(float), what);
    snprintf(what, sizeof what, "rope_forward in place %s", shape);
    check_bits(gxi, xi, all, what);
    snprintf(what, sizeof what, "rope_backward %s", shape);
    check_bits(gdx, dx, all, what);
    snprintf(what, sizeof what, "rope_backward in place %s", shape);
    check_bits(gdyi, dyi, all, what);
    for (int run = 0; run < 2; run++) gpu->free(gpu, gy[run]);
    gpu->free(gpu, gcs); gpu->free(gpu, gx); gpu->free(gpu, gxi); gpu->free(gpu, gdx); gpu->free(gpu, gdyi);
    free(cs); free(x); free(y0); free(y); free(xi); free(dx); free(dyi);
}

// Fused qkv rows [rows, (a + 2·kv)·d]: q (a heads at column 0) and k (kv heads at column a·d) rotated
// in place, v untouched: the whole buffer the CPU's bits.
static void test_rope_qkv(int rows, int b, int a, int kv, int d, int pos0, int round_bf16) {
    char what[128];
    int ld = (a + 2 * kv) * d, positions = pos0 + (rows + b - 1) / b;
    size_t all = (size_t)rows * ld, tf = rope_table_floats(positions, d);
    float *cs = malloc(tf * sizeof(float));
    rope_table(cs, positions, d, 500000.0f, NULL);
    float *qkv = host_random(all, -2.0f, 2.0f), *ref = fdup(qkv, all);
    cpu->rope_forward(cpu, ref, ref, ld, cs, positions, rows, b, a, d, d, pos0, round_bf16);
    cpu->rope_forward(cpu, ref + (size_t)a * d, ref + (size_t)a * d, ld, cs, positions, rows, b, kv, d, d, pos0, round_bf16);
    float *g = dev_upload(gpu, qkv, all * sizeof(float)), *gcs = dev_upload(gpu, cs, tf * sizeof(float));
    gpu->rope_forward(gpu, g, g, ld, gcs, positions, rows, b, a, d, d, pos0, round_bf16);
    gpu->rope_forward(gpu, g + (size_t)a * d, g + (size_t)a * d, ld, gcs, positions, rows, b, kv, d, d, pos0, round_bf16);
    snprintf(what, sizeof what, "rope_forward fused qkv rows=%d a=%d kv=%d d=%d bf16=%d", rows, a, kv, d, round_bf16);
    check_bits(g, ref, all, what);
    size_t v_changed = 0;
    for (int r = 0; r < rows; r++)
        for (int c = (a + kv) * d; c < ld; c++) v_changed += ref[(size_t)r * ld + c] != qkv[(size_t)r * ld + c];
    CHECK(v_changed == 0, "rope qkv: %zu elements of v changed", v_changed);
    gpu->free(gpu, g); gpu->free(gpu, gcs);
    free(cs); free(qkv); free(ref);
}

// The error cases, each run in a child (`self --rope-error I`: ctron_fatal exits the process; the
// child is a fresh exec, so the parent's CUDA context is never forked). A table of 8 positions at d = 6.
static const struct {
    const char *what;
    int backward, rows, b, d, pos0;
    const char *needle;
} ROPE_ERRORS[] = {
    {"past the table", 0, 12, 2, 6, 3, "rope_forward (cuda): positions 3 .. 8 are outside the table's 0 .. 7"},
    {"past the table, backward", 1, 12, 2, 6, 3, "rope_backward (cuda): positions 3 .. 8 are outside the table's 0 .. 7"},
    {"a negative position", 0, 12, 2, 6, -1, "positions -1 .. 4 are outside the table's 0 .. 7"},
    {"an odd head dimension", 0, 2, 1, 5, 0, "5 rotary dims of heads of 5: expected an even number"},
};
enum { ROPE_ERROR_CASES = sizeof ROPE_ERRORS / sizeof ROPE_ERRORS[0] };

static int rope_error_child(int i) {
    Backend *be = cuda_or_skip(PRECISION_FP32);
    static float table[8 * 6];
    rope_table(table, 8, 6, 10000.0f, NULL);
    float *cs = dev_upload(be, table, sizeof table), *x = be->alloc(be, 12 * 16 * sizeof(float));
    int rows = ROPE_ERRORS[i].rows, b = ROPE_ERRORS[i].b, d = ROPE_ERRORS[i].d, pos0 = ROPE_ERRORS[i].pos0;
    if (ROPE_ERRORS[i].backward) be->rope_backward(be, x, x, 16, cs, 8, rows, b, 1, d, d, pos0);
    else be->rope_forward(be, x, x, 16, cs, 8, rows, b, 1, d, d, pos0, 0);
    be->synchronize(be);
    return 0;   // not refused
}

static void expect_rope_refused(int i) {
    const char *needle = ROPE_ERRORS[i].needle;
    char index[16];
    snprintf(index, sizeof index, "%d", i);
    int fds[2];
    if (pipe(fds) != 0) { CHECK(0, "pipe failed"); return; }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    char *argv[] = {"test_cuda_llama_ops", "--rope-error", index, NULL};
    pid_t pid;
    fflush(stdout);
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    char msg[1024] = {0};
    size_t len = 0;
    ssize_t got;
    while (rc == 0 && (got = read(fds[0], msg + len, sizeof msg - 1 - len)) > 0) len += (size_t)got;
    close(fds[0]);
    int status = 0;
    if (rc == 0) waitpid(pid, &status, 0);
    int ok = rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 1 && strstr(msg, needle);
    printf("  rope %-26s %s%s", ROPE_ERRORS[i].what, ok ? "refused: " : "NOT REFUSED\n", ok ? msg : "");
    CHECK(ok, "rope %s: expected exit 1 with '%s', got spawn %d status %d, output '%s'", ROPE_ERRORS[i].what, needle,
          rc, status, msg);
}

// ---- SwiGLU

// gate and up: mostly [-8, 8], with the tails (the clamp of ctron_expf), zeros and tiny values.
static float *swiglu_inputs(size_t n) {
    float *x = host_random(n, -8.0f, 8.0f);
    static const float special[] = {0.0f, -0.0f, 100.0f, -100.0f, 88.5f, -87.5f, 1e-20f, -1e-20f, 30.0f, -30.0f};
    for (size_t i = 0; i < n && i < sizeof special / sizeof special[0]; i++) x[i * 7 % n] = special[i];
    return x;
}

// Forward: gate/up the two halves of one [n, 2f] buffer (halves = 1, ld = 2f) or separate [n, f]
// tensors; y and the (bf16-rounded) gate/up buffers the CPU's bits.
static void test_swiglu_forward(int n, int f, int halves, int round_bf16, int off) {
    char what[128];
    int ld = halves ? 2 * f : f;
    size_t gsz = (size_t)n * ld + off, nf = (size_t)n * f;
    float *gate = swiglu_inputs(gsz), *up = halves ? gate : swiglu_inputs(gsz);
    float *gc = fdup(gate, gsz), *uc = halves ? gc : fdup(up, gsz), *y = malloc((nf + off) * sizeof(float));
    float *uo = halves ? gc + f : uc;   // up's first element
    cpu->swiglu_forward(cpu, y + off, gc + off, uo + off, ld, n, f, round_bf16);

    float *gy[2], *gg[2], *gu[2];
    for (int run = 0; run < 2; run++) {
        gg[run] = dev_upload(gpu, gate, gsz * sizeof(float));
        gu[run] = halves ? gg[run] : dev_upload(gpu, up, gsz * sizeof(float));
        gy[run] = dev_poisoned(gpu, (nf + off) * sizeof(float));
        gpu->swiglu_forward(gpu, gy[run] + off, gg[run] + off, (halves ? gg[run] + f : gu[run]) + off, ld, n, f,
                            round_bf16);
    }
    snprintf(what, sizeof what, "swiglu_forward y n=%d f=%d ld=%d bf16=%d off=%d", n, f, ld, round_bf16, off);
    check_bits(gy[0] + off, y + off, nf, what);
    check_same_dev(gy[0], gy[1], (nf + off) * sizeof(float), what);
    snprintf(what, sizeof what, "swiglu_forward gate/up n=%d f=%d ld=%d bf16=%d off=%d", n, f, ld, round_bf16, off);
    check_bits(gg[0], gc, gsz, what);
    if (!halves) check_bits(gu[0], uc, gsz, what);
    for (int run = 0; run < 2; run++) {
        gpu->free(gpu, gy[run]); gpu->free(gpu, gg[run]);
        if (!halves) gpu->free(gpu, gu[run]);
    }
    free(gate); free(gc); free(y);
    if (!halves) { free(up); free(uc); }
}

// Backward from gate/up halves of one [n, 2f] buffer: dgate/dup into the halves of another (ldd = 2f)
// or, in_place, over gate and up themselves; y (with_y) the forward's bits.
static void test_swiglu_backward(int n, int f, int with_y, int in_place, int round_bf16) {
    char what[128];
    int ld = 2 * f;
    size_t gsz = (size_t)n * ld, nf = (size_t)n * f;
    float *gu = swiglu_inputs(gsz), *dy = host_random(nf, -2.0f, 2.0f), *out0 = host_random(gsz, -1.0f, 1.0f);
    float *d = in_place ? fdup(gu, gsz) : fdup(out0, gsz), *y = with_y ? malloc(nf * sizeof(float)) : NULL;
    float *yf = malloc(nf * sizeof(float)), *guf = fdup(gu, gsz);
    cpu->swiglu_backward(cpu, d, d + f, ld, y, dy, in_place ? d : gu, (in_place ? d : gu) + f, ld, n, f, round_bf16);
    cpu->swiglu_forward(cpu, yf, guf, guf + f, ld, n, f, 0);

    float *ggu = dev_upload(gpu, gu, gsz * sizeof(float)), *gdy = dev_upload(gpu, dy, nf * sizeof(float));
    float *gd[2], *gy[2] = {NULL, NULL};
    for (int run = 0; run < 2; run++) {
        gd[run] = dev_upload(gpu, in_place ? gu : out0, gsz * sizeof(float));
        if (with_y) gy[run] = dev_poisoned(gpu, nf * sizeof(float));
        const float *src = in_place ? gd[run] : ggu;
        gpu->swiglu_backward(gpu, gd[run], gd[run] + f, ld, gy[run], gdy, src, src + f, ld, n, f, round_bf16);
    }
    snprintf(what, sizeof what, "swiglu_backward dgate/dup n=%d f=%d y=%d in_place=%d bf16=%d", n, f, with_y, in_place,
             round_bf16);
    check_bits(gd[0], d, gsz, what);
    check_same_dev(gd[0], gd[1], gsz * sizeof(float), what);
    if (with_y) {
        snprintf(what, sizeof what, "swiglu_backward y n=%d f=%d in_place=%d bf16=%d", n, f, in_place, round_bf16);
        check_bits(gy[0], y, nf, what);
        if (!round_bf16) {   // and the forward's y, as the docs promise (on unrounded gate/up)
            snprintf(what, sizeof what, "swiglu_backward y = forward y n=%d f=%d", n, f);
            check_bits(gy[0], yf, nf, what);
        }
    }
    for (int run = 0; run < 2; run++) {
        gpu->free(gpu, gd[run]);
        if (with_y) gpu->free(gpu, gy[run]);
    }
    gpu->free(gpu, ggu); gpu->free(gpu, gdy);
    free(gu); free(dy); free(out0); free(d); free(y); free(yf); free(guf);
}

// ---- the ops on the arena's bf16 copies (backend.h's swiglu_forward16 / _backward16, gelu_backward16; the
// CUDA backend at bf16 only): bitwise the fp32 ops on the copies' values, y16 the bf16 rounding of fp32 y.
static uint16_t *host_bf16(const float *x, size_t n) {
    uint16_t *c = malloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; i++) c[i] = bf16_from_f32(x[i]);
    return c;
}
static float *host_unpacked(const uint16_t *c, size_t n) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = bf16_to_f32(c[i]);
    return x;
}

// gate/up the halves of one [n, 2f] copy (ld 2f) as a fused gate_up keeps them, or two [n, f] copies; `off`
// elements in (off 1: 2-byte aligned, the scalar path).
static void test_swiglu16(Backend *gpu16, int n, int f, int halves, int off) {
    char what[128];
    int ld = halves ? 2 * f : f;
    size_t gsz = (size_t)n * ld + off, nf = (size_t)n * f;
    float *g0 = swiglu_inputs(gsz), *u0 = halves ? g0 : swiglu_inputs(gsz), *dy = host_random(nf, -2.0f, 2.0f);
    uint16_t *g16 = host_bf16(g0, gsz), *u16 = halves ? g16 : host_bf16(u0, gsz);
    float *gf = host_unpacked(g16, gsz), *uf = halves ? gf : host_unpacked(u16, gsz);
    const float *gate = gf + off, *up = (halves ? gf + f : uf) + off;
    float *y = malloc(nf * sizeof(float)), *dg = malloc(nf * sizeof(float)), *du = malloc(nf * sizeof(float));
    cpu->swiglu_forward(cpu, y, (float *)gate, (float *)up, ld, n, f, 0);
    cpu->swiglu_backward(cpu, dg, du, f, NULL, dy, gate, up, ld, n, f, 0);
    uint16_t *want = host_bf16(y, nf);

    uint16_t *dg16 = dev_upload(gpu16, g16, gsz * 2), *du16 = halves ? dg16 : dev_upload(gpu16, u16, gsz * 2);
    const uint16_t *dgate = dg16 + off, *dup = (halves ? dg16 + f : du16) + off;
    uint16_t *gy = dev_poisoned(gpu16, (nf + 1) * 2);
    float *gdy = dev_upload(gpu16, dy, nf * 4), *gdg = dev_poisoned(gpu16, nf * 4), *gdu = dev_poisoned(gpu16, nf * 4);
    gpu16->swiglu_forward16(gpu16, gy + off, dgate, dup, ld, n, f);
    snprintf(what, sizeof what, "swiglu_forward16 n=%d f=%d ld=%d off=%d", n, f, ld, off);
    CHECK_BYTES_EQUAL(gpu16, gy + off, want, nf * 2, what);
    // from fp32 gate and up, writing their copies ([n, f], bf16_pack's bits) and the same y16
    float *gg32 = dev_upload(gpu16, g0, gsz * 4), *gu32 = halves ? gg32 : dev_upload(gpu16, u0, gsz * 4);
    uint16_t *py = dev_poisoned(gpu16, (nf + 1) * 2), *pg = dev_poisoned(gpu16, (nf + 1) * 2);
    uint16_t *pu = dev_poisoned(gpu16, (nf + 1) * 2);
    gpu16->swiglu_forward_pack16(gpu16, py + off, pg + off, pu + off, gg32 + off, (halves ? gg32 + f : gu32) + off, ld,
                                 n, f);
    uint16_t *want_g16 = malloc(nf * 2), *want_u16 = malloc(nf * 2);
    for (int r = 0; r < n; r++)
        for (int c = 0; c < f; c++) {
            want_g16[(size_t)r * f + c] = g16[off + (size_t)r * ld + c];
            want_u16[(size_t)r * f + c] = (halves ? g16 + f : u16)[off + (size_t)r * ld + c];
        }
    snprintf(what, sizeof what, "swiglu_forward_pack16 y16 n=%d f=%d ld=%d off=%d", n, f, ld, off);
    CHECK_BYTES_EQUAL(gpu16, py + off, want, nf * 2, what);
    snprintf(what, sizeof what, "swiglu_forward_pack16 gate16 n=%d f=%d ld=%d off=%d", n, f, ld, off);
    CHECK_BYTES_EQUAL(gpu16, pg + off, want_g16, nf * 2, what);
    snprintf(what, sizeof what, "swiglu_forward_pack16 up16 n=%d f=%d ld=%d off=%d", n, f, ld, off);
    CHECK_BYTES_EQUAL(gpu16, pu + off, want_u16, nf * 2, what);
    gpu16->free(gpu16, gg32), gpu16->free(gpu16, py), gpu16->free(gpu16, pg), gpu16->free(gpu16, pu);
    if (!halves) gpu16->free(gpu16, gu32);
    free(want_g16), free(want_u16);
    gpu16->swiglu_backward16(gpu16, gdg, gdu, f, 0, gdy, dgate, dup, ld, n, f);
    snprintf(what, sizeof what, "swiglu_backward16 dgate n=%d f=%d ld=%d off=%d", n, f, ld, off);
    CHECK_BYTES_EQUAL(gpu16, gdg, dg, nf * 4, what);
    snprintf(what, sizeof what, "swiglu_backward16 dup n=%d f=%d ld=%d off=%d", n, f, ld, off);
    CHECK_BYTES_EQUAL(gpu16, gdu, du, nf * 4, what);
    // grad16: the gradients rounded to bf16 for the GEMMs, into the first halves of the same buffers
    uint16_t *want_g = host_bf16(dg, nf), *want_u = host_bf16(du, nf);
    gpu16->swiglu_backward16(gpu16, gdg, gdu, f, 1, gdy, dgate, dup, ld, n, f);
    snprintf(what, sizeof what, "swiglu_backward16 bf16 dgate n=%d f=%d ld=%d off=%d", n, f, ld, off);
    CHECK_BYTES_EQUAL(gpu16, gdg, want_g, nf * 2, what);
    snprintf(what, sizeof what, "swiglu_backward16 bf16 dup n=%d f=%d ld=%d off=%d", n, f, ld, off);
    CHECK_BYTES_EQUAL(gpu16, gdu, want_u, nf * 2, what);
    free(want_g), free(want_u);
    gpu16->free(gpu16, dg16), gpu16->free(gpu16, gy), gpu16->free(gpu16, gdy), gpu16->free(gpu16, gdg);
    gpu16->free(gpu16, gdu);
    if (!halves) gpu16->free(gpu16, du16), free(u0), free(u16), free(uf);
    free(g0), free(g16), free(gf), free(dy), free(y), free(dg), free(du), free(want);
}

// GeLU's backward from the copy of its input (in place over dy, as the model calls it); `off` elements in.
static void test_gelu_backward16(Backend *gpu16, size_t count, int off) {
    char what[96];
    float *x0 = swiglu_inputs(count + off), *dy = host_random(count, -2.0f, 2.0f), *dx = malloc(count * 4);
    uint16_t *x16 = host_bf16(x0, count + off);
    float *xf = host_unpacked(x16, count + off);
    cpu->gelu_backward(cpu, dx, dy, xf + off, count);
    uint16_t *gx = dev_upload(gpu16, x16, (count + off) * 2);
    float *gd = dev_upload(gpu16, dy, count * 4);
    gpu16->gelu_backward16(gpu16, gd, gd, gx + off, count);
    snprintf(what, sizeof what, "gelu_backward16 count=%zu off=%d", count, off);
    CHECK_BYTES_EQUAL(gpu16, gd, dx, count * 4, what);
    gpu16->free(gpu16, gx), gpu16->free(gpu16, gd);
    free(x0), free(dy), free(dx), free(x16), free(xf);
}

// bias_gelu_forward into bf16 copies: the CPU's bias_gelu_forward (round_bf16 1) outputs, packed; x untouched.
static void test_bias_gelu16(Backend *gpu16, int n, int cols, int off) {
    char what[96];
    size_t total = (size_t)n * cols;
    float *x = swiglu_inputs(total + off), *bias = host_random((size_t)cols + off, -1.0f, 1.0f);
    float *xc = fdup(x, total + off), *y = malloc(total * sizeof(float));
    cpu->bias_gelu_forward(cpu, y, xc + off, bias + off, n, cols, 1);
    uint16_t *want_x = host_bf16(xc + off, total), *want_y = host_bf16(y, total);
    float *gx = dev_upload(gpu16, x, (total + off) * 4), *gb = dev_upload(gpu16, bias, ((size_t)cols + off) * 4);
    uint16_t *gx16 = dev_poisoned(gpu16, (total + 1) * 2), *gy16 = dev_poisoned(gpu16, (total + 1) * 2);
    gpu16->bias_gelu_forward16(gpu16, gy16 + off, gx16 + off, gx + off, gb + off, n, cols);
    snprintf(what, sizeof what, "bias_gelu_forward16 x16 n=%d cols=%d off=%d", n, cols, off);
    CHECK_BYTES_EQUAL(gpu16, gx16 + off, want_x, total * 2, what);
    snprintf(what, sizeof what, "bias_gelu_forward16 y16 n=%d cols=%d off=%d", n, cols, off);
    CHECK_BYTES_EQUAL(gpu16, gy16 + off, want_y, total * 2, what);
    snprintf(what, sizeof what, "bias_gelu_forward16 x untouched n=%d cols=%d off=%d", n, cols, off);
    CHECK_BYTES_EQUAL(gpu16, gx, x, (total + off) * 4, what);
    gpu16->free(gpu16, gx), gpu16->free(gpu16, gb), gpu16->free(gpu16, gx16), gpu16->free(gpu16, gy16);
    free(x), free(bias), free(xc), free(y), free(want_x), free(want_y);
}

// RMSNorm's and LayerNorm's backward from the copy of their input: bitwise the same backend's fp32 op on the
// copy's values (dx, dw, db), accumulating or not, with weight gradients or frozen (dw NULL); `off` elements in
// (off 1: the copy 2-byte aligned, the scalar path).
static void test_norm_backward16(Backend *gpu16, int rms, int n, int h, int accumulate, int frozen, int off) {
    char what[128];
    size_t nh = (size_t)n * h;
    float *x0 = host_random(nh + off, -2.0f, 3.0f), *w = host_random(h, 0.5f, 1.5f);
    float *stats = host_random(2 * (size_t)n, 0.2f, 1.5f), *dy = host_random(nh, -1.0f, 1.0f);
    float *dx0 = host_random(nh, -1.0f, 1.0f), *dw0 = host_random(2 * (size_t)h, -1.0f, 1.0f);
    uint16_t *x16 = host_bf16(x0, nh + off);
    float *xf = host_unpacked(x16, nh + off);
    float *g_xf = dev_upload(gpu16, xf, (nh + off) * 4), *g_st = dev_upload(gpu16, stats, 2 * (size_t)n * 4);
    float *g_w = dev_upload(gpu16, w, (size_t)h * 4), *g_dy = dev_upload(gpu16, dy, nh * 4);
    uint16_t *g_x16 = dev_upload(gpu16, x16, (nh + off) * 2);
    float *gdx[2], *gdw[2];
    for (int run = 0; run < 2; run++) {   // run 0: the fp32 op on the unpacked values; run 1: from the copy
        gdx[run] = accumulate ? dev_upload(gpu16, dx0, nh * 4) : dev_poisoned(gpu16, nh * 4);
        gdw[run] = dev_upload(gpu16, dw0, 2 * (size_t)h * 4);
        float *dw = frozen ? NULL : gdw[run], *db = frozen ? NULL : gdw[run] + h;
        if (rms && run) gpu16->rmsnorm_backward16(gpu16, gdx[run], accumulate, dw, g_dy, g_x16 + off, g_st, g_w, n, h);
        else if (rms) gpu16->rmsnorm_backward(gpu16, gdx[run], accumulate, dw, g_dy, g_xf + off, g_st, g_w, n, h);
        else if (run)
            gpu16->layernorm_backward16(gpu16, gdx[run], accumulate, dw, db, g_dy, g_x16 + off, g_st, g_w, n, h);
        else gpu16->layernorm_backward(gpu16, gdx[run], accumulate, dw, db, g_dy, g_xf + off, g_st, g_w, n, h);
    }
    float *want_dx = host_download(gpu16, gdx[0], nh * 4), *want_dw = host_download(gpu16, gdw[0], 2 * (size_t)h * 4);
    snprintf(what, sizeof what, "%s_backward16 dx n=%d h=%d acc=%d frozen=%d off=%d", rms ? "rmsnorm" : "layernorm", n, h,
             accumulate, frozen, off);
    CHECK_BYTES_EQUAL(gpu16, gdx[1], want_dx, nh * 4, what);
    snprintf(what, sizeof what, "%s_backward16 dw, db n=%d h=%d acc=%d frozen=%d off=%d", rms ? "rmsnorm" : "layernorm",
             n, h, accumulate, frozen, off);
    CHECK_BYTES_EQUAL(gpu16, gdw[1], want_dw, 2 * (size_t)h * 4, what);
    for (int run = 0; run < 2; run++) gpu16->free(gpu16, gdx[run]), gpu16->free(gpu16, gdw[run]);
    gpu16->free(gpu16, g_xf), gpu16->free(gpu16, g_st), gpu16->free(gpu16, g_w), gpu16->free(gpu16, g_dy);
    gpu16->free(gpu16, g_x16);
    free(x0), free(w), free(stats), free(dy), free(dx0), free(dw0), free(x16), free(xf), free(want_dx), free(want_dw);
}

static void test_copies_ops(void) {
    printf("ops on bf16 copies\n");
    CHECK(!gpu->swiglu_forward16 && !gpu->swiglu_forward_pack16 && !gpu->swiglu_backward16 && !gpu->gelu_backward16 &&
              !gpu->bias_gelu_forward16 &&
              !cpu->swiglu_forward16 && !cpu->bias_gelu_forward16,
          "ops on bf16 copies offered by a backend that computes in fp32");
    Backend *gpu16 = cuda_or_skip(PRECISION_BF16);
    CHECK(gpu16->swiglu_forward16 && gpu16->swiglu_forward_pack16 && gpu16->swiglu_backward16 &&
              gpu16->gelu_backward16 && gpu16->bias_gelu_forward16,
          "the CUDA backend at bf16 lacks an op on bf16 copies");
    if (!gpu16->swiglu_forward16 || !gpu16->swiglu_forward_pack16 || !gpu16->swiglu_backward16 ||
        !gpu16->gelu_backward16 || !gpu16->bias_gelu_forward16)
        return;
    test_bias_gelu16(gpu16, 37, 68, 0);
    test_bias_gelu16(gpu16, 37, 68, 1);
    test_bias_gelu16(gpu16, 5, 45, 0);
    static const int sizes[][4] = {{37, 45, 0, 0}, {37, 68, 1, 0}, {37, 68, 0, 1}, {13, 176, 1, 1}, {64, 1100, 1, 0}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        test_swiglu16(gpu16, sizes[i][0], sizes[i][1], sizes[i][2], sizes[i][3]);
    test_gelu_backward16(gpu16, 4099, 0);
    test_gelu_backward16(gpu16, 4099, 1);
    test_gelu_backward16(gpu16, 3, 0);
    CHECK(gpu16->rmsnorm_backward16 && gpu16->layernorm_backward16 && !gpu->rmsnorm_backward16 &&
              !gpu->layernorm_backward16 && !cpu->rmsnorm_backward16 && !cpu->layernorm_backward16,
          "the norms' backward on bf16 copies: offered by the CUDA backend at bf16 only");
    if (gpu16->rmsnorm_backward16 && gpu16->layernorm_backward16) {
        // vector rows (h % 4 == 0) and scalar ones (h odd, or the copy 2 bytes off); rows across the dw tiles
        static const int norm_sizes[][3] = {{37, 68, 0}, {37, 68, 1}, {37, 45, 0}, {300, 96, 0}, {5, 1100, 0}};
        for (size_t i = 0; i < sizeof norm_sizes / sizeof norm_sizes[0]; i++)
            for (int rms = 0; rms < 2; rms++)
                for (int acc = 0; acc < 2; acc++)
                    test_norm_backward16(gpu16, rms, norm_sizes[i][0], norm_sizes[i][1], acc, acc, norm_sizes[i][2]);
    }
    backend_close(gpu16);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--rope-error")) {
        int i = atoi(argv[2]);
        return i >= 0 && i < ROPE_ERROR_CASES ? rope_error_child(i) : 2;
    }
    gpu = cuda_or_skip(PRECISION_FP32);
    char err[256] = "";
    cpu = backend_open("cpu", PRECISION_FP32, err, sizeof err);
    CHECK(cpu != NULL, "cpu backend: %s", err);
    if (!cpu) return check_summary();

    printf("RMSNorm\n");
    // scalar (h odd, or misaligned), vector (h % 4 == 0), wide rows (more columns than a block's
    // threads cover at once); rows across dw tiles of 128 with a partial last one
    test_rmsnorm_forward(37, 45, 0);
    test_rmsnorm_forward(37, 68, 0);
    test_rmsnorm_forward(37, 68, 1);
    test_rmsnorm_forward(5, 4100, 0);
    test_rmsnorm_forward(300, 512, 0);
    static const int rms_sizes[][3] = {{37, 45, 0}, {37, 68, 0}, {37, 68, 1}, {300, 70, 0}, {300, 68, 1}, {5, 4100, 0},
                                       {257, 96, 0}};
    for (size_t i = 0; i < sizeof rms_sizes / sizeof rms_sizes[0]; i++)
        for (int from_output = 0; from_output < 2; from_output++)
            for (int acc = 0; acc < 2; acc++)
                test_rmsnorm_backward(rms_sizes[i][0], rms_sizes[i][1], from_output, acc, rms_sizes[i][2]);

    printf("RoPE\n");
    // d/2 odd (d = 6, 10: scalar), d/2 % 4 == 0 (d = 8, 64: float4), ld past the heads, ld % 4 != 0,
    // rows not a multiple of b, pos0 > 0, θ ≠ 10000, a misaligned view
    static const RopeCase rope_cases[] = {
        {15, 3, 3, 6, 18, 0, 5, 10000.0f, 0},  {13, 3, 1, 10, 13, 4, 9, 500000.0f, 0}, {14, 2, 4, 8, 36, 2, 9, 10000.0f, 0},
        {14, 2, 4, 8, 33, 1, 8, 10000.0f, 0},  {12, 4, 5, 64, 324, 7, 10, 1e6f, 0},    {9, 1, 2, 128, 256, 100, 109, 5e5f, 0},
        // partial rotary: 96 of 128 (Phi-4-mini's 0.75) and 8 of 12 (float4 pairs), 6 of 16 (scalar)
        {9, 1, 3, 128, 384, 5, 14, 1e4f, 96}, {10, 2, 2, 16, 34, 0, 5, 1e4f, 6}, {12, 3, 2, 12, 24, 1, 5, 5e5f, 8},
    };
    for (size_t i = 0; i < sizeof rope_cases / sizeof rope_cases[0]; i++)
        for (int round = 0; round < 2; round++) {
            test_rope(rope_cases[i], round, 0);
            if (i == 2) test_rope(rope_cases[i], round, 1);
        }
    test_rope((RopeCase){65600, 2, 1, 8, 8, 0, 32800, 10000.0f, 0}, 0, 0);   // more rows than a grid's 65535
    for (int round = 0; round < 2; round++) {
        test_rope_qkv(10, 2, 6, 2, 8, 3, round);   // GQA: 6 query heads, 2 kv heads
        test_rope_qkv(7, 1, 3, 1, 6, 0, round);    // MQA, d/2 odd
    }
    for (int i = 0; i < ROPE_ERROR_CASES; i++) expect_rope_refused(i);

    printf("SwiGLU\n");
    for (int round = 0; round < 2; round++) {
        test_swiglu_forward(37, 45, 0, round, 0);
        test_swiglu_forward(37, 45, 1, round, 0);
        test_swiglu_forward(37, 68, 1, round, 0);
        test_swiglu_forward(37, 68, 0, round, 1);
        test_swiglu_forward(13, 176, 1, round, 0);
        test_swiglu_forward(64, 1100, 1, round, 0);
        for (int with_y = 0; with_y < 2; with_y++)
            for (int in_place = 0; in_place < 2; in_place++) {
                test_swiglu_backward(37, 45, with_y, in_place, round);
                test_swiglu_backward(37, 68, with_y, in_place, round);
            }
        test_swiglu_backward(13, 176, 1, 0, round);
        test_swiglu_backward(64, 1100, 1, 1, round);
    }
    test_copies_ops();
    test_swiglu_forward(65600, 4, 1, 0, 0);   // more rows than a grid's 65535
    test_swiglu_backward(65600, 3, 1, 0, 0);

    backend_close(gpu);
    backend_close(cpu);
    return check_summary();
}
