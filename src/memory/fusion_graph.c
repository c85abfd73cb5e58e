#include "memory/fusion_graph.h"
#include <stdio.h>
#include <string.h>
#include "memory/flops.h"
#include "parallel/comm.h"
#include "util/common.h"

// Where an op's FLOPs come from (per micro-batch per rank); pointwise ops have none worth counting.
typedef enum { FL_NONE, FL_QKV, FL_SCORES, FL_PV, FL_FLASH, FL_PROJ, FL_FC1 } FlopSite;

// Which attention a row belongs to: both, the standard one (s×s tensors), or flash's (log-sum-exp only).
enum { ATT_ANY, ATT_STANDARD, ATT_FLASH };

// The block's forward, GPT-2's and llama's in one table: a tensor the family does not have is absent
// (llama has gate and up, no gelu_in or fc2_in; so GeLU's row vanishes: SwiGLU's output is never kept,
// its backward always makes it again). Under flash the core is one op: q, k, v in, its output O (proj_in)
// and the log-sum-exp out (its backward reads both; the s×s tensors never exist). LoRA: each adapted site's
// x·Aᵀ is an output of its linear's op (FC2's and llama's down of their own rows: FC2 is never remade);
// its traffic is priced, its FLOPs (2·s·b·r·(in + out), r ≪ h) are not.
static const struct {
    int attn;
    const char *name;
    FlopSite flops;
    FusionFuse fuse;
    ActName in[3];
    int n_in;
    ActName out[11];   // the most: qkv's
    int n_out;
} OPS[] = {
    {ATT_ANY, "norm1", FL_NONE, FUSE_NO, {ACT_LN1_IN}, 1, {ACT_QKV_IN, ACT_LN1_STATS}, 2},
    {ATT_ANY, "qkv", FL_QKV, FUSE_NO, {ACT_QKV_IN}, 1,
     {ACT_Q, ACT_K, ACT_V, ACT_LORA_QKV, ACT_LORA_Q, ACT_LORA_K, ACT_LORA_V, ACT_Q_NORM_IN, ACT_K_NORM_IN,
      ACT_Q_NORM_STATS, ACT_K_NORM_STATS},
     11},   // LoRA: the x·Aᵀ made with them; Qwen3: the per-head norms' inputs and 1/rms (the norms run in this op)
    {ATT_STANDARD, "scores+softmax", FL_SCORES, FUSE_BACKWARD, {ACT_Q, ACT_K}, 2, {ACT_ATTN_PROB}, 1},
    {ATT_STANDARD, "attn mask", FL_NONE, FUSE_WITH_LEAD, {0}, 0, {ACT_ATTN_MASK}, 1},
    {ATT_STANDARD, "attn dropout", FL_NONE, FUSE_BACKWARD, {ACT_ATTN_PROB, ACT_ATTN_MASK}, 2, {ACT_ATTN_DROP}, 1},
    {ATT_STANDARD, "p·v", FL_PV, FUSE_NO, {ACT_ATTN_DROP, ACT_V}, 2, {ACT_PROJ_IN}, 1},
    {ATT_FLASH, "flash attention", FL_FLASH, FUSE_NO, {ACT_Q, ACT_K, ACT_V}, 3, {ACT_PROJ_IN, ACT_ATTN_LSE}, 2},
    {ATT_ANY, "drop1 mask", FL_NONE, FUSE_NO, {0}, 0, {ACT_DROP1_MASK}, 1},
    {ATT_ANY, "proj+residual", FL_PROJ, FUSE_NO, {ACT_PROJ_IN, ACT_LN1_IN, ACT_DROP1_MASK}, 3,
     {ACT_LN2_IN, ACT_LORA_PROJ, ACT_LORA_O}, 3},
    {ATT_ANY, "norm2", FL_NONE, FUSE_NO, {ACT_LN2_IN}, 1, {ACT_FC1_IN, ACT_LN2_STATS}, 2},
    {ATT_ANY, "fc1", FL_FC1, FUSE_NO, {ACT_FC1_IN}, 1,
     {ACT_GELU_IN, ACT_GATE, ACT_UP, ACT_LORA_FC, ACT_LORA_GATE, ACT_LORA_UP, ACT_LORA_GATE_UP}, 7},
    {ATT_ANY, "gelu", FL_NONE, FUSE_NO, {ACT_GELU_IN}, 1, {ACT_FC2_IN}, 1},
    {ATT_ANY, "fc2 adapter", FL_NONE, FUSE_NO, {ACT_FC2_IN}, 1, {ACT_LORA_FC2}, 1},   // LoRA: x·Aᵀ of FC2's input
    {ATT_ANY, "down adapter", FL_NONE, FUSE_NO, {ACT_GATE, ACT_UP}, 2, {ACT_LORA_DOWN}, 1},   // of SwiGLU(gate, up)
    {ATT_ANY, "drop2 mask", FL_NONE, FUSE_NO, {0}, 0, {ACT_DROP2_MASK}, 1},
};

