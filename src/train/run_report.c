#include "train/run.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "memory/ledger_report.h"
#include "memory/memory_config.h"
#include "memory/pipe_memory.h"
#include "train/train_dist.h"
#include "model/memo.h"
#include "util/common.h"

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
    size_t weights = gpt_weight_bytes(m) + gpt_weight_copy_bytes(m);
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

// Rank 0's activation peak as the analytic model predicts it: the one-process step, or under a pipeline
// schedule stage 0's schedule of contexts.
static size_t predicted_peak(const GPT *m, const PipeSpec *spec) {
    if (!spec) return act_peak_bytes(&m->shape, &m->policy);
    PipeMemory pm = {spec, &m->shape, &m->policy, m->pp.keep_all > 0 ? &m->policy_all : NULL, m->pp.keep_all};
    return pipe_rank_act_peak(&pm, 0);
}

// ", sliding window W" for a model whose queries see their last W positions only; "" for the whole prefix.
static const char *window_text(int window, char *buf, size_t len) {
    if (window > 0) snprintf(buf, len, ", sliding window %d", window);
    else if (len) buf[0] = '\0';
    return buf;
}

// ", rotary R of d dims" for a model whose RoPE rotates part of each head; "" for the whole head.
static const char *rotary_text(const GPTConfig *c, char *buf, size_t len) {
    if (c->rotary_dim > 0) snprintf(buf, len, ", rotary %d of %d dims", c->rotary_dim, gpt_head_dim(c));
    else if (len) buf[0] = '\0';
    return buf;
}

// The model, the family's knobs, the layout, the parameters and the data, the device.
static void header_model(const TrainRun *r) {
    const TrainOptions *o = r->o;
    const GPTConfig *c = &o->model;
    char b1[32];
    printf("ctron train: %d layers, hidden %d, %d heads, seq %d, batch %d x %d, vocab %d, dropout %g\n",
           c->layers, c->hidden, c->heads, c->seq, c->batch, o->grad_accum, c->vocab, (double)c->dropout);
    if (c->arch != ARCH_GPT2)   // the family and its knobs (GPT-2's are fixed)
        printf("  %s: %d key/value heads, FFN %d (SwiGLU), RoPE theta %g%s%s%s, RMSNorm eps %g, %s output layer%s%s%s%s\n",
               arch_spec((ArchKind)c->arch)->name, c->kv_heads, c->ffn, (double)c->rope_theta,
               c->rope_scaling.type ? " scaled " : "",
               c->rope_scaling.type ? rope_scaling_label(&c->rope_scaling, (char[96]){0}, 96) : "",
               rotary_text(c, (char[48]){0}, 48), (double)c->norm_eps,
               gpt_tied(c) ? "tied" : "untied", c->qkv_bias ? ", q/k/v biases" : "", c->qk_norm ? ", q/k norms" : "",
               c->fused_proj ? ", fused qkv_proj, gate_up_proj" : "", window_text(c->sliding_window, (char[40]){0}, 40));
    if (o->init_from)
        printf("  weights from %s%s%s\n", o->init_from, o->tokenizer_path == o->init_tokenizer_path ? ", tokenizer " : "",
               o->tokenizer_path == o->init_tokenizer_path ? o->tokenizer_path : "");
    if (r->world->size > 1)
        printf("  %d ranks (%s) = dp %d x tp %d%s%s: %d sequences per step, each dp group takes %d\n", r->world->size,
               comm_backend_name(r->comm->backend), r->nranks, o->tp, o->sp ? ", sequence parallel" : "",
               r->zero ? ", ZeRO-1 optimizer" : "", r->seqs_per_rank * r->nranks, r->seqs_per_rank);
    if (o->tp_solo)
        printf("  TP rank 0 of %d alone (--tp-solo%s): its shards, kernels, memory and TP bytes; the other ranks' data "
               "stood in locally, so the loss and weights are not the model's\n", o->tp, o->sp ? ", sequence parallel" : "");
    char b2[48] = "";
    if (o->tp > 1) {   // TP ranks hold their shards
        char b3[32];
        snprintf(b2, sizeof b2, "; %s on each rank", format_bytes((double)r->m.n_params * 4, b3, sizeof b3));
    }
    printf("  %zu parameters (%s%s), data %s: %zu train / %zu val tokens, %d threads\n", gpt_num_params(c),
           format_bytes((double)gpt_num_params(c) * 4, b1, sizeof b1), b2, o->data_path, r->ds.n_train,
           dataset_n_val(&r->ds), omp_get_max_threads());
    if (c->lora_rank > 0) {   // what trains: the adapters (B only under LoRA-FA); the base is frozen
        char tg[96];
        printf("  LoRA%s rank %d, alpha %g (scale %g%s), targets %s: %zu parameters train on this rank (%s), %zu are "
               "frozen (the base%s: no gradients, no AdamW state)\n", c->lora_fa ? "-FA" : "", c->lora_rank,
               (double)c->lora_alpha, (double)r->m.lora_scale, c->lora_rslora ? " = alpha/sqrt(r), rsLoRA" : "",
               lora_describe_targets(c->lora_targets, tg, sizeof tg),
               r->m.n_params, c->lora_fa ? "B" : "A and B", r->m.n_frozen, c->lora_fa ? " and A" : "");
        // The weights term of the analytic model against what this rank holds (the first stage's, rank 0 prints)
        StageLayout lay = {r->m.shape, r->m.pp.p, r->m.pp.V, 1};
        size_t measured = gpt_weight_bytes(&r->m);
        double predicted = memory_weight_bytes(&lay);
        printf("  weights (base %s, adapters fp32): measured %zu B, predicted %.0f B  %s\n", c->base_bf16 ? "bf16" : "fp32",
               measured, predicted, (double)measured == predicted ? "ok" : "MISMATCH");
    }
    if (strcmp(r->m.be->name, "cpu") != 0) print_device(&r->m, &r->opt, r->zero);
    if (r->cdev && r->world->size > 1) {
        char b4[32];
        printf("  collectives on device memory: %s", comm_device_path_name(comm_device_path(r->cdev)));
        if (comm_device_host_bytes(r->cdev))
            printf(", %s of host staging (pinned on a GPU; pipeline transfers add one slot each in flight)",
                   format_bytes((double)comm_device_host_bytes(r->cdev), b4, sizeof b4));
        printf("\n");
    }
}

