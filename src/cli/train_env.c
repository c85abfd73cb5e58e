#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "backend/backend.h"
#include "backend/cpu/gemm_bf16.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/train_ckpt_args.h"
#include "cli/train_passes.h"
#include "data/tokenfile.h"
#include "memory/ledger_report.h"
#include "memory/memory_model.h"
#include "train/trainer.h"
#include "util/fileio.h"

#define usage_error(...) args_error("train", __VA_ARGS__)

// Said up front: below AVX-512 oneDNN 2.6 has no bf16 matmul, and the GEMMs run widened to fp32 (a
// device's bf16 is its own: check_device).
static void note_cpu_bf16(const TrainOptions *o) {
    if (o->precision != PRECISION_BF16 || (o->device && strncmp(o->device, "cpu", 3) != 0)) return;
    char why[256];
    int support = gemm_bf16_support(why, sizeof why);
    if (support == GEMM_BF16_WIDENED)
        fprintf(stderr, "ctron train: note: %s; the bf16 GEMMs run widened to fp32 sgemm, correct but slower than fp32\n",
                why);
    if (support == GEMM_BF16_EMULATED)
        fprintf(stderr, "ctron train: note: %s; the bf16 GEMMs run emulated, correct but slower than fp32\n", why);
}

// The device is opened once here, so that a missing GPU or driver, or an index past the devices
// there are, is a usage error (exit 2) before any data is read. Several ranks (--tp, --pp, data
// parallel, ZeRO) exchange device tensors through comm_device.h: NCCL where it is built, else staged
// through host memory around MPI. The device's capacity (0 on the CPU) is kept for check_size.
static size_t device_capacity;
static int check_device(const TrainOptions *o) {
    char err[512] = "";
    if (backend_bf16_copies(err, sizeof err) < 0) return usage_error("%s", err);   // read by every backend
    if (!o->device || strcmp(o->device, "cpu") == 0) return 0;
    Backend *be = backend_open(o->device, (Precision)o->precision, err, sizeof err);
    if (!be) return usage_error("--device %s: %s", o->device, err);
    size_t in_use = 0;
    be->device_memory(be, &in_use, &device_capacity);
    backend_close(be);
    return 0;
}

// A GPU run that cannot fit is refused before anything is allocated, with what it would need: the least it
// holds (n weights a rank; without LoRA their gradients and AdamW's moments, train_memory_estimate's; a LoRA
// run's frozen base at 2 or 4 bytes an element, its adapters left out) and the policy's activation peak (the
// ledger's prediction). The workspace and the libraries come on top, so no run that fits is refused. A
// pipeline stage holds its own layers and micro-batches, not this count: not checked.
static int check_device_size(const TrainOptions *o, double state) {
    if (!device_capacity || o->pp > 1) return 0;
    int lora = o->model.lora_rank > 0;
    if (lora) state = (o->model.base_bf16 ? 2.0 : 4.0) * (double)gpt_num_params(&o->model) / (o->tp > 0 ? o->tp : 1);
    MemoryPolicy pol;
    char err[256];
    if (train_build_policy(o, &pol, err, sizeof err) != 0) { policy_free(&pol); return 0; }   // refused later, with the reason
    ActShape sh = train_act_shape(o);
    double act = (double)act_peak_bytes(&sh, &pol);
    policy_free(&pol);
    char b1[32], b2[32], b3[32], b4[32];
    if (state + act <= (double)device_capacity) return 0;
    return usage_error("the model needs at least %s on --device %s (%s of %s, %s of activations at the step's peak "
                       "under this policy), more than the device's %s; recompute (--recompute selective or full), "
                       "--mem-budget, --attention flash or a smaller --batch keeps less",
                       format_bytes(state + act, b1, sizeof b1), o->device, format_bytes(state, b2, sizeof b2),
                       lora ? "the frozen base's weights" : "parameters, gradients and AdamW state",
                       format_bytes(act, b3, sizeof b3), format_bytes((double)device_capacity, b4, sizeof b4));
}

