#include "io/ckpt_state.h"
#include "backend/backend.h"
#include "data/dataset.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/common.h"
#include "util/fileio.h"
#include "util/philox.h"

int ckpt_state_write(const char *path, const CkptState *st, char *err, size_t errlen) {
    const GPTConfig *c = &st->model;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", CKPT_FORMAT);
    cJSON_AddNumberToObject(o, "format_version", CKPT_FORMAT_VERSION);
    cJSON_AddNumberToObject(o, "step", st->step);

    cJSON *mo = cJSON_AddObjectToObject(o, "model");
    cJSON_AddStringToObject(mo, "arch", arch_spec((ArchKind)c->arch)->name);
    cJSON_AddNumberToObject(mo, "layers", c->layers);
    cJSON_AddNumberToObject(mo, "hidden", c->hidden);
    cJSON_AddNumberToObject(mo, "heads", c->heads);
    cJSON_AddNumberToObject(mo, "seq", c->seq);
    cJSON_AddNumberToObject(mo, "batch", c->batch);
    cJSON_AddNumberToObject(mo, "vocab", c->vocab);
    cJSON_AddNumberToObject(mo, "dropout", float_shortest(c->dropout));
    if (c->arch == ARCH_GPT2) {
        cJSON_AddNumberToObject(mo, "layer_norm_eps", 1e-5);
        cJSON_AddStringToObject(mo, "activation", "gelu_tanh");
    } else {   // the family's knobs (resolved: every value explicit)
        cJSON_AddNumberToObject(mo, "kv_heads", c->kv_heads);
        if (c->head_dim > 0 && c->head_dim * c->heads != c->hidden)   // written only when not hidden / heads
            cJSON_AddNumberToObject(mo, "head_dim", c->head_dim);
        cJSON_AddNumberToObject(mo, "ffn", c->ffn);
        cJSON_AddNumberToObject(mo, "rope_theta", float_shortest(c->rope_theta));
        if (c->rope_scaling.type != ROPE_PLAIN) {   // --rope-scaling's text (absent: none)
            char text[ROPE_SCALING_TEXT_MAX];
            rope_scaling_text(&c->rope_scaling, text, sizeof text);
            cJSON_AddStringToObject(mo, "rope_scaling", text);
        }
        cJSON_AddNumberToObject(mo, "rms_norm_eps", float_shortest(c->norm_eps));
        cJSON_AddStringToObject(mo, "activation", "silu");
        cJSON_AddBoolToObject(mo, "qkv_bias", c->qkv_bias);
        if (c->qk_norm) cJSON_AddBoolToObject(mo, "qk_norm", 1);   // q/k norms (Qwen3); absent: none
        if (c->fused_proj) cJSON_AddBoolToObject(mo, "fused_proj", 1);   // Phi-3's qkv_proj, gate_up_proj; absent: split
        if (c->sliding_window > 0)   // each query's last W positions (Mistral, Phi-3); absent: the whole prefix
            cJSON_AddNumberToObject(mo, "sliding_window", c->sliding_window);
        if (c->rotary_dim > 0)   // RoPE on each head's first R dims (Phi-4-mini's 96 of 128); absent: all
            cJSON_AddNumberToObject(mo, "rotary_dim", c->rotary_dim);
    }
    cJSON_AddBoolToObject(mo, "tied_embeddings", c->tie_embeddings > 0);
    if (c->tokens.has_bos) cJSON_AddNumberToObject(mo, "bos_token_id", c->tokens.bos);   // a Hugging Face model's
    if (c->tokens.n_eos) cJSON_AddItemToObject(mo, "eos_token_ids", cJSON_CreateIntArray(c->tokens.eos, c->tokens.n_eos));
    if (c->reversible) cJSON_AddBoolToObject(mo, "reversible", 1);   // reversible blocks (absent: the standard block)
    if (c->max_positions) cJSON_AddNumberToObject(mo, "max_position_embeddings", c->max_positions);   // an HF model's

    cJSON *op = cJSON_AddObjectToObject(o, "optimizer");
    cJSON_AddStringToObject(op, "type", "adamw");
    cJSON_AddNumberToObject(op, "beta1", float_shortest(st->beta1));
    cJSON_AddNumberToObject(op, "beta2", float_shortest(st->beta2));
    cJSON_AddNumberToObject(op, "eps", float_shortest(st->eps));
    cJSON_AddNumberToObject(op, "weight_decay", float_shortest(st->weight_decay));
    cJSON_AddNumberToObject(op, "t", (double)st->adam_t);

    cJSON *sc = cJSON_AddObjectToObject(o, "schedule");
    cJSON_AddStringToObject(sc, "type", "warmup_cosine");
    cJSON_AddNumberToObject(sc, "lr", float_shortest(st->lr));
    cJSON_AddNumberToObject(sc, "min_lr", float_shortest(st->min_lr));
    cJSON_AddNumberToObject(sc, "warmup", st->warmup);
    cJSON_AddNumberToObject(sc, "steps", st->total_steps);

    cJSON *tr = cJSON_AddObjectToObject(o, "training");
    cJSON_AddNumberToObject(tr, "grad_accum", st->grad_accum);
    cJSON_AddNumberToObject(tr, "clip", float_shortest(st->clip));
    cJSON_AddNumberToObject(tr, "seed", (double)st->seed);
    cJSON_AddStringToObject(tr, "precision", precision_name((Precision)st->precision));

    // The data position: windows are drawn from Philox keyed by (seed, step, sample), so the next
    // step number is all a resumed run needs to see the same sequences.
    cJSON *da = cJSON_AddObjectToObject(o, "data");
    cJSON_AddStringToObject(da, "path", st->data_path);
    cJSON_AddStringToObject(da, "val_path", st->val_path);
    cJSON_AddNumberToObject(da, "val_frac", st->val_frac);
    cJSON_AddStringToObject(da, "order", st->data_order == DATA_SEQUENTIAL ? "sequential" : "random");
    cJSON_AddStringToObject(da, "order_key", "philox4x32-10(seed, step, sample) / (step-1)*samples_per_step+sample");
    cJSON_AddNumberToObject(da, "next_step", st->step + 1);
    cJSON_AddNumberToObject(da, "samples_per_step", (double)c->batch * st->grad_accum);

    cJSON *rn = cJSON_AddObjectToObject(o, "rng");
    cJSON_AddStringToObject(rn, "generator", "philox4x32-10");
    cJSON_AddNumberToObject(rn, "seed", (double)st->seed);
    philox_key key = philox_key_from_seed(st->seed);
    cJSON *k = cJSON_AddArrayToObject(rn, "key");
    cJSON_AddItemToArray(k, cJSON_CreateNumber(key.v[0]));
    cJSON_AddItemToArray(k, cJSON_CreateNumber(key.v[1]));

    cJSON *ck = cJSON_AddObjectToObject(o, "checkpointing");
    cJSON_AddNumberToObject(ck, "save_every", st->save_every);
    cJSON_AddNumberToObject(ck, "keep", st->keep);

    cJSON *ev = cJSON_AddObjectToObject(o, "evaluation");
    cJSON_AddNumberToObject(ev, "eval_every", st->eval_every);
    cJSON_AddNumberToObject(ev, "eval_batches", st->eval_batches);

    cJSON *fi = cJSON_AddObjectToObject(o, "files");
    cJSON_AddStringToObject(fi, "model", "model.safetensors");
    cJSON_AddStringToObject(fi, "optimizer", "optimizer.safetensors");
    cJSON_AddStringToObject(fi, "weight_orientation", "conv1d");
    cJSON_AddStringToObject(o, "tokenizer", st->tokenizer_path[0] ? "tokenizer.json" : "bytes");
    if (st->n_options > 0) {
        cJSON *op2 = cJSON_AddObjectToObject(o, "options");
        for (int i = 0; i < st->n_options; i++) cJSON_AddStringToObject(op2, st->option_flag[i], st->option_value[i]);
    }

    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    size_t n = strlen(text);
    const void *parts[2] = {text, "\n"};
    size_t sizes[2] = {n, 1};
    int rc = fileio_write_atomic(path, parts, sizes, 2, err, errlen);
    cJSON_free(text);
    return rc;
}

