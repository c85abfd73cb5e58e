// LoRA and LoRA-FA parity with peft (issue 27; tests/reference/lora_ref.py, peft 0.21.2 on the pinned
// transformers, fp32, eager attention): random-initialised tiny llama (GQA, untied) and GPT-2 models, the
// same base weights, the same adapters (B set non-zero so that A's gradient is not zero) and the same
// batch. The loss must agree to 1e-5 relative, every A and B gradient to 1e-4 relative (max-abs
// normalised, as the Llama parity test); LoRA-FA's B gradients are peft's with lora_A.requires_grad =
// False; after three AdamW steps on the same batch the adapters agree to 1e-4 relative (A unchanged under
// LoRA-FA, bit for bit), leaving out the few elements whose first gradient is below the gradient tolerance
// (rel_conditioned says why; at most 0.5% of them).
// usage: test_parity_lora PYTHON LORA_REF WORKDIR
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "check.h"
#include "io/safetensors.h"
#include "model/gpt.h"
#include "backend/cpu/dropout.h"
#include "train/adamw.h"
#include "util/common.h"

static const double LOSS_TOL = 1e-5, GRAD_TOL = 1e-4, STEP_TOL = 1e-4;
enum { SEQ = 16, BATCH = 3, STEPS = 3 };
static const float LR = 1e-3f, BETA1 = 0.9f, BETA2 = 0.95f, EPS = 1e-8f, WD = 0.1f;

typedef struct {
    const char *name;
    int arch, rank, fa;
    float alpha;
    unsigned targets;             // LoraSite bits (0: every site of the family)
    float drop;                   // --lora-dropout (the masks go to peft: masks.safetensors)
    int rslora;                   // --lora-rslora: peft's use_rslora (α/√r)
    int qk_norm;                  // Qwen3's per-head q/k norms, with heads of 24 (the reference: Qwen3ForCausalLM)
    int fused;                    // Phi-3's qkv_proj and gate_up_proj, one adapter each (the reference: Phi3ForCausalLM)
} LoraCase;

#define S(x) (1u << (x))
static const LoraCase CASES[] = {
    {"llama_all", ARCH_LLAMA, 4, 0, 8.0f, 0, 0.0f, 0, 0, 0},
    {"llama_all_fa", ARCH_LLAMA, 4, 1, 8.0f, 0, 0.0f, 0, 0, 0},
    {"llama_qv_r8", ARCH_LLAMA, 8, 0, 16.0f, S(LORA_Q) | S(LORA_V), 0.0f, 0, 0, 0},
    {"gpt2_all", ARCH_GPT2, 4, 0, 8.0f, 0, 0.0f, 0, 0, 0},
    {"gpt2_all_fa", ARCH_GPT2, 4, 1, 8.0f, 0, 0.0f, 0, 0, 0},
    {"llama_all_drop", ARCH_LLAMA, 4, 0, 8.0f, 0, 0.25f, 0, 0, 0},
    {"llama_fa_drop", ARCH_LLAMA, 4, 1, 8.0f, 0, 0.25f, 0, 0, 0},
    {"gpt2_all_drop", ARCH_GPT2, 4, 0, 8.0f, 0, 0.25f, 0, 0, 0},
    {"llama_rslora_r16", ARCH_LLAMA, 16, 0, 8.0f, 0, 0.0f, 1, 0, 0},   // α/√r = 2 where α/r is 0.5
    {"gpt2_rslora_fa", ARCH_GPT2, 16, 1, 8.0f, 0, 0.0f, 1, 0, 0},
    {"qwen3_all", ARCH_LLAMA, 4, 0, 8.0f, 0, 0.0f, 0, 1, 0},
    {"qwen3_all_fa_drop", ARCH_LLAMA, 4, 1, 8.0f, 0, 0.25f, 0, 1, 0},
    // Phi-3: one A over q|k|v (B's rows q, kv, kv: 64, 32, 32) and one over gate|up
    {"phi3_all", ARCH_LLAMA, 4, 0, 8.0f, 0, 0.0f, 0, 0, 1},
    {"phi3_all_fa_drop", ARCH_LLAMA, 4, 1, 8.0f, 0, 0.25f, 0, 0, 1},
    {"phi3_qkv_gate_up_r8", ARCH_LLAMA, 8, 0, 16.0f, S(LORA_QKV) | S(LORA_GATE_UP), 0.0f, 0, 0, 1},
};
enum { N_CASES = sizeof CASES / sizeof CASES[0] };