// What the memory policy keeps, the prediction of the activation peak, and the MFU peak.
static void header_policy(const TrainRun *r) {
    const MemoryPolicy *policy = &r->policy;
    const RunPeak *peak = &r->peak;
    char plan[256], tempo[48], fewbit[32] = "", b1[32];
    policy_describe(policy, plan, sizeof plan);
    if (policy->gelu_bits) snprintf(fewbit, sizeof fewbit, ", %d-bit GeLU codes", policy->gelu_bits);
    if (policy->mini_seq) snprintf(fewbit, sizeof fewbit, ", mini-seq %d", policy->mini_seq);
    if (policy->tempo & ATTN_FLASH) snprintf(fewbit + strlen(fewbit), sizeof fewbit - strlen(fewbit), ", flash attention");
    if (r->m.cfg.reversible)   // another model, and what it keeps: printed only for it
        printf("  reversible blocks: two residual streams (fp32), each layer rebuilt from its outputs in backward\n");
    printf("  %s compute, recompute %s, %s activations, %s dropout masks, tempo %s%s; activations predicted %s at peak",
           policy->precision == PRECISION_BF16 ? "bf16 mixed-precision" : "fp32", plan, act_dtype_name(policy->act_dtype),
           mask_mode_name(policy->masks), tempo_describe(policy->tempo, tempo, sizeof tempo), fewbit,
           format_bytes((double)predicted_peak(&r->m, r->pl ? &r->spec : NULL), b1, sizeof b1));
    if (r->pl) printf(" on stage 0 (every stage: ctron memory --pp)");
    if (peak->gflops > 0) printf("; MFU/HFU against %.1f GFLOP/s (%s)", peak->gflops, peak->src);
    else if (!peak->cpu_device) printf("; MFU/HFU unavailable (%s; give --peak-gflops)", peak->src);
    printf("\n");
    if (r->o->recompute && strcmp(r->o->recompute, "search") == 0) train_print_search(stdout, r->o);
}

// --offload: what goes to the pool, and where.
static void header_offload(const TrainRun *r) {
    const GPT *m = &r->m;
    char what[256], b1[32], b2[32];
    offload_describe(r->policy.offload, what, sizeof what);
    if (!m->off.pool)
        printf("  note: the policy keeps none of --offload %s: nothing is offloaded\n", what);
    else
        printf("  offload %s to %s: %s per micro-batch in the pool, %s of stage slots in the arena\n", what,
               offload_pool_where(m->off.pool),
               format_bytes((double)act_offload_pool_bytes(&m->shape, &m->policy), b1, sizeof b1),
               format_bytes((double)act_offload_stage_bytes(&m->shape, &m->policy), b2, sizeof b2));
    if (m->off.pool && act_offload_stage_bytes(&m->shape, &m->policy) >= act_offload_pool_bytes(&m->shape, &m->policy))
        printf("  note: the stage holds two layers' offloaded tensors; with %d layers offloading saves no device "
               "memory\n", r->o->model.layers);
}

