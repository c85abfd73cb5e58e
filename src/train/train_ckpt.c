#include "train/train_ckpt.h"
#include "backend/backend.h"
#include <stdio.h>
#include <string.h>
#include "memory/ledger_report.h"
#include "train/train_config.h"
#include "util/common.h"

int train_ckpt_last_step(const TrainOptions *o) {
    return o->stop_after > 0 && o->stop_after < o->steps ? o->stop_after : o->steps;
}

int train_ckpt_due(const TrainOptions *o, int step, int last) {
    if (!o->ckpt_dir) return 0;
    return step == last || (o->save_every > 0 && step % o->save_every == 0);
}

void train_ckpt_state(const TrainOptions *o, const AdamW *opt, const LRSchedule *sched, int step, CkptState *st) {
    memset(st, 0, sizeof *st);
    st->step = step;
    st->model = o->model;
    st->beta1 = opt->beta1;
    st->beta2 = opt->beta2;
    st->eps = opt->eps;
    st->weight_decay = opt->weight_decay;
    st->adam_t = opt->t;
    st->lr = sched->lr;
    st->min_lr = sched->min_lr;
    st->warmup = sched->warmup;
    st->total_steps = sched->steps;
    // The one-process equivalent: micro-batches per step over all data-parallel groups, so that the
    // checkpoint resumes at any layout with the same global batch.
    st->grad_accum = o->grad_accum * train_dp_groups(o);
    st->clip = o->clip;
    st->seed = o->seed;
    st->precision = o->precision;
    st->val_frac = o->val_frac;
    snprintf(st->data_path, sizeof st->data_path, "%s", o->data_path);
    snprintf(st->val_path, sizeof st->val_path, "%s", o->val_path ? o->val_path : "");
    st->data_order = (int)o->data_order;
    st->save_every = o->save_every;
    st->keep = o->keep;
    st->eval_every = o->eval_every;
    st->eval_batches = o->eval_batches;
    // Every option that changes the numbers and has no section of its own (train_config.c's list).
    TrainConfigField f[TRAIN_CONFIG_MAX];
    int n = train_config_fields(o, f, TRAIN_CONFIG_MAX);
    for (int i = 0; i < n && st->n_options < CKPT_MAX_OPTIONS; i++)
        // LoRA's options only for a LoRA run: a full fine-tune's state.json stays as it was
        if (train_config_recorded(f[i].resume) &&
            (o->model.lora_rank > 0 || (strncmp(f[i].flag, "lora-", 5) != 0 && strcmp(f[i].flag, "base-dtype") != 0))) {
            snprintf(st->option_flag[st->n_options], sizeof st->option_flag[0], "%s", f[i].flag);
            snprintf(st->option_value[st->n_options], sizeof st->option_value[0], "%s", f[i].value);
            st->n_options++;
        }
}

int train_ckpt_save(const TrainOptions *o, const GPT *m, const AdamW *opt, const LRSchedule *sched, int step,
                    int save_index, const void *tokenizer_json, size_t tokenizer_bytes) {
    CkptState st;
    train_ckpt_state(o, opt, sched, step, &st);
    int crash_at = ckpt_test_crash_in_save();
    // The vocabulary travels as bytes read at the start of the run: a resumed run's tokenizer.json
    // lives in a step directory that --keep may prune.
    CkptSaveOptions so = {o->keep, crash_at > 0 && crash_at == save_index, tokenizer_json, tokenizer_bytes};
    char err[1024], path[4096], b1[32];
    double t0 = now_seconds();
    if (ckpt_save(o->ckpt_dir, m, opt, &st, &so, err, sizeof err) != 0) {
        fprintf(stderr, "ctron: error: checkpoint at step %d: %s\n", step, err);
        return -1;
    }
    ckpt_step_dir(o->ckpt_dir, step, path, sizeof path);
    // LoRA: + the frozen base, 2 B an element under --base-dtype bf16 (stored BF16)
    double base16 = m->frozen && m->cfg.base_bf16 ? (double)m->n_base : 0.0;
    printf("saved %s (%s of weights and optimizer state, %.0f ms)\n", path,
           format_bytes((3.0 * (double)m->n_params + (double)m->n_frozen - base16) * sizeof(float) + 2.0 * base16, b1,
                        sizeof b1),
           (now_seconds() - t0) * 1e3);
    fflush(stdout);
    return 0;
}

