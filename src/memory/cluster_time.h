// The cluster planner's time model, from physics (docs/PLANNER.md): a GEMM takes its FLOPs over the
// peak times an efficiency from tile/wave quantisation, or its bytes over the HBM bandwidth when
// that is longer (a roofline); element-wise kernels and the softmax/dropout of attention take their
// bytes over the HBM bandwidth; collectives take ring-formula bytes over the link; nothing else.
// Bytes and FLOPs follow Megatron-LM's layer (the paper's code), per GPU, per micro-batch.
#ifndef CTRON_CLUSTER_TIME_H
#define CTRON_CLUSTER_TIME_H
#include "memory/cluster_model.h"

// One layer, one micro-batch, one GPU, seconds. Backward communication is what is exposed: Megatron
// overlaps the input-gradient all-reduce (reduce-scatter under SP) of a column-parallel linear with
// its weight-gradient GEMM, and SP's re-gather of the stored input with the input-gradient GEMM.
typedef struct {
    double gemm_f, attn_f, elem_f, comm_f;   // forward: linear GEMMs, attention core (BMMs, softmax,
    double gemm_b, attn_b, elem_b, comm_b;   // dropout), other element-wise kernels, TP collectives
    double rc_sel;    // selective: the attention core's forward again (QKᵀ, softmax, dropout, ·V)
    double rc_flash;  // flash attention (ctron's planner may choose it): the scores again in backward
    double rc_mini;   // mini-sequence MLP: FC1 and GeLU again in backward
    double pass;      // one extra element-wise pass over a layer's s·b·h/t elements (planner options)
    double kernels_f, kernels_b, kernels_sel;   // kernels launched: forward, backward, selective's recompute
} LayerTime;

// tempo: the planner's option bits (ATTN_FLASH changes the attention core's traffic), 0 otherwise.
void cluster_layer_time(const ClusterJob *job, const GpuSpec *gpu, const ClusterLayout *lay, unsigned tempo,
                        LayerTime *out);
// The output side (last stage: final LN, LM-head GEMMs, vocabulary-parallel cross-entropy) and the
// input side (first stage: vocabulary-parallel embedding, position embedding, dropout), forward +
// backward of one micro-batch; *comm gets the exposed TP communication within it.
double cluster_head_time(const ClusterJob *job, const GpuSpec *gpu, const ClusterLayout *lay, double *comm);
double cluster_embed_time(const ClusterJob *job, const GpuSpec *gpu, const ClusterLayout *lay, double *comm);
// One pipeline transfer of a micro-batch's activation between stages (Megatron's scatter/gather:
// 1/t of it over the link, gathered again inside the node when SP does not already shard it).
double cluster_p2p_time(const ClusterJob *job, const GpuSpec *gpu, const ClusterLayout *lay);
// The data-parallel gradient reduction of `params` parameters (all-reduce of the gradients, fp32 or
// bf16; with ZeRO-1 a reduce-scatter of them and an all-gather of the updated bf16 weights), all of it
// exposed, and the optimizer step (streams the Adam state, gradient norm and the weight copy: bytes
// over HBM).
double cluster_dp_time(const ClusterJob *job, const GpuSpec *gpu, const ClusterLayout *lay, double params);
// The part of it a step waits for. Without --dp-overlap all of cluster_dp_time. With it (Megatron's
// --overlap-grad-reduce, --overlap-param-gather), bucket by bucket: each bucket's gradient reduction
// starts when its gradients are ready in the last micro-batch's backward (`bwd` seconds on this stage),
// so the last bucket (the stage's first layers) is the exposed tail and what the others outlast the
// backward is exposed too; under ZeRO-1 the weight all-gather hides under the next step's first forward
// (`fwd`) the same way, its first bucket exposed. What hides still costs overlap_cost of its time (the
// collective's SMs and memory traffic slow the compute under it). *hidden gets the hidden seconds.
double cluster_dp_exposed(const ClusterJob *job, const GpuSpec *gpu, const ClusterLayout *lay, double params,
                          double bwd, double fwd, double *hidden);
// Bus bandwidth of the data-parallel ring: NVLink when the group is inside a node; across nodes, the
// NICs of the group's k ranks in a node (k = GPUs per node / (t·p)) carry k rings at once, up to NVLink.
double cluster_dp_bandwidth(const ClusterJob *job, const GpuSpec *gpu, const ClusterLayout *lay);
double cluster_optimizer_time(const ClusterJob *job, const GpuSpec *gpu, const ClusterLayout *lay, double params);
// The tied embedding's gradient all-reduce between the first and last stage (p > 1; 0 when untied).
double cluster_embed_sync_time(const ClusterJob *job, const GpuSpec *gpu, const ClusterLayout *lay);

// The building blocks, for tests and --explain.
double cluster_gemm_time(const GpuSpec *gpu, double M, double N, double K, double batch, int e);
double cluster_wave_efficiency(const GpuSpec *gpu, double M, double N, double batch);
double cluster_allreduce_time(const GpuSpec *gpu, double bw, int n, double bytes);
double cluster_allgather_time(const GpuSpec *gpu, double bw, int n, double bytes);   // = reduce-scatter
#endif