typedef struct {
    GPT m;
    int32_t *tokens, *targets;
    double loss;
    float *grads;                 // the first step's trainable gradients
    char dir[512];
} CaseRun;

static GPTConfig case_config(const LoraCase *lc) {
    GPTConfig c = {.layers = 2, .hidden = 64, .heads = 4, .seq = SEQ, .batch = BATCH, .vocab = 96, .dropout = 0.0f,
                   .arch = lc->arch, .lora_rank = lc->rank, .lora_alpha = lc->alpha, .lora_targets = lc->targets,
                   .lora_fa = lc->fa, .lora_dropout = lc->drop, .lora_rslora = lc->rslora};
    if (lc->arch == ARCH_LLAMA) {
        c.kv_heads = 2;
        c.ffn = 176;
        c.rope_theta = 500000.0f;
        c.norm_eps = 1e-5f;
        c.tie_embeddings = -1;
        c.qk_norm = lc->qk_norm;
        c.head_dim = lc->qk_norm ? 24 : 0;   // q 96 wide where h is 64
        c.fused_proj = lc->fused;
    }
    gpt_config_resolve(&c);
    return c;
}

static int write_case_json(const char *path, const LoraCase *lc, const GPTConfig *c) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"arch\": \"%s\", \"r\": %d, \"alpha\": %.9g, \"fa\": %d, \"rslora\": %d, \"steps\": %d, \"lr\": %.9g, "
            "\"dropout\": %.9g, ", lc->qk_norm ? "qwen3" : lc->fused ? "phi3" : lc->arch ? "llama" : "gpt2", c->lora_rank, (double)c->lora_alpha, c->lora_fa,
            c->lora_rslora, STEPS, (double)LR, (double)c->lora_dropout);
    fprintf(f, "\"betas\": [%.9g, %.9g], \"eps\": %.9g, \"weight_decay\": %.9g, \"targets\": [", (double)BETA1,
            (double)BETA2, (double)EPS, (double)WD);
    const char *sep = "";
    for (int s = 0; s < LORA_SITES; s++) {
        if (!(c->lora_targets >> s & 1u)) continue;
        const char *mod = strrchr(lora_site_module(gpt_lora_family(c), (LoraSite)s), '.') + 1;   // peft matches the last part
        if (s == LORA_PROJ) mod = "attn.c_proj";   // GPT-2 has two c_proj: the suffix tells them apart
        if (s == LORA_FC2) mod = "mlp.c_proj";
        fprintf(f, "%s\"%s\"", sep, mod);
        sep = ", ";
    }
    fprintf(f, "], \"config\": {");
    if (lc->arch == ARCH_LLAMA)
        fprintf(f, "\"vocab_size\": %d, \"hidden_size\": %d, \"intermediate_size\": %d, \"num_hidden_layers\": %d, "
                "\"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"rms_norm_eps\": %.9g, "
                "\"rope_parameters\": {\"rope_theta\": %.9g, \"rope_type\": \"default\"}, \"max_position_embeddings\": %d, "
                "\"tie_word_embeddings\": false, \"hidden_act\": \"silu\", %s\"head_dim\": %d}}\n",
                c->vocab, c->hidden, c->ffn, c->layers, c->heads, c->kv_heads, (double)c->norm_eps, (double)c->rope_theta,
                c->seq, c->fused_proj ? "\"pad_token_id\": null, " : "\"attention_bias\": false, \"mlp_bias\": false, ",
                gpt_head_dim(c));
    else
        fprintf(f, "\"vocab_size\": %d, \"n_embd\": %d, \"n_layer\": %d, \"n_head\": %d, \"n_positions\": %d, "
                "\"activation_function\": \"gelu_new\", \"resid_pdrop\": 0.0, \"embd_pdrop\": 0.0, \"attn_pdrop\": 0.0, "
                "\"layer_norm_epsilon\": 1e-05, \"tie_word_embeddings\": true}}\n",
                c->vocab, c->hidden, c->layers, c->heads, c->seq);
    return fclose(f);
}

// Tensors of one list into f: adapters (names with "lora_") or the base (the others).
static void add_list(StFile *f, const ParamInfo *info, int n, const float *buf, int adapters) {
    for (int i = 0; i < n; i++) {
        const ParamInfo *pi = &info[i];
        if ((strstr(pi->name, ".lora_") != NULL) != adapters) continue;
        int64_t shape[2] = {pi->shape[0], pi->shape[1]};
        st_add(f, pi->name, ST_F32, pi->ndim, shape, buf + pi->offset);
    }
}