int train_ckpt_resume(const TrainOptions *o, GPT *m, AdamW *opt) {
    CkptState st;
    char err[1024];
    if (ckpt_load(o->resume_step_dir, m, opt, &st, err, sizeof err) != 0) {
        fprintf(stderr, "ctron: error: cannot resume: %s\n", err);
        return -1;
    }
    printf("resumed from %s at step %d of %d\n", o->resume_step_dir, st.step, o->steps);
    if (st.total_steps != o->steps)
        printf("  note: the checkpoint's run had --steps %d; the cosine schedule now spans %d steps\n", st.total_steps,
               o->steps);
    // Allowed, not refused: the checkpoint holds fp32 master weights and AdamW state under either
    // precision, so nothing is lost; only the trajectory from here on is the other precision's.
    if (st.precision != o->precision) {
        const char *slash = strrchr(o->resume_step_dir, '/');
        printf("  note: checkpoint %s was trained with --precision %s; resuming under %s (fp32 master weights and "
               "AdamW state carry over unchanged)\n", slash ? slash + 1 : o->resume_step_dir,
               precision_name((Precision)st.precision), precision_name((Precision)o->precision));
    }
    fflush(stdout);
    return st.step;
}

// ---- --resume and the command line -------------------------------------------------------------

static int was_given(const char *const *given, int n, const char *flag) {
    for (int i = 0; i < n; i++)
        if (strcmp(given[i], flag) == 0) return 1;
    return 0;
}

#define MISMATCH(flag, fmt, mine, theirs)                                                                      \
    do {                                                                                                       \
        snprintf(err, errlen, "--resume: --%s " fmt " does not match the checkpoint's " fmt " (%s/state.json); " \
                 "leave --%s out to continue with the checkpoint's value", flag, mine, theirs,                  \
                 o->resume_step_dir, flag);                                                                    \
        return -1;                                                                                             \
    } while (0)

// The flag, when given, must equal the checkpoint's value; when not given, it takes it.
#define AGREE(flag, field, ck, fmt, cast)                                                                     \
    do {                                                                                                      \
        if (!was_given(given, n_given, flag)) field = (ck);                                                   \
        else if ((field) != (ck)) MISMATCH(flag, fmt, (cast)(field), (cast)(ck));                             \
    } while (0)

// A window as the mismatch message names it (0: none).
static const char *window_text(int window, char *buf, size_t len) {
    if (window > 0) snprintf(buf, len, "%d", window);
    else snprintf(buf, len, "no sliding window");
    return buf;
}

// The rotated dims as the mismatch message names them: R, or "all d dims" (0: the whole head).
static const char *rotary_text(const GPTConfig *c, char *buf, size_t len) {
    if (c->rotary_dim > 0) snprintf(buf, len, "%d", c->rotary_dim);
    else snprintf(buf, len, "all %d dims", gpt_head_dim(c));
    return buf;
}

#define ORDER_NAME(x) ((x) == DATA_SEQUENTIAL ? "sequential" : "random")

