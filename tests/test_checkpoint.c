// Checkpoints: a save/load round trip is bitwise; the file holds GPT-2 names in Conv1D orientation;
// --keep prunes; .tmp-* directories are never loaded; and every kind of damaged or mismatched
// checkpoint is refused with a message naming what is wrong, leaving the model and optimizer untouched.
// usage: test_checkpoint WORKDIR
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include "check.h"
#include "io/checkpoint.h"
#include "io/ckpt_fs.h"
#include "io/ckpt_state.h"
#include "io/safetensors.h"
#include "model/gpt.h"
#include "train/adamw.h"
#include "util/common.h"
#include "util/fileio.h"

static const GPTConfig CFG = {.layers = 2, .hidden = 16, .heads = 2, .seq = 8, .batch = 2, .vocab = 40, .dropout = 0.1f};

static void fill(float *x, size_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 17; s ^= s << 5;
        x[i] = (float)((double)s / 4294967296.0 - 0.5);
    }
}

static void make_run(GPT *m, AdamW *opt, uint32_t seed) {
    gpt_init(m, &CFG, NULL);
    fill(m->params, m->n_params, seed);
    adamw_init(opt, m->be, m->n_params, 0.9f, 0.95f, 1e-8f, 0.1f);
    fill(opt->m, m->n_params, seed + 1);
    fill(opt->v, m->n_params, seed + 2);
    for (size_t i = 0; i < m->n_params; i++) opt->v[i] = fabsf(opt->v[i]);   // second moments are >= 0
    opt->t = 7;
}

static void make_state(CkptState *st, int step) {
    memset(st, 0, sizeof *st);
    st->step = step;
    st->model = CFG;
    st->beta1 = 0.9f; st->beta2 = 0.95f; st->eps = 1e-8f; st->weight_decay = 0.1f;
    st->adam_t = 7;
    st->lr = 3e-4f; st->min_lr = 3e-5f; st->warmup = 3; st->total_steps = 100;
    st->grad_accum = 2; st->clip = 1.0f; st->seed = 4242; st->val_frac = 0.1;
    snprintf(st->data_path, sizeof st->data_path, "data/kjv.txt");
    st->save_every = 5; st->keep = 3; st->eval_every = 10; st->eval_batches = 4;
}

static int exists(const char *path) { struct stat sb; return stat(path, &sb) == 0; }

static void copy_file(const char *from, const char *to) {
    uint8_t *d; size_t n; char err[512];
    if (fileio_read_all(from, &d, &n, err, sizeof err) != 0) ctron_fatal("%s", err);
    const void *parts[1] = {d};
    if (fileio_write_atomic(to, parts, &n, 1, err, sizeof err) != 0) ctron_fatal("%s", err);
    free(d);
}

static void copy_ckpt(const char *from, const char *to) {
    const char *files[] = {"model.safetensors", "optimizer.safetensors", "state.json"};
    char a[4096], b[4096];
    fs_remove_tree(to);
    mkdir(to, 0755);
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s/%s", from, files[i]);
        snprintf(b, sizeof b, "%s/%s", to, files[i]);
        copy_file(a, b);
    }
}

// ---- damaging files -------------------------------------------------------------------------

typedef struct { cJSON *hdr; uint8_t *data; size_t data_len; } RawSt;

static RawSt raw_read(const char *path) {
    uint8_t *b; size_t n; char err[512];
    if (fileio_read_all(path, &b, &n, err, sizeof err) != 0) ctron_fatal("%s", err);
    uint64_t h = 0;
    for (int i = 0; i < 8; i++) h |= (uint64_t)b[i] << (8 * i);
    RawSt r = {cJSON_ParseWithLength((const char *)b + 8, h), NULL, n - 8 - h};
    r.data = xmalloc(r.data_len + 64);
    memcpy(r.data, b + 8 + h, r.data_len);
    free(b);
    return r;
}

// Writes hdr and data; header_size overrides the size field when non-zero.
static void raw_write(const char *path, RawSt *r, uint64_t header_size) {
    char *json = cJSON_PrintUnformatted(r->hdr);
    uint64_t h = strlen(json);
    if (header_size) h = header_size;
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(h >> (8 * i));
    size_t jl = strlen(json);
    const void *parts[3] = {le, json, r->data};
    size_t sizes[3] = {8, jl, r->data_len};
    char err[512];
    if (fileio_write_atomic(path, parts, sizes, 3, err, sizeof err) != 0) ctron_fatal("%s", err);
    cJSON_free(json);
    cJSON_Delete(r->hdr);
    free(r->data);
}

