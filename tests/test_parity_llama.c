// Llama parity with transformers (issue 25 item 7): ctron's --arch llama and the pinned transformers'
// LlamaForCausalLM (Qwen2ForCausalLM for the qkv bias; tests/reference/llama_ref.py, fp32, eager
// attention) run the same weights and batch. ctron writes each case as a Hugging Face model directory
// (config.json + model.safetensors under its own parameter names, which are HF's) and the batch; one
// start of Python computes every case. Logits and the loss must agree to 1e-5 relative, every
// parameter gradient to 1e-4 relative (max-abs normalised, as the GPT-2 parity test). The reference
// itself is within 2.3e-6 of a float64 computation (tests/reference/test_llama_ref_selfcheck.py), so
// the gradient tolerance leaves ctron's fp32 some 40× that.
// usage: test_parity_llama PYTHON LLAMA_REF WORKDIR
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "check.h"
#include "io/safetensors.h"
#include "model/gpt.h"
#include "util/common.h"

static const double LOGIT_TOL = 1e-5, LOSS_TOL = 1e-5, GRAD_TOL = 1e-4;

typedef struct {
    const char *name;
    int kv_heads, tie;            // tie: 1 tied, -1 untied (GPTConfig.tie_embeddings)
    float rope_theta;
    int qkv_bias;                 // Qwen2: q, k and v biases (the reference is Qwen2ForCausalLM)
    int qk_norm;                  // Qwen3: per-head q/k RMSNorms (the reference is Qwen3ForCausalLM)
    int head_dim;                 // 0: hidden / heads
    int fused;                    // Phi-3: q|k|v one qkv_proj, gate|up one gate_up_proj (Phi3ForCausalLM)
    int longrope_orig;            // Phi-3's LongRoPE with this original context (0: none; below SEQ: the long factors)
    int window;                   // sliding window (Mistral; Phi-3 when fused): key j seen by query i iff i − j < W
    int rotary;                   // partial rotary (Phi-4-mini): RoPE on the first `rotary` dims of a head (0: all)
} ParityCase;

// heads 4, hidden 64 (d = 16), FFN 176 (not a multiple of 64 or of 8h/3), vocab 96.
static const ParityCase CASES[] = {
    {"gqa_untied", 2, -1, 500000.0f, 0, 0, 0, 0, 0, 0, 0},
    {"gqa_tied", 2, 1, 500000.0f, 0, 0, 0, 0, 0, 0, 0},
    {"mha_untied", 4, -1, 10000.0f, 0, 0, 0, 0, 0, 0, 0},
    {"mqa_tied", 1, 1, 500000.0f, 0, 0, 0, 0, 0, 0, 0},
    {"mqa_untied", 1, -1, 1000000.0f, 0, 0, 0, 0, 0, 0, 0},
    {"gqa_qkv_bias", 2, -1, 500000.0f, 1, 0, 0, 0, 0, 0, 0},
    // Qwen3: q/k norms with heads of h/a (tied, as Qwen3 0.6B–4B), wider ones (24: q 96 wide) and narrower (8, MQA)
    {"qwen3_gqa_tied", 2, 1, 1000000.0f, 0, 1, 0, 0, 0, 0, 0},
    {"qwen3_head_dim24", 2, -1, 1000000.0f, 0, 1, 24, 0, 0, 0, 0},
    {"qwen3_mqa_head_dim8", 1, -1, 10000.0f, 0, 1, 8, 0, 0, 0, 0},
    // Phi-3: the fused tensors' rows are ctron's q|k|v and gate|up slabs (MHA as Phi-3-mini, GQA as Phi-4, tied as
    // Phi-4-mini, and heads wider than h/a)
    {"phi3_mha_untied", 4, -1, 10000.0f, 0, 0, 0, 1, 0, 0, 0},
    {"phi3_gqa_untied", 2, -1, 250000.0f, 0, 0, 0, 1, 0, 0, 0},
    {"phi3_gqa_tied_head_dim24", 2, 1, 10000.0f, 0, 0, 24, 1, 0, 0, 0},
    // LongRoPE (Phi-3-mini-128k, Phi-3.5): a sequence within the original context takes the short factors, a
    // longer one the long factors; cos and sin × √(1 + ln(max/orig)/ln(orig)) (max = 4·orig)
    {"phi3_longrope_short", 2, -1, 10000.0f, 0, 0, 0, 1, 64, 0, 0},
    {"phi3_longrope_long", 2, -1, 10000.0f, 0, 0, 0, 1, 16, 0, 0},
    // sliding windows shorter than the sequence: Mistral (MistralForCausalLM) and Phi-3-mini-4k's kind
    {"mistral_window5_gqa", 2, -1, 1000000.0f, 0, 0, 0, 0, 0, 5, 0},
    {"mistral_window1_mqa_tied", 1, 1, 10000.0f, 0, 0, 0, 0, 0, 1, 0},
    {"phi3_window19", 4, -1, 10000.0f, 0, 0, 0, 1, 0, 19, 0},
    // partial rotary (Phi-4-mini: partial_rotary_factor 0.75, LongRoPE over the rotated dims, tied): half of d = 16,
    // and 12 of 16 with LongRoPE's 6 long factors
    {"phi3_partial_rotary8_gqa", 2, -1, 10000.0f, 0, 0, 0, 1, 0, 0, 8},
    {"phi3_partial_rotary12_longrope_tied", 2, 1, 10000.0f, 0, 0, 0, 1, 16, 0, 12},
};
enum { N_CASES = sizeof CASES / sizeof CASES[0], SEQ = 32, BATCH = 3 };

