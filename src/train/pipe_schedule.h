// Pipeline schedules (DESIGN.md §9): which (micro-batch, chunk, forward|backward) units each stage
// runs and in what order, the activation slot each unit uses, a simulator of the resulting timeline
// (the theory the measured bubble is compared against) and a stage's activation peak over its order.
// Pure logic: no MPI, no model. The trainer and the analytic model share it so they agree exactly.
//
// p stages (ranks r = 0..p−1), L layers, m micro-batches per step, V model chunks per rank. Global
// chunk g = v·p + r (v: the rank's local chunk) holds layers [g·n, (g+1)·n), n = L/(p·V).
#ifndef CTRON_PIPE_SCHEDULE_H
#define CTRON_PIPE_SCHEDULE_H
#include <stddef.h>

typedef enum { PIPE_1F1B, PIPE_INTERLEAVED, PIPE_GPIPE, PIPE_LAYERED } PipeScheduleKind;
typedef struct { PipeScheduleKind kind; int p, V, m, L; } PipeSpec;   // V: chunks per rank
typedef struct { int mb, chunk, backward; } PipeUnit;                // chunk: the rank's local chunk v

// Parses "1f1b"|"interleaved"|"gpipe"|"layered"; -1 when unknown. And the name back.
int pipe_schedule_parse(const char *s, PipeScheduleKind *out);
const char *pipe_schedule_name(PipeScheduleKind k);

// Fills a spec from the user's flags: virtual_stages is --virtual-stages (0 = not given), m the
// micro-batches (--grad-accum). 1f1b and gpipe: V = 1 (m < p is accepted: the bubble grows);
// interleaved: V = virtual_stages ≥ 2, p ≥ 2 and m a multiple of p (Megatron's rule); layered
// (modular pipeline, layer l on stage l mod p): V = L/p. --virtual-stages with any schedule but
// interleaved is an error. Returns 0, or -1 with one message in err naming the rule and the values.
int pipe_spec_init(PipeSpec *s, PipeScheduleKind kind, int p, int virtual_stages, int m, int L, char *err,
                   size_t errlen);

int pipe_layers_per_chunk(const PipeSpec *s);                       // n = L/(pV)
int pipe_chunk_first_layer(const PipeSpec *s, int rank, int v);     // (v·p + rank)·n
int pipe_stage_of_layer(const PipeSpec *s, int layer);              // (layer / n) mod p
int pipe_chunk_of_layer(const PipeSpec *s, int layer);              // local chunk v = (layer / n) / p
int pipe_units_per_rank(const PipeSpec *s);                         // 2·m·V

// This rank's units in execution order (out has pipe_units_per_rank entries).
//  gpipe:       F(0..m−1), then B(0..m−1) (backwards first-in-first-out, the 1F1B accumulation order).
//  1f1b:        w = min(p − r − 1, m) forwards, then F(w+i), B(i) alternating, then the last w B's.
//  interleaved: Megatron's interleaved 1F1B over N = m·V chunk-units per direction: forward unit k is
//               chunk (k mod pV)/p of micro-batch (k / pV)·p + k mod p, backward unit k the same with
//               chunk V − 1 − (k mod pV)/p; w = min(2(p − r − 1) + (V − 1)p, N) forwards first.
//  layered:     every micro-batch through chunk 0, then chunk 1, …; backwards from chunk V−1 down.
void pipe_units(const PipeSpec *s, int rank, PipeUnit *out);

// The activation context each forward unit uses: the lowest slot free at that point (a slot is taken
// at F(mb, v) and freed after B(mb, v); mb, v ≥ 0). slot_of[i] is unit i's slot: a B gets its F's slot, or −1
// when no F of it came before. Returns the number of slots (= the most units in flight at once).
int pipe_assign_slots(const PipeUnit *units, int n_units, int *slot_of);

#define PIPE_SIM_MAX_RANKS 64
typedef struct {
    double makespan;                        // time until the last unit of any rank finishes
    double busy[PIPE_SIM_MAX_RANKS];        // per rank: Σ unit costs
    double idle[PIPE_SIM_MAX_RANKS];        // makespan − busy
    double bubble[PIPE_SIM_MAX_RANKS];      // idle / busy
    int in_flight[PIPE_SIM_MAX_RANKS];      // most (mb, chunk) units forwarded but not yet backwarded
} PipeSim;

// Every rank runs pipe_units in order; a unit starts when its rank is free and its input has
// arrived (transfers take 0, sends never block). F costs t_f·n, B costs t_b·n. F(mb, g) needs
// F(mb, g−1); B(mb, g) needs B(mb, g+1) (the last chunk: its own F). Returns 0, or −1 with a
// message naming a stuck rank and unit when the orders deadlock, a B precedes its own F, a unit
// repeats or p > PIPE_SIM_MAX_RANKS.
int pipe_simulate(const PipeSpec *s, double t_f, double t_b, PipeSim *out, char *err, size_t errlen);
// The same over given orders: units holds p rows of pipe_units_per_rank units, rank r's at r·2mV
// (pipe_simulate passes pipe_units; tests pass broken orders).
int pipe_simulate_units(const PipeSpec *s, const PipeUnit *units, double t_f, double t_b, PipeSim *out, char *err,
                        size_t errlen);
// The textbook bubble fraction: (p−1)/m for 1f1b and gpipe, (p−1)/(V·m) for interleaved and layered.
double pipe_bubble_theory(const PipeSpec *s);

// What one (micro-batch, chunk) context holds: `stored` from the end of its forward to the start of
// its backward, and `backward_peak`, the most it holds at any point of its backward (≥ stored only
// when backward recomputes).
typedef struct { size_t stored, backward_peak; } PipeUnitBytes;
typedef PipeUnitBytes (*PipeBytesFn)(int mb, int chunk, int slot, void *user);
// The rank's peak over its schedule: at F, held += stored (peak = max(peak, held)); at B,
// peak = max(peak, held − stored + backward_peak), then held −= stored.
size_t pipe_stage_peak(const PipeSpec *s, int rank, PipeBytesFn fn, void *user);
#endif
