// Reversible blocks (issue 29 part 2): how exact is the inversion? For one micro-batch of text (bytes as
// tokens), a training step of the reversible model inverted and the same model stored (rev_store):
//   - the reconstruction error of every block's input streams, max |x − x̂| / max |x| (RevProbe);
//   - the gradient error against storing, relative L2, over all parameters and per layer.
// The weights are a checkpoint of ctron train --reversible (DIR), or the initialisation (--init L H).
// usage: rev_error (--ckpt STEP_DIR | --init LAYERS HIDDEN HEADS [llama]) --data TEXT [--bf16] [--seq S --batch B]
// A program for measurements (docs/MEMORY.md, "Reversible blocks"), not a test.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/checkpoint.h"
#include "model/gpt.h"
#include "model/reversible.h"
#include "util/common.h"

typedef struct {
    double loss;
    float *grads;
    double *recon;   // [L] (inverted only)
} StepResult;

static void run(const GPTConfig *cfg, const char *ckpt, int bf16, int store, const int32_t *tok, const int32_t *tgt,
                StepResult *out, GPT *keep_info) {
    MemoryPolicy p;
    policy_default(&p, cfg->layers);
    p.rev_store = store;
    p.act_dtype = bf16 ? ACT_BF16 : ACT_FP32;
    p.precision = bf16 ? 1 : 0;
    GPT m;
    gpt_init(&m, cfg, &p);
    if (ckpt) {
        GPT host;
        gpt_init_params(&host, cfg);
        char err[1024];
        if (ckpt_load(ckpt, &host, NULL, NULL, err, sizeof err) != 0) ctron_fatal("%s", err);
        memcpy(m.params, host.params, m.n_params * sizeof(float));
        gpt_free(&host);
        gpt_params_changed(&m);
    } else {
        gpt_init_weights(&m, 1234);
    }
    RevProbe *probe = store ? NULL : rev_probe_new(&m);
    m.rev_probe = probe;
    int n = cfg->seq * cfg->batch;
    StepCtx ctx = {1234, 1, 0, 1};
    gpt_zero_grad(&m);
    out->loss = gpt_forward(&m, tok, tgt, cfg->seq, cfg->batch, ctx, 1.0f / (float)n) / n;
    gpt_backward(&m, tok, ctx);
    out->grads = xmalloc(m.n_params * sizeof(float));
    memcpy(out->grads, m.grads, m.n_params * sizeof(float));
    out->recon = NULL;
    if (probe) {
        out->recon = xmalloc((size_t)cfg->layers * sizeof(double));
        memcpy(out->recon, probe->err, (size_t)cfg->layers * sizeof(double));
    }
    m.rev_probe = NULL;
    rev_probe_free(probe);
    if (keep_info) {   // the names and offsets, for per-layer sums
        keep_info->n_info = m.n_info;
        keep_info->info = xmalloc((size_t)m.n_info * sizeof(ParamInfo));
        memcpy(keep_info->info, m.info, (size_t)m.n_info * sizeof(ParamInfo));
        keep_info->n_params = m.n_params;
    }
    gpt_free(&m);
    policy_free(&p);
}

// The layer a parameter belongs to (-1: embedding, final norm, head).
static int layer_of(const char *name) {
    const char *p = strstr(name, "h.");
    if (p == name) return atoi(name + 2);
    p = strstr(name, "layers.");
    return p ? atoi(p + 7) : -1;
}

