#include "memory/fusion_search.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// (cost, bytes) lexicographic, with a relative tolerance on the cost: equal recompute work is a tie.
static int cut_better(double cost, size_t bytes, const FusionCut *best) {
    double tol = 1e-12 * (best->cost > 0 ? best->cost : 1.0);
    if (cost < best->cost - tol) return 1;
    return cost <= best->cost + tol && bytes < best->bytes;
}

typedef struct {
    const FusionGraph *g;
    const FusionRates *r;
    size_t budget;
    int order[FG_MAX_TENSORS], n;
    FusionCut best;
    int found;
} Search;

// Decide order[i..] with kept fixed so far (undecided ones off in kept): the bytes only grow as more is
// kept, so kept bounds them from below; fusion_cost_floor of kept ∪ undecided bounds the cost.
static void branch(Search *S, int i, unsigned kept, unsigned undecided) {
    size_t bytes = fusion_bytes(S->g, kept);
    if (bytes > S->budget) return;
    if (S->found && !cut_better(fusion_cost_floor(S->g, S->r, kept | undecided), bytes, &S->best)) return;
    if (i == S->n) {   // a leaf: kept is the set
        double c = fusion_cost(S->g, S->r, kept, NULL, NULL);
        if (!S->found || cut_better(c, bytes, &S->best)) S->best = (FusionCut){kept | S->g->fixed, c, bytes};
        S->found = 1;
        return;
    }
    unsigned bit = 1u << S->order[i];
    branch(S, i + 1, kept | bit, undecided & ~bit);   // keep it first: the cheap sets are found early
    branch(S, i + 1, kept, undecided & ~bit);
}

int fusion_search(const FusionGraph *g, const FusionRates *r, size_t budget, FusionCut *out) {
    Search S = {.g = g, .r = r, .budget = budget};
    for (int i = 0; i < g->n; i++)   // the candidates, largest first (the bytes bound prunes soonest)
        if (!(g->fixed >> i & 1u)) {
            int k = S.n++;
            while (k > 0 && g->bytes[S.order[k - 1]] < g->bytes[i]) { S.order[k] = S.order[k - 1]; k--; }
            S.order[k] = i;
        }
    unsigned all = 0;
    for (int i = 0; i < S.n; i++) all |= 1u << S.order[i];
    branch(&S, 0, 0, all);
    if (S.found) {
        *out = S.best;
        return 0;
    }
    *out = (FusionCut){g->fixed, fusion_cost(g, r, 0, NULL, NULL), fusion_bytes(g, 0)};
    return -1;
}

int fusion_search_brute(const FusionGraph *g, const FusionRates *r, size_t budget, FusionCut *out) {
    int found = 0;
    unsigned free_bits = ((1u << g->n) - 1) & ~g->fixed;
    for (unsigned k = 0;; k = (k - free_bits) & free_bits) {   // every subset of the candidates
        size_t bytes = fusion_bytes(g, k);
        if (bytes <= budget) {
            double c = fusion_cost(g, r, k, NULL, NULL);
            if (!found || cut_better(c, bytes, out)) {
                *out = (FusionCut){k | g->fixed, c, bytes};
                found = 1;
            }
        }
        if (k == free_bits) break;
    }
    if (!found) *out = (FusionCut){g->fixed, fusion_cost(g, r, 0, NULL, NULL), fusion_bytes(g, 0)};
    return found ? 0 : -1;
}

unsigned fusion_mode_kept(const FusionGraph *g, FusionMode md) {
    unsigned kept = 0;
    for (int i = 0; i < g->n; i++)
        if (act_kept(md.kind, 1, md.parts | g->base, g->name[i])) kept |= 1u << i;
    return kept;
}

static int popcount(unsigned x) {
    int n = 0;
    for (; x; x &= x - 1) n++;
    return n;
}

