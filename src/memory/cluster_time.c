#include "memory/cluster_time.h"
#include <math.h>
#include "arch/lora.h"
#include "model/policy.h"

static double hbm_time(const GpuSpec *g, double bytes) { return bytes / (g->hbm_bw * g->hbm_eff); }

double cluster_wave_efficiency(const GpuSpec *g, double M, double N, double batch) {
    if (g->sms <= 1) return 1.0;
    // Each unit computes whole tile_m × tile_n output tiles; the last wave of tiles leaves units idle,
    // and a partial tile at an edge costs a whole one.
    double tiles = ceil(M / g->tile_m) * ceil(N / g->tile_n) * batch;
    double waves = ceil(tiles / g->sms);
    double useful = M * N * batch / ((double)g->tile_m * g->tile_n);
    return useful / (waves * g->sms);
}

// A GEMM at `peak` with operands of e_in bytes and an output of e_out.
static double gemm_at(const GpuSpec *g, double peak, double M, double N, double K, double batch, double e_in,
                      double e_out) {
    double flops = 2.0 * M * N * K * batch;
    double compute = flops / (peak * g->gemm_eff * cluster_wave_efficiency(g, M, N, batch));
    double bytes = (e_in * (M * K + K * N) + e_out * M * N) * batch;   // each operand once: the roofline's floor
    double memory = hbm_time(g, bytes);
    return compute > memory ? compute : memory;
}

double cluster_gemm_time(const GpuSpec *g, double M, double N, double K, double batch, int e) {
    return gemm_at(g, g->peak_flops, M, N, K, batch, e, e);
}

// A linear's GEMM: FP8 operands at the FP8 peak (the same efficiency: no published FP8 figure by
// shape), its output in the activation precision; else cluster_gemm_time.
static double linear_gemm(const ClusterJob *job, const GpuSpec *g, double M, double N, double K) {
    if (job->fp8 && g->fp8_flops > 0) return gemm_at(g, g->fp8_flops, M, N, K, 1, 1, job->e);
    return cluster_gemm_time(g, M, N, K, 1, job->e);
}

// A ring of n ranks: all-reduce moves 2(n−1)/n of the tensor through each link in 2(n−1) steps;
// all-gather and reduce-scatter (n−1)/n in n−1 steps.
double cluster_allreduce_time(const GpuSpec *g, double bw, int n, double bytes) {
    if (n <= 1 || bytes <= 0) return 0.0;
    return 2.0 * (n - 1) / n * bytes / (bw * g->link_eff) + 2.0 * (n - 1) * g->link_latency;
}

double cluster_allgather_time(const GpuSpec *g, double bw, int n, double bytes) {
    if (n <= 1 || bytes <= 0) return 0.0;
    return (double)(n - 1) / n * bytes / (bw * g->link_eff) + (double)(n - 1) * g->link_latency;
}

// What a collective overlapped with a GEMM still costs: the part it outlasts the GEMM, and
// overlap_cost of the rest (it takes SMs and HBM bandwidth from the GEMM it hides under).
static double exposed(const GpuSpec *g, double comm, double under) {
    if (comm <= under) return g->overlap_cost * comm;
    return comm - under + g->overlap_cost * under;
}

// A TP collective that the layout's overlap mode may hide under `under` (mode: the least
// TpOverlap that hides it: TP_OVERLAP_BACKWARD for Megatron's backward overlaps, TP_OVERLAP_FULL
// for the forward's).
static double tp_exposed(const ClusterJob *job, const GpuSpec *g, TpOverlap needs, double comm, double under) {
    TpOverlap o = (TpOverlap)job->tp_overlap;
    int hidden = o == TP_OVERLAP_FULL || (o == TP_OVERLAP_BACKWARD && needs == TP_OVERLAP_BACKWARD);
    return hidden ? exposed(g, comm, under) : comm;
}

