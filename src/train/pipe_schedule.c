#include "train/pipe_schedule.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/common.h"

static const char *const NAMES[] = {"1f1b", "interleaved", "gpipe", "layered"};

int pipe_schedule_parse(const char *s, PipeScheduleKind *out) {
    for (int k = 0; k < 4; k++)
        if (s && !strcmp(s, NAMES[k])) return *out = (PipeScheduleKind)k, 0;
    return -1;
}

const char *pipe_schedule_name(PipeScheduleKind k) {
    return (unsigned)k < 4 ? NAMES[k] : "unknown";
}

int pipe_spec_init(PipeSpec *s, PipeScheduleKind kind, int p, int virtual_stages, int m, int L, char *err,
                   size_t errlen) {
    if ((unsigned)kind >= 4) return snprintf(err, errlen, "unknown pipeline schedule %d", (int)kind), -1;
    const char *name = NAMES[kind];
    if (p < 1) return snprintf(err, errlen, "--pp must be >= 1 (got %d)", p), -1;
    if (m < 1) return snprintf(err, errlen, "--grad-accum must be >= 1 (got %d)", m), -1;
    if (L < 1) return snprintf(err, errlen, "L = %d layers: the model needs at least one", L), -1;
    if (virtual_stages != 0 && kind != PIPE_INTERLEAVED)
        return snprintf(err, errlen, "--virtual-stages %d needs --pp-schedule interleaved (got %s)", virtual_stages,
                        name), -1;
    int V = 1;
    if (kind == PIPE_INTERLEAVED) {
        if (p < 2) return snprintf(err, errlen, "--pp-schedule interleaved needs --pp >= 2 (got %d)", p), -1;
        if (virtual_stages < 2) {
            if (virtual_stages == 0)
                return snprintf(err, errlen, "--pp-schedule interleaved needs --virtual-stages V >= 2 (not given)"), -1;
            return snprintf(err, errlen, "--pp-schedule interleaved needs --virtual-stages V >= 2 (got %d)",
                            virtual_stages), -1;
        }
        V = virtual_stages;
        if (L % ((long)p * V))
            return snprintf(err, errlen, "L = %d layers is not divisible by P·V = %ld (--pp %d × --virtual-stages %d)",
                            L, (long)p * V, p, V), -1;
        // Megatron's rule: the forward order walks the chunks in groups of p micro-batches.
        if (m % p)
            return snprintf(err, errlen,
                            "--pp-schedule interleaved needs the micro-batches (--grad-accum %d) to be a multiple of "
                            "--pp %d", m, p), -1;
    } else {
        if (L % p) return snprintf(err, errlen, "L = %d layers is not divisible by P = %d (--pp %d)", L, p, p), -1;
        if (kind == PIPE_LAYERED) V = L / p;   // one layer per chunk: layer l on stage l mod p
    }
    if (2LL * m * V > INT_MAX / 2)
        return snprintf(err, errlen, "%d micro-batches × %d chunks per rank is too many units to schedule", m, V), -1;
    *s = (PipeSpec){.kind = kind, .p = p, .V = V, .m = m, .L = L};
    return 0;
}

int pipe_layers_per_chunk(const PipeSpec *s) { return s->L / (s->p * s->V); }
int pipe_chunk_first_layer(const PipeSpec *s, int rank, int v) { return (v * s->p + rank) * pipe_layers_per_chunk(s); }
int pipe_stage_of_layer(const PipeSpec *s, int layer) { return layer / pipe_layers_per_chunk(s) % s->p; }
int pipe_chunk_of_layer(const PipeSpec *s, int layer) { return layer / pipe_layers_per_chunk(s) / s->p; }
int pipe_units_per_rank(const PipeSpec *s) { return 2 * s->m * s->V; }

// The k-th forward (backward) unit of a schedule: every schedule here is "w forwards, then one
// forward and one backward alternating, then the remaining backwards" over its own unit orders.
static PipeUnit nth_unit(const PipeSpec *s, int k, int backward) {
    int p = s->p, V = s->V, m = s->m;
    switch (s->kind) {
    case PIPE_INTERLEAVED: {
        int v = k % (p * V) / p;
        return (PipeUnit){.mb = k / (p * V) * p + k % p, .chunk = backward ? V - 1 - v : v, .backward = backward};
    }
    case PIPE_LAYERED:   // chunk by chunk, every micro-batch through each; backwards from the last chunk
        return (PipeUnit){.mb = k % m, .chunk = backward ? V - 1 - k / m : k / m, .backward = backward};
    default:
        return (PipeUnit){.mb = k, .chunk = 0, .backward = backward};
    }
}

