// The parity dump of ctron eval: one batch of input_ids [B, T] through the model, as transformers runs
// it with labels = input_ids: logits [B, T, V]; loss, the mean cross-entropy of position t predicting
// token t+1 over the B·(T−1) shifted positions; and that loss's gradient for every parameter under its
// HF name and orientation. ctron's rows are sequence-major [s, b]: row s·B + b is token s of sequence b.
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "cli/args.h"
#include "cli/eval_cmd.h"
#include "io/hf_names.h"
#include "io/safetensors.h"
#include "util/common.h"

#define CMD "eval"

typedef struct {
    int B, T;
    int32_t *ids;                 // [B, T] as the file holds them
} IdBatch;

// input_ids: I32 or I64, [B, T] with T >= 2 (one shifted position at least), every id in the vocabulary.
static int read_ids(const char *path, int vocab, IdBatch *b, char *err, size_t errlen) {
    StFile f;
    if (st_read(&f, path, err, errlen) != 0) return -1;
    const StTensor *t = st_find(&f, "input_ids");
    int rc = -1;
    if (!t) {
        snprintf(err, errlen, "'%s' has no tensor 'input_ids'", path);
    } else if ((t->dtype != ST_I32 && t->dtype != ST_I64) || t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 2 ||
               t->shape[0] > 65536 || t->shape[1] > (1 << 24)) {
        snprintf(err, errlen, "'%s': tensor 'input_ids' is %s with %d dimensions; expected I32 or I64 [B, T] with "
                 "T >= 2", path, st_dtype_name(t->dtype), t->ndim);
    } else {
        b->B = (int)t->shape[0];
        b->T = (int)t->shape[1];
        size_t n = (size_t)b->B * b->T;
        b->ids = xmalloc(n * sizeof(int32_t));
        rc = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            int64_t v;
            if (t->dtype == ST_I64) {
                memcpy(&v, (const uint8_t *)t->data + 8 * i, 8);
            } else {
                int32_t v32;
                memcpy(&v32, (const uint8_t *)t->data + 4 * i, 4);
                v = v32;
            }
            if (v < 0 || v >= vocab) {
                snprintf(err, errlen, "'%s': input_ids[%zu][%zu] is %lld, outside the model's vocabulary 0..%d", path,
                         i / (size_t)b->T, i % (size_t)b->T, (long long)v, vocab - 1);
                rc = -1;
            }
            b->ids[i] = (int32_t)v;
        }
        if (rc) free(b->ids);
    }
    st_free(&f);
    return rc;
}

// The mean over the B·(T−1) shifted positions of log Σ exp(z) − z[next], from fp32 logits [T, B, V].
static double shifted_loss(const float *logits, const IdBatch *b, int V) {
    double sum = 0.0;
    for (int s = 0; s + 1 < b->T; s++)
        for (int bi = 0; bi < b->B; bi++) {
            const float *z = logits + ((size_t)s * b->B + bi) * V;
            double mx = z[0], acc = 0.0;
            for (int v = 1; v < V; v++) mx = fmax(mx, z[v]);
            for (int v = 0; v < V; v++) acc += exp((double)z[v] - mx);
            sum += mx + log(acc) - z[b->ids[(size_t)bi * b->T + s + 1]];
        }
    return sum / ((double)b->B * (b->T - 1));
}

// Every parameter's gradient as grad.<HF name> in HF's shape: Conv1D weights transposed, GPT-2's
// position table with the HF model's rows (those past T got no gradient: 0).
static void add_grads(StFile *f, const GPT *m, const ModelSource *src, const float *grads, char (*names)[128],
                      float **extra) {
    int positions = src->positions ? src->positions : m->cfg.seq;
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *pi = &m->info[i];
        int64_t shape[2];
        hf_param_shape(&m->cfg, pi, positions, shape);
        snprintf(names[i], sizeof names[i], "grad.");
        hf_param_name(&m->cfg, pi, names[i] + 5, sizeof names[i] - 5);
        const float *g = grads + pi->offset;
        if (hf_param_is_positions(&m->cfg, pi)) {
            *extra = xcalloc((size_t)shape[0] * shape[1] * sizeof(float));
            memcpy(*extra, g, pi->numel * sizeof(float));
            g = *extra;
        }
        st_add_converted(f, names[i], ST_F32, pi->ndim, shape, g, hf_param_transposed(&m->cfg, pi));
    }
}

