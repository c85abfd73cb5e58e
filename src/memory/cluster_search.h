// The cluster planner's search: every layout of the cluster's GPUs within the limits, each
// predicted (cluster_model.h), ranked: those that fit first, fastest first.
#ifndef CTRON_CLUSTER_SEARCH_H
#define CTRON_CLUSTER_SEARCH_H
#include "memory/cluster_model.h"

typedef struct {
    int max_t, max_p, max_v, max_mb;   // upper limits (t is also limited to a node)
    int sp;                            // -1: both; 0 or 1: only that
    int zero;                          // -1: both; 0 or 1: only that
    unsigned recompute;                // bit (1 << ClusterRecompute) for each choice searched
    ClusterLayout fix;                 // values every layout searched keeps: those of fix_mask's FIX_* bits
    unsigned fix_mask;
} ClusterLimits;

enum { FIX_T = 1, FIX_P = 2, FIX_V = 4, FIX_D = 8, FIX_MB = 16, FIX_SP = 32, FIX_RC = 64, FIX_ZERO = 128, FIX_FIRST = 256,
       FIX_LAST = 512 };

// The split the search gives p stages when p does not divide the layers: ⌈L/p⌉ layers on each stage
// between the first and the last, which share the rest (the last one more when it is odd) and take
// at most ⌈L/p⌉ each, as Llama 3 405B (126 layers, p = 16: 7, 8, …, 8, 7). 0 with *first, *last, or
// -1 when there is none (every stage needs a layer).
int cluster_uneven_split(long L, int p, int *first, int *last);

void cluster_limits_default(ClusterLimits *lim);

typedef struct {
    ClusterPrediction *c;   // ranked
    int n;
    long invalid;           // combinations ruled out by divisibility
    int n_fit;
} ClusterResults;

// Returns 0; -1 only when out of memory.
int cluster_search(const ClusterJob *job, const GpuSpec *gpu, const ClusterLimits *lim, ClusterResults *out);
void cluster_results_free(ClusterResults *r);
// Ranks fitting layouts first, then by step time (qsort comparator on ClusterPrediction).
int cluster_rank_cmp(const void *a, const void *b);
#endif