static int warmup_forwards(const PipeSpec *s, int rank) {
    int N = s->m * s->V, w;
    switch (s->kind) {
    case PIPE_1F1B: w = s->p - rank - 1; break;
    // The general formula also holds at m == p (the simulator finds no deadlock: sends never block
    // here), so Megatron's all-forwards-first special case for m == p is not needed.
    case PIPE_INTERLEAVED: w = 2 * (s->p - rank - 1) + (s->V - 1) * s->p; break;
    default: w = N;   // gpipe and layered: every forward first
    }
    return w < N ? w : N;
}

void pipe_units(const PipeSpec *s, int rank, PipeUnit *out) {
    int N = s->m * s->V, w = warmup_forwards(s, rank), j = 0;
    for (int k = 0; k < w; k++) out[j++] = nth_unit(s, k, 0);
    for (int i = 0; i < N - w; i++) {
        out[j++] = nth_unit(s, w + i, 0);
        out[j++] = nth_unit(s, i, 1);
    }
    for (int i = N - w; i < N; i++) out[j++] = nth_unit(s, i, 1);
}

int pipe_assign_slots(const PipeUnit *units, int n_units, int *slot_of) {
    // (mb, chunk) → the slot its F took (−1: none open); sized from the largest indices present.
    int max_mb = 0, max_chunk = 0;
    for (int i = 0; i < n_units; i++) {
        if (units[i].mb > max_mb) max_mb = units[i].mb;
        if (units[i].chunk > max_chunk) max_chunk = units[i].chunk;
    }
    size_t n_keys = (size_t)(max_mb + 1) * (size_t)(max_chunk + 1);
    int *open = xmalloc(n_keys * sizeof(int));
    for (size_t k = 0; k < n_keys; k++) open[k] = -1;
    unsigned char *used = xcalloc((size_t)n_units + 1);
    int n_slots = 0;
    for (int i = 0; i < n_units; i++) {
        size_t key = (size_t)units[i].mb * (size_t)(max_chunk + 1) + (size_t)units[i].chunk;
        if (!units[i].backward) {
            int slot = 0;
            while (used[slot]) slot++;
            used[slot] = 1;
            open[key] = slot_of[i] = slot;
            if (slot + 1 > n_slots) n_slots = slot + 1;
        } else {
            slot_of[i] = open[key];
            if (open[key] >= 0) used[open[key]] = 0;
            open[key] = -1;
        }
    }
    free(open);
    free(used);
    return n_slots;
}

static char unit_letter(const PipeUnit *u) { return u->backward ? 'B' : 'F'; }

int pipe_simulate(const PipeSpec *s, double t_f, double t_b, PipeSim *out, char *err, size_t errlen) {
    int U = pipe_units_per_rank(s);
    PipeUnit *units = xmalloc((size_t)s->p * (size_t)U * sizeof(PipeUnit));
    for (int r = 0; r < s->p; r++) pipe_units(s, r, units + (size_t)r * U);
    int rc = pipe_simulate_units(s, units, t_f, t_b, out, err, errlen);
    free(units);
    return rc;
}

