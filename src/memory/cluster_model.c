// cluster_predict: per-GPU memory of every pipeline stage from the analytic activation model
// (stage_model.h) and the step time from the physical model (cluster_time.h).
#include "memory/cluster_model.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "arch/lora.h"
#include "memory/cluster_time.h"
#include "memory/flops.h"
#include "memory/param_count.h"
#include "memory/stage_model.h"

static const char *rc_names[CR_COUNT] = {"none", "selective", "full", "plan"};
const char *cluster_recompute_name(ClusterRecompute r) { return r >= 0 && r < CR_COUNT ? rc_names[r] : "?"; }

int cluster_recompute_parse(const char *text, ClusterRecompute *out) {
    for (int i = 0; i < CR_COUNT; i++)
        if (strcasecmp(text, rc_names[i]) == 0) { *out = (ClusterRecompute)i; return 0; }
    return -1;
}

static const char *tp_overlap_names[TP_OVERLAP_COUNT] = {"backward", "none", "full"};
const char *cluster_tp_overlap_name(TpOverlap o) { return o >= 0 && o < TP_OVERLAP_COUNT ? tp_overlap_names[o] : "?"; }

int cluster_tp_overlap_parse(const char *text, TpOverlap *out) {
    for (int i = 0; i < TP_OVERLAP_COUNT; i++)
        if (strcasecmp(text, tp_overlap_names[i]) == 0) { *out = (TpOverlap)i; return 0; }
    return -1;
}

static const char *part_names[PART_COUNT] = {"gemm", "attention", "elementwise", "head", "recompute",
                                             "tp_comm", "pp_comm", "dp_comm", "bubble", "optimizer", "overhead"};
static const char *part_labels[PART_COUNT] = {
    "linear GEMMs (QKV, Proj, FC1, FC2), forward + backward",
    "attention core: QK^T and PV batched GEMMs, softmax, dropout",
    "other element-wise: LayerNorms, bias-dropout-adds, GeLU, transposes",
    "embedding, final LN, LM head and cross-entropy (first/last stage)",
    "recompute in backward (selective: attention core; full: the layer's forward)",
    "tensor/sequence-parallel collectives, exposed",
    "pipeline point-to-point and the tied-embedding gradient all-reduce",
    "data-parallel gradient reduction (ZeRO-1: reduce-scatter + all-gather), exposed",
    "pipeline bubble: (p-1)/v stage-times of fill and drain",
    "optimizer step: Adam, gradient norm, weight copy",
    "launch gaps: a gap per kernel of the slowest stage's micro-batches"};
const char *cluster_part_name(TimePart p) { return p >= 0 && p < PART_COUNT ? part_names[p] : "?"; }
const char *cluster_part_label(TimePart p) { return p >= 0 && p < PART_COUNT ? part_labels[p] : "?"; }

void cluster_job_shape(const ClusterJob *job, int mb, int t, int sp, ActShape *sh) {
    *sh = (ActShape){.s = job->s, .b = mb, .h = job->h, .a = job->a, .L = job->L, .v = job->v, .elem_bytes = job->e,
                     .masks = MASKS_BYTES, .t = t, .sp = sp};
    act_shape_set_family(sh, (ArchKind)job->arch, job->kv, job->ffn, job->tie, job->qkv_bias, job->qk_norm);
    sh->fused_proj = job->fused_proj != 0;
    sh->window = job->window > 0 ? job->window : 0;
    sh->head_dim = job->head_dim > 0 && job->head_dim * job->a != job->h ? job->head_dim : 0;   // ActShape's: 0 is h/a
    sh->dropout = arch_spec((ArchKind)job->arch)->dropout_default > 0.0f;
    if (job->lora_rank > 0) {
        sh->lora_rank = job->lora_rank;
        sh->lora_sites = job->lora_sites ? job->lora_sites : lora_family_sites(lora_family(job->arch, job->fused_proj));
        sh->lora_fa = job->lora_fa != 0;
    }
}

double cluster_param_count(const ClusterJob *job) {
    ActShape sh;
    cluster_job_shape(job, 1, 1, 0, &sh);
    return (double)param_model_count(&sh);
}

static double grad_bytes(const ClusterJob *job) { return job->grad_bytes == 2 ? 2.0 : 4.0; }

