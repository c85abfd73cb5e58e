#include "train/trainer.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "data/dataset.h"
#include "memory/flops.h"
#include "memory/ledger_report.h"
#include "model/workspace.h"
#include "parallel/comm_device.h"
#include "train/adamw.h"
#include "train/grad_norm.h"
#include "train/grads_dist.h"
#include "train/pipeline.h"
#include "memory/pipe_memory.h"
#include "train/guards.h"
#include "train/train_dist.h"
#include "train/zero.h"
#include "train/sample.h"
#include "train/schedule.h"
#include "train/train_ckpt.h"
#include "tokenizer/bpe.h"
#include "util/common.h"
#include "util/fileio.h"
#include "util/peak.h"
#include "backend/cpu/gemm_bf16.h"

// Sums a few numbers over all ranks (no-op on one). fp32, as the interface moves fp32.
static void sum_over_ranks(CommGroup *w, float *x, size_t n) {
    if (w->size > 1) comm_allreduce_sum(w, x, x, n);
}

// True on every rank when ok is true on every rank: a rank must never go on alone into a collective.
static int all_ok(CommGroup *w, int ok) {
    float bad = ok ? 0.0f : 1.0f;
    sum_over_ranks(w, &bad, 1);
    return bad == 0.0f;
}

// Validation batches are shared out over the dp groups and their loss sums added up (a TP group
// computes each of its batches together).
static double evaluate(GPT *m, const Dataset *ds, int n_batches, int32_t *tokens, int32_t *targets, CommGroup *w,
                       Pipeline *pl) {
    const GPTConfig *c = &m->cfg;
    double sum = 0.0;
    StepCtx ctx = {0, 0, 0, 0};
    for (int k = w->rank; k < n_batches; k += w->size) {
        dataset_val_batch(ds, c->seq, c->batch, k, n_batches, tokens, targets);
        if (pl) {   // through every stage; each rank of the pipeline gets the loss
            sum += pipeline_eval_batch(pl, m, tokens, targets, c->seq, c->batch);
            continue;
        }
        sum += gpt_forward(m, tokens, targets, c->seq, c->batch, ctx, 0.0f);
        gpt_release(m);
    }
    float total = (float)sum;
    sum_over_ranks(w, &total, 1);
    return (w->size > 1 ? (double)total : sum) / ((double)n_batches * c->seq * c->batch);
}


static void format_eta(double seconds, char *buf, size_t len) {
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, len, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
    else if (s >= 60) snprintf(buf, len, "%ldm%02lds", s / 60, s % 60);
    else snprintf(buf, len, "%lds", s);
}

// Where a step's time goes: forward, backward (with what it recomputes), clipping + optimizer; and
// the bytes this rank moved, by collective and (TP) by purpose.
typedef struct {
    double fwd, bwd, opt;
    CommStats comm;
    uint64_t tp_bytes[TPC_PURPOSES];
    int skipped;          // the numerical guard skipped this step
    int offload;          // --offload: what the step moved to and from the pool, and waited for it
    double offload_out, offload_in, offload_wait;
    int pp;               // a pipeline schedule ran: every stage's wait for transfers (the bubble) and compute
    int n_stages;
    float stage_wait[64], stage_busy[64];
} StepTimes;

// The step's collectives and transfers on all of this rank's groups.
static CommStats step_comm_stats(const CommGroup *world, const CommGrid *grid) {
    CommStats sum = comm_stats(world);
    const CommGroup *groups[4] = {&grid->tp_group, &grid->dp_group, &grid->pp_group, &grid->emb_group};
    for (int i = 0; i < 4; i++) {
        CommStats a = comm_stats(groups[i]);
        for (int k = 0; k < COMM_KINDS; k++) {
            sum.bytes[k] += a.bytes[k];
            sum.calls[k] += a.calls[k];
        }
    }
    return sum;
}

static void reset_comm_stats(CommGroup *world, CommGrid *grid) {
    comm_stats_reset(world);
    comm_stats_reset(&grid->tp_group);
    comm_stats_reset(&grid->dp_group);
    comm_stats_reset(&grid->pp_group);
    comm_stats_reset(&grid->emb_group);
}

// Every stage's seconds waiting for transfers and computing this step, from the ranks of dp group 0
// and TP rank 0 (world rank = stage · tp), for the log. Collective over the world.
static void gather_stage_times(StepTimes *t, const Pipeline *pl, CommGroup *world, int tp, int pp) {
    float mine[2] = {(float)pl->wait_s, (float)(pl->fwd_s + pl->bwd_s)};
    float *all = xmalloc((size_t)world->size * 2 * sizeof(float));
    if (world->size > 1) comm_allgather(world, mine, all, 2);
    else memcpy(all, mine, sizeof mine);
    t->pp = 1;
    t->n_stages = pp < 64 ? pp : 64;
    for (int r = 0; r < t->n_stages; r++) {
        t->stage_wait[r] = all[2 * r * tp];
        t->stage_busy[r] = all[2 * r * tp + 1];
    }
    free(all);
}