static int write_st(const char *dir, const char *file, const GPT *m, int adapters) {
    char path[700], err[512];
    StFile w;
    st_init(&w);
    st_add_meta(&w, "format", "pt");
    add_list(&w, m->frozen_info, m->n_frozen_info, m->frozen, adapters);
    add_list(&w, m->info, m->n_info, m->params, adapters);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int rc = st_write(&w, path, err, sizeof err);
    st_free(&w);
    CHECK(rc == 0, "write %s: %s", path, err);
    return rc;
}

static const StepCtx TRAIN = {7, 3, 0, 1};

// --lora-dropout: each adapted site's keep mask [s, b, in] per layer, drawn here from Philox as docs/LORA.md
// keys it (seed, step, sample = the sequence, layer, SITE_LORA + site, index position·in + column), not
// by ctron's model code: peft applies these masks, so a different draw or keying fails the loss.
static int write_masks(const char *dir, const GPT *m, float p) {
    StFile f;
    st_init(&f);
    st_add_meta(&f, "format", "pt");
    const GPTConfig *c = &m->cfg;
    long q = gpt_q_width(c), kv = gpt_kv_width(c), ff = c->ffn;
    float *bufs[64];
    int nb = 0;
    for (int l = 0; l < c->layers; l++)
        for (int s = 0; s < LORA_SITES && nb < 64; s++) {
            if (!(c->lora_targets >> s & 1u)) continue;
            long in = lora_width(lora_site((LoraSite)s)->in, c->hidden, q, kv, ff);
            float *mask = bufs[nb++] = xmalloc((size_t)SEQ * BATCH * (size_t)in * sizeof(float));
            DropoutSite site = {philox_key_from_seed(TRAIN.seed), TRAIN.step, (uint32_t)l, (uint32_t)SITE_LORA + (uint32_t)s, p};
            uint32_t thresh = dropout_keep_threshold(p);
            for (int si = 0; si < SEQ; si++)
                for (int bi = 0; bi < BATCH; bi++)
                    for (long col = 0; col < in; col++)
                        mask[((size_t)si * BATCH + bi) * (size_t)in + (size_t)col] =
                            (float)dropout_keep_at(site, thresh, TRAIN.sample0 + (uint32_t)bi, (uint64_t)si * (uint64_t)in + (uint64_t)col);
            char name[128];
            lora_param_name(gpt_lora_family(c), (LoraSite)s, l, 'A', name, sizeof name);
            *strstr(name, ".lora_A.weight") = 0;   // the peft module the mask belongs to
            int64_t shape[3] = {SEQ, BATCH, in};
            st_add(&f, name, ST_F32, 3, shape, mask);
        }
    char path[700], err[512];
    snprintf(path, sizeof path, "%s/masks.safetensors", dir);
    int rc = st_write(&f, path, err, sizeof err);
    CHECK(rc == 0, "write %s: %s", path, err);
    st_free(&f);
    for (int i = 0; i < nb; i++) free(bufs[i]);
    return rc;
}

static double forward_backward(CaseRun *r) {
    int n = SEQ * BATCH;
    StepCtx train = TRAIN;
    gpt_zero_grad(&r->m);
    double loss = gpt_forward(&r->m, r->tokens, r->targets, SEQ, BATCH, train, 1.0f / (float)n) / n;
    gpt_backward(&r->m, r->tokens, train);
    return loss;
}