typedef struct {
    GPT m;
    int32_t *tokens, *targets;
    float *logits;                // [s, b, v] of the evaluation forward
    double loss;                  // mean over the s·b positions (training forward)
    char dir[512], batch[512], out[512];
} CaseRun;

static GPTConfig case_config(const ParityCase *pc) {
    GPTConfig c = {.layers = 2, .hidden = 64, .heads = 4, .seq = SEQ, .batch = BATCH, .vocab = 96, .dropout = 0.0f,
                   .arch = ARCH_LLAMA, .kv_heads = pc->kv_heads, .ffn = 176, .rope_theta = pc->rope_theta,
                   .norm_eps = 1e-5f, .tie_embeddings = pc->tie, .qkv_bias = pc->qkv_bias, .qk_norm = pc->qk_norm,
                   .head_dim = pc->head_dim, .fused_proj = pc->fused, .sliding_window = pc->window,
                   .rotary_dim = pc->rotary};
    if (pc->longrope_orig) {   // factors away from 1, different per frequency and between the two lists
        RopeScaling *sc = &c.rope_scaling;
        sc->type = ROPE_LONGROPE;
        sc->original_max_positions = pc->longrope_orig;
        sc->n_factors = gpt_rotary_dim(&c) / 2;   // one per rotated pair
        sc->attention_factor = sqrt(1.0 + log(4.0) / log((double)pc->longrope_orig));
        for (int j = 0; j < sc->n_factors; j++) {
            sc->short_factor[j] = 1.0f + 0.25f * (float)j;
            sc->long_factor[j] = 1.5f + 2.0f * (float)j;
        }
        c.max_positions = 4 * pc->longrope_orig;
    }
    gpt_config_resolve(&c);
    return c;
}

