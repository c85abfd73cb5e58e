// Whole-model parity with PyTorch: ctron and tests/reference/gpt_ref.py (float64) run the same
// weights, batch and dropout masks; loss must agree to 1e-5 relative and every parameter gradient
// to 1e-4 relative (max-abs normalised). Runs with dropout 0 and with dropout 0.1.
// usage: test_parity PYTHON REF_SCRIPT WORKDIR
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "check.h"
#include "io/safetensors.h"
#include "model/gpt.h"
#include "util/common.h"

// Mixed precision against PyTorch's CPU autocast (bf16 GEMMs, fp32 master weights). The two round at
// different points — autocast also rounds GEMM outputs and runs GeLU and the residual adds on bf16
// tensors; ctron keeps those in fp32 and rounds only GEMM inputs and kept activations — so each
// differs from exact arithmetic by a few units of bf16 roundoff u = 2^-8 ≈ 3.9e-3 per rounding on the
// path. A gradient passes through about 2L+2 rounded GEMM stages forward and as many backward, whose
// errors add in quadrature (independent signs): ~u·√(4L+4) ≈ 1.1e-2 relative for L = 2. The test
// allows 4e-2 (max-abs normalised, about 3.5× that) for gradients and 2u for the loss, which averages
// the per-token errors.
static const double BF16_GRAD_TOL = 4e-2, BF16_LOSS_TOL = 7.8e-3;