static int write_log_line(FILE *log, int step, double loss, double val_loss, float lr, double ms, double tps,
                           size_t act_bytes, size_t act_layer_bytes, double grad_norm, const StepTimes *t) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "step", step);
    if (isfinite(loss)) cJSON_AddNumberToObject(o, "loss", loss);
    else cJSON_AddStringToObject(o, "loss", isnan(loss) ? "nan" : "inf");
    if (!isnan(val_loss)) cJSON_AddNumberToObject(o, "val_loss", val_loss);
    cJSON_AddNumberToObject(o, "lr", lr);
    cJSON_AddNumberToObject(o, "ms", ms);
    cJSON_AddNumberToObject(o, "tokens_per_s", tps);
    cJSON_AddNumberToObject(o, "act_bytes", (double)act_bytes);
    cJSON_AddNumberToObject(o, "act_layer_bytes", (double)act_layer_bytes);
    if (isfinite(grad_norm)) cJSON_AddNumberToObject(o, "grad_norm", grad_norm);
    else cJSON_AddStringToObject(o, "grad_norm", isnan(grad_norm) ? "nan" : "inf");
    if (t->skipped) cJSON_AddBoolToObject(o, "skipped", 1);
    if (t->pp) {   // the bubble: each stage's wait for its transfers against its compute
        cJSON *pp = cJSON_AddObjectToObject(o, "pipeline");
        cJSON *wait = cJSON_AddArrayToObject(pp, "wait_ms"), *busy = cJSON_AddArrayToObject(pp, "busy_ms");
        cJSON *idle = cJSON_AddArrayToObject(pp, "idle_fraction");
        for (int r = 0; r < t->n_stages; r++) {
            cJSON_AddItemToArray(wait, cJSON_CreateNumber(t->stage_wait[r] * 1e3));
            cJSON_AddItemToArray(busy, cJSON_CreateNumber(t->stage_busy[r] * 1e3));
            cJSON_AddItemToArray(idle, cJSON_CreateNumber(t->stage_busy[r] > 0 ? t->stage_wait[r] / t->stage_busy[r] : 0.0));
        }
    }
    if (t->offload) {
        cJSON *off = cJSON_AddObjectToObject(o, "offload");
        cJSON_AddNumberToObject(off, "out_bytes", t->offload_out);
        cJSON_AddNumberToObject(off, "in_bytes", t->offload_in);
        cJSON_AddNumberToObject(off, "wait_ms", t->offload_wait * 1e3);
    }
    cJSON_AddNumberToObject(o, "fwd_ms", t->fwd * 1e3);
    cJSON_AddNumberToObject(o, "bwd_ms", t->bwd * 1e3);
    cJSON_AddNumberToObject(o, "opt_ms", t->opt * 1e3);
    // Bytes this rank moved in the step's collectives, by kind (docs/PARALLEL.md's convention).
    cJSON *comm = cJSON_AddObjectToObject(o, "comm_bytes");
    for (int k = 0; k < COMM_KINDS; k++)
        if (t->comm.calls[k]) cJSON_AddNumberToObject(comm, comm_kind_name((CommKind)k), (double)t->comm.bytes[k]);
    // The TP group's part of it by purpose: inside the blocks (f/f̄ or g/ḡ), SP's re-gathers, vocabulary.
    if (t->tp_bytes[TPC_BLOCK] + t->tp_bytes[TPC_REGATHER] + t->tp_bytes[TPC_VOCAB] > 0) {
        cJSON *tp = cJSON_AddObjectToObject(o, "tp_bytes");
        cJSON_AddNumberToObject(tp, "block", (double)t->tp_bytes[TPC_BLOCK]);
        cJSON_AddNumberToObject(tp, "regather", (double)t->tp_bytes[TPC_REGATHER]);
        cJSON_AddNumberToObject(tp, "vocab", (double)t->tp_bytes[TPC_VOCAB]);
    }
    char *text = cJSON_PrintUnformatted(o);
    int ok = fprintf(log, "%s\n", text) >= 0 && fflush(log) == 0;   // 0, or -1 with errno
    cJSON_free(text);
    cJSON_Delete(o);
    return ok ? 0 : -1;
}

// Saves the checkpoint of step: rank 0 writes the model (gathered from its shards under TP or
// ZeRO). Collective over the world; 0 on every rank when it worked, -1 on every rank otherwise.
// The device, and what its driver says is in use beside what ctron holds there, so that nothing is
// hidden: weights (+ their bf16 copy), gradients, AdamW moments, the activation arenas, the workspace
// and the backend's scratch, and ZeRO's exchange stage. The rest is the libraries' own (CUDA context,
// cuBLASLt, NCCL).
static void print_device(const GPT *m, const AdamW *opt, const Zero *zero) {
    char line[256], b[9][32];
    m->be->describe(m->be, line, sizeof line);
    size_t in_use = 0, total = 0, arena = 0;
    m->be->device_memory(m->be, &in_use, &total);
    for (int k = 0; k < m->pp.contexts; k++) arena += m->acts[k].arena.capacity;
    size_t weights = m->n_params * (sizeof(float) + (m->params16 ? sizeof(uint16_t) : 0));
    size_t stage = zero && zero->be ? ((size_t)zero->dp->size + 1) * zero->piece * sizeof(float) : 0;
    size_t held = weights + m->n_params * sizeof(float) + 2 * opt->n * sizeof(float) + arena + m->workspace_bytes +
                  m->io_bytes + m->be->scratch_bytes(m->be) + stage;
    printf("  device %s\n", line);
    char zs[64] = "";
    if (stage) snprintf(zs, sizeof zs, ", ZeRO exchange stage %s", format_bytes((double)stage, b[6], sizeof b[6]));
    printf("  on the device: weights %s, gradients %s, AdamW %s, activation arena %s, workspace %s, inputs %s,"
           " scratch %s%s;"
           " ctron holds %s (%zu B), the device counts %s (%zu B) in use\n",
           format_bytes((double)weights, b[0], sizeof b[0]),
           format_bytes((double)m->n_params * sizeof(float), b[1], sizeof b[1]),
           format_bytes((double)(2 * opt->n * sizeof(float)), b[2], sizeof b[2]),
           format_bytes((double)arena, b[3], sizeof b[3]), format_bytes((double)m->workspace_bytes, b[4], sizeof b[4]),
           format_bytes((double)m->io_bytes, b[8], sizeof b[8]),
           format_bytes((double)m->be->scratch_bytes(m->be), b[5], sizeof b[5]), zs,
           format_bytes((double)held, b[6], sizeof b[6]), held, format_bytes((double)in_use, b[7], sizeof b[7]), in_use);
}