void report_header(TrainRun *r) {
    // Open MPI hands ranks a pseudo-terminal even when mpirun's output goes to a file: plain lines then.
    r->tty = isatty(fileno(stdout)) && r->world->size == 1;
    header_model(r);
    header_policy(r);
    if (r->policy.offload) header_offload(r);
}

void report_static_plan(const StaticPlanReport *p) {
    char f[7][32];
    printf("  static memory plan (one micro-batch: %d saved tensors and %d temporaries): one block of %s;\n"
           "    training step %s vs %s live at most (x%.3f; %s of it saved) and %s with no reuse; evaluation %s;\n"
           "    the default layout held %s (arena and workspace buffers)\n",
           p->saved, p->temporaries, format_bytes((double)p->block, f[0], 32), format_bytes((double)p->peak, f[1], 32),
           format_bytes((double)p->lower_bound, f[2], 32), (double)p->peak / (double)p->lower_bound,
           format_bytes((double)p->saved_at_peak, f[3], 32), format_bytes((double)p->naive_sum, f[4], 32),
           format_bytes((double)p->eval_peak, f[5], 32), format_bytes((double)p->default_bytes, f[6], 32));
}

// The step's JSON object: its numbers, the pipeline's bubble, the offload pool's traffic, the bytes
// this rank moved. 0, or -1 with errno.
static int write_log_line(FILE *log, int step, const StepResult *s, size_t act_bytes, size_t act_layer_bytes) {
    const StepTimes *t = &s->times;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "step", step);
    if (isfinite(s->loss)) cJSON_AddNumberToObject(o, "loss", s->loss);
    else cJSON_AddStringToObject(o, "loss", isnan(s->loss) ? "nan" : "inf");
    if (!isnan(s->val)) cJSON_AddNumberToObject(o, "val_loss", s->val);
    cJSON_AddNumberToObject(o, "lr", s->lr);
    cJSON_AddNumberToObject(o, "ms", s->step_s * 1e3);
    cJSON_AddNumberToObject(o, "tokens_per_s", s->tps);
    cJSON_AddNumberToObject(o, "act_bytes", (double)act_bytes);
    cJSON_AddNumberToObject(o, "act_layer_bytes", (double)act_layer_bytes);
    if (isfinite(s->norm)) cJSON_AddNumberToObject(o, "grad_norm", s->norm);
    else cJSON_AddStringToObject(o, "grad_norm", isnan(s->norm) ? "nan" : "inf");
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

// The first step's activation ledger, measured against the prediction (every rank's in a parallel
// run), and what mixed precision and the pipeline hold outside it.
static void print_ledger(TrainRun *r, const StepTimes *t) {
    GPT *m = &r->m;
    if (r->tty) printf("\n");
    if (r->pl) {
        dist_pipeline_ledger_report(stdout, m, &r->spec, r->world, r->grid.pp_group.rank);
        char bb[32];   // what the transfers hold: nothing the backward reads, so not in the ledger
        printf("  outside the ledger: rank 0's boundary buffers %s (%d in its send pool and the receive "
               "buffer)\n", format_bytes((double)pipeline_buffer_bytes(r->pl), bb, sizeof bb), r->pl->n_bufs);
    }
    else ledger_print_report(stdout, &m->ledger, &m->shape, &m->policy);
    if (m->off.pool) {
        ledger_print_offload(stdout, &m->off.ledger, &m->shape, &m->policy, offload_pool_where(m->off.pool),
                             t->offload_out, t->offload_in, t->offload_wait);
    }
    if (m->memo && m->memo->pool)
        ledger_print_memo(stdout, &m->memo->ledger, &m->shape, &m->policy, offload_pool_where(m->memo->pool),
                          t->offload_out, t->offload_in, t->offload_wait);
    if (r->world->size > 1 && !r->pl) dist_ledger_report(stdout, m, r->world);
    if (r->world->size > 1 && !r->pl && m->memo) dist_memo_report(stdout, m, r->world);
    if (m->params16) {   // mixed precision's bytes beside the activations (not in the ledger)
        char b1[32], b2[32];
        printf("  outside the ledger: bf16 weight copy %s, backend scratch (bf16 GEMM operands) %s\n",
               format_bytes((double)m->n_params * 2, b1, sizeof b1),
               format_bytes((double)m->be->scratch_bytes(m->be), b2, sizeof b2));
    }
}

