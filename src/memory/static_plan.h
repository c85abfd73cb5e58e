// Static memory planner ("offsets from lifetimes", after Lamprou et al.). A training step's
// schedule is fixed, so every buffer it allocates (saved activations, temporaries) has a known
// lifetime in event time. Record the step's allocations and frees once, in order; then solve gives
// every buffer a byte offset in one block so that no two buffers live at the same time share bytes.
// Solve is greedy by size with best fit (as TensorFlow Lite's arena planner): largest buffers
// first, each into the smallest gap left by the placed buffers it is live with. The plan's peak is
// reported against the lower bound (the most bytes ever live at once: no placement does better)
// and the naive sum (every buffer its own memory).
#ifndef CTRON_STATIC_PLAN_H
#define CTRON_STATIC_PLAN_H
#include <stddef.h>

// One buffer of a step: live over event times [start, end) (end = -1 while still live), placed at offset.
// kind: the caller's category (0 saved activation, 1 temporary); tag: the caller's id (e.g. a name).
typedef struct { size_t bytes; long start, end; int kind; int tag; size_t offset; } PlanBuf;

typedef struct {
    PlanBuf *bufs; int n, cap;
    long clock;             // next event time
    size_t align;           // every buffer's size is rounded up to this (e.g. 64) for placement and bounds
    size_t peak;            // after solve: max over buffers of offset + aligned bytes (the block's size)
    size_t lower_bound;     // after solve: max over time of the sum of aligned bytes live at that time
    long lower_bound_time;  // after solve: the first event time at which lower_bound bytes are live
    size_t naive_sum;       // after solve: sum of aligned bytes of all buffers (every buffer its own memory)
} StaticPlan;

void static_plan_init(StaticPlan *p, size_t align);           // align 0 is taken as 1
void static_plan_free(StaticPlan *p);
void static_plan_reset(StaticPlan *p);                         // forget the buffers, keep the memory
int  static_plan_alloc(StaticPlan *p, size_t bytes, int kind, int tag);  // start = clock++; returns the id
void static_plan_release(StaticPlan *p, int id);               // end = clock++ (fatal if id invalid or already released)
// Buffers still live at solve time are treated as live until the end (end = clock); their end
// field stays -1, so recording may go on and solve be called again.
// Assigns offsets; returns peak. Deterministic (same input -> same offsets). O(n^2) in a tight
// loop: about 0.2 s for 20,000 buffers at -O2.
size_t static_plan_solve(StaticPlan *p);
// 1 when no two buffers with overlapping lifetimes overlap in [offset, offset + aligned bytes).
// O(n log n + k), k the number of pairs of buffers live together.
int  static_plan_valid(const StaticPlan *p);
// Aligned bytes live at event time t (start <= t < end) of the given kind (kind < 0: all kinds);
// at t = lower_bound_time the total is lower_bound, and per kind it says what the peak is made of.
size_t static_plan_live_bytes(const StaticPlan *p, long t, int kind);
#endif