double cluster_state_bytes_per_param(const ClusterJob *job) {
    if (job->lora_rank > 0) return (double)job->e;   // the frozen base: its weights only (adapters aside)
    return job->e == 2 ? 2.0 + grad_bytes(job) + 12.0 : 16.0;
}

// The stage layout of one micro-batch (the analytic model's view of the pipeline).
static void base_shape(const ClusterJob *job, const ClusterLayout *lay, StageLayout *sl) {
    memset(sl, 0, sizeof *sl);
    cluster_job_shape(job, lay->mb, lay->t, lay->sp, &sl->sh);
    sl->p = lay->p;
    sl->m = lay->v;
    sl->microbatches = job->B / ((long)lay->d * lay->mb);
}

static StageSplit split_of(const ClusterLayout *lay) { return (StageSplit){lay->first, lay->last}; }

int cluster_stage_layers(const ClusterJob *job, const ClusterLayout *lay, int r) {
    StageLayout sl;
    base_shape(job, lay, &sl);
    StageSplit sp = split_of(lay);
    return stage_layers_split(&sl, &sp, r);
}

int cluster_layout_check(const ClusterJob *job, const GpuSpec *gpu, const ClusterLayout *lay, char *err, size_t errlen) {
    long gpus = (long)job->gpus_per_node * job->nodes;
    (void)gpu;
    if (lay->t < 1 || lay->p < 1 || lay->v < 1 || lay->d < 1 || lay->mb < 1)
        return snprintf(err, errlen, "t, p, v, d and mb must be at least 1"), -1;
    if (lay->t > job->gpus_per_node)
        return snprintf(err, errlen, "t=%d is larger than the %d GPUs of a node: tensor parallelism needs NVLink",
                        lay->t, job->gpus_per_node), -1;
    if ((long)lay->t * lay->p * lay->d != gpus)
        return snprintf(err, errlen, "t·p·d = %d·%d·%d = %ld, but the cluster has %ld GPUs", lay->t, lay->p, lay->d,
                        (long)lay->t * lay->p * lay->d, gpus), -1;
    if (job->a % lay->t || job->h % lay->t || job->v % lay->t)
        return snprintf(err, errlen, "t=%d does not divide the heads (%ld), hidden (%ld) and vocabulary (%ld)", lay->t,
                        job->a, job->h, job->v), -1;
    ActShape fam;
    cluster_job_shape(job, 1, 1, 0, &fam);
    if (fam.kv % lay->t)   // (GPT-2's follow from the heads and hidden)
        return snprintf(err, errlen, "t=%d does not divide the key/value heads (%ld): each TP rank takes whole key/value "
                        "heads", lay->t, fam.kv), -1;
    if (fam.ffn % lay->t)
        return snprintf(err, errlen, "t=%d does not divide the FFN width (%ld): each TP rank takes ffn/t columns of the "
                        "MLP", lay->t, fam.ffn), -1;
    // (STAGE_NO_LAYERS, "first=0": the embedding alone; an unstated 0: an even share)
    int nf = lay->first > 0 ? lay->first : 0, nl = lay->last > 0 ? lay->last : 0;
    if (lay->first < STAGE_NO_LAYERS || lay->last < STAGE_NO_LAYERS)
        return snprintf(err, errlen, "first and last must be at least 0"), -1;
    if ((lay->first || lay->last) && lay->p == 1)
        return snprintf(err, errlen, "first=%d, last=%d: uneven stages need p > 1", nf, nl), -1;
    if (lay->first || lay->last) {
        StageLayout sl;
        base_shape(job, lay, &sl);
        StageSplit sp = split_of(lay);
        long rest = job->L - nf - nl;
        int others = lay->p - (lay->first != 0) - (lay->last != 0);
        if (!stage_split_valid(&sl, &sp))
            return snprintf(err, errlen, "first=%d, last=%d, v=%d: the other %ld layers do not split evenly over the "
                            "other %d stages, or a stage's layers into v chunks (at least one layer each)", nf, nl, lay->v,
                            rest, others), -1;
    } else if (job->L % ((long)lay->p * lay->v))
        return snprintf(err, errlen, "p·v = %d·%d does not divide the %ld layers (uneven stages: first=N,last=N)",
                        lay->p, lay->v, job->L), -1;
    if (job->B % ((long)lay->d * lay->mb))
        return snprintf(err, errlen, "d·mb = %d·%d does not divide the global batch %ld", lay->d, lay->mb, job->B), -1;
    long n = job->B / ((long)lay->d * lay->mb);
    if (lay->v > 1 && (lay->p == 1 || n % lay->p))
        return snprintf(err, errlen, "interleaving (v=%d) needs p > 1 and micro-batches (%ld) divisible by p=%d",
                        lay->v, n, lay->p), -1;
    if (lay->sp && lay->t == 1) return snprintf(err, errlen, "sp=on needs t > 1"), -1;
    if (lay->sp && job->s % lay->t)
        return snprintf(err, errlen, "sp=on splits the sequence: t=%d does not divide s=%ld", lay->t, job->s), -1;
    if (lay->p > CLUSTER_MAX_STAGES) return snprintf(err, errlen, "p=%d: at most %d stages", lay->p, CLUSTER_MAX_STAGES), -1;
    return 0;
}

