#include "backend/backend.h"
#include "train/train_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "util/common.h"

#define SAME 0
#define FLOAT_TEXT(x) float_text((char[32]){0}, 32, (x))
#define LOCAL 1

// Every option of TrainOptions, in one list: a new flag gets one line here, and the MPI ranks then
// compare it. LOCAL: may legitimately differ between ranks (host paths, what only rank 0 prints).
#define TRAIN_CONFIG_LIST(X, o)                                                                      \
    X("layers", SAME, "%d", (o)->model.layers)                                                       \
    X("hidden", SAME, "%d", (o)->model.hidden)                                                       \
    X("heads", SAME, "%d", (o)->model.heads)                                                         \
    X("seq", SAME, "%d", (o)->model.seq)                                                             \
    X("batch", SAME, "%d", (o)->model.batch)                                                         \
    X("vocab", SAME, "%d", (o)->model.vocab)                                                         \
    X("dropout", SAME, "%s", FLOAT_TEXT((o)->model.dropout))                                           \
    X("steps", SAME, "%d", (o)->steps)                                                               \
    X("grad-accum", SAME, "%d", (o)->grad_accum)                                                     \
    X("warmup", SAME, "%d", (o)->warmup)                                                             \
    X("eval-every", SAME, "%d", (o)->eval_every)                                                     \
    X("eval-batches", SAME, "%d", (o)->eval_batches)                                                 \
    X("sample", SAME, "%d", (o)->sample_tokens)                                                      \
    X("lr", SAME, "%s", FLOAT_TEXT((o)->lr))                                                           \
    X("min-lr", SAME, "%s", FLOAT_TEXT((o)->min_lr))                                                   \
    X("weight-decay", SAME, "%s", FLOAT_TEXT((o)->weight_decay))                                       \
    X("adam-beta1", SAME, "%s", FLOAT_TEXT((o)->beta1))                                                \
    X("adam-beta2", SAME, "%s", FLOAT_TEXT((o)->beta2))                                                \
    X("clip", SAME, "%s", FLOAT_TEXT((o)->clip))                                                       \
    X("val-frac", SAME, "%.17g", (o)->val_frac)                                                      \
    X("seed", SAME, "%llu", (unsigned long long)(o)->seed)                                           \
    X("data-order", SAME, "%s", (o)->data_order == DATA_SEQUENTIAL ? "sequential" : "random")        \
    X("recompute", SAME, "%s", (o)->recompute)                                                       \
    X("recompute-method", SAME, "%s", (o)->recompute_method)                                         \
    X("recompute-num-layers", SAME, "%d", (o)->recompute_num_layers)                                 \
    X("recompute-layers", SAME, "%s", (o)->recompute_layers ? (o)->recompute_layers : "")            \
    X("dropout-masks", SAME, "%d", (int)(o)->masks)                                                  \
    X("act-dtype", SAME, "%d", (int)(o)->act_dtype)                                                  \
    X("tempo", SAME, "%u", (o)->tempo)                                                               \
    X("gelu-bits", SAME, "%d", (o)->gelu_bits)                                                       \
    X("attention", SAME, "%s", (o)->flash ? "flash" : "standard")                                    \
    X("mini-seq", SAME, "%d", (o)->mini_seq)                                                         \
    X("offload", SAME, "%u", (o)->offload)                                                           \
    X("static-plan", SAME, "%d", (o)->static_plan)                                                   \
    X("offload-budget", SAME, "%.17g", (o)->offload_budget)                                          \
    X("mem-budget", SAME, "%.17g", (o)->mem_budget)                                                  \
    X("tp", SAME, "%d", (o)->tp)                                                                     \
    X("sp", SAME, "%d", (o)->sp)                                                                     \
    X("pp", SAME, "%d", (o)->pp)                                                                     \
    X("pp-schedule", SAME, "%d", (o)->pp_schedule)                                                   \
    X("virtual-stages", SAME, "%d", (o)->virtual_stages)                                             \
    X("recompute-microbatches", SAME, "%d", (o)->recompute_microbatches)                             \
    X("zero", SAME, "%d", (o)->zero)                                                                 \
    X("ranks", SAME, "%d", (o)->world_size)                                                          \
    X("max-bad-steps", SAME, "%d", (o)->max_bad_steps)                                               \
    X("save-every", SAME, "%d", (o)->save_every)                                                     \
    X("keep", SAME, "%d", (o)->keep)                                                                 \
    X("stop-after", SAME, "%d", (o)->stop_after)                                                     \
    X("resume-step", SAME, "%.180s", base_name((o)->resume ? (o)->resume_step_dir : ""))                 \
    X("tokenizer", SAME, "%s", (o)->tokenizer_path ? "bpe" : "bytes")                                \
    X("val-data", SAME, "%s", (o)->val_path ? "file" : "split")                                      \
    X("ckpt-dir", SAME, "%s", (o)->ckpt_dir ? "set" : "none")                                        \
    X("precision", SAME, "%s", precision_name((Precision)(o)->precision))                           \
    X("data", LOCAL, "%s", (o)->data_path)                                                           \
    X("val-data-path", LOCAL, "%s", (o)->val_path ? (o)->val_path : "")                              \
    X("tokenizer-path", LOCAL, "%s", (o)->tokenizer_path ? (o)->tokenizer_path : "")                 \
    X("ckpt-dir-path", LOCAL, "%s", (o)->ckpt_dir ? (o)->ckpt_dir : "")                              \
    X("resume-path", LOCAL, "%s", (o)->resume ? (o)->resume : "")                                    \
    X("offload-dir", LOCAL, "%s", (o)->offload_dir ? (o)->offload_dir : "")                          \
    X("log", LOCAL, "%s", (o)->log_path ? (o)->log_path : "")                                        \
    X("prompt", LOCAL, "%s", (o)->sample_prompt ? (o)->sample_prompt : "")                           \
    X("threads", LOCAL, "%d", (o)->threads)                                                          \
    X("print-every", LOCAL, "%d", (o)->print_every)                                                  \
    X("ledger", LOCAL, "%d", (o)->show_ledger)                                                       \
    X("peak-gflops", LOCAL, "%.17g", (o)->peak_gflops)

