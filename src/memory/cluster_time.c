#include "memory/cluster_time.h"
#include <math.h>
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

double cluster_gemm_time(const GpuSpec *g, double M, double N, double K, double batch, int e) {
    double flops = 2.0 * M * N * K * batch;
    double compute = flops / (g->peak_flops * g->gemm_eff * cluster_wave_efficiency(g, M, N, batch));
    double bytes = (double)e * (M * K + K * N + M * N) * batch;   // each operand once: the roofline's floor
    double memory = hbm_time(g, bytes);
    return compute > memory ? compute : memory;
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

typedef struct { double M, N, K; } Gemm;

void cluster_layer_time(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay, unsigned tempo,
                        LayerTime *out) {
    const double e = job->e, t = lay->t, s = (double)job->s, b = lay->mb, h = (double)job->h;
    const double n = s * b, ht = h / t, at = (double)job->a / t, dh = h / (double)job->a;
    const double rows = lay->sp ? n / t : n;   // rows of the LayerNorm / dropout / residual region
    const double S2 = b * at * s * s;           // attention score elements on this rank
    const int flash = (tempo & ATTN_FLASH) != 0;
    // The four linears: QKV and FC1 column-parallel, Proj and FC2 row-parallel.
    const Gemm lin[4] = {{n, 3 * ht, h}, {n, h, ht}, {n, 4 * ht, h}, {n, h, 4 * ht}};
    double fwd[4], dgrad[4], wgrad[4];
    out->gemm_f = out->gemm_b = 0;
    for (int i = 0; i < 4; i++) {
        fwd[i] = cluster_gemm_time(g, lin[i].M, lin[i].N, lin[i].K, 1, job->e);
        dgrad[i] = cluster_gemm_time(g, lin[i].M, lin[i].K, lin[i].N, 1, job->e);   // dX = dY·Wᵀ
        wgrad[i] = cluster_gemm_time(g, lin[i].K, lin[i].N, lin[i].M, 1, job->e);   // dW = Xᵀ·dY
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
    if (flash) {
        double flops = 2.0 * s * s * dh * bat / (g->peak_flops * g->gemm_eff);
        qk = pv = flops;
        core_elem = 0;
    }
    out->attn_f = qk + pv + core_elem;
    out->attn_b = flash ? 4 * qk : 3 * pv + qk + hbm_time(g, S2 * (5 * e + 1));
    out->rc_sel = out->attn_f;
    out->rc_flash = flash ? qk : 0;
    // Other element-wise traffic, bytes per element of a [rows, h] or [n, h/t] tensor (Megatron's
    // fused kernels): forward LN1 and LN2 read and write (2e each), two bias-dropout-adds read the
    // linear's output and the residual, write the sum and a 1-byte mask (3e + 1 each); the context
    // transpose (2e) and the fused bias-GeLU on 4h/t (8e). Backward: the dropout-adds (2e + 1) and the
    // residual sums (3e), the LayerNorms (3e each: read dy and x, write dx), the GeLU (12e over 4h/t)
    // and the transpose (2e). The small reductions (LN γ/β and bias gradients) are not counted.
    out->elem_f = hbm_time(g, rows * h * (10 * e + 2) + n * ht * (10 * e));
    out->elem_b = hbm_time(g, rows * h * (16 * e + 2) + n * ht * (14 * e));
    out->pass = hbm_time(g, 2 * e * n * ht);
    out->rc_mini = fwd[2] + hbm_time(g, n * ht * 8 * e);
    // Tensor-parallel collectives on the node's links, over the full [n, h] activation.
    double act = n * h * e, bw = g->nvlink_bw;
    int ti = lay->t;
    if (ti <= 1) {
        out->comm_f = out->comm_b = 0;
    } else if (!lay->sp) {
        double ar = cluster_allreduce_time(g, bw, ti, act);
        out->comm_f = 2 * ar;                                   // f̄ after Proj and FC2
        out->comm_b = exposed(g, ar, wgrad[0]) + exposed(g, ar, wgrad[2]);  // f before QKV and FC1, under their wgrad
    } else {
        double ag = cluster_allgather_time(g, bw, ti, act);
        out->comm_f = 4 * ag;                                   // g: all-gather; ḡ: reduce-scatter; twice
        out->comm_b = 2 * ag + exposed(g, ag, wgrad[0]) + exposed(g, ag, wgrad[2]) + exposed(g, ag, dgrad[0]) +
                      exposed(g, ag, dgrad[2]);
    }
}

double cluster_head_time(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay, double *comm) {
    const double e = job->e, t = lay->t, n = (double)job->s * lay->mb, h = (double)job->h, vt = (double)job->v / t;
    const double rows = lay->sp ? n / t : n;
    double gemm = cluster_gemm_time(g, n, vt, h, 1, job->e) + cluster_gemm_time(g, n, h, vt, 1, job->e);
    double wgrad = cluster_gemm_time(g, h, vt, n, 1, job->e);
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
    // lookup (write n·h), position add and dropout (3e + 1 per element); backward: dropout (2e + 1)
    // and the fp32 scatter-add of the rows' gradients (e + 8)
    double elem = hbm_time(g, n * h * e + rows * h * (3 * e + 1) + rows * h * (2 * e + 1) + n * h * (e + 8));
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

double cluster_dp_time(const ClusterJob *job, const GpuSpec *g, const ClusterLayout *lay, double params) {
    if (lay->d <= 1) return 0.0;
    double bw = (long)lay->t * lay->p * lay->d > job->gpus_per_node ? g->internode_bw : g->nvlink_bw;
    if (lay->zero)
        return cluster_allgather_time(g, bw, lay->d, 4.0 * params) + cluster_allgather_time(g, bw, lay->d, job->e * params);
    return cluster_allreduce_time(g, bw, lay->d, 4.0 * params);
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
    if (lay->p <= 1) return 0.0;
    return cluster_allreduce_time(g, pp_link(job, g, lay), 2, 4.0 * (double)job->v * job->h / lay->t);
}