static void set_offsets(cJSON *hdr, const char *name, double b0, double b1) {
    cJSON *of = cJSON_GetObjectItem(cJSON_GetObjectItem(hdr, name), "data_offsets");
    cJSON_SetNumberValue(cJSON_GetArrayItem(of, 0), b0);
    cJSON_SetNumberValue(cJSON_GetArrayItem(of, 1), b1);
}

static double offset_of(cJSON *hdr, const char *name, int which) {
    return cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(hdr, name), "data_offsets"), which)->valuedouble;
}

// Rewrites a valid file through the writer: drop one tensor, or give one another shape / dtype.
static void rewrite(const char *path, const char *drop, const char *reshape, int64_t r0, int64_t r1, const char *add) {
    StFile in, out;
    char err[512];
    if (st_read(&in, path, err, sizeof err) != 0) ctron_fatal("%s", err);
    st_init(&out);
    for (int i = 0; i < in.n; i++) {
        StTensor *t = &in.t[i];
        if (drop && strcmp(t->name, drop) == 0) continue;
        int64_t shape[4] = {t->shape[0], t->shape[1], t->shape[2], t->shape[3]};
        if (reshape && strcmp(t->name, reshape) == 0) { shape[0] = r0; shape[1] = r1; }
        st_add(&out, t->name, t->dtype, t->ndim, shape, t->data);
    }
    float extra[4] = {0};
    int64_t four[1] = {4};
    if (add) st_add(&out, add, ST_F32, 1, four, extra);
    if (st_write(&out, path, err, sizeof err) != 0) ctron_fatal("%s", err);
    st_free(&out);
    st_free(&in);
}

static void edit_state(const char *dir, const char *section, const char *key, double value, int remove) {
    char path[4096];
    snprintf(path, sizeof path, "%s/state.json", dir);
    uint8_t *b; size_t n; char err[512];
    if (fileio_read_all(path, &b, &n, err, sizeof err) != 0) ctron_fatal("%s", err);
    cJSON *root = cJSON_ParseWithLength((const char *)b, n);
    free(b);
    cJSON *obj = section ? cJSON_GetObjectItem(root, section) : root;
    if (remove) cJSON_DeleteItemFromObject(obj, key);
    else if (!cJSON_GetObjectItem(obj, key)) cJSON_AddNumberToObject(obj, key, value);   // an optional field
    else cJSON_SetNumberValue(cJSON_GetObjectItem(obj, key), value);
    char *text = cJSON_Print(root);
    size_t len = strlen(text);
    const void *parts[1] = {text};
    if (fileio_write_atomic(path, parts, &len, 1, err, sizeof err) != 0) ctron_fatal("%s", err);
    cJSON_free(text);
    cJSON_Delete(root);
}

// ---- the checks -------------------------------------------------------------------------------

typedef struct { GPT m; AdamW opt; float *p0, *m0, *v0; } Target;

static void expect_refused(Target *tg, const char *dir, const char *needle, const char *what) {
    char err[2048] = "";
    int rc = ckpt_load(dir, &tg->m, &tg->opt, NULL, err, sizeof err);
    CHECK(rc == -1, "%s: loaded although it should have been refused", what);
    CHECK(strstr(err, needle) != NULL, "%s: message '%s' lacks '%s'", what, err, needle);
    size_t bytes = tg->m.n_params * sizeof(float);
    CHECK(memcmp(tg->m.params, tg->p0, bytes) == 0 && memcmp(tg->opt.m, tg->m0, bytes) == 0 &&
          memcmp(tg->opt.v, tg->v0, bytes) == 0 && tg->opt.t == 3, "%s: something was loaded before the error", what);
    printf("  refused (%s): %s\n", what, err);
}

static char *read_text(const char *path) {
    uint8_t *data;
    size_t n;
    char err[512];
    if (fileio_read_all(path, &data, &n, err, sizeof err) != 0) ctron_fatal("%s", err);
    char *text = xmalloc(n + 1);
    memcpy(text, data, n);
    text[n] = '\0';
    free(data);
    return text;
}

