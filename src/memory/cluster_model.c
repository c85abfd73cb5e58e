// cluster_predict: per-GPU memory of every pipeline stage from the analytic activation model
// (stage_model.h) and the step time from the physical model (cluster_time.h).
#include "memory/cluster_model.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

static const char *part_names[PART_COUNT] = {"gemm", "attention", "elementwise", "head", "recompute",
                                             "tp_comm", "pp_comm", "dp_comm", "bubble", "optimizer"};
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
    "optimizer step: Adam, gradient norm, weight copy"};
const char *cluster_part_name(TimePart p) { return p >= 0 && p < PART_COUNT ? part_names[p] : "?"; }
const char *cluster_part_label(TimePart p) { return p >= 0 && p < PART_COUNT ? part_labels[p] : "?"; }

void cluster_job_shape(const ClusterJob *job, int mb, int t, int sp, ActShape *sh) {
    *sh = (ActShape){.s = job->s, .b = mb, .h = job->h, .a = job->a, .L = job->L, .v = job->v, .elem_bytes = job->e,
                     .masks = MASKS_BYTES, .t = t, .sp = sp};
    act_shape_set_family(sh, (ArchKind)job->arch, job->kv, job->ffn, job->tie, job->qkv_bias);
    sh->dropout = arch_spec((ArchKind)job->arch)->dropout_default > 0.0f;
}

double cluster_param_count(const ClusterJob *job) {
    ActShape sh;
    cluster_job_shape(job, 1, 1, 0, &sh);
    return (double)param_model_count(&sh);
}

double cluster_state_bytes_per_param(const ClusterJob *job) { return job->e == 2 ? 18.0 : 16.0; }

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
    if (job->L % ((long)lay->p * lay->v))
        return snprintf(err, errlen, "p·v = %d·%d does not divide the %ld layers", lay->p, lay->v, job->L), -1;
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

static void base_shape(const ClusterJob *job, const ClusterLayout *lay, StageLayout *sl) {
    memset(sl, 0, sizeof *sl);
    cluster_job_shape(job, lay->mb, lay->t, lay->sp, &sl->sh);
    sl->p = lay->p;
    sl->m = lay->v;
    sl->microbatches = job->B / ((long)lay->d * lay->mb);
}

// Model states of one GPU holding `params`: the GEMMs' weight copy, fp32 gradients, Adam (and the
// fp32 master weights under mixed precision), the last sharded over d with ZeRO-1.
static void states(const ClusterJob *job, const ClusterLayout *lay, double params, StageMemory *m) {
    double dz = lay->zero && lay->d > 1 ? lay->d : 1;
    m->weights = (double)job->e * params;
    m->grads = 4.0 * params;
    m->optimizer = (job->e == 2 ? 12.0 : 8.0) * params / dz;
}

// The per-stage plan: ctron's budget planner over the stage's layers, with what the GPU has left
// after model states, workspace and reserve, per in-flight micro-batch as the budget. The planner
// counts the single-stage extras (logits …) once; they are added back so that its layers get
// exactly (left − this stage's extras) / in-flight.
static void stage_plan(const StageLayout *sl, int r, double left, MemPlan *plan) {
    ActShape sh = sl->sh;
    sh.L = stage_layer_count(sl);
    StageActivations none;
    MemoryPolicy pol;
    policy_default(&pol, (int)sl->sh.L);
    pol.act_dtype = sh.elem_bytes == 2 ? ACT_BF16 : ACT_FP32;
    stage_activations_at(sl, &pol, r, &none);
    policy_free(&pol);
    double budget = (left - none.extras) / stage_layer_factor_at(sl, r) + (double)act_model_extra_bytes(&sh);
    if (budget < 1) budget = 1;
    plan_memory(&sh, 1, budget, 0, plan);
}

static void policy_for_stage(const StageLayout *sl, int r, const MemPlan *plan, MemoryPolicy *pol) {
    policy_default(pol, (int)sl->sh.L);
    pol->act_dtype = sl->sh.elem_bytes == 2 ? ACT_BF16 : ACT_FP32;
    pol->masks = plan->masks;
    pol->tempo = plan->tempo;
    pol->mini_seq = plan->tempo & MINI_SEQ ? PLAN_MINI_SEQ : 0;
    for (int i = 0; i < stage_layer_count(sl); i++) {
        int l = stage_layer_at(sl, r, i);
        pol->kind[l] = i < plan->n_full ? RECOMPUTE_FULL : i < plan->n_full + plan->n_sel ? RECOMPUTE_SELECTIVE : RECOMPUTE_NONE;
        pol->group_start[l] = l;
    }
}

