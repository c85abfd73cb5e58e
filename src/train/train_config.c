#include "backend/backend.h"
#include "train/train_config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "util/common.h"
#include "model/policy.h"
#include "train/pipe_schedule.h"

#define SAME 0
#define R_FREE RESUME_FREE
#define R_STATE RESUME_STATE
#define R_KEEP RESUME_KEEP
#define R_NOTE RESUME_NOTE
#define R_LAYOUT RESUME_LAYOUT
#define R_RECORD RESUME_RECORD
#define FLOAT_TEXT(x) float_shortest_text((x), (char[32]){0}, 32)
#define LOCAL 1

// Every option of TrainOptions, in one list: a new flag gets one line here, and the MPI ranks then
// compare it. LOCAL: may legitimately differ between ranks (host paths, what only rank 0 prints).
// The third column says what --resume does with it (ResumeClass, train_config.h); the recorded ones
// are written to state.json "options" as the text the command line takes.
#define TRAIN_CONFIG_LIST(X, o)                                                                      \
    X("layers", SAME, R_STATE, "%d", (o)->model.layers)                                                       \
    X("hidden", SAME, R_STATE, "%d", (o)->model.hidden)                                                       \
    X("heads", SAME, R_STATE, "%d", (o)->model.heads)                                                         \
    X("seq", SAME, R_STATE, "%d", (o)->model.seq)                                                             \
    X("batch", SAME, R_STATE, "%d", (o)->model.batch)                                                         \
    X("vocab", SAME, R_STATE, "%d", (o)->model.vocab)                                                         \
    X("dropout", SAME, R_STATE, "%s", FLOAT_TEXT((o)->model.dropout))                                           \
    X("arch", SAME, R_STATE, "%s", arch_spec((ArchKind)(o)->model.arch)->name)                                 \
    X("kv-heads", SAME, R_STATE, "%d", (o)->model.kv_heads)                                                   \
    X("head-dim", SAME, R_STATE, "%d", (o)->model.head_dim)                                                   \
    X("ffn-hidden", SAME, R_STATE, "%d", (o)->model.ffn)                                                      \
    X("rope-theta", SAME, R_STATE, "%s", FLOAT_TEXT((o)->model.rope_theta))                                   \
    X("rope-scaling", SAME, R_STATE, "%s", rope_scaling_key(&(o)->model.rope_scaling, (char[96]){0}, 96))    \
    X("norm-eps", SAME, R_STATE, "%s", FLOAT_TEXT((o)->model.norm_eps))                                       \
    X("tie-embeddings", SAME, R_STATE, "%d", (o)->model.tie_embeddings)                                       \
    X("qkv-bias", SAME, R_STATE, "%d", (o)->model.qkv_bias)                                                   \
    X("qk-norm", SAME, R_STATE, "%d", (o)->model.qk_norm)                                                     \
    X("fused-proj", SAME, R_STATE, "%d", (o)->model.fused_proj)                                               \
    X("sliding-window", SAME, R_STATE, "%d", (o)->model.sliding_window)                                       \
    X("rotary-dim", SAME, R_STATE, "%d", (o)->model.rotary_dim)                                               \
    X("reversible", SAME, R_STATE, "%d", (o)->model.reversible)                                               \
    X("lora-rank", SAME, R_KEEP, "%d", (o)->model.lora_rank)                                                  \
    X("lora-alpha", SAME, R_KEEP, "%s", FLOAT_TEXT((o)->model.lora_alpha))                                    \
    X("lora-targets", SAME, R_KEEP, "%s", (o)->lora_targets ? (o)->lora_targets : "")                         \
    X("lora-fa", SAME, R_KEEP, "%d", (o)->model.lora_fa)                                                      \
    X("lora-rslora", SAME, R_KEEP, "%d", (o)->model.lora_rslora)                                              \
    X("lora-dropout", SAME, R_KEEP, "%s", FLOAT_TEXT((o)->model.lora_dropout))                                \
    X("base-dtype", SAME, R_KEEP, "%s", (o)->model.base_bf16 ? "bf16" : "fp32")                               \
    X("steps", SAME, R_STATE, "%d", (o)->steps)                                                               \
    X("grad-accum", SAME, R_STATE, "%d", (o)->grad_accum)                                                     \
    X("warmup", SAME, R_STATE, "%d", (o)->warmup)                                                             \
    X("eval-every", SAME, R_STATE, "%d", (o)->eval_every)                                                     \
    X("eval-batches", SAME, R_STATE, "%d", (o)->eval_batches)                                                 \
    X("sample", SAME, R_FREE, "%d", (o)->sample_tokens)                                                      \
    X("lr", SAME, R_STATE, "%s", FLOAT_TEXT((o)->lr))                                                           \
    X("min-lr", SAME, R_STATE, "%s", FLOAT_TEXT((o)->min_lr))                                                   \
    X("weight-decay", SAME, R_STATE, "%s", FLOAT_TEXT((o)->weight_decay))                                       \
    X("adam-beta1", SAME, R_STATE, "%s", FLOAT_TEXT((o)->beta1))                                                \
    X("adam-beta2", SAME, R_STATE, "%s", FLOAT_TEXT((o)->beta2))                                                \
    X("clip", SAME, R_STATE, "%s", FLOAT_TEXT((o)->clip))                                                       \
    X("val-frac", SAME, R_STATE, "%.17g", (o)->val_frac)                                                      \
    X("seed", SAME, R_STATE, "%llu", (unsigned long long)(o)->seed)                                           \
    X("data-order", SAME, R_STATE, "%s", (o)->data_order == DATA_SEQUENTIAL ? "sequential" : "random")        \
    X("recompute", SAME, R_NOTE, "%s", (o)->recompute)                                                       \
    X("recompute-method", SAME, R_NOTE, "%s", (o)->recompute_method)                                         \
    X("recompute-num-layers", SAME, R_NOTE, "%d", (o)->recompute_num_layers)                                 \
    X("recompute-layers", SAME, R_NOTE, "%s", (o)->recompute_layers ? (o)->recompute_layers : "")            \
    X("dropout-masks", SAME, R_NOTE, "%s", mask_mode_name((o)->masks))                                                  \
    X("act-dtype", SAME, R_KEEP, "%s", act_dtype_name((o)->act_dtype))                                                  \
    X("tempo", SAME, R_KEEP, "%s", tempo_describe((o)->tempo, (char[64]){0}, 64))                                                               \
    X("gelu-bits", SAME, R_KEEP, "%d", (o)->gelu_bits)                                                       \
    X("attention", SAME, R_KEEP, "%s", (o)->flash ? "flash" : "standard")                                    \
    X("mini-seq", SAME, R_KEEP, "%d", (o)->mini_seq)                                                         \
    X("memo", SAME, R_KEEP, "%s", memo_text((char[32]){0}, 32, (o)->memo_alpha))                               \
    X("offload", SAME, R_NOTE, "%s", offload_describe((o)->offload, (char[192]){0}, 192))                                                           \
    X("static-plan", SAME, R_NOTE, "%d", (o)->static_plan)                                                   \
    X("offload-budget", SAME, R_NOTE, "%.17g", (o)->offload_budget)                                          \
    X("mem-budget", SAME, R_KEEP, "%.17g", (o)->mem_budget)                                                  \
    X("act-budget-layer", SAME, R_NOTE, "%.17g", (o)->act_budget_layer)                                      \
    X("search-rates", SAME, R_NOTE, "%s", search_rates_text((char[80]){0}, 80, (o)))                          \
    X("tp-link-gbps", SAME, R_NOTE, "%.17g", (o)->tp_link_gbps)                                              \
    X("tp", SAME, R_LAYOUT, "%d", (o)->tp)                                                                     \
    X("sp", SAME, R_LAYOUT, "%d", (o)->sp)                                                                     \
    X("pp", SAME, R_LAYOUT, "%d", (o)->pp)                                                                     \
    X("pp-schedule", SAME, R_LAYOUT, "%s", pipe_schedule_name((PipeScheduleKind)(o)->pp_schedule))                                                   \
    X("virtual-stages", SAME, R_LAYOUT, "%d", (o)->virtual_stages)                                             \
    X("recompute-microbatches", SAME, R_LAYOUT, "%d", (o)->recompute_microbatches)                             \
    X("zero", SAME, R_LAYOUT, "%d", (o)->zero)                                                                 \
    X("ranks", SAME, R_RECORD, "%d", (o)->world_size)                                                          \
    X("max-bad-steps", SAME, R_NOTE, "%d", (o)->max_bad_steps)                                               \
    X("save-every", SAME, R_STATE, "%d", (o)->save_every)                                                     \
    X("keep", SAME, R_STATE, "%d", (o)->keep)                                                                 \
    X("stop-after", SAME, R_FREE, "%d", (o)->stop_after)                                                     \
    X("resume-step", SAME, R_FREE, "%.180s", base_name((o)->resume ? (o)->resume_step_dir : ""))                 \
    X("tokenizer", SAME, R_STATE, "%s", (o)->tokenizer_path ? "bpe" : "bytes")                                \
    X("val-data", SAME, R_STATE, "%s", (o)->val_path ? "file" : "split")                                      \
    X("ckpt-dir", SAME, R_STATE, "%s", (o)->ckpt_dir ? "set" : "none")                                        \
    X("precision", SAME, R_STATE, "%s", precision_name((Precision)(o)->precision))                           \
    X("device", LOCAL, R_NOTE, "%s", (o)->device ? (o)->device : "cpu")                             \
    X("data", LOCAL, R_STATE, "%s", (o)->data_path)                                                           \
    X("val-data-path", LOCAL, R_FREE, "%s", (o)->val_path ? (o)->val_path : "")                              \
    X("tokenizer-path", LOCAL, R_FREE, "%s", (o)->tokenizer_path ? (o)->tokenizer_path : "")                 \
    X("ckpt-dir-path", LOCAL, R_FREE, "%s", (o)->ckpt_dir ? (o)->ckpt_dir : "")                              \
    X("lora-from", LOCAL, R_RECORD, "%s", (o)->lora_from ? (o)->lora_from : "")                              \
    X("lora-out", LOCAL, R_FREE, "%s", (o)->lora_out ? (o)->lora_out : "")                                   \
    X("init-from", LOCAL, R_RECORD, "%s", (o)->init_from ? (o)->init_from : "")                             \
    X("resume-path", LOCAL, R_FREE, "%s", (o)->resume ? (o)->resume : "")                                    \
    X("offload-dir", LOCAL, R_FREE, "%s", (o)->offload_dir ? (o)->offload_dir : "")                          \
    X("log", LOCAL, R_FREE, "%s", (o)->log_path ? (o)->log_path : "")                                        \
    X("prompt", LOCAL, R_FREE, "%s", (o)->sample_prompt ? (o)->sample_prompt : "")                           \
    X("threads", LOCAL, R_FREE, "%d", (o)->threads)                                                          \
    X("print-every", LOCAL, R_FREE, "%d", (o)->print_every)                                                  \
    X("ledger", LOCAL, R_FREE, "%d", (o)->show_ledger)                                                       \
    X("peak-gflops", LOCAL, R_FREE, "%.17g", (o)->peak_gflops)