double cluster_stage_adapters(const ClusterJob *job, const ClusterLayout *lay, int r, int trainable_only) {
    if (job->lora_rank <= 0) return 0.0;
    ActShape sh;
    cluster_job_shape(job, lay->mb, lay->t, lay->sp, &sh);
    double per_layer = (double)param_lora_layer_count(&sh, 1) +
                       (trainable_only && job->lora_fa ? 0.0 : (double)param_lora_layer_count(&sh, 0));
    return cluster_stage_layers(job, lay, r) * per_layer;
}

// Model states of one GPU holding `params` base parameters and `adapters` adapter parameters of which
// `trained` train: the GEMMs' weight copy, fp32 gradients, Adam (and the fp32 master weights under mixed
// precision), the last sharded over d with ZeRO-1. Without LoRA every base parameter trains; with it the
// frozen ones (the base, LoRA-FA's A) keep only their GEMM copy.
static void states(const ClusterJob *job, const ClusterLayout *lay, double params, double adapters, double trained,
                   StageMemory *m) {
    double dz = lay->zero && lay->d > 1 ? lay->d : 1;
    if (job->lora_rank <= 0) trained = params;
    m->weights = (double)job->e * (params + adapters);
    m->grads = grad_bytes(job) * trained;
    m->optimizer = (job->e == 2 ? 12.0 : 8.0) * trained / dz;
}

// The per-stage plan: ctron's budget planner over the stage's layers, with what the GPU has left
// after model states, workspace and reserve, per in-flight micro-batch as the budget. The planner
// counts the single-stage extras (logits …) once; they are added back so that its layers get
// exactly (left − this stage's extras) / in-flight.
static void stage_plan(const StageLayout *sl, const StageSplit *sp, int r, double left, MemPlan *plan) {
    ActShape sh = sl->sh;
    sh.L = stage_layers_split(sl, sp, r);
    sh.first_layer = stage_layer_split(sl, sp, r, 0);   // only the model's layer 0 drops its first norm's input
    StageActivations none;
    MemoryPolicy pol;
    policy_default(&pol, (int)sl->sh.L);
    pol.act_dtype = sh.elem_bytes == 2 ? ACT_BF16 : ACT_FP32;
    pol.tempo = act_keep_bits(&sh);
    stage_activations_split(sl, sp, &pol, r, &none);
    policy_free(&pol);
    double budget = (left - none.extras) / stage_layer_factor_at(sl, r) + (double)act_model_extra_bytes(&sh);
    if (budget < 1) budget = 1;
    plan_memory(&sh, 1, budget, 0, plan);
}

static void policy_for_stage(const StageLayout *sl, const StageSplit *sp, int r, const MemPlan *plan, MemoryPolicy *pol) {
    policy_default(pol, (int)sl->sh.L);
    pol->act_dtype = sl->sh.elem_bytes == 2 ? ACT_BF16 : ACT_FP32;
    pol->masks = plan->masks;
    pol->tempo = plan->tempo;
    pol->mini_seq = plan->tempo & MINI_SEQ ? PLAN_MINI_SEQ : 0;
    for (int i = 0; i < stage_layers_split(sl, sp, r); i++) {
        int l = stage_layer_split(sl, sp, r, i);
        pol->kind[l] = i < plan->n_full ? RECOMPUTE_FULL : i < plan->n_full + plan->n_sel ? RECOMPUTE_SELECTIVE : RECOMPUTE_NONE;
        pol->group_start[l] = l;
    }
}