// An optional model field of state.json, model.KEY (sliding_window, rotary_dim): written only when set (so that
// every other model writes what checkpoints did before it, the one line being the whole difference), read back
// exactly; an absent key is 0; the values of `cases` are each written into the text and read: refused naming the
// field and `needle`, or (needle NULL) accepted as 0.
typedef struct { int arch; const char *value, *needle; } StateCase;
#define MODEL_INT(cfg, off) (*(int *)((char *)&(cfg) + (off)))
static void test_state_optional(const char *work, const char *key, size_t field, int value, const StateCase *cases,
                                size_t n_cases) {
    CkptState st, back;
    make_state(&st, 3);   // heads of 16 / 2 = 8 dims
    st.model.arch = ARCH_LLAMA;
    st.model.kv_heads = 1;
    st.model.ffn = 48;
    st.model.rope_theta = 10000.0f;
    st.model.norm_eps = 1e-5f;
    st.model.tie_embeddings = -1;
    char none[4200], with[4200], again[4200], err[2048], line_text[64];
    snprintf(none, sizeof none, "%s/%s_none.json", work, key);
    snprintf(with, sizeof with, "%s/%s_with.json", work, key);
    snprintf(again, sizeof again, "%s/%s_again.json", work, key);
    CHECK(ckpt_state_write(none, &st, err, sizeof err) == 0 && ckpt_state_read(none, &back, err, sizeof err) == 0 &&
          MODEL_INT(back.model, field) == 0, "state.json without %s: %s (read back %d)", key, err,
          MODEL_INT(back.model, field));
    MODEL_INT(st.model, field) = value;
    CHECK(ckpt_state_write(with, &st, err, sizeof err) == 0 && ckpt_state_read(with, &back, err, sizeof err) == 0 &&
          MODEL_INT(back.model, field) == value, "state.json with %s %d: %s (read back %d)", key, value, err,
          MODEL_INT(back.model, field));
    CHECK(ckpt_state_write(again, &back, err, sizeof err) == 0, "rewrite: %s", err);
    char *t_none = read_text(none), *t_with = read_text(with), *t_again = read_text(again);
    CHECK(strcmp(t_with, t_again) == 0, "state.json with %s is not written back byte for byte:\n%s\n%s", key, t_with,
          t_again);
    CHECK(!strstr(t_none, key), "a model without it writes model.%s:\n%s", key, t_none);
    snprintf(line_text, sizeof line_text, "\"%s\":\t%d,\n", key, value);
    char *line = strstr(t_with, line_text);
    CHECK(line != NULL, "state.json lacks %s", line_text);
    if (line) {   // the field's line out, the text is the one without it byte for byte
        const char *end = strchr(line, '\n') + 1;
        while (line > t_with && line[-1] == '\t') line--;
        memmove(line, end, strlen(end) + 1);
        CHECK(strcmp(t_with, t_none) == 0, "state.json differs beyond model.%s:\n%s\n%s", key, t_with, t_none);
    }
    free(t_none); free(t_with); free(t_again);
    for (size_t i = 0; i < n_cases; i++) {
        CkptState b = st;
        if (cases[i].arch == ARCH_GPT2) b.model = CFG;
        MODEL_INT(b.model, field) = 0;
        CHECK(ckpt_state_write(none, &b, err, sizeof err) == 0, "write: %s", err);
        char *text = read_text(none), *at = strstr(text, "\"model\":\t{"), edited[8192];
        at += strlen("\"model\":\t{");
        snprintf(edited, sizeof edited, "%.*s\"%s\": %s, %s", (int)(at - text), text, key, cases[i].value, at);
        free(text);
        FILE *f = fopen(none, "w");
        fputs(edited, f);
        fclose(f);
        int rc = ckpt_state_read(none, &back, err, sizeof err);
        if (!cases[i].needle)
            CHECK(rc == 0 && MODEL_INT(back.model, field) == 0, "state.json %s %s: rc %d, '%s', read as %d", key,
                  cases[i].value, rc, err, MODEL_INT(back.model, field));
        else
            CHECK(rc != 0 && strstr(err, "_none.json") && strstr(err, cases[i].needle), "state.json %s %s: rc %d, '%s'",
                  key, cases[i].value, rc, err);
    }
}