// --search-rates as the flag takes it ("0,0": not given, measured when the search runs; the link's rate third
// only when given, so a run without one reads as before).
static const char *search_rates_text(char *buf, size_t len, const TrainOptions *o) {
    if (o->search_link_gbps > 0) snprintf(buf, len, "%.17g,%.17g,%.17g", o->search_gflops, o->search_gbps, o->search_link_gbps);
    else snprintf(buf, len, "%.17g,%.17g", o->search_gflops, o->search_gbps);
    return buf;
}

// --memo's text as the command line takes it: off (-1), auto (-2) or the fraction.
static const char *memo_text(char *buf, size_t len, double alpha) {
    if (alpha == -1.0) snprintf(buf, len, "off");
    else if (alpha == -2.0) snprintf(buf, len, "auto");
    else snprintf(buf, len, "%.17g", alpha);
    return buf;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

// Every option fits the caller's array (a list grown past TRAIN_CONFIG_MAX would drop its last ones).
#define COUNT_OPTION(...) +1
enum { TRAIN_CONFIG_COUNT = 0 TRAIN_CONFIG_LIST(COUNT_OPTION, unused) };
#undef COUNT_OPTION
_Static_assert(TRAIN_CONFIG_COUNT <= TRAIN_CONFIG_MAX, "TRAIN_CONFIG_MAX is below the number of options");

int train_config_fields(const TrainOptions *o, TrainConfigField *out, int max) {
    int n = 0;
#define EMIT(flag_, local_, resume_, fmt_, value_)                                                   \
    if (n < max) {                                                                                   \
        out[n].flag = flag_;                                                                         \
        out[n].local = local_;                                                                       \
        out[n].resume = resume_;                                                                     \
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

int train_config_recorded(int resume_class) {
    return resume_class == RESUME_KEEP || resume_class == RESUME_NOTE || resume_class == RESUME_LAYOUT ||
           resume_class == RESUME_RECORD;
}

static const char *const resume_class_name[] = {"free", "state", "keep", "note", "layout", "record"};

void train_config_list(FILE *f) {
    TrainOptions o;
    train_options_default(&o);
    TrainConfigField fl[TRAIN_CONFIG_MAX];
    int n = train_config_fields(&o, fl, TRAIN_CONFIG_MAX);
    for (int i = 0; i < n; i++) fprintf(f, "%s %s\n", fl[i].flag, resume_class_name[fl[i].resume]);
}

static int was_given(const char *const *given, int n, const char *flag) {
    for (int i = 0; i < n; i++)
        if (strcmp(given[i], flag) == 0) return 1;
    return 0;
}

static const char *recorded_value(const CkptState *st, const char *flag) {
    for (int i = 0; i < st->n_options; i++)
        if (strcmp(st->option_flag[i], flag) == 0) return st->option_value[i];
    return NULL;
}

int train_config_resume(TrainOptions *o, const CkptState *st, const char *const *given, int n_given,
                        TrainOptionApply apply, char *err, size_t errlen) {
    if (st->n_options == 0) return 0;   // a checkpoint of a ctron from before "options": nothing recorded
    TrainConfigField f[TRAIN_CONFIG_MAX];
    int n = train_config_fields(o, f, TRAIN_CONFIG_MAX), layout_noted = 0;
    const char *ranks = recorded_value(st, "ranks");
    char ranks_now[32];
    snprintf(ranks_now, sizeof ranks_now, "%d", o->world_size);
    int same_ranks = ranks && strcmp(ranks, ranks_now) == 0;
    // Another --precision brings its own activation type (docs/CHECKPOINTS.md: a bf16 checkpoint under
    // fp32 is exactly an fp32 one).
    int other_precision = (was_given(given, n_given, "precision") || was_given(given, n_given, "bf16")) &&
                          o->precision != st->precision;
    for (int i = 0; i < n; i++) {
        const char *ck = recorded_value(st, f[i].flag);
        int cls = f[i].resume;
        if (!ck || cls == RESUME_RECORD || !train_config_recorded(cls) || strcmp(ck, f[i].value) == 0) continue;
        if (other_precision && strcmp(f[i].flag, "act-dtype") == 0) continue;
        if (was_given(given, n_given, f[i].flag)) {
            // A memo layer's α (memo@ALPHA) changes the numbers within rounding, as --memo does: kept.
            int memo_list = strcmp(f[i].flag, "recompute-layers") == 0 &&
                            (policy_list_has_memo(ck) || policy_list_has_memo(f[i].value));
            if (cls == RESUME_KEEP || memo_list) {
                snprintf(err, errlen, "--resume: --%s %s does not match the checkpoint's %s (%s/state.json): it changes "
                         "the numbers, so a resumed run would not be the run it continues; leave --%s out to continue "
                         "with the checkpoint's value", f[i].flag, f[i].value, ck, o->resume_step_dir, f[i].flag);
                return -1;
            }
            fprintf(stderr, "ctron train: note: --%s %s differs from the checkpoint's %s; %s\n", f[i].flag, f[i].value,
                    ck, cls == RESUME_LAYOUT ? "resuming at this layout (the same run within float rounding, "
                                               "docs/PARALLEL.md)"
                                             : "allowed: it changes what is kept in memory, not the numbers");
            continue;
        }
        if (cls == RESUME_LAYOUT && !same_ranks) {
            if (!layout_noted++)
                fprintf(stderr, "ctron train: note: the checkpoint ran on %s rank%s, this launch has %d: its layout "
                        "(--tp --pp --sp --zero, the pipeline schedule) is not restored; resuming at this launch's "
                        "(the same run within float rounding, docs/PARALLEL.md)\n", ranks ? ranks : "?",
                        ranks && strcmp(ranks, "1") == 0 ? "" : "s", o->world_size);
            continue;
        }
        int rc = apply(o, f[i].flag, ck);
        if (rc != 0) {
            snprintf(err, errlen, "--resume: the checkpoint's --%s '%s' (%s/state.json) cannot be restored", f[i].flag, ck,
                     o->resume_step_dir);
            return -1;
        }
    }
    return 0;
}
