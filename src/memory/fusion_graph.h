// The block's forward as a graph for the fusion-aware recompute search (He & Yu, "Transcending
// Runtime-Memory Tradeoffs in Checkpointing by being Fusion Aware"; docs/MEMORY.md): ops are rows of a
// table (fusion_graph.c), the tensors between them are the candidates to keep, each with its bytes per
// layer from the analytic model (memory_model.h: the ledger's names and sizes, any family, TP/SP, dtype,
// mask mode). A kept set K costs the time to recompute, in backward, every op whose output backward
// reads and K lacks, and the ops those need in turn; the layer's input (ln1_in) is always kept.
#ifndef CTRON_FUSION_GRAPH_H
#define CTRON_FUSION_GRAPH_H
#include <stddef.h>
#include "arch/lora.h"
#include "memory/memory_model.h"

enum { FG_MAX_TENSORS = 32, FG_MAX_OPS = 16 };   // tensors are bits of an unsigned

// What one op costs to run again: FLOPs at the GEMM rate plus its memory traffic (fp32 inputs read and
// outputs written) at the memory bandwidth, unless it is fused into its consumer's backward kernel
// (then its intermediates never leave the cache: FLOPs only), plus under TP the collective it repeats
// (its comm bytes at the link rate).
// The fusions the CPU backend has (and only these count): the selective recompute inside the attention
// backward (scores, softmax and the dropout mask drawn again per head, in scratch), and Tempo's re-forming
// of the dropped probabilities from the kept ones and the mask inside the standard attention backward.
// None for the norms, GeLU or SwiGLU: their recompute is a pass of its own over memory.
typedef enum {
    FUSE_NO,          // runs as its own kernel: FLOPs and memory traffic
    FUSE_BACKWARD,    // fused when only backward kernels read its outputs (no unfused op that runs does)
    FUSE_WITH_LEAD,   // fused when the group's lead op (the scores) runs fused: the attention mask is drawn
                      // inside the selective kernel, but regenerating it alone is a pass that writes it
} FusionFuse;

typedef struct {
    const char *name;
    int fuse;         // FusionFuse: how the backend can run it inside a backward kernel
    unsigned in, out; // bits over the graph's tensors (absent tensors resolved to what they stand for)
    double flops, traffic;
    double comm;      // bytes one rank sends again on the TP link (t > 1): SP's all-gather of a remade GEMM's
                      // input (q/k/v, FC1), Proj's reduce-scatter (SP) or all-reduce; never fused
} FusionOp;

typedef struct {
    int n;                              // tensors present in this configuration (bytes > 0)
    ActName name[FG_MAX_TENSORS];
    size_t bytes[FG_MAX_TENSORS];       // act_tensor_bytes: per layer, per rank
    int n_ops;
    FusionOp op[FG_MAX_OPS];            // topological order (the forward's)
    unsigned needs;                     // tensors backward reads
    unsigned fixed;                     // always kept: the layer's input, the checkpoint
    unsigned base;                      // the run's own policy bits (ATTN_FLASH) every mode carries
} FusionGraph;

// link_gbps: the TP link's rate, which prices each op's comm bytes (0: not priced; t = 1 has none).
typedef struct { double gemm_gflops, mem_gbps, link_gbps; } FusionRates;

// The run's policy bits the graph takes as given (fusion_graph_build's base): flash, and LoRA's frozen base,
// LoRA-FA and the adapted sites.
#define FUSION_BASE_BITS \
    (ATTN_FLASH | LORA_FROZEN | LORA_FA | ((1u << LORA_SITES) - 1u) << LORA_TARGET_SHIFT | QK_NORM_REBUILD)
// The graph of one layer of sh's family and layout. Tensors of 0 bytes (no dropout: the masks and
// attn_drop; regenerated masks) are not candidates: an op reading one reads what it stands for instead
// (attn_drop without dropout is attn_prob). base: the run's policy bits that shape the block, not chosen
// by the search (FUSION_BASE_BITS: ATTN_FLASH, flash's core, which keeps O and the log-sum-exp, no s×s
// tensors; LoRA's: each adapted site's x·Aᵀ a tensor its linear's op makes, and backward reads a frozen
// linear's input only where A's gradient does).
void fusion_graph_build(FusionGraph *g, const ActShape *sh, unsigned base);
// The tensor's bit in g (0 when it is not a candidate here).
unsigned fusion_bit(const FusionGraph *g, ActName name);
// Bytes a layer keeps under kept (the fixed input included).
size_t fusion_bytes(const FusionGraph *g, unsigned kept);
// Seconds per layer to recompute what kept lacks; *ran (may be NULL): bits over ops that run, *fused
// (may be NULL): those that run fused (a fusable op whose outputs only backward kernels read).
double fusion_cost(const FusionGraph *g, const FusionRates *r, unsigned kept, unsigned *ran, unsigned *fused);
// Bytes one rank sends again on the TP link per layer to recompute what kept lacks (the comm of the ops
// that run; 0 at t = 1).
double fusion_comm_bytes(const FusionGraph *g, unsigned kept);
// A floor under fusion_cost of every kept set K ⊆ kept: the ops that run under kept run under every
// such K, each at least its FLOPs (and its traffic if it can never fuse). Fusion makes the cost itself
// not quite monotone (the attention mask drawn again alone is a pass; inside the selective kernel it
// is free), so the search bounds with this.
double fusion_cost_floor(const FusionGraph *g, const FusionRates *r, unsigned kept);
// "q,k,v,proj_in" — the names of a set of tensors (or ops with is_ops).
const char *fusion_set_describe(const FusionGraph *g, unsigned set, int is_ops, char *buf, size_t len);
#endif