// model.sliding_window: a window of 0 or a fraction refused (none is written as no key), and one on GPT-2.
static void test_state_window(const char *work) {
    static const StateCase CASES[] = {
        {ARCH_LLAMA, "0", "model.sliding_window must be an integer in 1..1073741824 (it is 0)"},
        {ARCH_LLAMA, "2.5", "model.sliding_window must be an integer in 1..1073741824 (it is 2.5)"},
        {ARCH_LLAMA, "\"6\"", "model.sliding_window must be an integer in 1..1073741824 (it is a string)"},
        {ARCH_GPT2, "6", "model.sliding_window must be absent with model.arch gpt2 (GPT-2 attends to its whole causal prefix)"},
    };
    test_state_optional(work, "sliding_window", offsetof(GPTConfig, sliding_window), 6, CASES,
                        sizeof CASES / sizeof CASES[0]);
}

// model.rotary_dim: the head dim (8) is every dim, the model without partial RoPE; odd, below 2, past the head
// dim or beside arch gpt2 refused.
static void test_state_rotary(const char *work) {
    static const StateCase CASES[] = {
        {ARCH_LLAMA, "8", NULL},
        {ARCH_LLAMA, "0", "model.rotary_dim must be an integer in 2..8 (it is 0)"},
        {ARCH_LLAMA, "10", "model.rotary_dim must be an integer in 2..8 (it is 10)"},
        {ARCH_LLAMA, "5", "model.rotary_dim must be even (RoPE rotates pairs j, j + R/2; it is 5)"},
        {ARCH_LLAMA, "4.5", "model.rotary_dim must be an integer in 2..8 (it is 4.5)"},
        {ARCH_LLAMA, "\"6\"", "model.rotary_dim must be an integer in 2..8 (it is a string)"},
        {ARCH_GPT2, "6", "model.rotary_dim must be absent with model.arch gpt2 (GPT-2 has learned positions, no RoPE)"},
    };
    test_state_optional(work, "rotary_dim", offsetof(GPTConfig, rotary_dim), 6, CASES, sizeof CASES / sizeof CASES[0]);
}