// The TP/SP collectives of one layer on the node's links, over the full [n, h] activation (`act`
// bytes), as exposed under the job's overlap mode next to the layer's GEMMs.
static void tp_collectives(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay, double act,
                           const double fwd[4], const double dgrad[4], const double wgrad[4], LayerTime *out) {
    const TpOverlap B = TP_OVERLAP_BACKWARD, F = TP_OVERLAP_FULL;
    int ti = lay->t;
    if (ti <= 1) {
        out->comm_f = out->comm_b = 0;
    } else if (!lay->sp) {
        double ar = cluster_allreduce_time(g, g->nvlink_bw, ti, act);
        // f̄ after Proj and FC2 (full overlap: pipelined with them); f before QKV and FC1, under their wgrad
        out->comm_f = tp_exposed(job, g, F, ar, fwd[1]) + tp_exposed(job, g, F, ar, fwd[3]);
        out->comm_b = tp_exposed(job, g, B, ar, wgrad[0]) + tp_exposed(job, g, B, ar, wgrad[2]);
    } else {
        double ag = cluster_allgather_time(g, g->nvlink_bw, ti, act);
        // g: all-gather before QKV and FC1; ḡ: reduce-scatter after Proj and FC2 (full: each with its GEMM)
        out->comm_f = tp_exposed(job, g, F, ag, fwd[0]) + tp_exposed(job, g, F, ag, fwd[2]) +
                      tp_exposed(job, g, F, ag, fwd[1]) + tp_exposed(job, g, F, ag, fwd[3]);
        // ḡ's all-gather before the dgrad of Proj and FC2 (full: with them); g's reduce-scatter under the
        // wgrad of QKV and FC1; SP's re-gather of their stored input under their dgrad
        out->comm_b = tp_exposed(job, g, F, ag, dgrad[1]) + tp_exposed(job, g, F, ag, dgrad[3]) +
                      tp_exposed(job, g, B, ag, wgrad[0]) + tp_exposed(job, g, B, ag, wgrad[2]) +
                      tp_exposed(job, g, B, ag, dgrad[0]) + tp_exposed(job, g, B, ag, dgrad[2]);
    }
}

// Kernels on the stream, each with its launch gap: forward the four GEMMs, two norms, two residual
// (bias-dropout) adds, the activation, the context transpose, the attention core (QKᵀ, softmax,
// dropout, ·V; flash one kernel), RoPE on q and k, the TP collectives; backward eight GEMMs, the norms'
// input and weight gradients (4), the residual adds (2), the activation and the transpose, the bias
// gradients (GPT-2's four), the attention core's (dV, dP, dropout, softmax, dQ, dK; flash two), RoPE;
// FP8's four casts each way.
static void layer_kernels(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay, int flash, double rope,
                          int linear_bias, LayerTime *out) {
    double coll_f = lay->t <= 1 ? 0 : lay->sp ? 4 : 2, coll_b = lay->t <= 1 ? 0 : lay->sp ? 6 : 2;
    double casts = job->fp8 && g->fp8_flops > 0 ? 4 : 0;
    out->kernels_f = 4 + 6 + (flash ? 1 : 4) + 2 * rope + coll_f + casts;
    out->kernels_b = 8 + 8 + (linear_bias ? 4 : 0) + (flash ? 2 : 6) + 2 * rope + coll_b + casts;
    out->kernels_sel = flash ? 0 : 4;
}

typedef struct { double M, N, K; } Gemm;