static double op_flops(const ActShape *sh, FlopSite site) {
    double t = sh->t > 1 ? sh->t : 1, n = (double)sh->s * (double)sh->b, h = (double)sh->h, s = (double)sh->s;
    FlopBlock blk = flops_block_of(sh);
    switch (site) {
    case FL_QKV: return 2.0 * n * h * (h + 2.0 * blk.kv_width) / t;
    case FL_SCORES: case FL_PV: return 2.0 * (double)sh->b * s * s * h / t;
    case FL_FLASH: return 4.0 * (double)sh->b * s * s * h / t;   // the scores and p·v, tile by tile
    case FL_PROJ: return 2.0 * n * h * h / t;
    case FL_FC1: return 2.0 * n * h * blk.ffn * blk.mlp_mats / t;
    default: return 0.0;
    }
}

// The TP traffic one rank repeats when the op runs again in backward (comm.h's ring bytes of an fp32
// [s·b, h] tensor, as model/remat.c moves it): SP all-gathers the input of a remade q/k/v or FC1 GEMM
// (plain TP has every row already); Proj's partial sums are reduce-scattered (SP) or all-reduced (TP).
static double op_comm(const ActShape *sh, FlopSite site) {
    uint64_t full = (uint64_t)sh->s * (uint64_t)sh->b * (uint64_t)sh->h * sizeof(float);
    int t = sh->t > 1 ? sh->t : 1;
    switch (site) {
    case FL_QKV: case FL_FC1: return sh->sp ? (double)comm_bytes_for(COMM_ALLGATHER, t, full) : 0.0;
    case FL_PROJ: return (double)comm_bytes_for(sh->sp ? COMM_REDUCE_SCATTER : COMM_ALLREDUCE, t, full);
    default: return 0.0;
    }
}

unsigned fusion_bit(const FusionGraph *g, ActName name) {
    for (int i = 0; i < g->n; i++)
        if (g->name[i] == name) return 1u << i;
    return 0;
}

static void add_tensor(FusionGraph *g, const ActShape *sh, ActName a) {
    if (g->n >= FG_MAX_TENSORS) ctron_fatal("fusion graph: more than %d tensors at %s", FG_MAX_TENSORS, act_name_str(a));
    g->name[g->n] = a;
    g->bytes[g->n] = act_tensor_bytes(sh, a);
    g->n++;
}

void fusion_graph_build(FusionGraph *g, const ActShape *sh, unsigned base) {
    memset(g, 0, sizeof *g);
    g->base = base;
    int flash = (base & ATTN_FLASH) != 0;
    unsigned stands[ACT_COUNT] = {0};   // the bits an ActName stands for: itself, or an absent one's inputs
    add_tensor(g, sh, ACT_LN1_IN);      // no op's output: the checkpoint, always kept
    g->fixed = stands[ACT_LN1_IN] = 1u;
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++) {
        if (OPS[i].attn != ATT_ANY && (OPS[i].attn == ATT_FLASH) != flash) continue;   // the other attention's
        unsigned in = 0, out = 0;
        double traffic = 0.0;
        for (int k = 0; k < OPS[i].n_in; k++) {
            in |= stands[OPS[i].in[k]];
            traffic += 4.0 * (double)act_elements(sh, OPS[i].in[k]);
        }
        for (int k = 0; k < OPS[i].n_out; k++) {
            ActName a = OPS[i].out[k];
            if (act_tensor_bytes(sh, a) == 0) {   // absent here: who reads it reads this op's inputs
                stands[a] = in;
                continue;
            }
            traffic += 4.0 * (double)act_elements(sh, a);
            stands[a] = 1u << g->n;
            out |= stands[a];
            add_tensor(g, sh, a);
        }
        if (out)
            g->op[g->n_ops++] = (FusionOp){OPS[i].name, OPS[i].fuse, in, out, op_flops(sh, OPS[i].flops), traffic,
                                           op_comm(sh, OPS[i].flops)};
    }
    // What backward reads is what the keep-everything layer keeps (act_kept: with a frozen base (LoRA) a
    // linear's input only where A's gradient or flash reads it; each adapted site's x·Aᵀ, which B's reads).
    // A tensor it does not keep is still a candidate where an op that remakes another reads it (qkv_in
    // for q, k, v under LoRA-FA).
    for (int i = 0; i < g->n; i++)
        if (act_kept(RECOMPUTE_NONE, 1, base, g->name[i])) g->needs |= 1u << i;
}

