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
} ClusterLimits;

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