static int prepare(CaseRun *r, const LoraCase *lc, const char *work) {
    GPTConfig cfg = case_config(lc);
    gpt_init(&r->m, &cfg, NULL);
    gpt_init_weights(&r->m, 42);
    GPT *m = &r->m;
    // B away from its zero initialisation (A's gradient is B-weighted), the same values for peft.
    for (int i = 0; i < m->n_info; i++) {
        ParamInfo *pi = &m->info[i];
        if (strstr(pi->name, "lora_B"))
            for (size_t e = 0; e < pi->numel; e++) m->params[pi->offset + e] = 0.05f * sinf((float)(e * 7 + (size_t)i));
    }
    for (int i = 0; i < m->n_frozen_info; i++) {   // Qwen3's frozen q/k norms away from 1, so that they matter
        const ParamInfo *pi = &m->frozen_info[i];
        if (strstr(pi->name, "q_norm") || strstr(pi->name, "k_norm"))
            for (size_t e = 0; e < pi->numel; e++) m->frozen[pi->offset + e] += 0.2f * sinf((float)(e * 3 + (size_t)i));
    }
    gpt_params_changed(m);
    int n = SEQ * BATCH;
    r->tokens = xmalloc((size_t)n * 4);
    r->targets = xmalloc((size_t)n * 4);
    uint32_t x = 777u + (uint32_t)(lc - CASES);
    for (int i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        r->tokens[i] = (int32_t)(x % (uint32_t)cfg.vocab);
        r->targets[i] = (int32_t)((x >> 8) % (uint32_t)cfg.vocab);
    }
    snprintf(r->dir, sizeof r->dir, "%s/%s", work, lc->name);
    mkdir(r->dir, 0755);
    char path[700], err[512];
    snprintf(path, sizeof path, "%s/case.json", r->dir);
    int rc = write_case_json(path, lc, &cfg);
    rc |= write_st(r->dir, "base.safetensors", m, 0);
    rc |= write_st(r->dir, "adapters.safetensors", m, 1);
    if (lc->drop > 0.0f) rc |= write_masks(r->dir, m, lc->drop);
    StFile bt;
    st_init(&bt);
    int64_t sb[2] = {SEQ, BATCH};
    st_add(&bt, "tokens", ST_I32, 2, sb, r->tokens);
    st_add(&bt, "targets", ST_I32, 2, sb, r->targets);
    snprintf(path, sizeof path, "%s/batch.safetensors", r->dir);
    rc |= st_write(&bt, path, err, sizeof err);
    st_free(&bt);
    r->loss = forward_backward(r);
    r->grads = xmalloc(m->n_params * sizeof(float));
    memcpy(r->grads, m->grads, m->n_params * sizeof(float));
    return rc;
}

// max |got − ref| / max |ref| over n floats.
static double rel_maxabs(const float *got, const float *ref, size_t n) {
    double maxref = 0.0, maxdiff = 0.0;
    for (size_t e = 0; e < n; e++) {
        maxref = fmax(maxref, fabs(ref[e]));
        maxdiff = fmax(maxdiff, fabs((double)got[e] - ref[e]));
    }
    return maxdiff / fmax(maxref, 1e-30);
}

// rel_maxabs over the elements whose first gradient g is above the gradient tolerance (GRAD_TOL·max|g|).
// AdamW divides each element's gradient by its own magnitude: where that is below the fp32 error of the
// gradient (ctron's and peft's agree to GRAD_TOL of the tensor's largest), the step's sign is rounding noise
// (±lr in either implementation), not a difference between them. *skipped counts those left out.
static double rel_conditioned(const float *got, const float *ref, const float *g, size_t n, size_t *skipped) {
    double maxref = 0.0, maxdiff = 0.0, maxg = 0.0;
    for (size_t e = 0; e < n; e++) maxg = fmax(maxg, fabs(g[e]));
    for (size_t e = 0; e < n; e++) {
        maxref = fmax(maxref, fabs(ref[e]));
        if (fabs(g[e]) < GRAD_TOL * maxg) { (*skipped)++; continue; }
        maxdiff = fmax(maxdiff, fabs((double)got[e] - ref[e]));
    }
    return maxdiff / fmax(maxref, 1e-30);
}

// AdamW steps on the same batch (the first with the gradients already taken), as the reference does.
static void train_steps(CaseRun *r) {
    AdamW opt;
    adamw_init(&opt, r->m.be, r->m.n_params, BETA1, BETA2, EPS, WD);
    for (int k = 0; k < STEPS; k++) {
        if (k) forward_backward(r);
        adamw_step(&opt, &r->m, LR, 1.0f);
    }
    adamw_free(&opt);
}