// LoRA's adapter GEMMs of one layer on this rank (docs/LORA.md): per adapted site, forward x·Aᵀ and v·Bᵀ;
// backward dB = dyᵀ·v, dv = dy·B, dx += du·A, and dA = duᵀ·x unless LoRA-FA. Widths as model/adapters.c
// splits them: a column-parallel site's A whole and B's out/t rows, a row-parallel one's A in/t columns,
// whose partial x·Aᵀ (n·r elements) is all-reduced over the TP ranks before v·Bᵀ needs it (*comm_f; the
// backward needs no collective: dx = du·A stays in the rank's columns).
static void lora_gemms(const ClusterJob *job, const GpuSpec *g, const ActShape *fam, double n, double t,
                       double *fwd, double *bwd, double *comm_f, double *kernels_f, double *kernels_b) {
    *fwd = *bwd = *comm_f = *kernels_f = *kernels_b = 0;
    if (fam->lora_rank <= 0) return;
    double r = fam->lora_rank;
    long qw = act_q_width(fam), kvw = act_kv_width(fam);
    for (int k = 0; k < LORA_SITES; k++) {
        if (!(fam->lora_sites >> k & 1u)) continue;
        const LoraSiteRow *row = lora_site((LoraSite)k);
        double in = (double)lora_width(row->in, fam->h, qw, kvw, fam->ffn);
        double out = (double)lora_width(row->out, fam->h, qw, kvw, fam->ffn);
        if (row->parallel == LORA_COLUMN) out /= t; else in /= t;
        *fwd += linear_gemm(job, g, n, r, in) + linear_gemm(job, g, n, out, r);
        *bwd += linear_gemm(job, g, out, r, n) + linear_gemm(job, g, n, r, out) + linear_gemm(job, g, n, in, r) +
                (fam->lora_fa ? 0.0 : linear_gemm(job, g, r, in, n));
        *kernels_f += 2;
        *kernels_b += fam->lora_fa ? 3 : 4;
        if (row->parallel == LORA_ROW && t > 1) {
            *comm_f += cluster_allreduce_time(g, g->nvlink_bw, (int)t, n * r * job->e);
            *kernels_f += 1;
        }
    }
}