void cluster_prediction_free(ClusterPrediction *p) {
    free(p->mem);
    p->mem = NULL;
}

// What one stage needs: its memory (states, activations under its policy, workspace, reserve) and,
// for CR_PLAN, the plan of its layers; *lt gets the layer time under the plan's options.
typedef struct {
    const ClusterJob *job;
    const GpuSpec *gpu;
    const ClusterLayout *lay;
    StageLayout sl;
    StageSplit split;   // uneven first/last stages
    MemoryPolicy uni;   // the uniform policies: Megatron's full recompute checkpoints every layer
    unsigned tempo;     // ATTN_FLASH with ClusterJob.flash
    LayerTime lt;       // the layer without the plan's options
    double head, head_comm, emb, emb_comm, p2p;
} PredictCtx;

static void stage_memory(const PredictCtx *c, int r, StageMemory *m, MemPlan *plan, LayerTime *lt) {
    const ClusterJob *job = c->job;
    const ClusterLayout *lay = c->lay;
    double params = stage_param_count_split(&c->sl, &c->split, r);
    memset(m, 0, sizeof *m);
    memset(plan, 0, sizeof *plan);
    states(job, lay, params, cluster_stage_adapters(job, lay, r, 0), cluster_stage_adapters(job, lay, r, 1), m);
    MemoryPolicy planned;
    const MemoryPolicy *pol = &c->uni;
    StageLayout ssl = c->sl;
    int ls = stage_layers_split(&c->sl, &c->split, r);
    *lt = c->lt;
    // (a layer's activation gradients: as large with adapters as without, so LoRA's keep bits are left out)
    unsigned lora = act_keep_bits(&c->sl.sh);
    m->workspace = (double)act_layer_kind_bytes(&c->sl.sh, RECOMPUTE_NONE, 1, c->tempo);
    m->reserve = job->reserve_bytes;
    if (ls == 0) m->workspace = 0;   // the embedding or the head alone: no layer's gradients
    if (lay->rc == CR_PLAN && ls > 0) {
        double usable = c->gpu->mem_bytes - job->reserve_bytes;
        stage_plan(&c->sl, &c->split, r, usable - m->weights - m->grads - m->optimizer - m->workspace, plan);
        plan->tempo |= c->tempo;   // the job's flash attention whatever the plan chose
        policy_for_stage(&c->sl, &c->split, r, plan, &planned);
        ssl.sh.masks = plan->masks;
        ssl.sh.mini_seq = plan->tempo & MINI_SEQ ? PLAN_MINI_SEQ : 0;
        pol = &planned;
        cluster_layer_time(job, c->gpu, lay, plan->tempo, lt);
        m->n_full = plan->n_full;
        m->n_sel = plan->n_sel;
        // the gradients of one layer as the plan's options keep it (flash: no s×s tensors)
        m->workspace = (double)act_layer_kind_bytes(&ssl.sh, RECOMPUTE_NONE, 1, plan->tempo & ~lora);
    } else {
        m->n_full = lay->rc == CR_FULL ? ls : 0;
        m->n_sel = lay->rc == CR_SELECTIVE ? ls : 0;
    }
    m->layers = ls;
    m->in_flight = stage_layer_factor_at(&c->sl, r);
    StageActivations act;
    stage_activations_split(&ssl, &c->split, pol, r, &act);
    m->activations = act.held + act.rebuild_over;
    if (job->fp8 && job->e == 2) {
        // Transformer Engine keeps an FP8 copy of each linear's weight and its transpose, and saves the
        // linears' inputs for backward in FP8: half the bf16 bytes, in every layer that keeps them.
        m->weights += 2.0 * ls * (double)param_layer_count(&c->sl.sh);
        static const ActName inputs[] = {ACT_QKV_IN, ACT_PROJ_IN, ACT_FC1_IN, ACT_FC2_IN};
        double half = 0;
        for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
            if (act_in_block(&ssl.sh, inputs[i])) half += 0.5 * (double)act_tensor_bytes(&ssl.sh, inputs[i]);
        m->activations -= (ls - m->n_full) * half * m->in_flight;
    }
    m->total = m->weights + m->grads + m->optimizer + m->activations + m->workspace + m->reserve;
    if (pol == &planned) policy_free(&planned);
}