static void run_case(const char *python, const char *script, const char *dir, float dropout, int bf16) {
    GPTConfig cfg = {.layers = 2, .hidden = 64, .heads = 4, .seq = 32, .batch = 3, .vocab = 256, .dropout = dropout};
    GPT m;
    MemoryPolicy pol;
    policy_default(&pol, cfg.layers);
    pol.act_dtype = bf16 ? ACT_BF16 : ACT_FP32;
    pol.precision = bf16 ? PRECISION_BF16 : PRECISION_FP32;
    gpt_init(&m, &cfg, &pol);
    policy_free(&pol);
    gpt_init_weights(&m, 42);
    // Non-trivial LN and bias parameters so their gradients are exercised.
    for (int i = 0; i < m.n_info; i++) {
        ParamInfo *pi = &m.info[i];
        if (strstr(pi->name, "bias") || strstr(pi->name, "ln_"))
            for (size_t e = 0; e < pi->numel; e++)
                m.params[pi->offset + e] += 0.05f * sinf((float)(e * 7 + (size_t)i));
    }
    int s = cfg.seq, b = cfg.batch, h = cfg.hidden, a = cfg.heads, n = s * b;
    int32_t *tokens = xmalloc((size_t)n * 4), *targets = xmalloc((size_t)n * 4);
    uint32_t x = 12345;
    for (int i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        tokens[i] = (int32_t)(x % 256);
        targets[i] = (int32_t)((x >> 8) % 256);
    }
    StepCtx ctx = {7, 3, 0, 1};
    gpt_zero_grad(&m);
    double loss = gpt_forward(&m, tokens, targets, s, b, ctx, 1.0f / (float)n) / n;

    StFile in;
    st_init(&in);
    char buf[64];
    snprintf(buf, sizeof buf, "%d", cfg.layers); st_add_meta(&in, "layers", buf);
    snprintf(buf, sizeof buf, "%d", h); st_add_meta(&in, "hidden", buf);
    snprintf(buf, sizeof buf, "%d", a); st_add_meta(&in, "heads", buf);
    snprintf(buf, sizeof buf, "%d", s); st_add_meta(&in, "seq", buf);
    snprintf(buf, sizeof buf, "%d", b); st_add_meta(&in, "batch", buf);
    snprintf(buf, sizeof buf, "%d", cfg.vocab); st_add_meta(&in, "vocab", buf);
    snprintf(buf, sizeof buf, "%.9g", (double)dropout); st_add_meta(&in, "dropout", buf);
    st_add_meta(&in, "precision", bf16 ? "bf16" : "fp64");
    int64_t sb[2] = {s, b}, sbh[3] = {s, b, h}, bass[4] = {b, a, s, s};
    st_add(&in, "tokens", ST_I32, 2, sb, tokens);
    st_add(&in, "targets", ST_I32, 2, sb, targets);
    for (int i = 0; i < m.n_info; i++) {
        ParamInfo *pi = &m.info[i];
        int64_t shape[2] = {pi->shape[0], pi->shape[1]};
        st_add(&in, pi->name, ST_F32, pi->ndim, shape, m.params + pi->offset);
    }
    // The masks ctron drew (they live in the arena until backward releases them).
    char names[64][48];
    int nn = 0;
    if (dropout > 0.0f) {
        st_add(&in, "mask.emb", ST_U8, 3, sbh, m.act->model_acts.saved[ACT_EMB_MASK]);
        for (int l = 0; l < cfg.layers; l++) {
            snprintf(names[nn], 48, "mask.h.%d.attn", l); st_add(&in, names[nn++], ST_U8, 4, bass, m.act->blocks[l].saved[ACT_ATTN_MASK]);
            snprintf(names[nn], 48, "mask.h.%d.drop1", l); st_add(&in, names[nn++], ST_U8, 3, sbh, m.act->blocks[l].saved[ACT_DROP1_MASK]);
            snprintf(names[nn], 48, "mask.h.%d.drop2", l); st_add(&in, names[nn++], ST_U8, 3, sbh, m.act->blocks[l].saved[ACT_DROP2_MASK]);
        }
    }
    char in_path[512], out_path[512], cmd[2048], err[512];
    snprintf(in_path, sizeof in_path, "%s/in_p%g%s.safetensors", dir, (double)dropout, bf16 ? "_bf16" : "");
    snprintf(out_path, sizeof out_path, "%s/out_p%g%s.safetensors", dir, (double)dropout, bf16 ? "_bf16" : "");
    CHECK(st_write(&in, in_path, err, sizeof err) == 0, "write %s: %s", in_path, err);
    st_free(&in);
    gpt_backward(&m, tokens, ctx);

    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' '%s'", python, script, in_path, out_path);
    int rc = system(cmd);
    CHECK(rc == 0, "reference script failed (%d): %s", rc, cmd);
    StFile out;
    if (rc != 0 || st_read(&out, out_path, err, sizeof err) != 0) {
        CHECK(0, "cannot read reference output %s", out_path);
        gpt_free(&m);
        return;
    }
    const StTensor *lt = st_find(&out, "loss");
    double ref_loss = lt ? ((const float *)lt->data)[0] : NAN;
    double rel = fabs(loss - ref_loss) / fabs(ref_loss);
    const char *mode = bf16 ? "bf16 vs autocast" : "fp32 vs fp64";
    double loss_tol = bf16 ? BF16_LOSS_TOL : 1e-5, grad_tol = bf16 ? BF16_GRAD_TOL : 1e-4;
    CHECK(rel < loss_tol, "p=%g %s: loss ctron %.8f torch %.8f rel %.2e", (double)dropout, mode, loss, ref_loss, rel);
    printf("p=%g %s: loss ctron %.7f torch %.7f (rel %.1e)\n", (double)dropout, mode, loss, ref_loss, rel);
    double worst = 0.0;
    const char *worst_name = "";
    for (int i = 0; i < m.n_info; i++) {
        ParamInfo *pi = &m.info[i];
        char gname[96];
        snprintf(gname, sizeof gname, "grad.%s", pi->name);
        const StTensor *gt = st_find(&out, gname);
        CHECK(gt && gt->nbytes == pi->numel * 4, "reference gradient %s missing or wrong size", gname);
        if (!gt || gt->nbytes != pi->numel * 4) continue;
        const float *ref = gt->data, *got = m.grads + pi->offset;
        double maxref = 0.0, maxdiff = 0.0;
        for (size_t e = 0; e < pi->numel; e++) {
            maxref = fmax(maxref, fabs(ref[e]));
            maxdiff = fmax(maxdiff, fabs((double)got[e] - ref[e]));
        }
        double r = maxdiff / fmax(maxref, 1e-12);
        CHECK(r < grad_tol, "p=%g gradient %s: max|diff| %.3e, max|ref| %.3e, rel %.2e", (double)dropout, pi->name,
              maxdiff, maxref, r);
        if (r > worst) { worst = r; worst_name = pi->name; }
    }
    printf("p=%g %s: worst gradient rel error %.2e (%s)\n", (double)dropout, mode, worst, worst_name);
    st_free(&out);
    free(tokens);
    free(targets);
    gpt_free(&m);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PYTHON REF_SCRIPT WORKDIR\n", argv[0]);
        return 2;
    }
    mkdir(argv[3], 0755);
    for (int bf16 = 0; bf16 < 2; bf16++) {
        run_case(argv[1], argv[2], argv[3], 0.0f, bf16);
        run_case(argv[1], argv[2], argv[3], 0.1f, bf16);
    }
    return check_summary();
}