typedef struct {
    const cJSON *root;
    const char *path;
    char *err;
    size_t errlen;
    int failed;
} Reader;

static const cJSON *field(Reader *r, const char *section, const char *name) {
    const cJSON *obj = section ? cJSON_GetObjectItemCaseSensitive(r->root, section) : r->root;
    const cJSON *x = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;
    if (!x && !r->failed) {
        snprintf(r->err, r->errlen, "'%s' lacks %s%s%s", r->path, section ? section : "", section ? "." : "", name);
        r->failed = 1;
    }
    return x;
}

static void bad(Reader *r, const char *section, const char *name, const char *what) {
    if (r->failed) return;
    snprintf(r->err, r->errlen, "'%s': %s%s%s must be %s", r->path, section ? section : "", section ? "." : "", name,
             what);
    r->failed = 1;
}

static double number(Reader *r, const char *section, const char *name, double lo, double hi, int integer) {
    const cJSON *x = field(r, section, name);
    if (!x) return 0.0;
    double v = cJSON_IsNumber(x) ? x->valuedouble : NAN;
    char what[96];
    if (integer) snprintf(what, sizeof what, "an integer in %.0f..%.0f", lo, hi);   // 1..1073741824, not 1.07374e+09
    else snprintf(what, sizeof what, "a number in %g..%g", lo, hi);
    if (!(v >= lo && v <= hi) || (integer && v != floor(v))) {
        char got[64];   // say what it is: 1e999 parses as inf, "0.1" is a string
        if (cJSON_IsNumber(x)) snprintf(got, sizeof got, "%g", v);
        else snprintf(got, sizeof got, "%s", cJSON_IsString(x) ? "a string" : cJSON_IsBool(x) ? "a boolean" : "not a number");
        char full[200];
        snprintf(full, sizeof full, "%s (it is %s%s)", what, got,
                 cJSON_IsNumber(x) && isinf(v) ? ", out of double range" : "");
        bad(r, section, name, full);
        return lo;   // the caller converts to int and friends: never an out-of-range value (found by fuzzing)
    }
    return v;
}