int main(int argc, char **argv) {
    const char *work = argc > 1 ? argv[1] : "test_checkpoint.d";
    char dir[4096], step[4096], path[8400], err[2048];
    fs_remove_tree(work);
    if (fs_mkdir_p(work, err, sizeof err) != 0) ctron_fatal("%s", err);

    // Round trip, bitwise.
    GPT m; AdamW opt;
    make_run(&m, &opt, 1);
    CkptState st, back;
    make_state(&st, 7);
    snprintf(dir, sizeof dir, "%s/run", work);
    CkptSaveOptions so = {.keep = 0};
    CHECK(ckpt_save(dir, &m, &opt, &st, &so, err, sizeof err) == 0, "save: %s", err);
    ckpt_step_dir(dir, 7, step, sizeof step);
    CHECK(exists(step), "%s missing", step);
    snprintf(path, sizeof path, "%s/.tmp-step_00000007", dir);
    CHECK(!exists(path), "temporary directory left behind");
    char found[4096], run[4096];
    CHECK(ckpt_resolve(dir, found, sizeof found, run, sizeof run, err, sizeof err) == 0 && strcmp(found, step) == 0 &&
          strcmp(run, dir) == 0, "resolve run dir: %s -> %s", dir, found);
    CHECK(ckpt_resolve(step, found, sizeof found, run, sizeof run, err, sizeof err) == 0 && strcmp(found, step) == 0 &&
          strcmp(run, dir) == 0, "resolve step dir: %s -> %s (run %s)", step, found, run);
    GPT m2; AdamW opt2;
    gpt_init(&m2, &CFG, NULL);
    adamw_init(&opt2, m2.be, m2.n_params, 0.9f, 0.95f, 1e-8f, 0.1f);
    CHECK(ckpt_load(step, &m2, &opt2, &back, err, sizeof err) == 0, "load: %s", err);
    size_t bytes = m.n_params * sizeof(float);
    CHECK(memcmp(m.params, m2.params, bytes) == 0, "parameters differ after the round trip");
    CHECK(memcmp(opt.m, opt2.m, bytes) == 0 && memcmp(opt.v, opt2.v, bytes) == 0, "AdamW moments differ");
    CHECK(opt2.t == 7, "AdamW t %ld, expected 7", opt2.t);
    CHECK(back.step == 7 && back.lr == st.lr && back.min_lr == st.min_lr && back.warmup == 3 &&
          back.total_steps == 100 && back.grad_accum == 2 && back.clip == st.clip && back.seed == 4242 &&
          back.val_frac == 0.1 && back.eps == st.eps && back.model.dropout == CFG.dropout &&
          strcmp(back.data_path, "data/kjv.txt") == 0 && back.save_every == 5 && back.keep == 3 &&
          back.eval_every == 10 && back.eval_batches == 4,
          "state.json does not round-trip");

    // The file is a GPT-2 state dict: Conv1D weights [in, out], everything else as in ctron.
    StFile f;
    snprintf(path, sizeof path, "%s/model.safetensors", step);
    CHECK(st_read(&f, path, err, sizeof err) == 0, "st_read: %s", err);
    const StTensor *qkv = st_find(&f, "h.1.attn.c_attn.weight"), *fc2 = st_find(&f, "h.0.mlp.c_proj.weight");
    const ParamInfo *pq = gpt_find_param(&m, "h.1.attn.c_attn.weight"), *pf = gpt_find_param(&m, "h.0.mlp.c_proj.weight");
    int h = CFG.hidden;
    CHECK(qkv && qkv->ndim == 2 && qkv->shape[0] == h && qkv->shape[1] == 3 * h, "c_attn.weight is not [h, 3h]");
    CHECK(fc2 && fc2->shape[0] == 4 * h && fc2->shape[1] == h, "mlp.c_proj.weight is not [4h, h]");
    int transposed = qkv && fc2;
    for (int i = 0; transposed && i < h; i++)
        for (int j = 0; j < 3 * h; j++)
            transposed &= ((const float *)qkv->data)[i * 3 * h + j] == m.params[pq->offset + (size_t)j * h + i];
    for (int i = 0; transposed && i < 4 * h; i++)
        for (int j = 0; j < h; j++)
            transposed &= ((const float *)fc2->data)[i * h + j] == m.params[pf->offset + (size_t)j * 4 * h + i];
    CHECK(transposed, "Conv1D weights are not the transpose of ctron's [out, in]");
    const StTensor *wte = st_find(&f, "wte.weight");
    CHECK(wte && wte->shape[0] == CFG.vocab && memcmp(wte->data, m.params, (size_t)CFG.vocab * h * 4) == 0,
          "wte.weight differs");
    CHECK(f.n == m.n_info && st_meta(&f, "format") && strcmp(st_meta(&f, "format"), "pt") == 0,
          "%d tensors (expected %d) or no format=pt metadata", f.n, m.n_info);
    st_free(&f);

    // Loading weights only (generation) ignores batch and dropout; training requires them.
    GPTConfig other = CFG;
    other.batch = 1;
    other.dropout = 0.0f;
    GPT m3;
    gpt_init(&m3, &other, NULL);
    CHECK(ckpt_load(step, &m3, NULL, NULL, err, sizeof err) == 0 && memcmp(m3.params, m.params, bytes) == 0,
          "weights-only load with another batch: %s", err);
    AdamW opt3;
    adamw_init(&opt3, m3.be, m3.n_params, 0.9f, 0.95f, 1e-8f, 0.1f);
    CHECK(ckpt_load(step, &m3, &opt3, NULL, err, sizeof err) == -1 && strstr(err, "batch 2"),
          "resuming with another batch was not refused: %s", err);
    adamw_free(&opt3);
    gpt_free(&m3);

    CHECK(back.tokenizer_path[0] == '\0', "a byte-level checkpoint names a tokenizer '%s'", back.tokenizer_path);

    // A BPE vocabulary is saved beside the weights as tokenizer.json, and reading names that copy.
    const char vocab[] = "{\"type\":\"ctron-bpe\",\"version\":1,\"vocab_size\":256,\"pretokenizer\":\"gpt2-bytes\",\"merges\":[]}";
    CkptSaveOptions with_tok = {.keep = 0, .tokenizer_json = vocab, .tokenizer_bytes = sizeof vocab - 1};
    snprintf(dir, sizeof dir, "%s/bpe", work);
    CHECK(ckpt_save(dir, &m, &opt, &st, &with_tok, err, sizeof err) == 0, "save with tokenizer: %s", err);
    ckpt_step_dir(dir, 7, step, sizeof step);
    snprintf(path, sizeof path, "%s/tokenizer.json", step);
    uint8_t *tok_back;
    size_t tok_n;
    CHECK(fileio_read_all(path, &tok_back, &tok_n, err, sizeof err) == 0 && tok_n == sizeof vocab - 1 &&
          memcmp(tok_back, vocab, tok_n) == 0, "tokenizer.json is not the vocabulary saved");
    free(tok_back);
    CHECK(ckpt_read_state(step, &back, err, sizeof err) == 0 && strcmp(back.tokenizer_path, path) == 0,
          "state names tokenizer '%s', expected '%s'", back.tokenizer_path, path);

    // --keep: older ones are pruned once the new one is complete; .tmp-* is never a checkpoint.
    snprintf(dir, sizeof dir, "%s/keep", work);
    so.keep = 3;
    for (int s = 1; s <= 5; s++) {
        make_state(&st, s);
        CHECK(ckpt_save(dir, &m, &opt, &st, &so, err, sizeof err) == 0, "save %d: %s", s, err);
    }
    int *steps, n = fs_list_steps(dir, &steps);
    CHECK(n == 3 && steps[0] == 3 && steps[2] == 5, "keep 3 left %d checkpoints (first %d)", n, n ? steps[0] : -1);
    free(steps);
    ckpt_step_dir(dir, 5, step, sizeof step);
    snprintf(path, sizeof path, "%s/.tmp-step_00000009", dir);
    copy_ckpt(step, path);
    CHECK(ckpt_resolve(dir, found, sizeof found, NULL, 0, err, sizeof err) == 0 && strcmp(found, step) == 0,
          "resolve picked %s, not the newest complete %s", found, step);
    snprintf(path, sizeof path, "%s/.tmp-step_00000009", dir);
    CHECK(ckpt_resolve(path, found, sizeof found, NULL, 0, err, sizeof err) == -1 && strstr(err, "incomplete save"),
          "a .tmp- directory named explicitly was not refused: %s", err);
    snprintf(path, sizeof path, "%s/empty", work);
    mkdir(path, 0755);
    CHECK(ckpt_resolve(path, found, sizeof found, NULL, 0, err, sizeof err) == -1 && strstr(err, "no checkpoint"),
          "empty directory: %s", err);
    // Saving the same step again (a run resumed from an earlier checkpoint) replaces it.
    make_state(&st, 5);
    CHECK(ckpt_save(dir, &m2, &opt2, &st, &so, err, sizeof err) == 0, "re-save of step 5: %s", err);
    snprintf(path, sizeof path, "%s/.tmp-step_00000009", dir);
    CHECK(!exists(path), "stale .tmp-step_00000009 was not cleaned up by the next save");

    // Damaged and mismatched checkpoints: refused, nothing loaded.
    ckpt_step_dir(dir, 5, step, sizeof step);
    Target tg;
    make_run(&tg.m, &tg.opt, 99);
    tg.opt.t = 3;
    tg.p0 = xmalloc(bytes); memcpy(tg.p0, tg.m.params, bytes);
    tg.m0 = xmalloc(bytes); memcpy(tg.m0, tg.opt.m, bytes);
    tg.v0 = xmalloc(bytes); memcpy(tg.v0, tg.opt.v, bytes);
    char bad[4096], mp[4200], op[4200];
    snprintf(bad, sizeof bad, "%s/bad", work);
    snprintf(mp, sizeof mp, "%s/model.safetensors", bad);
    snprintf(op, sizeof op, "%s/optimizer.safetensors", bad);
    RawSt r;

    copy_ckpt(step, bad);
    r = raw_read(mp);
    raw_write(mp, &r, 1u << 30);
    expect_refused(&tg, bad, "exceeds the file", "header size beyond the file");

    copy_ckpt(step, bad);
    r = raw_read(mp);
    double w1 = offset_of(r.hdr, "wpe.weight", 1) - offset_of(r.hdr, "wpe.weight", 0);
    set_offsets(r.hdr, "wpe.weight", 4, 4 + w1);
    raw_write(mp, &r, 0);
    expect_refused(&tg, bad, "overlap", "overlapping offsets");

    copy_ckpt(step, bad);
    r = raw_read(mp);
    set_offsets(r.hdr, "ln_f.bias", offset_of(r.hdr, "ln_f.bias", 0) + 64, offset_of(r.hdr, "ln_f.bias", 1) + 64);
    raw_write(mp, &r, 0);
    expect_refused(&tg, bad, "run past the data section", "offsets out of range");

    copy_ckpt(step, bad);
    r = raw_read(mp);
    set_offsets(r.hdr, "ln_f.bias", offset_of(r.hdr, "ln_f.bias", 1), offset_of(r.hdr, "ln_f.bias", 0));
    raw_write(mp, &r, 0);
    expect_refused(&tg, bad, "out of order", "reversed offsets");

    copy_ckpt(step, bad);
    r = raw_read(mp);
    r.data_len += 16;   // bytes no tensor claims
    raw_write(mp, &r, 0);
    expect_refused(&tg, bad, "cover only", "data section not fully covered");

    copy_ckpt(step, bad);
    r = raw_read(mp);
    cJSON_AddItemToObject(r.hdr, "wte.weight", cJSON_Duplicate(cJSON_GetObjectItem(r.hdr, "wte.weight"), 1));
    raw_write(mp, &r, 0);
    expect_refused(&tg, bad, "appears twice", "duplicate name");

    copy_ckpt(step, bad);
    r = raw_read(mp);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(r.hdr, "wpe.weight"), "dtype", cJSON_CreateString("F64"));
    raw_write(mp, &r, 0);
    expect_refused(&tg, bad, "dtype 'F64'", "unknown dtype");

    copy_ckpt(step, bad);
    r = raw_read(mp);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(r.hdr, "wpe.weight"), "dtype", cJSON_CreateString("I32"));
    raw_write(mp, &r, 0);
    expect_refused(&tg, bad, "is I32", "wrong dtype");

    copy_ckpt(step, bad);
    rewrite(mp, "h.1.mlp.c_fc.bias", NULL, 0, 0, NULL);
    expect_refused(&tg, bad, "lacks tensor 'h.1.mlp.c_fc.bias'", "missing tensor");

    copy_ckpt(step, bad);
    rewrite(mp, NULL, "h.0.attn.c_attn.weight", 3 * h, h, NULL);
    expect_refused(&tg, bad, "has shape [48, 16], the model needs [16, 48]", "wrong shape");

    copy_ckpt(step, bad);
    rewrite(mp, NULL, NULL, 0, 0, "lm_head.bias");
    expect_refused(&tg, bad, "holds tensor 'lm_head.bias'", "unexpected tensor");

    copy_ckpt(step, bad);
    rewrite(op, "v.wte.weight", NULL, 0, 0, NULL);
    expect_refused(&tg, bad, "lacks tensor 'v.wte.weight'", "missing optimizer tensor");

    copy_ckpt(step, bad);
    edit_state(bad, "model", "layers", 3, 0);
    expect_refused(&tg, bad, "has layers 3 but the model being loaded has 2", "config mismatch");

    copy_ckpt(step, bad);
    edit_state(bad, "optimizer", "t", 0, 1);
    expect_refused(&tg, bad, "lacks optimizer.t", "state.json field missing");

    copy_ckpt(step, bad);
    edit_state(bad, "model", "max_position_embeddings", 0.5, 0);
    expect_refused(&tg, bad, "model.max_position_embeddings must be an integer 1..2^30", "bad optional context");

    copy_ckpt(step, bad);
    edit_state(bad, NULL, "format_version", 2, 0);
    expect_refused(&tg, bad, "newer ctron", "newer format");

    copy_ckpt(step, bad);
    snprintf(path, sizeof path, "%s/model.safetensors", bad);
    remove(path);
    expect_refused(&tg, bad, "cannot open", "missing model file");

    // The causal-mask buffers of a Hugging Face GPT-2 file hold no parameters: accepted and ignored.
    copy_ckpt(step, bad);
    rewrite(mp, NULL, NULL, 0, 0, "h.0.attn.bias");
    CHECK(ckpt_load(bad, &tg.m, &tg.opt, NULL, err, sizeof err) == 0, "h.0.attn.bias buffer refused: %s", err);

    test_state_window(work);
    test_state_rotary(work);

    free(tg.p0); free(tg.m0); free(tg.v0);
    adamw_free(&tg.opt); gpt_free(&tg.m);
    adamw_free(&opt2); gpt_free(&m2);
    adamw_free(&opt); gpt_free(&m);
    fs_remove_tree(work);
    return check_summary();
}