static int run(GPT *m, const ModelSource *src, const IdBatch *b, const char *out_path, int grads) {
    int B = b->B, T = b->T, V = m->cfg.vocab;
    size_t n = (size_t)B * T;
    int32_t *tok = xmalloc(n * sizeof(int32_t)), *tgt = xmalloc(n * sizeof(int32_t));
    for (int s = 0; s < T; s++)
        for (int bi = 0; bi < B; bi++) {
            tok[s * B + bi] = b->ids[(size_t)bi * T + s];
            tgt[s * B + bi] = b->ids[(size_t)bi * T + (s + 1 < T ? s + 1 : 0)];   // the last row's is dropped
        }
    StepCtx eval = {0, 0, 0, 0}, train = {0, 0, 0, 1};
    gpt_forward(m, tok, NULL, T, B, eval, 1.0f);
    float *rows = xmalloc(n * V * sizeof(float)), *logits = xmalloc(n * V * sizeof(float));
    m->be->copy(m->be, rows, m->logits, n * V * sizeof(float), COPY_D2H);
    for (int s = 0; s < T; s++)   // [T, B, V] → [B, T, V]
        for (int bi = 0; bi < B; bi++)
            memcpy(logits + ((size_t)bi * T + s) * V, rows + ((size_t)s * B + bi) * V, (size_t)V * sizeof(float));
    float loss = (float)shifted_loss(rows, b, V);
    float *g = NULL, *wpe = NULL;
    char (*names)[128] = NULL;
    StFile f;
    st_init(&f);
    st_add_meta(&f, "format", "pt");
    int64_t lshape[3] = {B, T, V}, one[1] = {1};
    st_add(&f, "logits", ST_F32, 3, lshape, logits);
    st_add(&f, "loss", ST_F32, 1, one, &loss);
    if (grads) {   // the mean over B·(T−1) positions: the last position's rows get no gradient
        gpt_zero_grad(m);
        gpt_forward(m, tok, tgt, T, B, train, 1.0f / (float)((size_t)B * (T - 1)));
        m->be->memset(m->be, m->logits + (size_t)(T - 1) * B * V, 0, (size_t)B * V * sizeof(float));
        gpt_backward(m, tok, train);
        g = xmalloc(m->n_params * sizeof(float));
        m->be->copy(m->be, g, m->grads, m->n_params * sizeof(float), COPY_D2H);
        names = xmalloc(sizeof *names * (size_t)m->n_info);
        add_grads(&f, m, src, g, names, &wpe);
    }
    char err[1024];
    int rc = st_write(&f, out_path, err, sizeof err);
    if (rc) fprintf(stderr, "ctron %s: error: --dump: %s\n", CMD, err);
    else fprintf(stderr, "ctron %s: loss %.7f over %d x %d shifted positions; wrote %s%s\n", CMD, (double)loss, B, T - 1,
                 out_path, grads ? " with gradients" : "");
    st_free(&f);
    free(tok);
    free(tgt);
    free(rows);
    free(logits);
    free(g);
    free(wpe);
    free(names);
    return rc ? 1 : 0;
}

int eval_dump(const ModelSource *src, const char *ids_path, const char *out_path, int grads) {
    char err[2048];
    IdBatch b;
    if (read_ids(ids_path, src->cfg.vocab, &b, err, sizeof err) != 0) return args_error(CMD, "--ids: %s", err);
    GPTConfig cfg;
    if (model_source_config(src, b.T, b.B, &cfg, err, sizeof err) != 0) {
        free(b.ids);
        return args_error(CMD, "--ids: a batch of %d tokens: %s", b.T, err);
    }
    GPT m;
    gpt_init(&m, &cfg, NULL);
    int rc = model_source_load(src, &m, err, sizeof err);
    if (rc != 0) rc = args_error(CMD, "--model: %s", err);
    else rc = run(&m, src, &b, out_path, grads);
    gpt_free(&m);
    free(b.ids);
    return rc;
}