static const char *string(Reader *r, const char *section, const char *name) {
    const cJSON *x = field(r, section, name);
    if (x && !cJSON_IsString(x)) bad(r, section, name, "a string");
    return x && cJSON_IsString(x) ? x->valuestring : "";
}

// "options" (optional): an object of at most CKPT_MAX_OPTIONS strings, names and texts of bounded length.
static void read_options(Reader *r, CkptState *st) {
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(r->root, "options"), *x;
    if (r->failed || !ops) return;
    if (!cJSON_IsObject(ops)) { bad(r, NULL, "options", "an object of option texts"); return; }
    cJSON_ArrayForEach(x, ops) {
        if (st->n_options == CKPT_MAX_OPTIONS) { bad(r, NULL, "options", "at most " "48" " entries"); return; }
        if (!cJSON_IsString(x) || !x->string || strlen(x->string) >= sizeof st->option_flag[0] ||
            strlen(x->valuestring) >= sizeof st->option_value[0]) {
            bad(r, "options", x->string ? x->string : "?", "a string of at most 191 characters under a name of at most 31");
            return;
        }
        snprintf(st->option_flag[st->n_options], sizeof st->option_flag[0], "%s", x->string);
        snprintf(st->option_value[st->n_options], sizeof st->option_value[0], "%s", x->valuestring);
        st->n_options++;
    }
}

// model.bos_token_id and model.eos_token_ids (optional: a Hugging Face model's special tokens).
static void read_token_ids(Reader *r, const cJSON *mo, SpecialTokens *t) {
    const cJSON *bos = cJSON_GetObjectItemCaseSensitive(mo, "bos_token_id");
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(mo, "eos_token_ids");
    if (bos) {
        if (!cJSON_IsNumber(bos) || bos->valuedouble < 0 || bos->valuedouble > 2147483647.0 ||
            bos->valuedouble != floor(bos->valuedouble)) {
            bad(r, "model", "bos_token_id", "a token id");
            return;
        }
        t->has_bos = 1;
        t->bos = (int)bos->valuedouble;
    }
    if (!eos) return;
    int n = cJSON_IsArray(eos) ? cJSON_GetArraySize(eos) : -1;
    if (n < 1 || n > MAX_EOS_IDS) {
        bad(r, "model", "eos_token_ids", "a list of 1 to 8 token ids");
        return;
    }
    for (const cJSON *x = eos->child; x; x = x->next) {
        if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 2147483647.0 || x->valuedouble != floor(x->valuedouble)) {
            bad(r, "model", "eos_token_ids", "a list of 1 to 8 token ids");
            return;
        }
        t->eos[t->n_eos++] = (int32_t)x->valuedouble;
    }
}

