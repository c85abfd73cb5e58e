// This machine's memory bandwidth, for the fusion search's cost of a pointwise pass (memory/fusion_graph.h):
// a parallel copy of 64 MiB (read + write counted), best of 5 after a warm-up; about 0.1 s.
#ifndef CTRON_MEMBW_H
#define CTRON_MEMBW_H
// GB/s with `threads` OpenMP threads (≤ 0: all).
double membw_measure_gbps(int threads);
#endif
