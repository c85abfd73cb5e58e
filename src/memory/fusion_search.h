// The fusion-aware recompute search (docs/MEMORY.md): the cheapest kept set of a layer's tensors under a
// per-layer byte budget, over the block's graph (memory/fusion_graph.h). Exact: branch and bound over
// the ~12-17 candidates (recompute time only falls as more is kept, bytes only rise), checked against
// every subset by tests/test_fusion_search.c. The executable search takes the best of the kept sets the
// executor has: none, selective or full per layer, with Tempo's softmax–dropout fusion (exact) and the
// parts of policy.h: RECOMPUTE_NORM_OUT (the norms' outputs), RECOMPUTE_ACT_OUT (GeLU's output), on
// selective RECOMPUTE_ATTN_OUT (the attention's output), RECOMPUTE_QKV_OUT (q, k, v), RECOMPUTE_FC1_OUT (the
// MLP's inner tensors), RECOMPUTE_PROJ_OUT (ln2_in) and one part per dropout mask (RECOMPUTE_ATTN_MASK,
// RECOMPUTE_DROP1_MASK, RECOMPUTE_DROP2_MASK: that mask drawn again alone).
#ifndef CTRON_FUSION_SEARCH_H
#define CTRON_FUSION_SEARCH_H
#include "memory/fusion_graph.h"
#include "model/policy.h"

typedef struct {
    unsigned kept;     // bits over the graph's tensors (the fixed input included)
    double cost;       // seconds per layer recomputed in backward (fusion_cost)
    size_t bytes;      // per layer (fusion_bytes)
} FusionCut;

// The least cost (then the fewest bytes) with bytes <= budget: 0, or -1 when even keeping only the
// layer input does not fit (*out: that set).
int fusion_search(const FusionGraph *g, const FusionRates *r, size_t budget, FusionCut *out);
// The same by trying every subset (the tests' reference).
int fusion_search_brute(const FusionGraph *g, const FusionRates *r, size_t budget, FusionCut *out);

// An execution mode: a layer's recompute kind and the parts (TEMPO_SOFTMAX, RECOMPUTE_NORM_OUT,
// RECOMPUTE_ACT_OUT, RECOMPUTE_QKV_OUT, RECOMPUTE_FC1_OUT, RECOMPUTE_PROJ_OUT, the masks' RECOMPUTE_ATTN_MASK,
// RECOMPUTE_DROP1_MASK and RECOMPUTE_DROP2_MASK; RECOMPUTE_ATTN_OUT on selective) on top of it.
typedef struct { LayerRecompute kind; unsigned parts; } FusionMode;
enum { FUSION_MAX_MODES = 1600 };   // none: 2^9 part sets (no attn), selective: 2^10, full: 1
#define FUSION_PARTS (TEMPO_SOFTMAX | RECOMPUTE_NORM_OUT | RECOMPUTE_ACT_OUT | RECOMPUTE_ATTN_OUT | RECOMPUTE_QKV_OUT | \
                      RECOMPUTE_FC1_OUT | RECOMPUTE_PROJ_OUT | RECOMPUTE_ATTN_MASK | RECOMPUTE_DROP1_MASK |            \
                      RECOMPUTE_DROP2_MASK)
// What a mode keeps, as the analytic model says (act_kept): bits over g's tensors.
unsigned fusion_mode_kept(const FusionGraph *g, FusionMode md);
// The modes with distinct kept sets (the fewest parts first among equal ones). Returns the count.
int fusion_modes(const FusionGraph *g, FusionMode *out);
// The best executable mode under the budget (least cost, then fewest bytes, then fewest parts): 0, or -1
// with the mode of fewest bytes.
int fusion_search_modes(const FusionGraph *g, const FusionRates *r, size_t budget, FusionMode *pick, FusionCut *cut);
// "full", "selective+norm", "none+norm,act", "none+softmax", "selective+norm,act,attn", "selective+norm,qkv,fc1,proj",
// "selective+norm,fc1,drop1_mask"
const char *fusion_mode_name(FusionMode md, char *buf, size_t len);
// --search-rates GFLOPS,GBPS[,LINK_GBPS]: positive, finite (<= 1e9) numbers; link_gbps 0 when not given.
// Returns 0, or -1 (r untouched).
int fusion_parse_rates(const char *text, FusionRates *r);
// The parts alone ("norm,act", "softmax", "qkv,fc1,proj", "drop1_mask"; "none").
const char *fusion_parts_name(unsigned parts, char *buf, size_t len);
#endif