// model.sliding_window (optional: absent is the whole causal prefix, as in every checkpoint from before it): an
// integer 1..2^30, a llama-family model's only.
static void read_window(Reader *r, GPTConfig *c) {
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r->root, "model"), "sliding_window");
    if (!w) return;
    if (c->arch == ARCH_GPT2) {
        bad(r, "model", "sliding_window", "absent with model.arch gpt2 (GPT-2 attends to its whole causal prefix)");
        return;
    }
    c->sliding_window = (int)number(r, "model", "sliding_window", 1, 1073741824.0, 1);
}

// model.rotary_dim (optional: absent rotates every dim of a head, as in every checkpoint from before it): an even
// integer 2..the head dim, a llama-family model's only. The head dim itself reads as 0 (all dims).
static void read_rotary(Reader *r, GPTConfig *c) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r->root, "model"), "rotary_dim");
    if (!x) return;
    if (c->arch == ARCH_GPT2) {
        bad(r, "model", "rotary_dim", "absent with model.arch gpt2 (GPT-2 has learned positions, no RoPE)");
        return;
    }
    int d = gpt_head_dim(c);
    c->rotary_dim = (int)number(r, "model", "rotary_dim", 2, d, 1);
    if (!r->failed && c->rotary_dim % 2) {
        char what[96];
        snprintf(what, sizeof what, "even (RoPE rotates pairs j, j + R/2; it is %d)", c->rotary_dim);
        bad(r, "model", "rotary_dim", what);
    }
    if (c->rotary_dim == d) c->rotary_dim = 0;
}

// LoRA's fields of the model (docs/LORA.md), from the options the run recorded: a LoRA checkpoint's
// model file holds the frozen base and the adapters, and whoever reads it builds that model.
static void read_lora(Reader *r, CkptState *st) {
    GPTConfig *c = &st->model;
    const char *targets = NULL;
    for (int i = 0; i < st->n_options && !r->failed; i++) {
        const char *f = st->option_flag[i], *v = st->option_value[i];
        char *end;
        if (strcmp(f, "lora-rank") == 0) {
            long x = strtol(v, &end, 10);
            if (*end || x < 0 || x > 65536) bad(r, "options", "lora-rank", "a rank from 0 to 65536");
            c->lora_rank = (int)x;
        } else if (strcmp(f, "lora-alpha") == 0) {
            c->lora_alpha = strtof(v, &end);
            if (*end || !(c->lora_alpha >= 0.0f) || c->lora_alpha > 1e6f) bad(r, "options", "lora-alpha", "a number from 0 to 1e6");
        } else if (strcmp(f, "lora-dropout") == 0) {
            c->lora_dropout = strtof(v, &end);
            if (*end || !(c->lora_dropout >= 0.0f && c->lora_dropout < 1.0f)) bad(r, "options", "lora-dropout", "a probability in [0, 1)");
        } else if (strcmp(f, "lora-fa") == 0) {
            c->lora_fa = strcmp(v, "1") == 0;
        } else if (strcmp(f, "lora-rslora") == 0) {
            c->lora_rslora = strcmp(v, "1") == 0;
        } else if (strcmp(f, "lora-targets") == 0) {
            targets = v;
        }
    }
    if (r->failed || c->lora_rank <= 0) return;
    char why[256];
    if (targets && targets[0] && lora_parse_targets(gpt_lora_family(c), targets, &c->lora_targets, why, sizeof why) != 0)
        bad(r, "options", "lora-targets", "the family's LoRA targets");
}

