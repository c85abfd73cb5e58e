// What ctron sees in a checkpoint, for tests in other languages (tests/test_interop.py):
//   ckpt_tool dump CKPT OUT              the parameters as ctron holds them ([out, in] weights), raw
//                                        float32 in ParamInfo order to OUT; one JSON line per tensor
//                                        (name, shape, offset in floats) on stdout
//   ckpt_tool logits CKPT OUT TOK...     KV-cache logits [n, vocab] of the tokens, raw float32 to OUT
// CKPT is a run directory or a step directory. Exit 1 with the loader's message on a bad checkpoint.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "io/checkpoint.h"
#include "model/infer.h"
#include "util/common.h"

static int write_floats(const char *path, const float *x, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(x, sizeof(float), n, f) != n) { fprintf(stderr, "cannot write %s\n", path); return 1; }
    fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: ckpt_tool dump|logits CKPT OUT [TOKENS...]\n");
        return 2;
    }
    char step[4096], err[2048];
    CkptState st;
    if (ckpt_resolve(argv[2], step, sizeof step, NULL, 0, err, sizeof err) != 0 ||
        ckpt_read_state(step, &st, err, sizeof err) != 0) {
        fprintf(stderr, "ckpt_tool: %s\n", err);
        return 1;
    }
    GPTConfig cfg = st.model;
    cfg.batch = 1;
    GPT m;
    gpt_init(&m, &cfg, NULL);
    if (ckpt_load(step, &m, NULL, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "ckpt_tool: %s\n", err);
        return 1;
    }
    int rc = 0;
    if (strcmp(argv[1], "dump") == 0) {
        for (int i = 0; i < m.n_info; i++) {
            const ParamInfo *pi = &m.info[i];
            char shape[32];
            if (pi->ndim == 2) snprintf(shape, sizeof shape, "%d,%d", pi->shape[0], pi->shape[1]);
            else snprintf(shape, sizeof shape, "%d", pi->shape[0]);
            printf("{\"name\":\"%s\",\"shape\":[%s],\"offset\":%zu}\n", pi->name, shape, pi->offset);
        }
        rc = write_floats(argv[3], m.params, m.n_params);
    } else if (strcmp(argv[1], "logits") == 0) {
        int n = argc - 4;
        if (n < 1 || n > cfg.seq) { fprintf(stderr, "ckpt_tool: give 1..%d tokens\n", cfg.seq); return 2; }
        int32_t *tok = xmalloc((size_t)n * sizeof(int32_t));
        for (int i = 0; i < n; i++) tok[i] = atoi(argv[4 + i]);
        float *logits = xmalloc((size_t)n * cfg.vocab * sizeof(float));
        KVCache c;
        infer_init(&c, &m);
        infer_forward(&c, tok, n, logits, 1);
        rc = write_floats(argv[3], logits, (size_t)n * cfg.vocab);
        infer_free(&c);
        free(logits);
        free(tok);
    } else {
        fprintf(stderr, "ckpt_tool: unknown command '%s'\n", argv[1]);
        rc = 2;
    }
    gpt_free(&m);
    return rc;
}