static void compare(CaseRun *r, const LoraCase *lc) {
    StFile out;
    char err[512], name[128];
    snprintf(name, sizeof name, "%s/out.safetensors", r->dir);
    if (st_read(&out, name, err, sizeof err) != 0) {
        CHECK(0, "%s: cannot read the reference's %s: %s", lc->name, name, err);
        return;
    }
    GPT *m = &r->m;
    const StTensor *lt = st_find(&out, "loss");
    double ref = lt && lt->nbytes == 4 ? ((const float *)lt->data)[0] : NAN, loss_rel = fabs(r->loss - ref) / fabs(ref);
    CHECK(loss_rel <= LOSS_TOL, "%s: loss ctron %.8f peft %.8f rel %.2e", lc->name, r->loss, ref, loss_rel);
    int n_grads = 0;
    for (int i = 0; i < out.n; i++) n_grads += strncmp(out.t[i].name, "grad.", 5) == 0;
    CHECK(n_grads == m->n_info, "%s: peft has %d trainable adapters, ctron %d", lc->name, n_grads, m->n_info);
    double worst = 0.0, worst_step = 0.0;
    size_t skipped = 0, total = 0;
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *pi = &m->info[i];
        CHECK(!lc->fa || strstr(pi->name, "lora_B"), "%s: LoRA-FA trains %s", lc->name, pi->name);
        snprintf(name, sizeof name, "grad.%s", pi->name);
        const StTensor *g = st_find(&out, name);
        CHECK(g && g->nbytes == pi->numel * 4, "%s: peft gradient %s missing or of another size", lc->name, name);
        if (!g || g->nbytes != pi->numel * 4) continue;
        double rr = rel_maxabs(r->grads + pi->offset, g->data, pi->numel);
        CHECK(rr <= GRAD_TOL, "%s: gradient %s rel %.2e", lc->name, pi->name, rr);
        worst = fmax(worst, rr);
    }
    train_steps(r);
    const ParamInfo *lists[2] = {m->info, m->frozen_info};
    const float *bufs[2] = {m->params, m->frozen};
    int counts[2] = {m->n_info, m->n_frozen_info};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < counts[k]; i++) {
            const ParamInfo *pi = &lists[k][i];
            if (!strstr(pi->name, ".lora_")) continue;
            snprintf(name, sizeof name, "step.%s", pi->name);
            const StTensor *p = st_find(&out, name);
            CHECK(p && p->nbytes == pi->numel * 4, "%s: peft adapter %s missing", lc->name, name);
            if (!p || p->nbytes != pi->numel * 4) continue;
            snprintf(name, sizeof name, "grad.%s", pi->name);
            const StTensor *g = k == 0 ? st_find(&out, name) : NULL;
            double rr = k == 0 && g ? rel_conditioned(bufs[k] + pi->offset, p->data, g->data, pi->numel, &skipped)
                                    : rel_maxabs(bufs[k] + pi->offset, p->data, pi->numel);
            total += pi->numel;
            if (k == 1) CHECK(memcmp(bufs[k] + pi->offset, p->data, pi->numel * 4) == 0, "%s: frozen %s moved", lc->name, pi->name);
            CHECK(rr <= STEP_TOL, "%s: after %d AdamW steps %s rel %.2e", lc->name, STEPS, pi->name, rr);
            worst_step = fmax(worst_step, rr);
        }
    CHECK(skipped * 200 <= total, "%s: %zu of %zu adapter elements have a first gradient below the gradient tolerance",
          lc->name, skipped, total);
    printf("%-13s loss ctron %.7f peft %.7f (rel %.1e), %d trainable adapters, worst gradient rel %.1e, after %d AdamW "
           "steps rel %.1e (%zu of %zu elements with an undetermined first step left out)\n", lc->name, r->loss, ref,
           loss_rel, m->n_info, worst, STEPS, worst_step, skipped, total);
    st_free(&out);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PYTHON LORA_REF WORKDIR\n", argv[0]);
        return 2;
    }
    const char *python = argv[1], *script = argv[2], *work = argv[3];
    mkdir(work, 0755);
    CaseRun runs[N_CASES];
    memset(runs, 0, sizeof runs);
    char cmd[8192];
    int len = snprintf(cmd, sizeof cmd, "'%s' '%s'", python, script), ok = 1;
    for (int c = 0; c < N_CASES; c++) {
        ok &= prepare(&runs[c], &CASES[c], work) == 0;
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " '%s'", runs[c].dir);
    }
    int rc = ok ? system(cmd) : -1;
    CHECK(rc == 0, "the reference failed (%d): %s", rc, cmd);
    for (int c = 0; c < N_CASES; c++) {
        if (rc == 0) compare(&runs[c], &CASES[c]);
        free(runs[c].tokens);
        free(runs[c].targets);
        free(runs[c].grads);
        gpt_free(&runs[c].m);
    }
    return check_summary();
}