int train_ckpt_merge(TrainOptions *o, const CkptState *st, const char *const *given, int n_given, char *err,
                     size_t errlen) {
    GPTConfig *c = &o->model;
    const GPTConfig *k = &st->model;
    AGREE("layers", c->layers, k->layers, "%d", int);
    AGREE("hidden", c->hidden, k->hidden, "%d", int);
    AGREE("heads", c->heads, k->heads, "%d", int);
    AGREE("seq", c->seq, k->seq, "%d", int);
    AGREE("batch", c->batch, k->batch, "%d", int);
    AGREE("vocab", c->vocab, k->vocab, "%d", int);
    AGREE("dropout", c->dropout, k->dropout, "%g", double);
    if (!was_given(given, n_given, "arch")) c->arch = k->arch;
    else if (c->arch != k->arch)
        MISMATCH("arch", "%s", arch_spec((ArchKind)c->arch)->name, arch_spec((ArchKind)k->arch)->name);
    c->tokens = k->tokens;   // the special token ids of the model it started from: no flag gives them
    c->max_positions = k->max_positions;   // and its declared context
    if (!was_given(given, n_given, "reversible")) c->reversible = k->reversible;   // another model: it must agree
    else if (!k->reversible) MISMATCH("reversible", "%s", "(reversible blocks)", "the standard block");
    if (k->arch != ARCH_GPT2) {   // the family's knobs (GPT-2's checkpoints have none: they are fixed)
        AGREE("kv-heads", c->kv_heads, k->kv_heads, "%d", int);
        // head_dim: 0 in a state.json that does not write it (hidden / heads); compared resolved
        if (!was_given(given, n_given, "head-dim")) c->head_dim = k->head_dim;
        else if (gpt_head_dim(c) != gpt_head_dim(k)) MISMATCH("head-dim", "%d", gpt_head_dim(c), gpt_head_dim(k));
        AGREE("ffn-hidden", c->ffn, k->ffn, "%d", int);
        AGREE("rope-theta", c->rope_theta, k->rope_theta, "%g", double);
        if (!was_given(given, n_given, "rope-scaling")) c->rope_scaling = k->rope_scaling;
        else if (memcmp(&c->rope_scaling, &k->rope_scaling, sizeof c->rope_scaling))
            MISMATCH("rope-scaling", "%s", rope_scaling_key(&c->rope_scaling, (char[96]){0}, 96),
                     rope_scaling_key(&k->rope_scaling, (char[96]){0}, 96));
        AGREE("norm-eps", c->norm_eps, k->norm_eps, "%g", double);
        if (!was_given(given, n_given, "tie-embeddings")) c->tie_embeddings = k->tie_embeddings;
        else if (k->tie_embeddings < 0) MISMATCH("tie-embeddings", "%s", "(tied)", "untied output layer");
        if (!was_given(given, n_given, "qkv-bias")) c->qkv_bias = k->qkv_bias;
        else if (!k->qkv_bias) MISMATCH("qkv-bias", "%s", "(biases)", "no q/k/v biases");
        if (!was_given(given, n_given, "qk-norm")) c->qk_norm = k->qk_norm;
        else if (!k->qk_norm) MISMATCH("qk-norm", "%s", "(q/k norms)", "no q/k norms");
        if (!was_given(given, n_given, "fused-proj")) c->fused_proj = k->fused_proj;
        else if (!k->fused_proj) MISMATCH("fused-proj", "%s", "(fused qkv_proj, gate_up_proj)", "no fused projections");
        // the window changes what every query sees: a checkpoint's model keeps its own (0: none)
        if (!was_given(given, n_given, "sliding-window")) c->sliding_window = k->sliding_window;
        else if (c->sliding_window != k->sliding_window)
            MISMATCH("sliding-window", "%s", window_text(c->sliding_window, (char[48]){0}, 48),
                     window_text(k->sliding_window, (char[48]){0}, 48));
        // RoPE's width is the model's too; compared as rotated dims (R = d, all of them, is the checkpoint's 0)
        if (!was_given(given, n_given, "rotary-dim")) c->rotary_dim = k->rotary_dim;
        else if (gpt_rotary_dim(c) != gpt_rotary_dim(k))
            MISMATCH("rotary-dim", "%s", rotary_text(c, (char[48]){0}, 48), rotary_text(k, (char[48]){0}, 48));
    }
    AGREE("lr", o->lr, st->lr, "%g", double);
    AGREE("min-lr", o->min_lr, st->min_lr, "%g", double);
    AGREE("warmup", o->warmup, st->warmup, "%d", int);
    AGREE("weight-decay", o->weight_decay, st->weight_decay, "%g", double);
    AGREE("clip", o->clip, st->clip, "%g", double);
    // The checkpoint's accumulation is over all data-parallel groups: split it over this run's.
    int dp = train_dp_groups(o);
    if (!was_given(given, n_given, "grad-accum")) {
        if (st->grad_accum % dp != 0) {
            snprintf(err, errlen, "--resume: the checkpoint's step of %d micro-batches (%s/state.json) cannot be "
                     "split over %d data-parallel groups; use a layout whose dp divides %d", st->grad_accum,
                     o->resume_step_dir, dp, st->grad_accum);
            return -1;
        }
        o->grad_accum = st->grad_accum / dp;
    } else if (o->grad_accum * dp != st->grad_accum) {
        snprintf(err, errlen, "--resume: --grad-accum %d over %d data-parallel group%s is %d micro-batches per step, "
                 "the checkpoint's is %d (%s/state.json); leave --grad-accum out to keep the checkpoint's batch",
                 o->grad_accum, dp, dp == 1 ? "" : "s", o->grad_accum * dp, st->grad_accum, o->resume_step_dir);
        return -1;
    }
    AGREE("seed", o->seed, st->seed, "%llu", unsigned long long);
    // LoRA: a LoRA run continues only a LoRA checkpoint (its LoRA options come back from "options"); the base's
    // tensors without adapters are not a LoRA run's state.
    int ck_lora = 0;
    for (int i = 0; i < st->n_options; i++)
        if (strcmp(st->option_flag[i], "lora-rank") == 0) ck_lora = atoi(st->option_value[i]) > 0;
    if (c->lora_rank > 0 && !ck_lora) {
        snprintf(err, errlen, "--resume: --lora-rank %d, but the checkpoint %s is a full fine-tuning run (no LoRA "
                 "adapters in its state.json); a LoRA run cannot continue it", c->lora_rank, o->resume_step_dir);
        return -1;
    }
    // The frozen base's storage changes its values (bf16 rounding): a checkpoint from before "base-dtype" was
    // recorded kept it in fp32.
    int ck_base_recorded = 0;
    for (int i = 0; i < st->n_options; i++) ck_base_recorded |= strcmp(st->option_flag[i], "base-dtype") == 0;
    if (c->lora_rank > 0 && ck_lora && c->base_bf16 && !ck_base_recorded) {
        snprintf(err, errlen, "--resume: --base-dtype bf16, but the checkpoint %s kept its frozen base in fp32 (no "
                 "base-dtype in its state.json); leave --base-dtype out to continue it", o->resume_step_dir);
        return -1;
    }
    // Without --precision (or --bf16) the run continues in the checkpoint's precision, which is what
    // makes a plain --resume bitwise; a different one is allowed (train_ckpt_resume says so).
    if (!was_given(given, n_given, "precision") && !was_given(given, n_given, "bf16")) o->precision = st->precision;
    AGREE("val-frac", o->val_frac, st->val_frac, "%g", double);
    if (!was_given(given, n_given, "data-order")) o->data_order = (DataOrder)st->data_order;
    else if (o->data_order != (DataOrder)st->data_order)
        MISMATCH("data-order", "%s", ORDER_NAME(o->data_order), ORDER_NAME((DataOrder)st->data_order));
    // No flags: AdamW's betas come from the checkpoint (eps is checked when the tensors load).
    o->beta1 = st->beta1;
    o->beta2 = st->beta2;
    if (!was_given(given, n_given, "steps")) o->steps = st->total_steps;
    if (o->steps <= st->step) {
        snprintf(err, errlen, "--resume: the checkpoint %s is at step %d, and --steps is %d: nothing is left to train "
                 "(give a larger --steps to train on)", o->resume_step_dir, st->step, o->steps);
        return -1;
    }
    if (o->stop_after > 0 && o->stop_after <= st->step) {
        snprintf(err, errlen, "--stop-after %d: the checkpoint %s is already at step %d", o->stop_after,
                 o->resume_step_dir, st->step);
        return -1;
    }
    // The split decides which windows are training data: an explicit validation file must persist.
    snprintf(o->resume_val_path, sizeof o->resume_val_path, "%s", st->val_path);
    if (!was_given(given, n_given, "val-data")) o->val_path = st->val_path[0] ? o->resume_val_path : NULL;
    else if (strcmp(o->val_path, st->val_path) != 0)
        fprintf(stderr, "ctron train: note: --val-data '%s' differs from the checkpoint's '%s'\n", o->val_path,
                st->val_path);
    // The vocabulary: the checkpoint's own copy unless one is given.
    snprintf(o->resume_tokenizer_path, sizeof o->resume_tokenizer_path, "%s", st->tokenizer_path);
    if (!was_given(given, n_given, "tokenizer")) o->tokenizer_path = st->tokenizer_path[0] ? o->resume_tokenizer_path : NULL;
    snprintf(o->resume_data_path, sizeof o->resume_data_path, "%s", st->data_path);
    if (!was_given(given, n_given, "data")) o->data_path = o->resume_data_path;
    else if (strcmp(o->data_path, st->data_path) != 0)
        fprintf(stderr, "ctron train: note: --data '%s' differs from the checkpoint's '%s'; the data order is "
                "the same only if the file is the same\n", o->data_path, st->data_path);
    if (!was_given(given, n_given, "ckpt-dir")) o->ckpt_dir = o->resume_run_dir;
    if (!was_given(given, n_given, "save-every")) o->save_every = st->save_every;
    if (!was_given(given, n_given, "keep")) o->keep = st->keep;
    if (!was_given(given, n_given, "eval-every")) o->eval_every = st->eval_every;
    if (!was_given(given, n_given, "eval-batches")) o->eval_batches = st->eval_batches;
    return 0;
}