static void format_eta(double seconds, char *buf, size_t len) {
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, len, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
    else if (s >= 60) snprintf(buf, len, "%ldm%02lds", s / 60, s % 60);
    else snprintf(buf, len, "%lds", s);
}

// The progress line: on a terminal one line rewritten every step, else a line every --print-every
// steps, at the first and last step and at each evaluation.
static void print_progress(TrainRun *r, int step, const StepResult *s) {
    const TrainOptions *o = r->o;
    int print = step == r->start + 1 || step == r->last || !isnan(s->val) ||
                (o->print_every > 0 && step % o->print_every == 0);
    if (!print && !r->tty) return;
    int ranks = r->world->size;
    char eta[32], line[256], b1[32];
    format_eta(r->train_seconds / (step - r->start) * (r->last - step), eta, sizeof eta);
    int k = snprintf(line, sizeof line, "step %*d/%d | loss %.4f | lr %.2e | %.0f tok/s | %.1f GFLOP/s",
                     (int)snprintf(NULL, 0, "%d", o->steps), step, o->steps, s->loss, (double)s->lr, s->tps,
                     r->flops / s->step_s * 1e-9);
    run_peak_raise(&r->peak, o, r->hw_flops / s->step_s * 1e-9 / ranks);
    double peak = r->peak.gflops;
    if (peak > 0 && k > 0 && (size_t)k < sizeof line)
        k += snprintf(line + k, sizeof line - (size_t)k, " | MFU %.1f%% HFU %.1f%%",
                      100.0 * r->flops / s->step_s * 1e-9 / (peak * ranks),
                      100.0 * r->hw_flops / s->step_s * 1e-9 / (peak * ranks));
    if (k > 0 && (size_t)k < sizeof line)
        k += snprintf(line + k, sizeof line - (size_t)k, " | act %s | ETA %s",
                      format_bytes((double)r->m.ledger.total_peak, b1, sizeof b1), eta);
    if (!isnan(s->val) && k > 0 && (size_t)k < sizeof line)
        snprintf(line + k, sizeof line - (size_t)k, " | val %.4f", s->val);
    if (r->tty) printf("\r%s\033[K%s", line, (!isnan(s->val) || step == r->last) ? "\n" : "");
    else printf("%s\n", line);
    if ((fflush(stdout) != 0 || ferror(stdout)) && !r->stdout_failed) {   // said once; main() exits 1
        fprintf(stderr, "ctron: error: cannot write the progress to standard output at step %d: %s; the run "
                "goes on (its checkpoints matter more) and will exit 1\n", step, strerror(errno));
        r->stdout_failed = 1;
    }
}

void report_step(TrainRun *r, int step, const StepResult *s) {
    const TrainOptions *o = r->o;
    if (r->log && write_log_line(r->log, step, s, r->m.ledger.total_peak, ledger_layer_stored(&r->m.ledger, 0, 0)) != 0) {
        // Said at once; the training goes on (its checkpoints matter more) and exits 1 at the end.
        fprintf(stderr, "ctron: error: cannot write --log '%s' at step %d: %s; no more log lines are written, "
                "the run goes on and will exit 1\n", o->log_path, step, strerror(errno));
        fclose(r->log);
        r->log = NULL;
        r->log_failed = 1;
    }
    if (step == r->start + 1 && o->show_ledger) print_ledger(r, &s->times);
    print_progress(r, step, s);
}

void report_done(TrainRun *r, double wall, int end) {
    const TrainOptions *o = r->o;
    char val_text[32] = "-", b1[32];
    if (!isnan(r->last_val)) snprintf(val_text, sizeof val_text, "%.4f", r->last_val);
    int done = r->completed - r->start;
    printf("done: %d steps in %.1f s (%.1f ms/step training), final val loss %s, activation peak %s\n", done, wall,
           done > 0 ? r->train_seconds / done * 1e3 : 0.0, val_text,
           format_bytes((double)r->m.ledger.total_peak, b1, sizeof b1));
    if (r->last < o->steps && end == 0)
        printf("stopped after step %d of %d (--stop-after)%s%s\n", r->last, o->steps,
               o->ckpt_dir ? "; continue with --resume " : "", o->ckpt_dir ? o->ckpt_dir : "");
}

void report_close_log(TrainRun *r) {
    if (r->log && fclose(r->log) != 0) {
        fprintf(stderr, "ctron: error: cannot write --log '%s': %s\n", r->o->log_path, strerror(errno));
        r->log_failed = 1;
    }
    r->log = NULL;
}
