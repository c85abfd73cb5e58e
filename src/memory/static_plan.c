#include "memory/static_plan.h"
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include "util/common.h"

static size_t aligned(const StaticPlan *p, const PlanBuf *b) { return align_up(b->bytes, p->align); }

// A buffer still live when the plan is read lives to the end of the recording.
static long buf_end(const StaticPlan *p, const PlanBuf *b) { return b->end < 0 ? p->clock : b->end; }

void static_plan_init(StaticPlan *p, size_t align) {
    memset(p, 0, sizeof *p);
    p->align = align ? align : 1;
}

void static_plan_free(StaticPlan *p) {
    free(p->bufs);
    p->bufs = NULL;
    p->n = p->cap = 0;
}

void static_plan_reset(StaticPlan *p) {
    p->n = 0;
    p->clock = 0;
    p->peak = p->lower_bound = p->naive_sum = 0;
    p->lower_bound_time = 0;
}

static void grow(StaticPlan *p) {
    if (p->cap > INT_MAX / 2) ctron_fatal("static plan: too many buffers (%d)", p->cap);
    int cap = p->cap ? 2 * p->cap : 256;
    p->bufs = xgrow(p->bufs, (size_t)p->n * sizeof *p->bufs, (size_t)cap * sizeof *p->bufs);
    p->cap = cap;
}

int static_plan_alloc(StaticPlan *p, size_t bytes, int kind, int tag) {
    if (p->n == p->cap) grow(p);
    p->bufs[p->n] = (PlanBuf){.bytes = bytes, .start = p->clock++, .end = -1, .kind = kind, .tag = tag};
    return p->n++;
}

void static_plan_release(StaticPlan *p, int id) {
    if (id < 0 || id >= p->n) ctron_fatal("static plan: release of unknown buffer %d (%d recorded)", id, p->n);
    if (p->bufs[id].end >= 0) ctron_fatal("static plan: buffer %d (tag %d) released twice", id, p->bufs[id].tag);
    p->bufs[id].end = p->clock++;
}

// ---- the sweep over event times (lower bound, validity) ----

typedef struct { long t; int id; int is_start; } Event;

static int event_cmp(const void *a, const void *b) {
    const Event *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    // ends before starts: lifetimes are half-open, so a buffer ending at t is not live with one starting at t
    if (x->is_start != y->is_start) return x->is_start - y->is_start;
    return (x->id > y->id) - (x->id < y->id);
}

static Event *sorted_events(const StaticPlan *p) {
    Event *ev = xmalloc(2 * (size_t)p->n * sizeof *ev);
    for (int i = 0; i < p->n; i++) {
        ev[2 * i] = (Event){p->bufs[i].start, i, 1};
        ev[2 * i + 1] = (Event){buf_end(p, &p->bufs[i]), i, 0};
    }
    qsort(ev, 2 * (size_t)p->n, sizeof *ev, event_cmp);
    return ev;
}

static void sweep_lower_bound(StaticPlan *p) {
    Event *ev = sorted_events(p);
    size_t live = 0;
    p->lower_bound = 0;
    p->lower_bound_time = 0;
    for (size_t i = 0; i < 2 * (size_t)p->n; i++) {
        size_t bytes = aligned(p, &p->bufs[ev[i].id]);
        if (!ev[i].is_start) { live -= bytes; continue; }
        live += bytes;
        if (live > p->lower_bound) { p->lower_bound = live; p->lower_bound_time = ev[i].t; }
    }
    free(ev);
}

size_t static_plan_live_bytes(const StaticPlan *p, long t, int kind) {
    size_t live = 0;
    for (int i = 0; i < p->n; i++) {
        const PlanBuf *b = &p->bufs[i];
        if (b->start <= t && t < buf_end(p, b) && (kind < 0 || b->kind == kind)) live += aligned(p, b);
    }
    return live;
}

// ---- placement: greedy by size, best fit ----

typedef struct { size_t size; long start; int id; } Key;