static int save_checkpoint(const TrainOptions *o, const GPT *m, const AdamW *opt, Zero *zero, CommGroup *world,
                           CommGrid *grid, const LRSchedule *sched, int step, int save_index,
                           const void *tokenizer_json, size_t tokenizer_bytes) {
    int saved = 1;
    // A device the host cannot read (a GPU) writes through the gathered copy too: one host model.
    if (o->tp <= 1 && o->pp <= 1 && !zero && m->be->host_addressable) {
        saved = world->rank != 0 ||
                train_ckpt_save(o, m, opt, sched, step, save_index, tokenizer_json, tokenizer_bytes) == 0;
    } else {   // the unsharded model and state, gathered for rank 0 to write
        // Only the ranks of dp group 0 receive the whole model; the others only send their pieces.
        GPT full;
        AdamW full_opt;
        memset(&full, 0, sizeof full);
        memset(&full_opt, 0, sizeof full_opt);
        if (grid->dp_group.rank == 0) {
            gpt_init_params(&full, &o->model);
            adamw_init(&full_opt, NULL, full.n_params, opt->beta1, opt->beta2, opt->eps, opt->weight_decay);
        }
        dist_gather_whole(m, opt, zero, grid, &full, &full_opt);
        if (world->rank == 0)
            saved = train_ckpt_save(o, &full, &full_opt, sched, step, save_index, tokenizer_json, tokenizer_bytes) == 0;
        adamw_free(&full_opt);
        gpt_free(&full);
    }
    return all_ok(world, saved) ? 0 : -1;
}

// Rank 0's activation peak as the analytic model predicts it: the one-process step, or under a pipeline
// schedule stage 0's schedule of contexts.
static size_t predicted_peak(const GPT *m, const PipeSpec *spec) {
    if (!spec) return act_peak_bytes(&m->shape, &m->policy);
    PipeMemory pm = {spec, &m->shape, &m->policy, m->pp.keep_all > 0 ? &m->policy_all : NULL, m->pp.keep_all};
    return pipe_rank_act_peak(&pm, 0);
}

// MFU never reads above 100 % unremarked: a step that ran faster than the peak proves the peak low (it
// was measured on a busy machine). A cached peak is raised to what the step ran at, per rank (the
// cache too, at the end of the run); a --peak-gflops given is kept, with a note. *raised: 0 not yet,
// 1 raised, -1 noted.
static double peak_raise(const TrainOptions *o, double peak, double observed, int *raised) {
    if (!(peak > 0) || !(observed > peak)) return peak;
    if (o->peak_gflops > 0) {
        if (!*raised)
            printf("note: a step ran at %.1f GFLOP/s per rank, above --peak-gflops %.1f: MFU/HFU read above 100 %%\n",
                   observed, peak);
        *raised = -1;
        return peak;
    }
    if (!*raised)
        printf("note: a step ran at %.1f GFLOP/s per rank, above the cached GEMM peak %.1f (measured on a busy "
               "machine?): MFU/HFU use the higher figure from here on, and the cache keeps it\n", observed, peak);
    *raised = 1;
    return observed;
}