// The parts a mode may carry, in the order fusion_parts_name writes them (and policy_describe).
static const struct { unsigned bit; const char *name; } PARTS[] = {
    {TEMPO_SOFTMAX, "softmax"},     {RECOMPUTE_NORM_OUT, "norm"},          {RECOMPUTE_ACT_OUT, "act"},
    {RECOMPUTE_ATTN_OUT, "attn"},   {RECOMPUTE_QKV_OUT, "qkv"},            {RECOMPUTE_FC1_OUT, "fc1"},
    {RECOMPUTE_PROJ_OUT, "proj"},   {RECOMPUTE_ATTN_MASK, "attn_mask"},    {RECOMPUTE_DROP1_MASK, "drop1_mask"},
    {RECOMPUTE_DROP2_MASK, "drop2_mask"}};
enum { NP = sizeof PARTS / sizeof PARTS[0] };

int fusion_modes(const FusionGraph *g, FusionMode *out) {
    unsigned kept[FUSION_MAX_MODES];   // out[j]'s kept set
    int n = 0;
    for (int kind = RECOMPUTE_NONE; kind <= RECOMPUTE_FULL; kind++)
        for (int np = 0; np <= NP; np++)   // fewest parts first, so a duplicate set keeps the simplest mode
            for (unsigned sub = 0; sub < 1u << NP; sub++) {
                if (popcount(sub) != np || (kind == RECOMPUTE_FULL && sub)) continue;
                FusionMode md = {(LayerRecompute)kind, 0};
                for (int b = 0; b < NP; b++)
                    if (sub >> b & 1u) md.parts |= PARTS[b].bit;
                if ((md.parts & RECOMPUTE_ATTN_OUT) && kind != RECOMPUTE_SELECTIVE) continue;   // selective layers only
                unsigned k = fusion_mode_kept(g, md);
                int dup = 0;
                for (int j = 0; j < n && !dup; j++) dup = kept[j] == k;
                if (!dup && n < FUSION_MAX_MODES) {
                    kept[n] = k;
                    out[n++] = md;
                }
            }
    return n;
}

int fusion_search_modes(const FusionGraph *g, const FusionRates *r, size_t budget, FusionMode *pick, FusionCut *cut) {
    FusionMode modes[FUSION_MAX_MODES];
    int n = fusion_modes(g, modes), found = 0, least = -1;
    size_t least_bytes = 0;
    for (int i = 0; i < n; i++) {
        unsigned kept = fusion_mode_kept(g, modes[i]);
        size_t bytes = fusion_bytes(g, kept);
        double c = fusion_cost(g, r, kept, NULL, NULL);
        if (least < 0 || bytes < least_bytes) {
            least = i;
            least_bytes = bytes;
        }
        if (bytes > budget || (found && !cut_better(c, bytes, cut))) continue;
        *pick = modes[i];
        *cut = (FusionCut){kept | g->fixed, c, bytes};
        found = 1;
    }
    if (!found) {
        *pick = modes[least];
        unsigned kept = fusion_mode_kept(g, *pick);
        *cut = (FusionCut){kept | g->fixed, fusion_cost(g, r, kept, NULL, NULL), least_bytes};
    }
    return found ? 0 : -1;
}

int fusion_parse_rates(const char *text, FusionRates *r) {
    double x[3] = {0.0, 0.0, 0.0};
    int n = 0;
    for (const char *p = text;;) {   // two or three numbers, comma-separated, nothing else
        char *q;
        x[n] = strtod(p, &q);
        if (q == p || !(x[n] > 0) || x[n] > 1e9) return -1;
        n++;
        if (*q == '\0') break;
        if (*q != ',' || n == 3) return -1;
        p = q + 1;
    }
    if (n < 2) return -1;
    *r = (FusionRates){x[0], x[1], x[2]};
    return 0;
}

const char *fusion_parts_name(unsigned parts, char *buf, size_t len) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < NP && k + 1 < len; i++) {
        if (!(parts & PARTS[i].bit)) continue;
        int w = snprintf(buf + k, len - k, "%s%s", k ? "," : "", PARTS[i].name);
        if (w < 0 || (size_t)w >= len - k) break;
        k += (size_t)w;
    }
    if (!k) snprintf(buf, len, "none");
    return buf;
}

const char *fusion_mode_name(FusionMode md, char *buf, size_t len) {
    char parts[96];
    if (md.parts) snprintf(buf, len, "%s+%s", recompute_name(md.kind), fusion_parts_name(md.parts, parts, sizeof parts));
    else snprintf(buf, len, "%s", recompute_name(md.kind));
    return buf;
}