void cluster_layer_time(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay, unsigned tempo,
                        LayerTime *out) {
    const double e = job->e, t = lay->t, s = (double)job->s, b = lay->mb, h = (double)job->h;
    const double n = s * b, ht = h / t, at = (double)job->a / t;
    const double rows = lay->sp ? n / t : n;   // rows of the LayerNorm / dropout / residual region
    const double S2 = b * at * s * s;           // attention score elements on this rank
    const int flash = (tempo & ATTN_FLASH) != 0 || job->flash;   // the plan's choice, or every layer's
    // The family's widths on this rank: the head (d: h/a unless head_dim says otherwise), q and the attention
    // output (a·d/t), k and v (grouped-query attention), the FFN, the MLP's input matrices (GeLU's FC1; SwiGLU's
    // gate and up, one GEMM of 2f/t outputs as Megatron fuses them).
    ActShape fam;
    cluster_job_shape(job, lay->mb, lay->t, lay->sp, &fam);
    const ArchSpec *spec = arch_spec((ArchKind)fam.arch);
    const double dh = (double)act_head_dim(&fam), qt = (double)act_q_width(&fam) / t;
    const double kvt = (double)fam.kv * dh / t, ft = (double)fam.ffn / t, mats = fam.swiglu ? 2 : 1;
    const double k_mask = fam.dropout ? 1 : 0;   // bytes per element of a dropout mask (none without dropout)
    const double rope = spec->pos == POS_ROPE ? 1 : 0;
    // The four linears: QKV and FC1 (gate and up) column-parallel, Proj and FC2 (down) row-parallel.
    const Gemm lin[4] = {{n, qt + 2 * kvt, h}, {n, h, qt}, {n, mats * ft, h}, {n, h, ft}};
    double fwd[4], dgrad[4], wgrad[4];
    out->gemm_f = out->gemm_b = 0;
    for (int i = 0; i < 4; i++) {
        fwd[i] = linear_gemm(job, g, lin[i].M, lin[i].N, lin[i].K);
        dgrad[i] = linear_gemm(job, g, lin[i].M, lin[i].K, lin[i].N);   // dX = dY·Wᵀ
        // dW = Xᵀ·dY; a frozen (LoRA) base has none
        wgrad[i] = fam.lora_rank > 0 ? 0.0 : linear_gemm(job, g, lin[i].K, lin[i].N, lin[i].M);
        out->gemm_f += fwd[i];
        out->gemm_b += dgrad[i] + wgrad[i];
    }
    // Attention core per rank: b·a/t batched GEMMs QKᵀ (s×s, K = d) and P·V (s×d, K = s); softmax
    // (read and write the scores) and dropout (read, write, a 1-byte mask). Backward: four batched
    // GEMMs (dV, dP, dQ, dK), dropout's and softmax's backward. Flash attention never writes the
    // scores: its GEMMs move only q, k, v and the output, and backward recomputes QKᵀ.
    double bat = b * at;
    double qk = cluster_gemm_time(g, s, s, dh, bat, job->e), pv = cluster_gemm_time(g, s, dh, s, bat, job->e);
    double core_elem = hbm_time(g, S2 * (4 * e + 1));
    if (flash) {   // flash skips the key tiles outside a sliding window: W keys a query instead of s
        const double keys = fam.window > 0 && fam.window < s ? (double)fam.window : s;
        double flops = 2.0 * s * keys * dh * bat / (g->peak_flops * g->gemm_eff);
        qk = pv = flops;
        core_elem = 0;
    }
    out->attn_f = qk + pv + core_elem;
    out->attn_b = flash ? 4 * qk : 3 * pv + qk + hbm_time(g, S2 * (5 * e + 1));
    out->rc_sel = out->attn_f;
    out->rc_flash = flash ? qk : 0;
    // Other element-wise traffic, bytes per element of a [rows, h], [n, h/t] or [n, f/t] tensor
    // (Megatron's fused kernels): forward the two norms read and write (2e each), two bias-dropout-adds
    // read the linear's output and the residual, write the sum and a 1-byte mask (3e + 1 each; 3e
    // without dropout); the context transpose (2e over h/t); the fused bias-GeLU (2e over f/t) or
    // SwiGLU (read gate and up, write: 3e over f/t); RoPE on q and k (2e over (a·d + kv·d)/t); Qwen3's per-head
    // q/k norms (2e over the same; backward makes q and k again from their inputs, 2e, then their backward, 3e).
    // Backward:
    // the dropout-adds (2e + 1; nothing without dropout) and the residual sums (3e), the norms (3e
    // each: read dy and x, write dx), the GeLU (3e over f/t) or SwiGLU (its output made again for the
    // down projection's weight gradient, 3e, and its backward, 5e), RoPE (2e) and the transpose (2e).
    // GPT-2 (f = 4h): 10e + 2 and 10e over h/t forward, 16e + 2 and 14e backward. The small reductions
    // (norm γ/β and bias gradients) are not counted.
    const double act_f = fam.swiglu ? 3 : 2, act_b = fam.swiglu ? 8 : 3;
    const double qk_norm = fam.qk_norm ? 1 : 0;
    out->elem_f = hbm_time(g, rows * h * (4 * e + 2 * (3 * e + k_mask)) + n * qt * (2 * e) + n * ft * (act_f * e) +
                                  (rope + qk_norm) * n * (qt + kvt) * (2 * e));
    out->elem_b = hbm_time(g, rows * h * (12 * e + 2 * (k_mask ? 2 * e + 1 : 0)) + n * qt * (2 * e) + n * ft * (act_b * e) +
                                  rope * n * (qt + kvt) * (2 * e) + qk_norm * n * (qt + kvt) * (5 * e));
    // FP8: each linear's input cast forward and its output gradient backward (read e, write 1 byte;
    // the amax reduction rides along); the weights' casts are cached across micro-batches.
    if (job->fp8 && g->fp8_flops > 0) {
        double in = n * (h + qt + h + ft);   // QKV, Proj, FC1 (gate, up), FC2 (down) inputs
        double dy = n * (qt + 2 * kvt + h + mats * ft + h);
        out->elem_f += hbm_time(g, in * (e + 1));
        out->elem_b += hbm_time(g, dy * (e + 1));
    }
    out->pass = hbm_time(g, 2 * e * n * ht);   // [s·b, h/t]: the planner's options' passes are over h
    out->rc_mini = fwd[2] + hbm_time(g, n * ft * 2 * e);
    tp_collectives(job, g, lay, n * h * e, fwd, dgrad, wgrad, out);
    layer_kernels(job, g, lay, flash, rope, spec->linear_bias, out);
    double lf, lb, lc, kf, kb;
    lora_gemms(job, g, &fam, n, t, &lf, &lb, &lc, &kf, &kb);
    out->gemm_f += lf;
    out->comm_f += lc;
    out->gemm_b += lb;
    out->kernels_f += kf;
    out->kernels_b += kb;
}