int train_run(const TrainOptions *o, Comm *comm) {
    const GPTConfig *c = &o->model;
    CommGroup *world = &comm->world;
    int rank = world->rank;
    char err[512], b1[32];
    // The dp × pp × tp grid (the CLI checked the layout); nranks counts the data-parallel groups.
    CommGrid grid;
    if (comm_grid_pp(comm, o->tp, o->pp, &grid, err, sizeof err) != 0) {
        if (rank == 0) fprintf(stderr, "ctron: error: %s\n", err);
        return 2;
    }
    CommGroup *dpg = &grid.dp_group, *tpg = &grid.tp_group;
    guard_install_signals();
    int nranks = grid.dp, dp_rank = dpg->rank;
    if (o->threads > 0) omp_set_num_threads(o->threads);
    // Rank 0 speaks for the run: progress, ledger report, log, checkpoints, sample.
    if (rank != 0 && !freopen("/dev/null", "w", stdout)) return 1;

    // Data and vocabulary are user input: a problem with them is a usage error (exit 2), on every
    // rank at once when any rank has it.
    Dataset ds;
    Bpe bpe;
    uint8_t *tokenizer_json = NULL;
    size_t tokenizer_bytes = 0;
    int data_ok = dataset_load_split(&ds, o->data_path, o->val_path, o->tokenizer_path, o->val_frac, c->vocab, err,
                                     sizeof err) == 0 &&
                  dataset_check_windows(&ds, c->seq, err, sizeof err) == 0;
    if (data_ok && o->tokenizer_path) {
        if (bpe_load(&bpe, o->tokenizer_path, err, sizeof err) != 0) data_ok = 0;
        else if (fileio_read_all(o->tokenizer_path, &tokenizer_json, &tokenizer_bytes, err, sizeof err) != 0) {
            bpe_free(&bpe);
            data_ok = 0;
        }
    }
    if (!data_ok) {
        if (world->size > 1) fprintf(stderr, "ctron train (rank %d of %d): %s\n", rank, world->size, err);
        else fprintf(stderr, "ctron train: %s\n", err);
    }
    if (!all_ok(world, data_ok)) {
        if (data_ok && o->tokenizer_path) bpe_free(&bpe);
        free(tokenizer_json);
        dataset_free(&ds);
        comm_grid_free(&grid);
        return 2;
    }
    FILE *log = NULL;
    MemoryPolicy policy;
    int policy_ok = train_build_policy(o, &policy, err, sizeof err) == 0;
    if (!policy_ok) fprintf(stderr, "ctron: error: %s\n", err);
    // A resumed run appends: the log of the steps before the checkpoint is not lost.
    else if (rank == 0 && o->log_path && !(log = fileio_fopen_out(o->log_path, o->resume != NULL, err, sizeof err)))
        fprintf(stderr, "ctron: error: --log: %s\n", err);
    if (!policy_ok || (rank == 0 && o->log_path && !log)) {
        if (policy_ok) policy_free(&policy);
        if (o->tokenizer_path) bpe_free(&bpe);
        free(tokenizer_json);
        dataset_free(&ds);
        comm_grid_free(&grid);
        return 1;
    }
    GPT m;
    TPLayout tpl = {o->tp, tpg->rank, o->sp, tpg};
    // A pipeline schedule (DESIGN.md §9): this stage's units and the activation contexts they need.
    Pipeline pipe, *pl = NULL;
    PipeSpec spec;
    if (train_uses_pipeline(o)) {
        if (train_pipe_spec(o, &spec, err, sizeof err) != 0) ctron_fatal("%s", err);   // the CLI checked it
        pl = &pipe;
        int s_rank = o->sp ? c->seq / o->tp : c->seq;
        pipeline_init(pl, &spec, grid.pp_group.rank, &grid.pp_group, dpg, spec.kind == PIPE_LAYERED && !o->zero,
                      c->seq, c->batch, (size_t)s_rank * c->batch * c->hidden);
        PPLayout ppl = {spec.p, grid.pp_group.rank, spec.V, pipe_layers_per_chunk(&spec), pl->contexts,
                        o->recompute_microbatches < pl->contexts ? o->recompute_microbatches : pl->contexts,
                        &grid.pp_group};
        gpt_init_pp(&m, c, &policy, &tpl, &ppl);
    } else {
        gpt_init_tp(&m, c, &policy, &tpl);
    }
    gpt_init_weights(&m, o->seed);
    // Collectives on device tensors (NULL on the CPU): staged through a host buffer as large as the
    // largest of them (ZeRO's reduce-scatter region, the gradient buckets, an activation), or NCCL.
    size_t stage_floats = m.n_params + m.n_params / (size_t)nranks + (size_t)nranks + 1;
    if ((size_t)c->seq * c->batch * c->hidden > stage_floats) stage_floats = (size_t)c->seq * c->batch * c->hidden;
    CommDevice *cdev = comm_device_open(&grid, m.be, stage_floats);
    // ZeRO-1: this rank keeps the AdamW moments of its pieces only.
    Zero zero_state, *zero = NULL;
    if (o->zero) {
        zero_init(&zero_state, dpg, m.n_params, m.be);
        zero = &zero_state;
    }
    AdamW opt;
    adamw_init(&opt, m.be, zero ? zero->n_owned : m.n_params, o->beta1, o->beta2, 1e-8f, o->weight_decay);
    // Loaded through a whole host copy: sharded layouts, and a device the host cannot write (a GPU).
    int sharded = o->tp > 1 || o->pp > 1 || zero || !m.be->host_addressable;
    int warmup = o->warmup >= 0 ? o->warmup : (o->steps / 10 < 100 ? o->steps / 10 : 100);
    LRSchedule sched = {o->lr, o->min_lr >= 0.0f ? o->min_lr : o->lr / 10.0f, warmup, o->steps};
    // A resumed run continues after the checkpoint's step; last < steps when --stop-after cuts it short.
    int start = 0, last = train_ckpt_last_step(o), saves = 0, failed = 0, bad_run = 0, interrupted = 0, saved_at = -1;
    int log_failed = 0;
    int completed = start;
    size_t *bad_counts = xcalloc((size_t)m.n_info * sizeof(size_t));
    if (o->resume && !sharded) {
        start = train_ckpt_resume(o, &m, &opt);
    } else if (o->resume) {   // every rank reads the whole checkpoint and keeps its shards
        GPT full;
        AdamW full_opt;
        gpt_init_params(&full, c);
        adamw_init(&full_opt, NULL, full.n_params, o->beta1, o->beta2, 1e-8f, o->weight_decay);
        start = train_ckpt_resume(o, &full, &full_opt);
        if (start >= 0) dist_load_whole(&m, &opt, zero, &full, &full_opt);
        adamw_free(&full_opt);
        gpt_free(&full);
    }
    if (!all_ok(world, start >= 0)) {
        adamw_free(&opt);
        if (pl) pipeline_free(pl);
        if (zero) zero_free(zero);   // before the model: its stage may be on the model's backend
        comm_device_close(cdev);
        gpt_free(&m);
        policy_free(&policy);
        if (o->tokenizer_path) bpe_free(&bpe);
        free(tokenizer_json);
        dataset_free(&ds);
        if (log) fclose(log);
        comm_grid_free(&grid);
        free(bad_counts);
        return 1;
    }

    size_t n_tok = (size_t)c->seq * c->batch;
    int32_t *tokens = xmalloc(n_tok * sizeof(int32_t)), *targets = xmalloc(n_tok * sizeof(int32_t));
    // One optimizer step covers batch × grad_accum sequences on each of the nranks ranks.
    int seqs_per_rank = c->batch * o->grad_accum;
    double flops = train_flops_per_step(c, o->grad_accum * nranks);
    FlopBlock blk = train_flop_block(c);
    double hw_flops = flops_hardware_block((double)seqs_per_rank * nranks, c->seq, c->hidden, c->vocab, &policy,
                                           c->layers, 1, &blk);
    double peak = o->peak_gflops;
    // MFU/HFU against the GEMM peak of the run's precision: a GPU's from its datasheet (the backend's
    // table), the CPU's measured (bf16: oneDNN's bf16 matmul).
    const char *prec = precision_name((Precision)o->precision);
    char peak_why[512] = "";
    int peak_raised = 0, stdout_failed = 0;
    int cpu_device = strncmp(m.be->name, "cpu", 3) == 0;
    char peak_src[192];
    snprintf(peak_src, sizeof peak_src, "%s", o->peak_gflops > 0 ? "--peak-gflops" : prec);
    if (peak <= 0 && !cpu_device) {
        char src[160];
        peak = m.be->peak_flops(m.be, (Precision)o->precision, src, sizeof src) * 1e-9;
        snprintf(peak_src, sizeof peak_src, "%s", src);
    }
    if (rank == 0 && cpu_device && peak <= 0 &&
        peak_gflops_lookup(o->threads, prec, &peak, peak_why, sizeof peak_why) != 0) {
        // MFU needs this machine's peak: measure it once (a few seconds) and cache it (`ctron peak`).
        if (peak_why[0]) printf("note: %s\n", peak_why);   // absurd or expired: measured again
        printf("measuring this machine's %s GEMM peak for MFU/HFU (once; cached, see `ctron peak --precision %s`)...\n",
               prec, prec);
        fflush(stdout);
        peak = peak_gflops_measure_prec(o->threads, prec);
        char perr[256];
        char why[160];   // an emulated bf16 figure is this process's, not the CPU's: not cached
        int emulated = o->precision == PRECISION_BF16 && !gemm_bf16_native(why, sizeof why);
        if (!emulated && peak_gflops_store_prec(o->threads, prec, peak, perr, sizeof perr) != 0)
            fprintf(stderr, "ctron train: note: the peak was not cached: %s\n", perr);
    }
    // Open MPI hands ranks a pseudo-terminal even when mpirun's output goes to a file: plain lines then.
    int tty = isatty(fileno(stdout)) && world->size == 1;
    printf("ctron train: %d layers, hidden %d, %d heads, seq %d, batch %d x %d, vocab %d, dropout %g\n",
           c->layers, c->hidden, c->heads, c->seq, c->batch, o->grad_accum, c->vocab, (double)c->dropout);
    if (c->arch != ARCH_GPT2)   // the family and its knobs (GPT-2's are fixed)
        printf("  %s: %d key/value heads, FFN %d (SwiGLU), RoPE theta %g, RMSNorm eps %g, %s output layer%s\n",
               arch_spec((ArchKind)c->arch)->name, c->kv_heads, c->ffn, (double)c->rope_theta, (double)c->norm_eps,
               gpt_tied(c) ? "tied" : "untied", c->qkv_bias ? ", q/k/v biases" : "");
    if (world->size > 1)
        printf("  %d ranks (%s) = dp %d x tp %d%s%s: %d sequences per step, each dp group takes %d\n", world->size,
               comm_backend_name(comm->backend), nranks, o->tp, o->sp ? ", sequence parallel" : "",
               zero ? ", ZeRO-1 optimizer" : "", seqs_per_rank * nranks, seqs_per_rank);
    char b2[48] = "";
    if (o->tp > 1) {   // TP ranks hold their shards
        char b3[32];
        snprintf(b2, sizeof b2, "; %s on each rank", format_bytes((double)m.n_params * 4, b3, sizeof b3));
    }
    printf("  %zu parameters (%s%s), data %s: %zu train / %zu val tokens, %d threads\n", gpt_num_params(c),
           format_bytes((double)gpt_num_params(c) * 4, b1, sizeof b1), b2, o->data_path, ds.n_train,
           dataset_n_val(&ds), omp_get_max_threads());
    if (strcmp(m.be->name, "cpu") != 0) print_device(&m, &opt, zero);
    if (cdev && world->size > 1) {
        char b4[32];
        printf("  collectives on device memory: %s", comm_device_path_name(comm_device_path(cdev)));
        if (comm_device_host_bytes(cdev))
            printf(", %s of host staging (pinned on a GPU; pipeline transfers add one slot each in flight)",
                   format_bytes((double)comm_device_host_bytes(cdev), b4, sizeof b4));
        printf("\n");
    }
    char plan[256];
    policy_describe(&policy, plan, sizeof plan);
    char tempo[48];
    char fewbit[32] = "";
    if (policy.gelu_bits) snprintf(fewbit, sizeof fewbit, ", %d-bit GeLU codes", policy.gelu_bits);
    if (policy.mini_seq) snprintf(fewbit, sizeof fewbit, ", mini-seq %d", policy.mini_seq);
    if (policy.tempo & ATTN_FLASH) snprintf(fewbit + strlen(fewbit), sizeof fewbit - strlen(fewbit), ", flash attention");
    printf("  %s compute, recompute %s, %s activations, %s dropout masks, tempo %s%s; activations predicted %s at peak",
           policy.precision == PRECISION_BF16 ? "bf16 mixed-precision" : "fp32", plan, act_dtype_name(policy.act_dtype), mask_mode_name(policy.masks),
           tempo_describe(policy.tempo, tempo, sizeof tempo), fewbit,
           format_bytes((double)predicted_peak(&m, pl ? &spec : NULL), b1, sizeof b1));
    if (pl) printf(" on stage 0 (every stage: ctron memory --pp)");
    if (peak > 0) printf("; MFU/HFU against %.1f GFLOP/s (%s)", peak, peak_src);
    else if (!cpu_device) printf("; MFU/HFU unavailable (%s; give --peak-gflops)", peak_src);
    printf("\n");
    if (policy.offload) {
        char what[256];
        offload_describe(policy.offload, what, sizeof what);
        if (!m.off.pool)
            printf("  note: the policy keeps none of --offload %s: nothing is offloaded\n", what);
        else
            printf("  offload %s to %s: %s per micro-batch in the pool, %s of stage slots in the arena\n", what,
                   offload_pool_where(m.off.pool),
                   format_bytes((double)act_offload_pool_bytes(&m.shape, &m.policy), b1, sizeof b1),
                   format_bytes((double)act_offload_stage_bytes(&m.shape, &m.policy), b2, sizeof b2));
        if (m.off.pool && act_offload_stage_bytes(&m.shape, &m.policy) >= act_offload_pool_bytes(&m.shape, &m.policy))
            printf("  note: the stage holds two layers' offloaded tensors; with %d layers offloading saves no device "
                   "memory\n", c->layers);
    }
    if (o->static_plan) {   // every step's buffers at offsets planned from one recorded step
        int32_t *zeros = xcalloc(n_tok * sizeof(int32_t));
        StepCtx ctx0 = {o->seed, 0, 0, 1};
        StaticPlanReport r = gpt_plan_memory(&m, zeros, zeros, ctx0);
        free(zeros);
        char f[7][32];
        printf("  static memory plan (one micro-batch: %d saved tensors and %d temporaries): one block of %s;\n"
               "    training step %s vs %s live at most (x%.3f; %s of it saved) and %s with no reuse; evaluation %s;\n"
               "    the default layout held %s (arena and workspace buffers)\n",
               r.saved, r.temporaries, format_bytes((double)r.block, f[0], 32), format_bytes((double)r.peak, f[1], 32),
               format_bytes((double)r.lower_bound, f[2], 32), (double)r.peak / (double)r.lower_bound,
               format_bytes((double)r.saved_at_peak, f[3], 32), format_bytes((double)r.naive_sum, f[4], 32),
               format_bytes((double)r.eval_peak, f[5], 32), format_bytes((double)r.default_bytes, f[6], 32));
    }
    fflush(stdout);

    double t_start = now_seconds(), train_seconds = 0.0, last_val = NAN;
    for (int step = start + 1; step <= last; step++) {
        double t0 = now_seconds();
        float lr = lr_at(&sched, step);
        gpt_zero_grad(&m);
        StepTimes times;
        memset(&times, 0, sizeof times);
        OffloadStats moved_before = {0, 0, 0.0};
        if (m.off.pool) moved_before = offload_pool_stats(m.off.pool);
        reset_comm_stats(world, &grid);
        memset(m.comm_bytes, 0, sizeof m.comm_bytes);
        double loss_sum = 0.0;
        // The step's sequences are numbered across dp groups (group r holds r·batch·accum onwards),
        // so data windows and dropout masks are those of the one-process run with nranks × accum.
        float grad_scale = 1.0f / ((float)n_tok * (float)o->grad_accum * (float)nranks);
        if (pl) {   // the schedule's units on this stage, with their transfers
            PipeStep st = {o->seed, step, (uint32_t)(dp_rank * seqs_per_rank), (uint32_t)(seqs_per_rank * nranks),
                           o->data_order, grad_scale};
            loss_sum = pipeline_train_step(pl, &m, &ds, &st);
            guard_test_inject_nan(&m, step, rank);
            times.fwd = pl->fwd_s;
            times.bwd = pl->bwd_s;
        }
        m.defer_loss = !pl;   // the micro-batches' losses are read back once, below (gpt_loss_take)
        for (int mb = 0; !pl && mb < o->grad_accum; mb++) {
            StepCtx ctx = {o->seed, (uint32_t)step, (uint32_t)(dp_rank * seqs_per_rank + mb * c->batch), 1};
            dataset_train_batch(&ds, c->seq, c->batch, o->data_order, o->seed, (uint32_t)step, ctx.sample0,
                                (uint32_t)(seqs_per_rank * nranks), tokens, targets);
            double f0 = now_seconds();
            gpt_forward(&m, tokens, targets, c->seq, c->batch, ctx, grad_scale);
            double f1 = now_seconds();
            gpt_backward(&m, tokens, ctx);
            guard_test_inject_nan(&m, step, rank);
            times.fwd += f1 - f0;
            times.bwd += now_seconds() - f1;
        }
        guard_test_slow_step();
        double o0 = now_seconds();
        if (pl) gather_stage_times(&times, pl, world, o->tp, o->pp);
        grads_reduce_sp(&m);
        // The tied token embedding: the first stage's gradient (embedding) and the last's (output layer).
        if (grid.emb_group.size > 1 && gpt_tied(&m.cfg))
            comm_device_allreduce_sum(&grid.emb_group, m.g.wte, m.g.wte, (size_t)m.vl * c->hidden);
        if (zero) zero_reduce_scatter(zero, m.grads);
        else if (pl && pl->reduce_layers) pipeline_finish_dp(pl, &m);   // layered: the layers' sums are under way
        else grads_allreduce_dp(dpg, m.grads, m.n_params);
        if (!pl) loss_sum = gpt_loss_take(&m);   // the step's one read-back of the loss
        m.defer_loss = 0;
        double loss_rows = loss_sum;   // the last stage has the loss: a double as two floats, over the pipeline
        if (o->pp > 1) {
            float pair[2] = {(float)loss_sum, (float)(loss_sum - (double)(float)loss_sum)};
            comm_broadcast(&grid.pp_group, pair, 2, o->pp - 1);
            loss_rows = (double)pair[0] + (double)pair[1];
        }
        float loss_total = (float)loss_rows;   // every TP rank of a group has the group's loss
        sum_over_ranks(dpg, &loss_total, 1);
        double loss = (nranks > 1 ? (double)loss_total : loss_rows) / ((double)n_tok * o->grad_accum * nranks);
        double norm = grads_global_norm(&m, zero, tpg, dpg, &grid.pp_group);
        float clip_scale = grad_clip_scale(norm, o->clip);
        if (!isfinite(loss) || !isfinite(norm)) {
            // Not applied: the parameters and AdamW state stay those of the last good step.
            times.skipped = 1;
            bad_run++;
            int first = guard_first_nonfinite(&m, world, bad_counts);
            char first_name[48] = "none, the loss itself";
            if (first >= 0) gpt_param_full_name(c, first, first_name, sizeof first_name);
            fprintf(stderr, "ctron train: step %d: %s is not finite (first non-finite gradient: %s); step skipped "
                    "(%d in a row, --max-bad-steps %d)\n", step, isfinite(loss) ? "the gradient norm" : "the loss",
                    first_name, bad_run, o->max_bad_steps);
            if (o->max_bad_steps > 0 && bad_run >= o->max_bad_steps) {
                char path[1200], gerr[1300];
                snprintf(path, sizeof path, "%s/nonfinite_step_%08d.json", o->ckpt_dir ? o->ckpt_dir : ".", step);
                if (rank == 0 && guard_write_diagnostic(path, &m, step, loss, norm, first, bad_counts, bad_run, gerr,
                                                        sizeof gerr) != 0)
                    fprintf(stderr, "ctron train: %s\n", gerr);
                if (rank == 0)
                    fprintf(stderr, "ctron: error: %d steps in a row were not finite; stopping at step %d without "
                            "saving (the last checkpoint is the last good state); diagnostic: %s\n", bad_run, step,
                            path);
                failed = 3;
                break;
            }
        } else if (!zero) {
            bad_run = 0;
            adamw_step(&opt, &m, lr, clip_scale);
        } else {   // update the owned pieces, then everyone gets every piece
            bad_run = 0;
            adamw_tick(&opt);
            size_t lo, hi, off = 0;
            for (size_t k = 0; zero_piece(zero, k, &lo, &hi); k++, off += hi - lo)
                adamw_update_range(&opt, &m, lr, clip_scale, lo, hi, off);
            zero_allgather(zero, m.params);
            gpt_params_changed(&m);
        }
        times.opt = now_seconds() - o0;
        times.comm = step_comm_stats(world, &grid);   // before validation, which communicates too
        memcpy(times.tp_bytes, m.comm_bytes, sizeof times.tp_bytes);
        double step_s = now_seconds() - t0;
        train_seconds += step_s;
        if (m.off.pool) {
            OffloadStats os = offload_pool_stats(m.off.pool);
            times.offload = 1;
            times.offload_out = (double)(os.stored - moved_before.stored);
            times.offload_in = (double)(os.loaded - moved_before.loaded);
            times.offload_wait = os.wait_s - moved_before.wait_s;
        }

        double val = NAN;
        if ((o->eval_every > 0 && step % o->eval_every == 0) || step == o->steps) {
            val = evaluate(&m, &ds, o->eval_batches, tokens, targets, dpg, pl);
            last_val = val;
        }
        double tps = (double)n_tok * o->grad_accum * nranks / step_s;
        if (log && write_log_line(log, step, loss, val, lr, step_s * 1e3, tps, m.ledger.total_peak,
                                  ledger_layer_stored(&m.ledger, 0, 0), norm, &times) != 0) {
            // Said at once; the training goes on (its checkpoints matter more) and exits 1 at the end.
            fprintf(stderr, "ctron: error: cannot write --log '%s' at step %d: %s; no more log lines are written, "
                    "the run goes on and will exit 1\n", o->log_path, step, strerror(errno));
            fclose(log);
            log = NULL;
            log_failed = 1;
        }

        completed = step;
        if (step == start + 1 && o->show_ledger) {
            if (tty) printf("\n");
            if (pl) {
                dist_pipeline_ledger_report(stdout, &m, &spec, world, grid.pp_group.rank);
                char bb[32];   // what the transfers hold: nothing the backward reads, so not in the ledger
                printf("  outside the ledger: rank 0's boundary buffers %s (%d in its send pool and the receive "
                       "buffer)\n", format_bytes((double)pipeline_buffer_bytes(pl), bb, sizeof bb), pl->n_bufs);
            }
            else ledger_print_report(stdout, &m.ledger, &m.shape, &m.policy);
            if (m.off.pool) {
                ledger_print_offload(stdout, &m.off.ledger, &m.shape, &m.policy, offload_pool_where(m.off.pool),
                                     times.offload_out, times.offload_in, times.offload_wait);
            }
            if (world->size > 1 && !pl) dist_ledger_report(stdout, &m, world);
            if (m.params16) {   // mixed precision's bytes beside the activations (not in the ledger)
                char b1[32], b2[32];
                printf("  outside the ledger: bf16 weight copy %s, backend scratch (bf16 GEMM operands) %s\n",
                       format_bytes((double)m.n_params * 2, b1, sizeof b1),
                       format_bytes((double)m.be->scratch_bytes(m.be), b2, sizeof b2));
            }
        }
        int print = step == start + 1 || step == last || !isnan(val) || (o->print_every > 0 && step % o->print_every == 0);
        if (print || tty) {
            char eta[32], line[256];
            format_eta(train_seconds / (step - start) * (last - step), eta, sizeof eta);
            int k = snprintf(line, sizeof line, "step %*d/%d | loss %.4f | lr %.2e | %.0f tok/s | %.1f GFLOP/s",
                             (int)snprintf(NULL, 0, "%d", o->steps), step, o->steps, loss, (double)lr, tps,
                             flops / step_s * 1e-9);
            // (a GPU's peak is its datasheet's, never raised nor written to the CPU's cache)
            if (cpu_device) peak = peak_raise(o, peak, hw_flops / step_s * 1e-9 / world->size, &peak_raised);
            if (peak > 0 && k > 0 && (size_t)k < sizeof line)
                k += snprintf(line + k, sizeof line - (size_t)k, " | MFU %.1f%% HFU %.1f%%",
                              100.0 * flops / step_s * 1e-9 / (peak * world->size),
                              100.0 * hw_flops / step_s * 1e-9 / (peak * world->size));
            if (k > 0 && (size_t)k < sizeof line)
                k += snprintf(line + k, sizeof line - (size_t)k, " | act %s | ETA %s",
                              format_bytes((double)m.ledger.total_peak, b1, sizeof b1), eta);
            if (!isnan(val) && k > 0 && (size_t)k < sizeof line)
                snprintf(line + k, sizeof line - (size_t)k, " | val %.4f", val);
            if (tty) printf("\r%s\033[K%s", line, (!isnan(val) || step == last) ? "\n" : "");
            else printf("%s\n", line);
            if ((fflush(stdout) != 0 || ferror(stdout)) && !stdout_failed) {   // said once; main() exits 1
                fprintf(stderr, "ctron: error: cannot write the progress to standard output at step %d: %s; the run "
                        "goes on (its checkpoints matter more) and will exit 1\n", step, strerror(errno));
                stdout_failed = 1;
            }
        }
        // A skipped step saves nothing: with --keep, its checkpoint could prune the last good one.
        if (train_ckpt_due(o, step, last) && bad_run > 0) {
            printf("no checkpoint at step %d: the step was skipped (not finite); the last one stays\n", step);
        } else if (train_ckpt_due(o, step, last)) {   // rank 0 writes; every rank learns whether it worked
            if (save_checkpoint(o, &m, &opt, zero, world, &grid, &sched, step, ++saves, tokenizer_json, tokenizer_bytes) != 0) {
                failed = 1;
                break;
            }
            saved_at = step;
        }
        // SIGINT/SIGTERM/SIGHUP on any rank: every rank stops after this step, with a checkpoint.
        int sig = guard_signal_agree(world);
        if (sig) {
            interrupted = sig;
            printf("interrupted (%s) after step %d of %d\n", guard_signal_name(sig), step, o->steps);
            fflush(stdout);
            if (o->ckpt_dir && saved_at != step &&
                save_checkpoint(o, &m, &opt, zero, world, &grid, &sched, step, ++saves, tokenizer_json, tokenizer_bytes) != 0)
                failed = 1;
            else if (o->ckpt_dir)
                printf("continue with --resume %s\n", o->ckpt_dir);
            break;
        }
    }
    double wall = now_seconds() - t_start;
    if (peak_raised == 1) {   // the best this machine has shown (an emulated bf16 figure is not cached)
        char why[160], perr[256];
        if ((o->precision != PRECISION_BF16 || gemm_bf16_native(why, sizeof why)) &&
            peak_gflops_store_prec(o->threads, prec, peak, perr, sizeof perr) != 0)
            fprintf(stderr, "ctron train: note: the raised peak was not cached: %s\n", perr);
    }
    char val_text[32] = "-";
    if (!isnan(last_val)) snprintf(val_text, sizeof val_text, "%.4f", last_val);
    printf("done: %d steps in %.1f s (%.1f ms/step training), final val loss %s, activation peak %s\n",
           completed - start, wall, completed > start ? train_seconds / (completed - start) * 1e3 : 0.0, val_text,
           format_bytes((double)m.ledger.total_peak, b1, sizeof b1));
    if (last < o->steps && !failed && !interrupted)
        printf("stopped after step %d of %d (--stop-after)%s%s\n", last, o->steps,
               o->ckpt_dir ? "; continue with --resume " : "", o->ckpt_dir ? o->ckpt_dir : "");

    if (o->sample_tokens > 0 && !failed && !interrupted) {
        GPT full;
        memset(&full, 0, sizeof full);
        // rank 0 samples from the whole model (gathered by dp group 0), or from a host copy of a GPU's
        int gathered = o->tp > 1 || o->pp > 1 || !m.be->host_addressable;
        if (gathered) {
            if (dp_rank == 0) gpt_init_params(&full, c);
            dist_gather_whole(&m, NULL, NULL, &grid, &full, NULL);
        }
        if (rank == 0) {
            printf("sample (%d tokens, temperature 0.8, top-k 40):\n", o->sample_tokens);
            sample_text(gathered ? &full : &m, o->tokenizer_path ? &bpe : NULL,
                        o->sample_prompt ? o->sample_prompt : "\n", o->sample_tokens, 0.8f, 40, o->seed, stdout);
        }
        if (gathered) gpt_free(&full);
    }

    free(tokens);
    free(targets);
    adamw_free(&opt);
    if (zero) zero_free(zero);
    if (pl) pipeline_free(pl);
    comm_device_close(cdev);   // after the pipeline's last sends, before the backend closes
    gpt_free(&m);
    policy_free(&policy);
    dataset_free(&ds);
    if (o->tokenizer_path) bpe_free(&bpe);
    free(tokenizer_json);
    if (log && fclose(log) != 0) {
        fprintf(stderr, "ctron: error: cannot write --log '%s': %s\n", o->log_path, strerror(errno));
        log_failed = 1;
    }
    comm_grid_free(&grid);
    free(bad_counts);
    if (failed) return failed;
    if (interrupted) return 128 + interrupted;
    if (log_failed) fprintf(stderr, "ctron: error: the --log file '%s' is incomplete (see above): exit 1\n", o->log_path);
    return log_failed ? 1 : 0;
}