// Largest first (they are the hardest to fit); ties: earlier start, then id, so the order is total.
static int key_cmp(const void *a, const void *b) {
    const Key *x = a, *y = b;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static Key *sorted_keys(const StaticPlan *p) {
    Key *keys = xmalloc((size_t)p->n * sizeof *keys);
    for (int i = 0; i < p->n; i++) keys[i] = (Key){aligned(p, &p->bufs[i]), p->bufs[i].start, i};
    qsort(keys, (size_t)p->n, sizeof *keys, key_cmp);
    return keys;
}

// A placed buffer: bytes [lo, hi), live over [start, end). Kept compact for the scan below.
typedef struct { size_t lo, hi; long start, end; } Span;

// placed is sorted by offset, so one pass sees the gaps between the buffers live with [start, end):
// top is the highest byte they hold so far, and a gap is the room from top to the next one's start.
static size_t best_fit(const Span *placed, int n, size_t size, long start, long end) {
    size_t top = 0, best = 0, best_gap = SIZE_MAX;
    for (int i = 0; i < n; i++) {
        const Span *s = &placed[i];
        if (s->start >= end || start >= s->end) continue;   // never live together: its bytes are ours to share
        if (s->lo >= top + size && s->lo - top < best_gap) { best_gap = s->lo - top; best = top; }
        if (s->hi > top) top = s->hi;
    }
    return best_gap != SIZE_MAX ? best : top;   // no gap fits: above everything live with it
}

// Insert after any span at the same offset, so the order (and the plan) depends only on the input.
static void insert_span(Span *placed, int n, Span s) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (placed[mid].lo <= s.lo) lo = mid + 1; else hi = mid;
    }
    memmove(&placed[lo + 1], &placed[lo], (size_t)(n - lo) * sizeof *placed);
    placed[lo] = s;
}

size_t static_plan_solve(StaticPlan *p) {
    sweep_lower_bound(p);
    Key *keys = sorted_keys(p);
    Span *placed = xmalloc((size_t)p->n * sizeof *placed);
    int n_placed = 0;
    p->peak = p->naive_sum = 0;
    for (int k = 0; k < p->n; k++) {
        PlanBuf *b = &p->bufs[keys[k].id];
        size_t size = keys[k].size;
        long end = buf_end(p, b);
        p->naive_sum += size;
        b->offset = 0;
        if (size == 0) continue;   // holds no bytes; left out of placed so it cannot split a gap
        b->offset = best_fit(placed, n_placed, size, b->start, end);
        insert_span(placed, n_placed++, (Span){b->offset, b->offset + size, b->start, end});
        if (b->offset + size > p->peak) p->peak = b->offset + size;
    }
    free(placed);
    free(keys);
    return p->peak;
}

// ---- validity: sweep over time, each starting buffer checked against the ones live then ----

static int bytes_overlap(const size_t *lo, const size_t *hi, int a, int b) {
    return lo[a] < hi[b] && lo[b] < hi[a];
}

// Returns 1 when no buffer clashes with one live at its start (every pair live together is such a pair).
static int sweep_valid(const StaticPlan *p, const Event *ev, const size_t *lo, const size_t *hi) {
    int *active = xmalloc((size_t)p->n * sizeof *active), *pos = xmalloc((size_t)p->n * sizeof *pos);
    int n_active = 0, ok = 1;
    for (size_t i = 0; i < 2 * (size_t)p->n && ok; i++) {
        int id = ev[i].id;
        if (!ev[i].is_start) {   // swap-remove: pos[] makes it O(1)
            int last = active[--n_active];
            active[pos[id]] = last;
            pos[last] = pos[id];
            continue;
        }
        for (int j = 0; j < n_active && ok; j++) ok = !bytes_overlap(lo, hi, id, active[j]);
        pos[id] = n_active;
        active[n_active++] = id;
    }
    free(active);
    free(pos);
    return ok;
}

int static_plan_valid(const StaticPlan *p) {
    size_t *lo = xmalloc((size_t)p->n * sizeof *lo), *hi = xmalloc((size_t)p->n * sizeof *hi);
    for (int i = 0; i < p->n; i++) {   // precomputed: align_up divides, and the inner loop is hot
        lo[i] = p->bufs[i].offset;
        hi[i] = lo[i] + aligned(p, &p->bufs[i]);
    }
    Event *ev = sorted_events(p);
    int ok = sweep_valid(p, ev, lo, hi);
    free(ev);
    free(lo);
    free(hi);
    return ok;
}