double cluster_head_time(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay, double *comm) {
    const double e = job->e, t = lay->t, n = (double)job->s * lay->mb, h = (double)job->h, vt = (double)job->v / t;
    const double rows = lay->sp ? n / t : n;
    double gemm = cluster_gemm_time(g, n, vt, h, 1, job->e) + cluster_gemm_time(g, n, h, vt, 1, job->e);
    double wgrad = job->lora_rank > 0 ? 0.0 : cluster_gemm_time(g, h, vt, n, 1, job->e);   // LoRA: frozen
    // final LN forward and backward; cross-entropy on the fp32 logits: cast, max, exp, sum, the
    // gradient (≈ 2e + 24 bytes per logit)
    double elem = hbm_time(g, rows * h * 5 * e + n * vt * (2 * e + 24));
    double c = 0, act = n * h * e;
    if (lay->t > 1)
        c = lay->sp ? cluster_allgather_time(g, g->nvlink_bw, lay->t, act) +
                          exposed(g, cluster_allgather_time(g, g->nvlink_bw, lay->t, act), wgrad)
                    : exposed(g, cluster_allreduce_time(g, g->nvlink_bw, lay->t, act), wgrad);
    *comm = c;
    return gemm + wgrad + elem;
}

double cluster_embed_time(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay, double *comm) {
    const double e = job->e, t = lay->t, n = (double)job->s * lay->mb, h = (double)job->h;
    const double rows = lay->sp ? n / t : n;
    // lookup (write n·h), position add and dropout (3e + 1 per element; dropout alone 2e + 1, RoPE's
    // families without dropout nothing); backward: dropout (2e + 1) and the fp32 scatter-add of the
    // rows' gradients (e + 8)
    ActShape fam;
    cluster_job_shape(job, lay->mb, lay->t, lay->sp, &fam);
    double k_mask = fam.dropout ? 1 : 0, learned = arch_spec((ArchKind)fam.arch)->pos == POS_LEARNED ? 1 : 0;
    double add_f = learned ? 3 * e + k_mask : k_mask ? 2 * e + 1 : 0, add_b = k_mask ? 2 * e + 1 : 0;
    // (a frozen embedding under LoRA runs no backward)
    double elem = hbm_time(g, n * h * e + rows * h * add_f + (job->lora_rank > 0 ? 0.0 : rows * h * add_b + n * h * (e + 8)));
    double c = 0, act = n * h * e;
    (void)t;
    if (lay->t > 1)
        c = lay->sp ? 2 * cluster_allgather_time(g, g->nvlink_bw, lay->t, act)   // reduce-scatter; ḡ backward
                    : cluster_allreduce_time(g, g->nvlink_bw, lay->t, act);
    *comm = c;
    return elem;
}

static double pp_link(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay) {
    return (long)lay->t * lay->p > job->gpus_per_node ? g->internode_bw : g->nvlink_bw;
}

double cluster_p2p_time(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay) {
    if (lay->p <= 1) return 0.0;
    double act = (double)job->s * lay->mb * job->h * job->e;
    double x = act / lay->t / (pp_link(job, g, lay) * g->link_eff) + g->link_latency;
    if (!lay->sp && lay->t > 1) x += cluster_allgather_time(g, g->nvlink_bw, lay->t, act);
    return x;
}