size_t fusion_bytes(const FusionGraph *g, unsigned kept) {
    size_t sum = 0;
    kept |= g->fixed;
    for (int i = 0; i < g->n; i++)
        if (kept >> i & 1u) sum += g->bytes[i];
    return sum;
}

// Seconds of the op's repeated TP traffic on the link (none where no link rate is given: one process).
static double op_link_sec(const FusionOp *o, const FusionRates *r) {
    return r->link_gbps > 0 ? o->comm / (r->link_gbps * 1e9) : 0.0;
}

double fusion_cost(const FusionGraph *g, const FusionRates *r, unsigned kept, unsigned *ran, unsigned *fused) {
    unsigned avail = kept | g->fixed, want = g->needs & ~avail, run = 0, fu = 0, feeds = 0;
    // Consumers before producers: an op runs when something wanted is its output; its inputs that are
    // not kept are wanted in turn. A fusable op runs fused (inside the backward kernel that reads its
    // outputs) unless an op that runs unfused reads them: then they are made in memory.
    int lead = -1;
    for (int i = g->n_ops - 1; i >= 0; i--) {
        const FusionOp *o = &g->op[i];
        if (!(o->out & want)) continue;
        run |= 1u << i;
        want |= o->in & ~avail;
        if (o->fuse == FUSE_BACKWARD && !(o->out & feeds)) fu |= 1u << i;
        else if (o->fuse != FUSE_WITH_LEAD) feeds |= o->in;
        if (o->fuse == FUSE_BACKWARD && o->flops > 0) lead = i;   // the scores: the fused kernel's own work
    }
    for (int i = 0; i < g->n_ops; i++)   // drawn inside the lead's kernel, or a pass of its own
        if ((run >> i & 1u) && g->op[i].fuse == FUSE_WITH_LEAD && lead >= 0 && (fu >> lead & 1u)) fu |= 1u << i;
    double sec = 0.0;
    for (int i = 0; i < g->n_ops; i++)
        if (run >> i & 1u)
            sec += g->op[i].flops / (r->gemm_gflops * 1e9) + (fu >> i & 1u ? 0.0 : g->op[i].traffic / (r->mem_gbps * 1e9)) +
                   op_link_sec(&g->op[i], r);
    if (ran) *ran = run;
    if (fused) *fused = fu;
    return sec;
}

double fusion_comm_bytes(const FusionGraph *g, unsigned kept) {
    unsigned run;
    FusionRates any = {1.0, 1.0, 0.0};
    fusion_cost(g, &any, kept, &run, NULL);
    double bytes = 0.0;
    for (int i = 0; i < g->n_ops; i++)
        if (run >> i & 1u) bytes += g->op[i].comm;
    return bytes;
}

double fusion_cost_floor(const FusionGraph *g, const FusionRates *r, unsigned kept) {
    unsigned run;
    fusion_cost(g, r, kept, &run, NULL);
    double sec = 0.0;
    for (int i = 0; i < g->n_ops; i++)
        if (run >> i & 1u)
            sec += g->op[i].flops / (r->gemm_gflops * 1e9) +
                   (g->op[i].fuse == FUSE_NO ? g->op[i].traffic / (r->mem_gbps * 1e9) : 0.0) + op_link_sec(&g->op[i], r);
    return sec;
}

const char *fusion_set_describe(const FusionGraph *g, unsigned set, int is_ops, char *buf, size_t len) {
    size_t k = 0;
    buf[0] = '\0';
    int n = is_ops ? g->n_ops : g->n;
    for (int i = 0; i < n && k + 1 < len; i++) {
        if (!(set >> i & 1u)) continue;
        int w = snprintf(buf + k, len - k, "%s%s", k ? "," : "", is_ops ? g->op[i].name : act_name_str(g->name[i]));
        if (w < 0 || (size_t)w >= len - k) break;
        k += (size_t)w;
    }
    if (!k) snprintf(buf, len, "-");
    return buf;
}