// The shortest decimal that reads back as f: exact for the comparison, and readable.
static const char *float_text(char *buf, size_t len, float f) {
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, len, "%.*g", p, (double)f);
        if ((float)strtod(buf, NULL) == f) break;
    }
    return buf;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int train_config_fields(const TrainOptions *o, TrainConfigField *out, int max) {
    int n = 0;
#define EMIT(flag_, local_, fmt_, value_)                                                            \
    if (n < max) {                                                                                   \
        out[n].flag = flag_;                                                                         \
        out[n].local = local_;                                                                       \
        snprintf(out[n].value, sizeof out[n].value, fmt_, value_);                                   \
        n++;                                                                                         \
    }
    TRAIN_CONFIG_LIST(EMIT, o)
#undef EMIT
    return n;
}

void train_config_text(const TrainOptions *o, char *buf, size_t len) {
    TrainConfigField f[TRAIN_CONFIG_MAX];
    int n = train_config_fields(o, f, TRAIN_CONFIG_MAX);
    size_t k = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; i < n && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s=%s%s\n", f[i].flag, f[i].value, f[i].local ? " (local)" : "");
}

// A checksum travels as two 16-bit halves in fp32 (exact): the collectives move floats.
static void put_crc(float *p, uint32_t c) { p[0] = (float)(c >> 16); p[1] = (float)(c & 0xFFFF); }

int train_config_agree(const TrainOptions *o, CommGroup *w, char *err, size_t errlen) {
    if (w->size == 1) return 0;
    TrainConfigField f[TRAIN_CONFIG_MAX];
    int n = train_config_fields(o, f, TRAIN_CONFIG_MAX), P = w->size;
    // The list's length first: ranks running different builds would otherwise gather unequal sizes.
    float mine_n = (float)n, *all_n = xmalloc((size_t)P * sizeof(float));
    comm_allgather(w, &mine_n, all_n, 1);
    for (int r = 1; r < P; r++)
        if (all_n[r] != all_n[0]) {
            snprintf(err, errlen, "the ranks run different ctron builds: rank 0 lists %d options, rank %d lists %d",
                     (int)all_n[0], r, (int)all_n[r]);
            free(all_n);
            return -1;
        }
    free(all_n);
    float *mine = xmalloc((size_t)n * 2 * sizeof(float)), *all = xmalloc((size_t)P * n * 2 * sizeof(float));
    for (int i = 0; i < n; i++) {
        const char *v = f[i].local ? "" : f[i].value;
        put_crc(mine + 2 * i, (uint32_t)crc32(0L, (const Bytef *)v, (uInt)strlen(v)));
    }
    comm_allgather(w, mine, all, (size_t)n * 2);
    int first = -1;
    for (int i = 0; i < n && first < 0; i++)
        for (int r = 1; r < P && first < 0; r++)
            if (memcmp(all + (size_t)r * n * 2 + 2 * i, all + 2 * i, 2 * sizeof(float)) != 0) first = i;
    free(mine);
    if (first < 0) { free(all); return 0; }
    // Every rank's value of that option, so that the message shows them (chars as floats).
    enum { W = sizeof f[0].value };
    float text[W], *texts = xmalloc((size_t)P * W * sizeof(float));
    for (int c = 0; c < W; c++) text[c] = (float)(unsigned char)f[first].value[c];
    comm_allgather(w, text, texts, W);
    size_t k = (size_t)snprintf(err, errlen, "the ranks were given different configurations: --%s is '%s' on rank 0",
                                f[first].flag, f[first].value);
    int shown = 0;
    for (int r = 1; r < P && k < errlen; r++) {
        if (memcmp(all + (size_t)r * n * 2 + 2 * first, all + 2 * first, 2 * sizeof(float)) == 0) continue;
        if (shown++ == 8) { k += (size_t)snprintf(err + k, errlen - k, ", ..."); break; }
        char v[W];
        for (int c = 0; c < W; c++) v[c] = (char)(int)texts[(size_t)r * W + c];
        v[W - 1] = '\0';
        k += (size_t)snprintf(err + k, errlen - k, ", '%s' on rank %d", v, r);
    }
    if (k < errlen)
        snprintf(err + k, errlen - k, " (the first option that differs; every rank must get the same flags)");
    free(texts);
    free(all);
    return -1;
}