double cluster_dp_bandwidth(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay) {
    long tp = (long)lay->t * lay->p;
    if (tp * lay->d <= job->gpus_per_node) return g->nvlink_bw;
    long k = tp < job->gpus_per_node && job->gpus_per_node % tp == 0 ? job->gpus_per_node / tp : 1;
    double bw = (double)k * g->internode_bw;
    return bw < g->nvlink_bw ? bw : g->nvlink_bw;
}

static double grad_bytes(const ClusterJob *job) { return job->grad_bytes == 2 ? 2.0 : 4.0; }

// One reduction of n parameters' gradients (ZeRO-1: reduce-scatter) and the weights' all-gather.
static double dp_reduce(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay, double bw, double n) {
    return lay->zero ? cluster_allgather_time(g, bw, lay->d, grad_bytes(job) * n)
                     : cluster_allreduce_time(g, bw, lay->d, grad_bytes(job) * n);
}
static double dp_gather(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay, double bw, double n) {
    return lay->zero ? cluster_allgather_time(g, bw, lay->d, (double)job->e * n) : 0.0;
}

double cluster_dp_time(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay, double params) {
    if (lay->d <= 1) return 0.0;
    double bw = cluster_dp_bandwidth(job, g, lay);
    return dp_reduce(job, g, lay, bw, params) + dp_gather(job, g, lay, bw, params);
}

// Buckets of Megatron's DDP: `bucket` parameters each, the last (the earliest layers', whose gradients
// come last) the remainder. Of a collective over them, the last bucket's time is the tail; `under`
// hides the others' up to its length.
static double bucketed(const GpuSpec *g, double all, double tail, double under, double *hidden) {
    double rest = all - tail, hid = rest < under ? rest : under;
    *hidden += hid;
    return tail + (rest - hid) + g->overlap_cost * hid;
}

double cluster_dp_exposed(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay, double params,
                          double bwd, double fwd, double *hidden) {
    *hidden = 0;
    if (lay->d <= 1 || params <= 0) return 0.0;
    if (!job->dp_overlap) return cluster_dp_time(job, g, lay, params);
    double bw = cluster_dp_bandwidth(job, g, lay);
    double bucket = job->dp_bucket > 0 ? job->dp_bucket : fmax(40e6, 1e6 * lay->d);
    double nb = ceil(params / bucket), last = params - (nb - 1) * bucket;
    double red = (nb - 1) * dp_reduce(job, g, lay, bw, bucket) + dp_reduce(job, g, lay, bw, last);
    double x = bucketed(g, red, dp_reduce(job, g, lay, bw, last), bwd, hidden);
    if (lay->zero) {
        double gat = (nb - 1) * dp_gather(job, g, lay, bw, bucket) + dp_gather(job, g, lay, bw, last);
        x += bucketed(g, gat, dp_gather(job, g, lay, bw, last), fwd, hidden);
    }
    return x;
}

double cluster_optimizer_time(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay, double params) {
    // Every GPU: the gradient norm (read 4) and zeroing the gradients (write 4). The shard it updates
    // (all of it without ZeRO-1): Adam reads weight, gradient, m, v and writes weight, m, v (28);
    // under mixed precision the fp32 → bf16 weight copy (read 4, write 2).
    double shard = params / (lay->zero && lay->d > 1 ? lay->d : 1);
    double bytes = 8.0 * params + shard * (28.0 + (job->e == 2 ? 6.0 : 0.0));
    return hbm_time(g, bytes);
}

double cluster_embed_sync_time(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay) {
    ActShape fam;
    cluster_job_shape(job, lay->mb, lay->t, lay->sp, &fam);
    // an untied output layer has no copy to keep in step; a frozen one (LoRA) no gradient
    if (lay->p <= 1 || fam.untied || job->lora_rank > 0) return 0.0;
    return cluster_allreduce_time(g, pp_link(job, g, lay), 2, 4.0 * (double)job->v * job->h / lay->t);
}