// Time of one micro-batch through stage r (all its chunks), by part; the launch gaps as PART_OVERHEAD.
static void stage_time(const PredictCtx *c, int r, const StageMemory *m, const MemPlan *plan, const LayerTime *lt,
                       double part[PART_COUNT]) {
    const ClusterLayout *lay = c->lay;
    int ls = stage_layers_split(&c->sl, &c->split, r);
    double pf = lt->gemm_f + lt->attn_f + lt->elem_f + lt->comm_f;
    memset(part, 0, PART_COUNT * sizeof *part);
    part[PART_GEMM] = ls * (lt->gemm_f + lt->gemm_b);
    part[PART_ATTN] = ls * (lt->attn_f + lt->attn_b);
    part[PART_ELEM] = ls * (lt->elem_f + lt->elem_b);
    part[PART_TP_COMM] = ls * (lt->comm_f + lt->comm_b);
    part[PART_RECOMPUTE] = m->n_sel * lt->rc_sel + m->n_full * pf;
    double kernels = ls * (lt->kernels_f + lt->kernels_b) + m->n_sel * lt->kernels_sel + m->n_full * lt->kernels_f;
    unsigned tempo = lay->rc == CR_PLAN ? plan->tempo : c->tempo;
    // flash recomputes the scores in its backward instead of selective's attention core
    if (tempo & ATTN_FLASH) part[PART_RECOMPUTE] += ls * lt->rc_flash - m->n_sel * lt->rc_sel;
    if (lay->rc == CR_PLAN) {
        if (plan->tempo & MINI_SEQ) part[PART_RECOMPUTE] += ls * lt->rc_mini;
        part[PART_ELEM] += ls * plan->passes * lt->pass;
        kernels += ls * plan->passes;
    }
    // the ends: embedding (lookup, add/dropout, backward scatter) and head (final norm, two GEMMs
    // forward and back, the cross-entropy's three kernels), about ten kernels each
    if (r == 0) { part[PART_HEAD] += c->emb; part[PART_TP_COMM] += c->emb_comm; kernels += 5; }
    if (r == lay->p - 1) { part[PART_HEAD] += c->head; part[PART_TP_COMM] += c->head_comm; kernels += 10; }
    part[PART_PP_COMM] = c->p2p;
    // a send and a receive each way per chunk boundary the micro-batch crosses
    if (lay->p > 1) kernels += 4.0 * lay->v;
    part[PART_OVERHEAD] = kernels * c->gpu->launch_gap;
}

// Hardware FLOPs beyond the model's for stage r's layers, the whole global batch.
static double stage_extra_flops(const PredictCtx *c, int r, const StageMemory *m, const MemPlan *plan, const FlopBlock *blk) {
    const ClusterJob *job = c->job;
    double B = (double)job->B, s = (double)job->s, h = (double)job->h;
    int ls = stage_layers_split(&c->sl, &c->split, r);
    double sel = flops_recompute_selective_block(B, s, h, blk);   // the core again: W keys a query under a window
    double x = m->n_sel * sel + m->n_full * flops_recompute_full_block(B, s, h, 0, blk);
    unsigned tempo = c->lay->rc == CR_PLAN ? plan->tempo : c->tempo;
    if (tempo & ATTN_FLASH) x += (ls - m->n_sel) * sel;
    // (mini-seq chunks GPT-2's GeLU MLP: FC1 again; the planner never chooses it for SwiGLU)
    if (c->lay->rc == CR_PLAN && (plan->tempo & MINI_SEQ)) x += ls * 8.0 * B * s * h * h;
    return x;
}