int pipe_simulate_units(const PipeSpec *s, const PipeUnit *units, double t_f, double t_b, PipeSim *out, char *err,
                        size_t errlen) {
    int p = s->p, V = s->V, m = s->m, G = p * V, U = pipe_units_per_rank(s), n = pipe_layers_per_chunk(s);
    memset(out, 0, sizeof *out);
    if (p > PIPE_SIM_MAX_RANKS)
        return snprintf(err, errlen, "the simulator handles at most %d stages (got --pp %d)", PIPE_SIM_MAX_RANKS, p), -1;
    // Finish times of F(mb, g) and B(mb, g); −1 until they have run.
    double *f_end = xmalloc((size_t)m * G * sizeof(double)), *b_end = xmalloc((size_t)m * G * sizeof(double));
    for (size_t i = 0; i < (size_t)m * G; i++) f_end[i] = b_end[i] = -1;
    int next[PIPE_SIM_MAX_RANKS] = {0}, held[PIPE_SIM_MAX_RANKS] = {0}, rc = 0;
    double free_at[PIPE_SIM_MAX_RANKS] = {0};
    // Each rank's start times depend only on its own previous unit and finished inputs, so running
    // ranks as far as they can until none moves gives the timeline (or the deadlock) in any order.
    for (int moved = 1; moved && !rc;) {
        moved = 0;
        for (int r = 0; r < p && !rc; r++) {
            for (; next[r] < U; next[r]++) {
                const PipeUnit *u = &units[(size_t)r * U + next[r]];
                if (u->mb < 0 || u->mb >= m || u->chunk < 0 || u->chunk >= V) {
                    snprintf(err, errlen, "rank %d unit %d: %c(mb %d, chunk %d) is out of range", r, next[r],
                             unit_letter(u), u->mb, u->chunk);
                    rc = -1;
                    break;
                }
                int g = u->chunk * p + r;
                double *mine = (u->backward ? b_end : f_end) + (size_t)u->mb * G + g, input;
                if (*mine >= 0) {
                    snprintf(err, errlen, "rank %d unit %d: %c(mb %d, chunk %d) runs twice", r, next[r],
                             unit_letter(u), u->mb, u->chunk);
                    rc = -1;
                    break;
                }
                if (!u->backward) {
                    input = g > 0 ? f_end[(size_t)u->mb * G + g - 1] : 0;
                } else {
                    double own_f = f_end[(size_t)u->mb * G + g];
                    if (own_f < 0) {
                        snprintf(err, errlen, "rank %d unit %d: B(mb %d, chunk %d) comes before its own F", r,
                                 next[r], u->mb, u->chunk);
                        rc = -1;
                        break;
                    }
                    input = g < G - 1 ? b_end[(size_t)u->mb * G + g + 1] : own_f;
                }
                if (input < 0) break;   // waits for another rank
                double start = free_at[r] > input ? free_at[r] : input, cost = (u->backward ? t_b : t_f) * n;
                *mine = free_at[r] = start + cost;
                out->busy[r] += cost;
                held[r] += u->backward ? -1 : 1;
                if (held[r] > out->in_flight[r]) out->in_flight[r] = held[r];
                moved = 1;
            }
        }
    }
    for (int r = 0; r < p && !rc; r++) {
        if (next[r] == U) continue;
        const PipeUnit *u = &units[(size_t)r * U + next[r]];
        int g = u->chunk * p + r, from = u->backward ? g + 1 : g - 1;
        snprintf(err, errlen, "the pipeline deadlocks: rank %d waits at unit %d, %c(mb %d, chunk %d), for "
                 "%c(mb %d, chunk %d) of rank %d", r, next[r], unit_letter(u), u->mb, u->chunk, unit_letter(u),
                 u->mb, from / p, from % p);
        rc = -1;
    }
    if (!rc) {
        for (int r = 0; r < p; r++) out->makespan = free_at[r] > out->makespan ? free_at[r] : out->makespan;
        for (int r = 0; r < p; r++) {
            out->idle[r] = out->makespan - out->busy[r];
            out->bubble[r] = out->busy[r] > 0 ? out->idle[r] / out->busy[r] : 0;
        }
    }
    free(f_end);
    free(b_end);
    return rc;
}

double pipe_bubble_theory(const PipeSpec *s) {
    double chunks = s->kind == PIPE_INTERLEAVED || s->kind == PIPE_LAYERED ? s->V : 1;
    return (s->p - 1) / (chunks * s->m);
}

size_t pipe_stage_peak(const PipeSpec *s, int rank, PipeBytesFn fn, void *user) {
    int U = pipe_units_per_rank(s);
    PipeUnit *units = xmalloc((size_t)U * sizeof(PipeUnit));
    int *slot = xmalloc((size_t)U * sizeof(int));
    pipe_units(s, rank, units);
    pipe_assign_slots(units, U, slot);
    size_t held = 0, peak = 0;
    for (int i = 0; i < U; i++) {
        PipeUnitBytes b = fn(units[i].mb, units[i].chunk, slot[i], user);
        if (!units[i].backward) {
            held += b.stored;
            if (held > peak) peak = held;
        } else {
            size_t during = held - b.stored + b.backward_peak;
            if (during > peak) peak = during;
            held -= b.stored;
        }
    }
    free(units);
    free(slot);
    return peak;
}
