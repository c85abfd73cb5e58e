// ctron plan --cluster: the layout search on a GPU cluster (docs/PLANNER.md).
#ifndef CTRON_CLUSTER_CMD_H
#define CTRON_CLUSTER_CMD_H
#include <stdio.h>
#include "memory/cluster_search.h"

void cli_cluster_usage(FILE *f);
int cli_cluster_main(int argc, char **argv);
// "t=8,p=8,v=3,d=1,mb=1,sp=on,recompute=selective,zero=1" (and first=N,last=N): keys in any order; v,
// mb default 1, sp off, zero 0, recompute selective, d the GPUs left over by t·p. *given (may be NULL)
// gets the FIX_* bits of the keys the text names. Returns 0, or -1 with err.
int cluster_layout_parse(const char *text, const ClusterJob *job, ClusterLayout *lay, unsigned *given, char *err,
                         size_t errlen);
// The report (cluster_report.c): the ranked table, the JSON object, --explain of one prediction
// (memory of every stage: pred->mem), the SVG of the top layouts' time parts, --check's table.
void cluster_print_table(FILE *f, const ClusterJob *job, const GpuSpec *gpu, const ClusterPrediction *c, int n);
void cluster_print_json(FILE *f, const ClusterPrediction *c, int n);
void cluster_print_explain(FILE *f, const ClusterJob *job, const GpuSpec *gpu, const ClusterPrediction *pred);
int cluster_svg_save(const char *path, const ClusterJob *job, const GpuSpec *gpu, const ClusterPrediction *c, int n,
                     char *err, size_t errlen);
void cluster_layout_str(const ClusterLayout *lay, char *buf, size_t len);
#endif