// Absurd sizes are refused with what they would need, before anything is allocated; then what the
// BLAS's 32-bit indices can address.
static int check_size(const TrainOptions *o) {
    const GPTConfig *c = &o->model;
    double state, act, need = train_memory_estimate(o, &state, &act);
    double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
    char b1[32], b2[32], b3[32], b4[32];
    // This bound (no recompute, fp32) is the host's concern only where the run lives in host memory; a
    // device run is checked against the device with its policy's exact peak.
    int host_memory = !o->device || strncmp(o->device, "cpu", 3) == 0;
    if (!host_memory) {
        int rc = check_device_size(o, state);
        if (rc) return rc;
    }
    if (host_memory && ram > 0 && need > ram)
        return usage_error("the model (--layers %d --hidden %d --heads %d --seq %d --batch %d --vocab %d) would "
                           "need about %s per rank (%s of parameters, gradients and AdamW state, up to %s of "
                           "activations), more than this machine's %s of memory", c->layers, c->hidden, c->heads,
                           c->seq, c->batch, c->vocab, format_bytes(need, b1, sizeof b1),
                           format_bytes(state, b2, sizeof b2), format_bytes(act, b3, sizeof b3),
                           format_bytes(ram, b4, sizeof b4));
    if ((long long)c->seq * c->batch * 4 * c->hidden > INT_MAX || (long long)c->vocab * c->hidden > INT_MAX ||
        (long long)c->seq * c->batch * c->vocab > INT_MAX || (long long)c->seq * c->seq * c->heads > (1LL << 34))
        return usage_error("model too large for 32-bit BLAS indices: --seq %d --batch %d --hidden %d --vocab %d",
                           c->seq, c->batch, c->hidden, c->vocab);
    return 0;
}

// --mem-budget: the planner's policy, sized for the device's scratch and this machine's threads.
static int check_plan(const TrainOptions *o) {
    if (!(o->mem_budget > 0)) return 0;   // the flags' policy: checked with the options (train_validate.c)
    char err[256];
    MemoryPolicy pol;
    if (train_build_policy(o, &pol, err, sizeof err) != 0) { policy_free(&pol); return usage_error("%s", err); }
    policy_free(&pol);
    return 0;
}

// The data must exist and hold a full window (seq+1 tokens) in both splits; the other inputs exist.
static int check_data(const TrainOptions *o) {
    const GPTConfig *c = &o->model;
    struct stat st;
    if (stat(o->data_path, &st) != 0)
        return usage_error("--data: cannot read '%s': %s", o->data_path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return usage_error("--data: '%s' is not a regular file", o->data_path);
    if (st.st_size == 0) return usage_error("--data: '%s' is empty", o->data_path);
    if (o->val_path) {
        if (stat(o->val_path, &st) != 0) return usage_error("--val-data: cannot read '%s': %s", o->val_path, strerror(errno));
        if (!S_ISREG(st.st_mode) || st.st_size == 0)
            return usage_error("--val-data: '%s' is not a non-empty regular file", o->val_path);
    }
    if (o->tokenizer_path && stat(o->tokenizer_path, &st) != 0)
        return usage_error("--tokenizer: cannot read '%s': %s", o->tokenizer_path, strerror(errno));
    if (o->tokenizer_path && !S_ISREG(st.st_mode))   // a FIFO would block the first read forever
        return usage_error("--tokenizer: '%s' is %s, expected a regular file", o->tokenizer_path,
                           fileio_kind(st.st_mode));
    // Byte-level text: its size is its token count, so a too-long --seq is caught here; token files
    // and BPE text are checked once loaded (train_run, also exit 2).
    char err[256];
    int is_tokens = tokenfile_sniff(o->data_path, err, sizeof err);
    if (is_tokens < 0) return usage_error("--data: %s", err);
    if (!is_tokens && !o->tokenizer_path && !o->val_path) {
        stat(o->data_path, &st);
        long long n = st.st_size, n_val = (long long)((double)n * o->val_frac), n_train = n - n_val;
        if (n_train < (long long)c->seq + 1 || n_val < (long long)c->seq + 1)
            return usage_error("--seq %d is longer than the data: '%s' has %lld tokens (%lld train, %lld validation), "
                               "each split needs at least %d", c->seq, o->data_path, n, n_train, n_val, c->seq + 1);
    }
    return 0;
}

int train_check_environment(TrainOptions *o, const TrainGiven *given) {
    int rc;
    if ((rc = cli_train_resume_tokenizer(o, given->name, given->n)) != 0) return rc;
    note_cpu_bf16(o);
    if ((rc = check_device(o)) != 0) return rc;
    if ((rc = check_size(o)) != 0) return rc;
    if ((rc = check_plan(o)) != 0) return rc;
    if (o->offload_dir) {
        struct stat sd;
        if (stat(o->offload_dir, &sd) != 0 || !S_ISDIR(sd.st_mode) || access(o->offload_dir, W_OK | X_OK) != 0)
            return usage_error("--offload-dir: '%s' is not a writable directory", o->offload_dir);
    }
    if ((rc = check_data(o)) != 0) return rc;
    if (o->log_path) {
        char err[256];
        struct stat sl;
        o->log_made = o->log_made || stat(o->log_path, &sl) != 0;   // the second parse of a failed launch finds it
        FILE *f = fileio_fopen_out(o->log_path, 1, err, sizeof err);
        if (!f) return usage_error("--log: %s", err);
        fclose(f);
    }
    return cli_train_ckpt_dir(o);
}