// transformers 5's config.json keys (rope_parameters; llama_ref.py also reads 4.x's top-level rope_theta).
static int write_config(const char *path, const GPTConfig *c) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int mistral = c->sliding_window && !c->fused_proj;   // LlamaConfig has no window: MistralConfig has
    const char *family = c->qkv_bias ? "qwen2" : c->qk_norm ? "qwen3" : c->fused_proj ? "phi3" : mistral ? "mistral" : "llama";
    fprintf(f, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n", c->qkv_bias ? "Qwen2ForCausalLM" :
            c->qk_norm ? "Qwen3ForCausalLM" : c->fused_proj ? "Phi3ForCausalLM" : mistral ? "MistralForCausalLM"
            : "LlamaForCausalLM", family);
    fprintf(f, "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n", c->vocab, c->hidden, c->ffn);
    fprintf(f, "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n",
            c->layers, c->heads, c->kv_heads);
    const RopeScaling *sc = &c->rope_scaling;
    fprintf(f, "  \"rms_norm_eps\": %.9g,\n  \"rope_parameters\": {\"rope_theta\": %.9g, \"rope_type\": \"%s\"",
            (double)c->norm_eps, (double)c->rope_theta, sc->type == ROPE_LONGROPE ? "longrope" : "default");
    if (c->rotary_dim)   // transformers 5 keeps it in rope_parameters; rotary dims = int(head_dim · factor)
        fprintf(f, ", \"partial_rotary_factor\": %.17g", (double)c->rotary_dim / gpt_head_dim(c));
    if (sc->type == ROPE_LONGROPE) {   // attention_factor left out: transformers derives it from the two contexts
        const float *lists[2] = {sc->short_factor, sc->long_factor};
        for (int k = 0; k < 2; k++) {
            fprintf(f, ", \"%s_factor\": [", k ? "long" : "short");
            for (int j = 0; j < sc->n_factors; j++) fprintf(f, "%s%.9g", j ? ", " : "", (double)lists[k][j]);
            fprintf(f, "]");
        }
        fprintf(f, ", \"original_max_position_embeddings\": %d", sc->original_max_positions);
    }
    if (sc->type == ROPE_LONGROPE)   // Phi3Config's own key (4096 when absent) wins over the dict's
        fprintf(f, "},\n  \"original_max_position_embeddings\": %d", sc->original_max_positions);
    fprintf(f, "%s,\n  \"max_position_embeddings\": %d,\n  \"tie_word_embeddings\": %s,\n  \"hidden_act\": \"silu\",\n",
            sc->type == ROPE_LONGROPE ? "" : "}", c->max_positions > c->seq ? c->max_positions : c->seq,
            gpt_tied(c) ? "true" : "false");
    char window[32] = "null";
    if (c->sliding_window) snprintf(window, sizeof window, "%d", c->sliding_window);
    if (c->fused_proj)   // Phi3Config's default pad id 32000 lies outside this vocabulary
        fprintf(f, "  \"head_dim\": %d,\n  \"sliding_window\": %s,\n  \"pad_token_id\": null,\n", gpt_head_dim(c), window);
    else if (mistral) fprintf(f, "  \"head_dim\": %d,\n  \"sliding_window\": %s,\n", gpt_head_dim(c), window);
    else if (!c->qkv_bias) fprintf(f, "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n  \"head_dim\": %d,\n", gpt_head_dim(c));
    if (c->qkv_bias || c->qk_norm) fprintf(f, "  \"use_sliding_window\": false,\n");
    fprintf(f, "  \"attention_dropout\": 0.0,\n  \"dtype\": \"float32\"\n}\n");
    return fclose(f);
}