void cluster_predict(const ClusterJob *job, const GpuSpec *gpu, const ClusterLayout *lay, int keep_stages,
                     ClusterPrediction *out) {
    memset(out, 0, sizeof *out);
    out->lay = *lay;
    if (cluster_layout_check(job, gpu, lay, out->reason, sizeof out->reason) != 0) return;
    PredictCtx c = {.job = job, .gpu = gpu, .lay = lay, .split = split_of(lay)};
    base_shape(job, lay, &c.sl);
    FlopBlock blk = flops_block_of(&c.sl.sh);
    out->microbatches = c.sl.microbatches;
    out->n_stages = lay->p;
    if (keep_stages) out->mem = calloc((size_t)lay->p, sizeof *out->mem);
    // policy_build allocates the layer plan itself: start from an empty policy (policy_default's
    // arrays would leak).
    char err[256];
    const char *rc = lay->rc == CR_FULL ? "full" : lay->rc == CR_SELECTIVE ? "selective" : "none";
    c.uni.act_dtype = job->e == 2 ? ACT_BF16 : ACT_FP32;
    stage_policy_build(&c.uni, &c.sl, rc, "uniform", 1, NULL, err, sizeof err);
    c.tempo = job->flash ? ATTN_FLASH : 0;
    c.uni.tempo |= c.tempo | act_keep_bits(&c.sl.sh);   // what LoRA keeps (the plan's tempo carries it too)
    cluster_layer_time(job, gpu, lay, c.tempo, &c.lt);
    c.head = cluster_head_time(job, gpu, lay, &c.head_comm);
    c.emb = cluster_embed_time(job, gpu, lay, &c.emb_comm);
    c.p2p = 2.0 * lay->v * cluster_p2p_time(job, gpu, lay);
    double worst_t = -1, sum_t = 0, opt_max = 0, dp_max = 0, extra_flops = 0;
    double slow_part[PART_COUNT] = {0};
    out->fits = 1;
    for (int r = 0; r < lay->p; r++) {
        StageMemory m;
        MemPlan plan;
        LayerTime lt;
        stage_memory(&c, r, &m, &plan, &lt);
        if (r == 0) out->plan0 = plan;
        if (m.total > out->mem_max) { out->mem_max = m.total; out->worst_stage = r; }
        if (out->mem) out->mem[r] = m;
        double part[PART_COUNT];
        stage_time(&c, r, &m, &plan, &lt, part);
        double ts = 0;
        for (int k = 0; k < PART_COUNT; k++) ts += part[k];
        sum_t += ts;
        if (ts > worst_t) {
            worst_t = ts;
            out->slowest_stage = r;
            memcpy(slow_part, part, sizeof part);
        }
        // The DP reduction hides (--dp-overlap) under the last micro-batch's backward and the next
        // step's first forward through this stage.
        int ls = stage_layers_split(&c.sl, &c.split, r);
        // what the DP reduction and the optimizer cover: every parameter, or LoRA's trained adapters
        double params = job->lora_rank > 0 ? cluster_stage_adapters(job, lay, r, 1)
                                           : stage_param_count_split(&c.sl, &c.split, r), hidden;
        double fwd = ls * (lt.gemm_f + lt.attn_f + lt.elem_f + lt.comm_f);
        double bwd = ls * (lt.gemm_b + lt.attn_b + lt.elem_b + lt.comm_b) + part[PART_RECOMPUTE];
        double opt = cluster_optimizer_time(job, gpu, lay, params);
        double dp = cluster_dp_exposed(job, gpu, lay, params, bwd, fwd, &hidden);
        if (opt > opt_max) opt_max = opt;
        if (dp > dp_max) dp_max = dp;
        extra_flops += stage_extra_flops(&c, r, &m, &plan, &blk);
    }
    policy_free(&c.uni);
    double n = (double)c.sl.microbatches;
    for (int k = 0; k < PART_COUNT; k++) out->part[k] = slow_part[k] * n;
    out->part[PART_BUBBLE] = (double)(lay->p - 1) / lay->v * (sum_t / lay->p);
    out->part[PART_PP_COMM] += cluster_embed_sync_time(job, gpu, lay);
    out->part[PART_DP_COMM] = dp_max;
    out->part[PART_OPTIMIZER] = opt_max;
    out->step_s = 0;
    for (int k = 0; k < PART_COUNT; k++) out->step_s += out->part[k];
    double gpus = (double)job->gpus_per_node * job->nodes;
    double model = flops_model_block((double)job->B, (double)job->L, (double)job->s, (double)job->h, (double)job->v, &blk) +
                   flops_lora_delta(&c.sl.sh, (double)job->B);
    out->mfu = model / (out->step_s * gpus * gpu->peak_flops);
    out->hfu = (model + extra_flops) / (out->step_s * gpus * gpu->peak_flops);
    if (out->mem_max > gpu->mem_bytes) {
        out->fits = 0;
        snprintf(out->reason, sizeof out->reason, "stage %d needs %.1f GiB of %.1f GiB", out->worst_stage,
                 out->mem_max / 1073741824.0, gpu->mem_bytes / 1073741824.0);
    }
}