int main(int argc, char **argv) {
    const char *ckpt = NULL, *data = NULL;
    int bf16 = 0, seq = 64, batch = 4, L = 12, H = 128, A = 4, llama = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ckpt") && i + 1 < argc) ckpt = argv[++i];
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
        else if (!strcmp(argv[i], "--bf16")) bf16 = 1;
        else if (!strcmp(argv[i], "--seq") && i + 1 < argc) seq = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--init") && i + 3 < argc) {
            L = atoi(argv[++i]); H = atoi(argv[++i]); A = atoi(argv[++i]);
            if (i + 1 < argc && !strcmp(argv[i + 1], "llama")) { llama = 1; i++; }
        } else {
            fprintf(stderr, "usage: rev_error (--ckpt STEP_DIR | --init LAYERS HIDDEN HEADS [llama]) --data TEXT [--bf16] "
                            "[--seq S --batch B]\n");
            return 2;
        }
    }
    if (!data) { fprintf(stderr, "rev_error: --data TEXT is needed\n"); return 2; }
    GPTConfig cfg = {.layers = L, .hidden = H, .heads = A, .seq = seq, .batch = batch, .vocab = 256, .dropout = 0.1f,
                     .arch = llama ? ARCH_LLAMA : ARCH_GPT2, .kv_heads = llama ? A / 2 : 0, .reversible = 1};
    if (ckpt) {
        CkptState st;
        char err[1024];
        if (ckpt_read_state(ckpt, &st, err, sizeof err) != 0) ctron_fatal("%s", err);
        cfg = st.model;
        if (!cfg.reversible) ctron_fatal("%s is not a reversible-block checkpoint", ckpt);
        if (seq > cfg.seq) ctron_fatal("--seq %d beyond the checkpoint's %d", seq, cfg.seq);
        cfg.seq = seq;
        cfg.batch = batch;
    }
    gpt_config_resolve(&cfg);
    int n = seq * batch;
    int32_t *tok = xmalloc((size_t)n * 4), *tgt = xmalloc((size_t)n * 4);
    FILE *f = fopen(data, "rb");
    if (!f) ctron_fatal("cannot open %s", data);
    unsigned char *buf = xmalloc((size_t)n + 1);
    fseek(f, 1000003, SEEK_SET);   // somewhere in the middle of the text
    if (fread(buf, 1, (size_t)n + 1, f) != (size_t)n + 1) ctron_fatal("%s is too short", data);
    fclose(f);
    for (int si = 0; si < seq; si++)   // sequence-major [s, b]: sample bi is a contiguous stretch
        for (int bi = 0; bi < batch; bi++) {
            tok[si * batch + bi] = buf[bi * seq + si];
            tgt[si * batch + bi] = buf[bi * seq + si + 1];
        }
    StepResult inv, sto;
    GPT info = {0};
    run(&cfg, ckpt, bf16, 0, tok, tgt, &inv, &info);
    run(&cfg, ckpt, bf16, 1, tok, tgt, &sto, NULL);
    double *d2 = xcalloc(((size_t)cfg.layers + 1) * sizeof(double)), *r2 = xcalloc(((size_t)cfg.layers + 1) * sizeof(double));
    double D = 0, R = 0;
    for (int i = 0; i < info.n_info; i++) {
        const ParamInfo *pi = &info.info[i];
        int l = layer_of(pi->name), slot = l < 0 ? cfg.layers : l;
        for (size_t j = 0; j < pi->numel; j++) {
            double a = inv.grads[pi->offset + j], b = sto.grads[pi->offset + j];
            d2[slot] += (a - b) * (a - b);
            r2[slot] += b * b;
        }
    }
    for (int l = 0; l <= cfg.layers; l++) { D += d2[l]; R += r2[l]; }
    printf("%s L%d h%d %s %s s%d b%d: loss %.6f (stored %.6f)\n", ckpt ? "trained" : "init", cfg.layers, cfg.hidden,
           cfg.arch == ARCH_LLAMA ? "llama" : "gpt2", bf16 ? "bf16" : "fp32", seq, batch, inv.loss, sto.loss);
    double worst = 0;
    for (int l = 0; l < cfg.layers; l++) worst = fmax(worst, inv.recon[l]);
    printf("  reconstruction max|x-x^|/max|x|: top layer %.2e, bottom layer %.2e, worst %.2e\n", inv.recon[cfg.layers - 1],
           inv.recon[0], worst);
    printf("  gradient rel L2 vs stored: all %.2e, top layer %.2e, bottom layer %.2e, embedding/head %.2e\n",
           sqrt(D / R), sqrt(d2[cfg.layers - 1] / r2[cfg.layers - 1]), sqrt(d2[0] / r2[0]),
           sqrt(d2[cfg.layers] / r2[cfg.layers]));
    printf("  per layer (recon, grad):");
    for (int l = 0; l < cfg.layers; l++) printf(" %d:%.1e/%.1e", l, inv.recon[l], sqrt(d2[l] / r2[l]));
    printf("\n");
    free(inv.grads); free(sto.grads); free(inv.recon); free(d2); free(r2); free(info.info); free(tok); free(tgt); free(buf);
    return 0;
}