// Builds the case's model and batch, runs ctron's evaluation and training forward and its backward,
// and writes the HF directory and batch the reference reads.
static int prepare(CaseRun *r, const ParityCase *pc, const char *work) {
    GPTConfig cfg = case_config(pc);
    gpt_init(&r->m, &cfg, NULL);
    gpt_init_weights(&r->m, 42);
    GPT *m = &r->m;
    // RMSNorm weights away from 1 and non-zero biases, so that their gradients are exercised.
    for (int i = 0; i < m->n_info; i++) {
        ParamInfo *pi = &m->info[i];
        if (strstr(pi->name, "norm") || strstr(pi->name, "bias"))
            for (size_t e = 0; e < pi->numel; e++) m->params[pi->offset + e] += 0.1f * sinf((float)(e * 7 + (size_t)i));
    }
    gpt_params_changed(m);
    int s = SEQ, b = BATCH, n = s * b, v = cfg.vocab;
    r->tokens = xmalloc((size_t)n * 4);
    r->targets = xmalloc((size_t)n * 4);
    uint32_t x = 12345u + (uint32_t)(pc - CASES);
    for (int i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        r->tokens[i] = (int32_t)(x % (uint32_t)v);
        r->targets[i] = (int32_t)((x >> 8) % (uint32_t)v);
    }
    StepCtx eval = {7, 3, 0, 0}, train = {7, 3, 0, 1};
    gpt_forward(m, r->tokens, r->targets, s, b, eval, 1.0f);
    r->logits = xmalloc((size_t)n * v * sizeof(float));
    memcpy(r->logits, m->logits, (size_t)n * v * sizeof(float));
    gpt_zero_grad(m);
    r->loss = gpt_forward(m, r->tokens, r->targets, s, b, train, 1.0f / (float)n) / n;
    gpt_backward(m, r->tokens, train);

    char path[600], err[512];
    snprintf(r->dir, sizeof r->dir, "%s/%s", work, pc->name);
    snprintf(r->batch, sizeof r->batch, "%s/%s.batch.safetensors", work, pc->name);
    snprintf(r->out, sizeof r->out, "%s/%s.out.safetensors", work, pc->name);
    mkdir(r->dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", r->dir);
    if (write_config(path, &cfg) != 0) { CHECK(0, "%s: cannot write %s", pc->name, path); return -1; }
    StFile w;
    st_init(&w);
    st_add_meta(&w, "format", "pt");
    for (int i = 0; i < m->n_info; i++) {
        ParamInfo *pi = &m->info[i];
        int64_t shape[2] = {pi->shape[0], pi->shape[1]};
        st_add(&w, pi->name, ST_F32, pi->ndim, shape, m->params + pi->offset);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", r->dir);
    int rc = st_write(&w, path, err, sizeof err);
    st_free(&w);
    CHECK(rc == 0, "%s: write %s: %s", pc->name, path, err);
    StFile bt;
    st_init(&bt);
    int64_t sb[2] = {s, b};
    st_add(&bt, "tokens", ST_I32, 2, sb, r->tokens);
    st_add(&bt, "targets", ST_I32, 2, sb, r->targets);
    int rc2 = st_write(&bt, r->batch, err, sizeof err);
    st_free(&bt);
    CHECK(rc2 == 0, "%s: write %s: %s", pc->name, r->batch, err);
    return rc || rc2 ? -1 : 0;
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

static void compare(CaseRun *r, const ParityCase *pc) {
    StFile out;
    char err[512];
    if (st_read(&out, r->out, err, sizeof err) != 0) {
        CHECK(0, "%s: cannot read the reference's %s: %s", pc->name, r->out, err);
        return;
    }
    GPT *m = &r->m;
    size_t n_logits = (size_t)SEQ * BATCH * m->cfg.vocab;
    const StTensor *lt = st_find(&out, "loss"), *gt = st_find(&out, "logits");
    double ref_loss = lt && lt->nbytes == 4 ? ((const float *)lt->data)[0] : NAN;
    double loss_rel = fabs(r->loss - ref_loss) / fabs(ref_loss);
    CHECK(loss_rel <= LOSS_TOL, "%s: loss ctron %.8f transformers %.8f rel %.2e", pc->name, r->loss, ref_loss, loss_rel);
    CHECK(gt && gt->nbytes == n_logits * 4, "%s: reference logits missing or not [s, b, v]", pc->name);
    double logit_rel = gt && gt->nbytes == n_logits * 4 ? rel_maxabs(r->logits, gt->data, n_logits) : INFINITY;
    CHECK(logit_rel <= LOGIT_TOL, "%s: logits rel %.2e", pc->name, logit_rel);
    double worst = 0.0;
    const char *worst_name = "";
    int n_grads = 0;
    for (int i = 0; i < out.n; i++) n_grads += strncmp(out.t[i].name, "grad.", 5) == 0;
    CHECK(n_grads == m->n_info, "%s: the reference has %d gradients, ctron %d parameters", pc->name, n_grads, m->n_info);
    for (int i = 0; i < m->n_info; i++) {
        ParamInfo *pi = &m->info[i];
        char gname[96];
        snprintf(gname, sizeof gname, "grad.%s", pi->name);
        const StTensor *g = st_find(&out, gname);
        CHECK(g && g->nbytes == pi->numel * 4, "%s: reference gradient %s missing or wrong size", pc->name, gname);
        if (!g || g->nbytes != pi->numel * 4) continue;
        double rr = rel_maxabs(m->grads + pi->offset, g->data, pi->numel);
        CHECK(rr <= GRAD_TOL, "%s: gradient %s rel %.2e", pc->name, pi->name, rr);
        if (rr > worst) { worst = rr; worst_name = pi->name; }
    }
    printf("%-13s loss ctron %.7f transformers %.7f (rel %.1e), logits rel %.1e, worst gradient rel %.1e (%s)\n",
           pc->name, r->loss, ref_loss, loss_rel, logit_rel, worst, worst_name);
    st_free(&out);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PYTHON LLAMA_REF WORKDIR\n", argv[0]);
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
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " '%s' '%s' '%s'", runs[c].dir, runs[c].batch, runs[c].out);
    }
    CHECK(len < (int)sizeof cmd, "command line too long");
    int rc = ok && len < (int)sizeof cmd ? system(cmd) : -1;
    CHECK(rc == 0, "the reference failed (%d): %s", rc, cmd);
    for (int c = 0; c < N_CASES; c++) {
        if (rc == 0) compare(&runs[c], &CASES[c]);
        free(runs[c].tokens);
        free(runs[c].targets);
        free(runs[c].logits);
        gpt_free(&runs[c].m);
    }
    return check_summary();
}