void cluster_prediction_free(ClusterPrediction *p) {
    free(p->mem);
    p->mem = NULL;
}

void cluster_predict(const ClusterJob *job, const GpuSpec *gpu, const ClusterLayout *lay, int keep_stages,
                     ClusterPrediction *out) {
    memset(out, 0, sizeof *out);
    out->lay = *lay;
    if (cluster_layout_check(job, gpu, lay, out->reason, sizeof out->reason) != 0) return;
    StageLayout sl;
    base_shape(job, lay, &sl);
    FlopBlock blk = flops_block_of(&sl.sh);
    out->microbatches = sl.microbatches;
    out->n_stages = lay->p;
    if (keep_stages) out->mem = calloc((size_t)lay->p, sizeof *out->mem);
    int ls = stage_layer_count(&sl);
    // One policy for the uniform choices: Megatron's full recompute checkpoints every layer.
    // policy_build allocates the layer plan itself: start from an empty policy (policy_default's
    // arrays would leak).
    MemoryPolicy uni = {0};
    char err[256];
    const char *rc = lay->rc == CR_FULL ? "full" : lay->rc == CR_SELECTIVE ? "selective" : "none";
    uni.act_dtype = job->e == 2 ? ACT_BF16 : ACT_FP32;
    stage_policy_build(&uni, &sl, rc, "uniform", 1, NULL, err, sizeof err);
    LayerTime lt;
    cluster_layer_time(job, gpu, lay, 0, &lt);
    double bwd = lt.gemm_b + lt.attn_b + lt.elem_b + lt.comm_b;
    double head_comm, head = cluster_head_time(job, gpu, lay, &head_comm);
    double emb_comm, emb = cluster_embed_time(job, gpu, lay, &emb_comm);
    double p2p = 2.0 * lay->v * cluster_p2p_time(job, gpu, lay);
    double usable = gpu->mem_bytes - job->reserve_bytes;
    double worst_t = -1, sum_t = 0, opt_max = 0, dp_max = 0, extra_flops = 0;
    double slow_part[PART_COUNT] = {0};
    out->fits = 1;
    for (int r = 0; r < lay->p; r++) {
        StageMemory m = {0};
        double params = stage_param_count_at(&sl, r);
        states(job, lay, params, &m);
        MemoryPolicy planned, *pol = &uni;
        MemPlan plan = {0};
        StageLayout ssl = sl;
        LayerTime plt = lt;
        m.workspace = (double)act_layer_kind_bytes(&sl.sh, RECOMPUTE_NONE, 1, 0);
        m.reserve = job->reserve_bytes;
        if (lay->rc == CR_PLAN) {
            stage_plan(&sl, r, usable - m.weights - m.grads - m.optimizer - m.workspace, &plan);
            policy_for_stage(&sl, r, &plan, &planned);
            ssl.sh.masks = plan.masks;
            ssl.sh.mini_seq = plan.tempo & MINI_SEQ ? PLAN_MINI_SEQ : 0;
            pol = &planned;
            if (r == 0) out->plan0 = plan;
            cluster_layer_time(job, gpu, lay, plan.tempo, &plt);
            m.n_full = plan.n_full;
            m.n_sel = plan.n_sel;
            // the gradients of one layer as the plan's options keep it (flash: no s×s tensors)
            m.workspace = (double)act_layer_kind_bytes(&ssl.sh, RECOMPUTE_NONE, 1, plan.tempo);
        } else {
            m.n_full = lay->rc == CR_FULL ? ls : 0;
            m.n_sel = lay->rc == CR_SELECTIVE ? ls : 0;
        }
        StageActivations act;
        stage_activations_at(&ssl, pol, r, &act);
        m.activations = act.held + act.working;
        m.total = m.weights + m.grads + m.optimizer + m.activations + m.workspace + m.reserve;
        if (pol == &planned) policy_free(&planned);
        if (m.total > out->mem_max) { out->mem_max = m.total; out->worst_stage = r; }
        if (out->mem) out->mem[r] = m;
        // Time of one micro-batch through this stage (all its chunks).
        double part[PART_COUNT] = {0};
        double pf = plt.gemm_f + plt.attn_f + plt.elem_f + plt.comm_f;
        part[PART_GEMM] = ls * (plt.gemm_f + plt.gemm_b);
        part[PART_ATTN] = ls * (plt.attn_f + plt.attn_b);
        part[PART_ELEM] = ls * (plt.elem_f + plt.elem_b);
        part[PART_TP_COMM] = ls * (plt.comm_f + plt.comm_b);
        part[PART_RECOMPUTE] = m.n_sel * plt.rc_sel + m.n_full * pf;
        if (lay->rc == CR_PLAN) {
            int flash = (plan.tempo & ATTN_FLASH) != 0;
            if (flash) part[PART_RECOMPUTE] += ls * plt.rc_flash - m.n_sel * plt.rc_sel;   // flash recomputes the scores instead
            if (plan.tempo & MINI_SEQ) part[PART_RECOMPUTE] += ls * plt.rc_mini;
            part[PART_ELEM] += ls * plan.passes * plt.pass;
        }
        if (r == 0) { part[PART_HEAD] += emb; part[PART_TP_COMM] += emb_comm; }
        if (r == lay->p - 1) { part[PART_HEAD] += head; part[PART_TP_COMM] += head_comm; }
        part[PART_PP_COMM] = p2p;
        double ts = 0;
        for (int k = 0; k < PART_COUNT; k++) ts += part[k];
        sum_t += ts;
        if (ts > worst_t) {
            worst_t = ts;
            out->slowest_stage = r;
            memcpy(slow_part, part, sizeof part);
        }
        double opt = cluster_optimizer_time(job, gpu, lay, params), dp = cluster_dp_time(job, gpu, lay, params);
        if (job->dp_overlap) dp = dp > ls * bwd ? dp - ls * bwd : 0;   // under the last micro-batch's backward
        if (opt > opt_max) opt_max = opt;
        if (dp > dp_max) dp_max = dp;
        // hardware FLOPs beyond the model's: per layer of this stage, for the whole global batch
        double B = (double)job->B, s = (double)job->s, h = (double)job->h;
        extra_flops += m.n_sel * flops_recompute_selective(B, s, h) + m.n_full * flops_recompute_full_block(B, s, h, 0, &blk);
        if (lay->rc == CR_PLAN && (plan.tempo & ATTN_FLASH)) extra_flops += (ls - m.n_sel) * flops_recompute_selective(B, s, h);
        // (mini-seq chunks GPT-2's GeLU MLP: FC1 again; the planner never chooses it for SwiGLU)
        if (lay->rc == CR_PLAN && (plan.tempo & MINI_SEQ)) extra_flops += ls * 8.0 * B * s * h * h;
    }
    policy_free(&uni);
    double n = (double)sl.microbatches;
    for (int k = 0; k < PART_COUNT; k++) out->part[k] = slow_part[k] * n;
    out->part[PART_BUBBLE] = (double)(lay->p - 1) / lay->v * (sum_t / lay->p);
    out->part[PART_PP_COMM] += cluster_embed_sync_time(job, gpu, lay);
    out->part[PART_DP_COMM] = dp_max;
    out->part[PART_OPTIMIZER] = opt_max;
    out->step_s = 0;
    for (int k = 0; k < PART_COUNT; k++) out->step_s += out->part[k];
    double gpus = (double)job->gpus_per_node * job->nodes;
    double model = flops_model_block((double)job->B, (double)job->L, (double)job->s, (double)job->h, (double)job->v, &blk);
    out->mfu = model / (out->step_s * gpus * gpu->peak_flops);
    out->hfu = (model + extra_flops) / (out->step_s * gpus * gpu->peak_flops);
    if (out->mem_max > gpu->mem_bytes) {
        out->fits = 0;
        snprintf(out->reason, sizeof out->reason, "stage %d needs %.1f GiB of %.1f GiB", out->worst_stage,
                 out->mem_max / 1073741824.0, gpu->mem_bytes / 1073741824.0);
    }
}