int ckpt_state_read(const char *path, CkptState *st, char *err, size_t errlen) {
    uint8_t *data;
    size_t n;
    if (fileio_read_all(path, &data, &n, err, errlen) != 0) return -1;
    cJSON *root = cJSON_ParseWithLength((const char *)data, n);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        long off = at && at >= (const char *)data && at <= (const char *)data + n ? (long)(at - (const char *)data) : -1;
        snprintf(err, errlen, "'%s' is not valid JSON (error near byte %ld)", path, off);
        free(data);
        return -1;
    }
    free(data);
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen, "'%s' is not a JSON object", path);
        cJSON_Delete(root);
        return -1;
    }
    Reader r = {root, path, err, errlen, 0};
    memset(st, 0, sizeof *st);
    const char *format = string(&r, NULL, "format");
    if (!r.failed && strcmp(format, CKPT_FORMAT) != 0) bad(&r, NULL, "format", "\"" CKPT_FORMAT "\"");
    double version = number(&r, NULL, "format_version", 1, 1e9, 1);
    if (!r.failed && version > CKPT_FORMAT_VERSION) {
        snprintf(err, errlen, "'%s' has format_version %g; this ctron reads version %d (written by a newer ctron?)",
                 path, version, CKPT_FORMAT_VERSION);
        r.failed = 1;
    }
    st->step = (int)number(&r, NULL, "step", 0, 2147483647, 1);
    GPTConfig *c = &st->model;
    const char *arch = string(&r, "model", "arch");
    if (!r.failed && arch_from_name(arch) < 0) bad(&r, "model", "arch", "one of gpt2, llama");
    c->arch = r.failed ? ARCH_GPT2 : arch_from_name(arch);
    c->layers = (int)number(&r, "model", "layers", 1, 65535, 1);
    c->hidden = (int)number(&r, "model", "hidden", 1, 2147483647, 1);
    c->heads = (int)number(&r, "model", "heads", 1, 2147483647, 1);
    c->seq = (int)number(&r, "model", "seq", 1, 2147483647, 1);
    c->batch = (int)number(&r, "model", "batch", 1, 2147483647, 1);
    c->vocab = (int)number(&r, "model", "vocab", 1, 2147483647, 1);
    c->dropout = (float)number(&r, "model", "dropout", 0, 0.999999, 0);
    if (!r.failed && c->hidden % c->heads != 0) bad(&r, "model", "hidden", "divisible by model.heads");
    if (!r.failed && c->arch != ARCH_GPT2) {
        c->kv_heads = (int)number(&r, "model", "kv_heads", 1, c->heads, 1);
        if (!r.failed && c->heads % c->kv_heads != 0) bad(&r, "model", "kv_heads", "a divisor of model.heads");
        const cJSON *hd = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"), "head_dim");
        if (!r.failed && hd) c->head_dim = (int)number(&r, "model", "head_dim", 2, 65536, 1);
        if (!r.failed && hd && c->head_dim % 2) bad(&r, "model", "head_dim", "even (RoPE rotates pairs j, j + d/2)");
        c->ffn = (int)number(&r, "model", "ffn", 1, 2147483647, 1);
        c->rope_theta = (float)number(&r, "model", "rope_theta", 1, 1e12, 0);
        const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"),
                                                                "rope_scaling");
        char why[256] = "not a string";
        if (!r.failed && scaling &&
            (!cJSON_IsString(scaling) || rope_scaling_parse(scaling->valuestring, &c->rope_scaling, why, sizeof why))) {
            char what[400];
            snprintf(what, sizeof what, "none, linear:FACTOR, llama3:FACTOR:LOW:HIGH:ORIGINAL_POSITIONS or longrope:... (%s)",
                     why);
            bad(&r, "model", "rope_scaling", what);
        }
        c->norm_eps = (float)number(&r, "model", "rms_norm_eps", 1e-12, 1, 0);
        const cJSON *mo = cJSON_GetObjectItemCaseSensitive(root, "model");
        const cJSON *tied = cJSON_GetObjectItemCaseSensitive(mo, "tied_embeddings");
        const cJSON *bias = cJSON_GetObjectItemCaseSensitive(mo, "qkv_bias");
        const cJSON *qk_norm = cJSON_GetObjectItemCaseSensitive(mo, "qk_norm");   // optional: absent is none
        const cJSON *fused = cJSON_GetObjectItemCaseSensitive(mo, "fused_proj");   // optional: absent is split
        if (!r.failed && !cJSON_IsBool(tied)) bad(&r, "model", "tied_embeddings", "true or false");
        if (!r.failed && bias && !cJSON_IsBool(bias)) bad(&r, "model", "qkv_bias", "true or false");
        if (!r.failed && qk_norm && !cJSON_IsBool(qk_norm)) bad(&r, "model", "qk_norm", "true or false");
        if (!r.failed && fused && !cJSON_IsBool(fused)) bad(&r, "model", "fused_proj", "true or false");
        c->tie_embeddings = cJSON_IsTrue(tied) ? 1 : -1;
        c->qkv_bias = cJSON_IsTrue(bias);
        c->qk_norm = cJSON_IsTrue(qk_norm);
        if (!r.failed && c->qkv_bias && c->qk_norm)
            bad(&r, "model", "qk_norm", "false with model.qkv_bias true (no family has both)");
        c->fused_proj = cJSON_IsTrue(fused);
        if (!r.failed && c->fused_proj && (c->qkv_bias || c->qk_norm))
            bad(&r, "model", "fused_proj", c->qkv_bias ? "false with model.qkv_bias true (no family has both)"
                                                       : "false with model.qk_norm true (no family has both)");
    }
    if (!r.failed) read_window(&r, c);
    if (!r.failed) read_rotary(&r, c);
    if (!r.failed) {
        const cJSON *rev = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"), "reversible");
        if (rev && !cJSON_IsBool(rev)) bad(&r, "model", "reversible", "true or false");
        c->reversible = cJSON_IsTrue(rev);
    }
    if (!r.failed) read_token_ids(&r, cJSON_GetObjectItemCaseSensitive(root, "model"), &c->tokens);
    const cJSON *mp = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"),
                                                       "max_position_embeddings");
    if (!r.failed && mp) {   // optional: the context of the Hugging Face model a run started from
        if (!cJSON_IsNumber(mp) || mp->valuedouble < 1 || mp->valuedouble > 1073741824.0 || mp->valuedouble != floor(mp->valuedouble))
            bad(&r, "model", "max_position_embeddings", "an integer 1..2^30");
        else c->max_positions = (int)mp->valuedouble;
    }
    st->beta1 = (float)number(&r, "optimizer", "beta1", 0, 1, 0);
    st->beta2 = (float)number(&r, "optimizer", "beta2", 0, 1, 0);
    st->eps = (float)number(&r, "optimizer", "eps", 0, 1, 0);
    st->weight_decay = (float)number(&r, "optimizer", "weight_decay", 0, 1e9, 0);
    st->adam_t = (long)number(&r, "optimizer", "t", 0, 9e15, 1);
    st->lr = (float)number(&r, "schedule", "lr", 0, 1e9, 0);
    st->min_lr = (float)number(&r, "schedule", "min_lr", 0, 1e9, 0);
    st->warmup = (int)number(&r, "schedule", "warmup", 0, 2147483647, 1);
    st->total_steps = (int)number(&r, "schedule", "steps", 1, 2147483647, 1);
    st->grad_accum = (int)number(&r, "training", "grad_accum", 1, 65535, 1);
    st->clip = (float)number(&r, "training", "clip", 0, 1e30, 0);
    st->seed = (uint64_t)number(&r, "training", "seed", 0, 9007199254740992.0, 1);
    // Optional: checkpoints from before mixed precision have none and were trained in fp32.
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(root, "training");
    st->precision = PRECISION_FP32;
    if (!r.failed && cJSON_IsObject(tr) && cJSON_GetObjectItemCaseSensitive(tr, "precision")) {
        Precision p;
        if (precision_parse(string(&r, "training", "precision"), &p) == 0) st->precision = (int)p;
        else bad(&r, "training", "precision", "\"fp32\" or \"bf16\"");
    }
    snprintf(st->data_path, sizeof st->data_path, "%s", string(&r, "data", "path"));
    snprintf(st->val_path, sizeof st->val_path, "%s", string(&r, "data", "val_path"));
    const char *order = string(&r, "data", "order");
    if (!r.failed && strcmp(order, "random") != 0 && strcmp(order, "sequential") != 0)
        bad(&r, "data", "order", "\"random\" or \"sequential\"");
    st->data_order = strcmp(order, "sequential") == 0 ? DATA_SEQUENTIAL : DATA_RANDOM;
    st->val_frac = number(&r, "data", "val_frac", 0, 1, 0);
    st->save_every = (int)number(&r, "checkpointing", "save_every", 0, 2147483647, 1);
    st->keep = (int)number(&r, "checkpointing", "keep", 0, 2147483647, 1);
    st->eval_every = (int)number(&r, "evaluation", "eval_every", 0, 2147483647, 1);
    st->eval_batches = (int)number(&r, "evaluation", "eval_batches", 1, 1000000, 1);
    const char *tok = string(&r, NULL, "tokenizer");
    if (!r.failed && strcmp(tok, "tokenizer.json") == 0) {   // beside state.json
        const char *slash = strrchr(path, '/');
        int dir_len = slash ? (int)(slash - path) : 1;
        snprintf(st->tokenizer_path, sizeof st->tokenizer_path, "%.*s/tokenizer.json", dir_len, slash ? path : ".");
    } else if (!r.failed && strcmp(tok, "bytes") != 0) {
        bad(&r, NULL, "tokenizer", "\"bytes\" or \"tokenizer.json\"");
    }
    read_options(&r, st);
    read_lora(&r, st);
    cJSON_Delete(root);
    return r.failed ? -1 : 0;
}
