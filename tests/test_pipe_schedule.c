// The pipeline schedules (DESIGN.md §9): every schedule's orders are complete and deadlock-free,
// the simulated bubbles and makespans against their closed forms, the in-flight counts against the
// analytic model's (stage_model.h), the slots, the stage peak, and every layout error.
//
// What the simulator finds (costs t_f·n and t_b·n, transfers free), all exact to rounding:
//  1f1b and gpipe: makespan (m + p − 1)(t_f + t_b)n, bubble (p − 1)/m for every m, also m < p.
//  interleaved:    makespan (mV + p − 1)(t_f + t_b)n, bubble (p − 1)/(Vm) for every valid m (m a
//                  multiple of p, m == p included) and any t_b/t_f; nothing here is approximate.
//  layered:        makespan (max(m, p)(V − 1) + m + p − 1)(t_f + t_b)n: bubble (p − 1)/(Vm) exactly
//                  when m ≥ p (or V = 1); with m < p each chunk waits for micro-batch 0 to come round
//                  the ring, so the bubble is (p − 1)/(Vm) + (p − m)(V − 1)/(Vm).
#include <math.h>
#include <string.h>
#include "check.h"
#include "train/pipe_schedule.h"
#include "util/common.h"

static int min_int(int a, int b) { return a < b ? a : b; }
static int max_int(int a, int b) { return a > b ? a : b; }

static void test_parse_and_names(void) {
    const char *names[] = {"1f1b", "interleaved", "gpipe", "layered"};
    const PipeScheduleKind kinds[] = {PIPE_1F1B, PIPE_INTERLEAVED, PIPE_GPIPE, PIPE_LAYERED};
    for (int i = 0; i < 4; i++) {
        PipeScheduleKind k = PIPE_GPIPE;
        CHECK(pipe_schedule_parse(names[i], &k) == 0 && k == kinds[i], "parse %s", names[i]);
        CHECK(!strcmp(pipe_schedule_name(kinds[i]), names[i]), "name of %d: %s", i, pipe_schedule_name(kinds[i]));
    }
    PipeScheduleKind k = PIPE_LAYERED;
    CHECK(pipe_schedule_parse("1F1B", &k) == -1 && k == PIPE_LAYERED, "names are lower case");
    CHECK(pipe_schedule_parse("zb", &k) == -1 && pipe_schedule_parse("", &k) == -1, "unknown names");
}

// One bad layout: init fails and the message holds every key word.
static void expect_error(PipeScheduleKind kind, int p, int vs, int m, int L, const char *const *words) {
    PipeSpec s;
    char err[256] = "";
    int rc = pipe_spec_init(&s, kind, p, vs, m, L, err, sizeof err);
    CHECK(rc == -1, "%s p=%d vs=%d m=%d L=%d should fail", pipe_schedule_name(kind), p, vs, m, L);
    for (; *words; words++) CHECK(strstr(err, *words), "message '%s' lacks '%s'", err, *words);
}

static void test_spec_errors(void) {
    expect_error(PIPE_1F1B, 2, 2, 4, 8, (const char *[]){"--virtual-stages 2 needs --pp-schedule interleaved (got 1f1b)", 0});
    expect_error(PIPE_LAYERED, 2, 3, 4, 8, (const char *[]){"--virtual-stages 3", "interleaved (got layered)", 0});
    expect_error(PIPE_INTERLEAVED, 2, 0, 4, 8,
                 (const char *[]){"--pp-schedule interleaved needs --virtual-stages V >= 2", "not given", 0});
    expect_error(PIPE_INTERLEAVED, 2, 1, 4, 8, (const char *[]){"--virtual-stages V >= 2 (got 1)", 0});
    expect_error(PIPE_INTERLEAVED, 2, 2, 4, 6,
                 (const char *[]){"L = 6 layers is not divisible by P·V = 4 (--pp 2 × --virtual-stages 2)", 0});
    expect_error(PIPE_LAYERED, 4, 0, 4, 6, (const char *[]){"L = 6 layers is not divisible by P = 4 (--pp 4)", 0});
    expect_error(PIPE_1F1B, 4, 0, 4, 6, (const char *[]){"L = 6 layers is not divisible by P = 4", 0});
    expect_error(PIPE_INTERLEAVED, 2, 2, 3, 8,
                 (const char *[]){"--pp-schedule interleaved needs the micro-batches (--grad-accum 3) to be a "
                                  "multiple of --pp 2", 0});
    expect_error(PIPE_INTERLEAVED, 1, 2, 4, 8, (const char *[]){"--pp-schedule interleaved needs --pp >= 2 (got 1)", 0});
    expect_error(PIPE_GPIPE, 0, 0, 4, 8, (const char *[]){"--pp must be >= 1 (got 0)", 0});
    expect_error(PIPE_GPIPE, 2, 0, 0, 8, (const char *[]){"--grad-accum must be >= 1 (got 0)", 0});
    expect_error(PIPE_1F1B, 2, 0, 2, 0, (const char *[]){"L = 0 layers", 0});
    expect_error((PipeScheduleKind)7, 2, 0, 2, 8, (const char *[]){"unknown pipeline schedule 7", 0});
    expect_error(PIPE_INTERLEAVED, 2, 1 << 16, 1 << 14, 1 << 17, (const char *[]){"too many units", 0});

    // The fields of good layouts: V per schedule; 1f1b and gpipe accept m < p.
    PipeSpec s;
    char err[256];
    CHECK(pipe_spec_init(&s, PIPE_1F1B, 4, 0, 2, 8, err, sizeof err) == 0 && s.V == 1 && s.p == 4 && s.m == 2 &&
          s.L == 8 && s.kind == PIPE_1F1B, "1f1b p=4 m=2 L=8");
    CHECK(pipe_spec_init(&s, PIPE_GPIPE, 4, 0, 1, 4, err, sizeof err) == 0 && s.V == 1, "gpipe m < p");
    CHECK(pipe_spec_init(&s, PIPE_LAYERED, 4, 0, 3, 12, err, sizeof err) == 0 && s.V == 3, "layered V = L/p = 3");
    CHECK(pipe_spec_init(&s, PIPE_INTERLEAVED, 2, 3, 4, 12, err, sizeof err) == 0 && s.V == 3 &&
          pipe_layers_per_chunk(&s) == 2 && pipe_units_per_rank(&s) == 24, "interleaved p=2 V=3 m=4 L=12");
}

// Layer l is in chunk v of rank r iff first_layer(r, v) ≤ l < first_layer(r, v) + n.
static void test_layer_placement(void) {
    const int cases[][4] = {{PIPE_1F1B, 4, 0, 8}, {PIPE_INTERLEAVED, 4, 2, 16}, {PIPE_INTERLEAVED, 3, 4, 24},
                            {PIPE_LAYERED, 4, 0, 12}, {PIPE_GPIPE, 1, 0, 5}};
    for (int c = 0; c < 5; c++) {
        PipeSpec s;
        char err[256];
        int p = cases[c][1], L = cases[c][3];
        CHECK(pipe_spec_init(&s, (PipeScheduleKind)cases[c][0], p, cases[c][2], p, L, err, sizeof err) == 0, "%s", err);
        int n = pipe_layers_per_chunk(&s), agree = 0;
        CHECK(n * p * s.V == L, "case %d: n = %d", c, n);
        for (int l = 0; l < L; l++)
            for (int r = 0; r < p; r++)
                for (int v = 0; v < s.V; v++) {
                    int first = pipe_chunk_first_layer(&s, r, v), inside = first <= l && l < first + n;
                    int placed = pipe_stage_of_layer(&s, l) == r && pipe_chunk_of_layer(&s, l) == v;
                    agree += inside == placed;
                }
        CHECK(agree == L * p * s.V, "case %d: %d of %d placements agree", c, agree, L * p * s.V);
    }
    // Chunk v of rank r starts at v·L/V + r·L/(pV): interleaved p=4 V=2 L=16, rank 1 chunk 1 → 8 + 2.
    PipeSpec s;
    char err[256];
    pipe_spec_init(&s, PIPE_INTERLEAVED, 4, 2, 4, 16, err, sizeof err);
    CHECK(pipe_chunk_first_layer(&s, 1, 1) == 10 && pipe_stage_of_layer(&s, 11) == 1 && pipe_chunk_of_layer(&s, 11) == 1,
          "interleaved rank 1 chunk 1 = layers 10, 11");
    pipe_spec_init(&s, PIPE_LAYERED, 4, 0, 4, 12, err, sizeof err);
    CHECK(pipe_stage_of_layer(&s, 9) == 1 && pipe_chunk_of_layer(&s, 9) == 2 && pipe_chunk_first_layer(&s, 1, 2) == 9,
          "layered: layer 9 on stage 9 mod 4 = 1, chunk 2");
}

// Each F and B of every (mb, v) exactly once, B after its F; the slots: distinct while in use, a B
// gets its F's slot, and their count is the simulator's in-flight count. Returns 1 when all hold.
static int check_orders_and_slots(const PipeSpec *s, int rank, int in_flight) {
    int U = pipe_units_per_rank(s), N = s->m * s->V, ok = 1;
    PipeUnit *u = xmalloc((size_t)U * sizeof *u);
    int *slot = xmalloc((size_t)U * sizeof(int)), *f_at = xmalloc((size_t)N * sizeof(int));
    int *b_at = xmalloc((size_t)N * sizeof(int)), *owner = xmalloc((size_t)U * sizeof(int));
    for (int i = 0; i < N; i++) f_at[i] = b_at[i] = -1;
    for (int i = 0; i < U; i++) owner[i] = -1;
    pipe_units(s, rank, u);
    int slots = pipe_assign_slots(u, U, slot);
    for (int i = 0; i < U; i++) {
        if (u[i].mb < 0 || u[i].mb >= s->m || u[i].chunk < 0 || u[i].chunk >= s->V) { ok = 0; break; }
        int key = u[i].mb * s->V + u[i].chunk, *at = u[i].backward ? b_at : f_at;
        ok &= at[key] < 0;   // once
        at[key] = i;
        if (slot[i] < 0 || slot[i] >= slots) { ok = 0; continue; }
        if (!u[i].backward) {
            ok &= owner[slot[i]] < 0;   // the slot is free
            owner[slot[i]] = key;
        } else {
            ok &= f_at[key] >= 0 && slot[i] == slot[f_at[key]] && owner[slot[i]] == key;
            owner[slot[i]] = -1;
        }
    }
    for (int i = 0; i < N; i++) ok &= f_at[i] >= 0 && b_at[i] > f_at[i];
    ok &= slots == in_flight;
    free(u);
    free(slot);
    free(f_at);
    free(b_at);
    free(owner);
    return ok;
}

static double expected_makespan(const PipeSpec *s, double t_f, double t_b) {
    double n = pipe_layers_per_chunk(s), per = (t_f + t_b) * n;
    switch (s->kind) {
    case PIPE_INTERLEAVED: return (s->m * s->V + s->p - 1) * per;
    case PIPE_LAYERED: return (max_int(s->m, s->p) * (s->V - 1) + s->m + s->p - 1) * per;
    default: return (s->m + s->p - 1) * per;
    }
}

static int expected_in_flight(const PipeSpec *s, int r) {
    switch (s->kind) {
    case PIPE_1F1B: return min_int(s->p - r, s->m);
    case PIPE_INTERLEAVED: return min_int(2 * (s->p - r - 1) + (s->V - 1) * s->p + 1, s->m * s->V);
    default: return s->m * s->V;   // gpipe and layered hold everything before the first backward
    }
}

// Every schedule × p ∈ {1, 2, 3, 4, 8} × m ∈ 1..16 × V ∈ {2, 3, 4} (interleaved) × two L per layout.
static void test_all_schedules(void) {
    const int ps[] = {1, 2, 3, 4, 8};
    const double t_f = 1, t_b = 2;
    int layouts = 0, orders_ok = 0, sims_ok = 0, flight_ok = 0, makespan_ok = 0, bubble_ok = 0, theory_ok = 0;
    int rejected = 0, ranks = 0;
    for (int kind = 0; kind < 4; kind++)
        for (int pi = 0; pi < 5; pi++)
            for (int m = 1; m <= 16; m++)
                for (int vs = kind == PIPE_INTERLEAVED ? 2 : 0; vs <= (kind == PIPE_INTERLEAVED ? 4 : 0); vs++)
                    for (int k = 1; k <= 3; k++) {
                        int p = ps[pi], L = p * (vs ? vs : 1) * k;
                        if (kind != PIPE_LAYERED && k == 3) continue;   // layered: L = p, 2p, 3p (V = 1, 2, 3)
                        PipeSpec s;
                        char err[256];
                        int valid = kind != PIPE_INTERLEAVED || (p >= 2 && m % p == 0);
                        int rc = pipe_spec_init(&s, (PipeScheduleKind)kind, p, vs, m, L, err, sizeof err);
                        if (!valid) { rejected += rc == -1; continue; }
                        CHECK(rc == 0, "%s", err);
                        layouts++;
                        PipeSim sim;
                        rc = pipe_simulate(&s, t_f, t_b, &sim, err, sizeof err);
                        CHECK(rc == 0, "%s p=%d V=%d m=%d L=%d: %s", pipe_schedule_name(s.kind), p, s.V, m, L, err);
                        sims_ok += rc == 0;
                        double want = expected_makespan(&s, t_f, t_b), theory = pipe_bubble_theory(&s);
                        makespan_ok += fabs(sim.makespan - want) < 1e-9;
                        for (int r = 0; r < p; r++, ranks++) {
                            orders_ok += check_orders_and_slots(&s, r, sim.in_flight[r]);
                            flight_ok += sim.in_flight[r] == expected_in_flight(&s, r);
                            double busy = (t_f + t_b) * m * L / p;
                            bubble_ok += fabs(sim.busy[r] - busy) < 1e-9 && fabs(sim.idle[r] - (want - busy)) < 1e-9 &&
                                         fabs(sim.bubble[r] - (want - busy) / busy) < 1e-12;
                            // The textbook fraction holds exactly except layered with m < p and V > 1
                            // (with V = 1 layered is GPipe).
                            if (s.kind != PIPE_LAYERED || m >= p || s.V == 1) theory_ok += fabs(sim.bubble[r] - theory) < 1e-12;
                            else theory_ok += sim.bubble[r] > theory + 1e-9;
                        }
                    }
    // 1f1b and gpipe 5·16·2 each, layered 5·16·3, interleaved (8 + 5 + 4 + 2 values of m)·3·2.
    CHECK(layouts == 160 + 160 + 240 + 114, "%d layouts", layouts);
    CHECK(rejected == 16 * 3 * 2 + (8 + 11 + 12 + 14) * 3 * 2, "%d invalid interleaved layouts rejected", rejected);
    CHECK(sims_ok == layouts && makespan_ok == layouts, "%d simulations ran, %d makespans as expected", sims_ok,
          makespan_ok);
    CHECK(orders_ok == ranks && flight_ok == ranks && bubble_ok == ranks && theory_ok == ranks,
          "of %d ranks: %d orders, %d in-flight counts, %d bubbles, %d against the theory", ranks, orders_ok,
          flight_ok, bubble_ok, theory_ok);
}

static PipeSim simulate(PipeScheduleKind kind, int p, int vs, int m, int L, double t_f, double t_b, PipeSpec *s) {
    char err[256];
    PipeSim sim;
    CHECK(pipe_spec_init(s, kind, p, vs, m, L, err, sizeof err) == 0, "%s", err);
    CHECK(pipe_simulate(s, t_f, t_b, &sim, err, sizeof err) == 0, "%s", err);
    return sim;
}

static void test_known_values(void) {
    PipeSpec s;
    // 1F1B p = 4, m = 8, t_b = 2t_f: 11 time steps of 3 for 8 of work, bubble 3/8; ranks hold 4, 3, 2, 1.
    PipeSim sim = simulate(PIPE_1F1B, 4, 0, 8, 4, 1, 2, &s);
    CHECK(sim.makespan == 33 && sim.busy[0] == 24 && sim.idle[0] == 9 && sim.bubble[0] == 0.375,
          "1f1b makespan %g bubble %g", sim.makespan, sim.bubble[0]);
    CHECK(sim.in_flight[0] == 4 && sim.in_flight[1] == 3 && sim.in_flight[2] == 2 && sim.in_flight[3] == 1,
          "1f1b in flight %d %d %d %d", sim.in_flight[0], sim.in_flight[1], sim.in_flight[2], sim.in_flight[3]);
    // m < p: every rank holds all m.
    sim = simulate(PIPE_1F1B, 8, 0, 3, 8, 1, 2, &s);
    CHECK(sim.in_flight[0] == 3 && sim.in_flight[5] == 3 && sim.in_flight[6] == 2 && sim.in_flight[7] == 1 &&
          fabs(sim.bubble[0] - 7.0 / 3) < 1e-12, "1f1b p=8 m=3: %d %d %d %d, bubble %g", sim.in_flight[0],
          sim.in_flight[5], sim.in_flight[6], sim.in_flight[7], sim.bubble[0]);
    // GPipe holds all m on every rank, same bubble.
    sim = simulate(PIPE_GPIPE, 4, 0, 8, 8, 1, 2, &s);
    CHECK(sim.in_flight[0] == 8 && sim.in_flight[3] == 8 && sim.bubble[0] == 0.375 && sim.makespan == 66,
          "gpipe in flight %d, bubble %g, makespan %g", sim.in_flight[0], sim.bubble[0], sim.makespan);

    // Interleaved p = 4, V = 2, m = 8: rank 0 warms up 2·3 + 4 = 10, holds 11 = pV(1 + (p−1)/(pV))
    // chunk-units, Eq. 5's factor: 11 chunks of L/8 layers = (11/8)·L layers vs 1F1B's p·L/p = L.
    sim = simulate(PIPE_INTERLEAVED, 4, 2, 8, 16, 1, 2, &s);
    int p = 4, V = 2;
    CHECK(sim.in_flight[0] == 2 * (p - 1) + (V - 1) * p + 1 && sim.in_flight[0] == 11, "interleaved in flight %d",
          sim.in_flight[0]);
    CHECK(fabs(sim.in_flight[0] - p * V * (1 + (p - 1) / (double)(p * V))) < 1e-12 &&
          sim.in_flight[0] * pipe_layers_per_chunk(&s) * p * V == s.L * (p * V + p - 1), "Eq. 5 factor");
    CHECK(sim.in_flight[1] == 9 && sim.in_flight[2] == 7 && sim.in_flight[3] == 5, "interleaved ranks 1-3: %d %d %d",
          sim.in_flight[1], sim.in_flight[2], sim.in_flight[3]);
    CHECK(sim.bubble[0] == 3.0 / 16 && sim.makespan == (16 + 3) * 3 * 2, "interleaved bubble %g = (p−1)/(Vm), makespan %g",
          sim.bubble[0], sim.makespan);
    // m == p: Megatron runs all forwards first there; our general order holds too (no deadlock) and
    // rank 0 is all warm-up anyway (w = 2(p−1) + (V−1)p ≥ N = pV), rank 3 is not (w = 4 < 8).
    sim = simulate(PIPE_INTERLEAVED, 4, 2, 4, 16, 1, 2, &s);
    CHECK(sim.in_flight[0] == 8 && sim.in_flight[3] == 5 && sim.bubble[0] == 3.0 / 8, "interleaved m == p: %d %d %g",
          sim.in_flight[0], sim.in_flight[3], sim.bubble[0]);
    // Equal forward and backward costs: the bubble fraction is the same.
    sim = simulate(PIPE_INTERLEAVED, 3, 3, 6, 9, 1, 1, &s);
    CHECK(fabs(sim.bubble[0] - 2.0 / 18) < 1e-12 && sim.in_flight[0] == 11, "interleaved p=3 V=3 m=6: %g %d",
          sim.bubble[0], sim.in_flight[0]);

    // Layered p = 4, L = 12 (V = 3), m = 4: every micro-batch of every layer held, bubble 3/12.
    sim = simulate(PIPE_LAYERED, 4, 0, 4, 12, 1, 2, &s);
    CHECK(s.V == 3 && sim.in_flight[0] == 12 && sim.in_flight[3] == 12 && sim.bubble[0] == 0.25 && sim.makespan == 45,
          "layered in flight %d, bubble %g, makespan %g", sim.in_flight[0], sim.bubble[0], sim.makespan);
    // m = 2 < p = 4: makespan (4·2 + 2 + 3)·3 = 39 for 18 of work, bubble 7/6 > 3/6.
    sim = simulate(PIPE_LAYERED, 4, 0, 2, 12, 1, 2, &s);
    CHECK(sim.makespan == 39 && fabs(sim.bubble[0] - 7.0 / 6) < 1e-12, "layered m < p: makespan %g bubble %g",
          sim.makespan, sim.bubble[0]);
}

static void test_orders(void) {
    PipeSpec s;
    char err[256];
    PipeUnit u[32];
    // 1F1B p = 4 rank 1, m = 4: F0 F1 | F2 B0 F3 B1 | B2 B3.
    pipe_spec_init(&s, PIPE_1F1B, 4, 0, 4, 4, err, sizeof err);
    pipe_units(&s, 1, u);
    const int f1b_mb[] = {0, 1, 2, 0, 3, 1, 2, 3}, f1b_bw[] = {0, 0, 0, 1, 0, 1, 1, 1};
    int same = 0;
    for (int i = 0; i < 8; i++) same += u[i].mb == f1b_mb[i] && u[i].backward == f1b_bw[i] && u[i].chunk == 0;
    CHECK(same == 8, "1f1b rank 1 order: %d of 8", same);
    // Interleaved p = 2, V = 2, m = 2, rank 1 (w = 2): F(0,0) F(1,0) | F(0,1) B(0,1) F(1,1) B(1,1) | B(0,0) B(1,0).
    pipe_spec_init(&s, PIPE_INTERLEAVED, 2, 2, 2, 4, err, sizeof err);
    pipe_units(&s, 1, u);
    const int il[][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 1, 1}, {1, 1, 0}, {1, 1, 1}, {0, 0, 1}, {1, 0, 1}};
    same = 0;
    for (int i = 0; i < 8; i++) same += u[i].mb == il[i][0] && u[i].chunk == il[i][1] && u[i].backward == il[i][2];
    CHECK(same == 8, "interleaved rank 1 order: %d of 8", same);
    // Layered p = 2, L = 4 (V = 2), m = 2: F(0,0) F(1,0) F(0,1) F(1,1) B(0,1) B(1,1) B(0,0) B(1,0).
    pipe_spec_init(&s, PIPE_LAYERED, 2, 0, 2, 4, err, sizeof err);
    pipe_units(&s, 0, u);
    same = 0;
    const int ly[][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0}, {0, 1, 1}, {1, 1, 1}, {0, 0, 1}, {1, 0, 1}};
    for (int i = 0; i < 8; i++) same += u[i].mb == ly[i][0] && u[i].chunk == ly[i][1] && u[i].backward == ly[i][2];
    CHECK(same == 8, "layered order: %d of 8", same);
    // GPipe: F0 F1 F2 B0 B1 B2.
    pipe_spec_init(&s, PIPE_GPIPE, 2, 0, 3, 2, err, sizeof err);
    pipe_units(&s, 0, u);
    same = 0;
    for (int i = 0; i < 6; i++) same += u[i].mb == i % 3 && u[i].backward == (i >= 3);
    CHECK(same == 6, "gpipe order: %d of 6", same);
}

static void test_slots(void) {
    // F0 F1 B0 F2 B1 F3 B2 B3: F2 reuses slot 0, F3 slot 1; two slots.
    const PipeUnit u[] = {{0, 0, 0}, {1, 0, 0}, {0, 0, 1}, {2, 0, 0}, {1, 0, 1}, {3, 0, 0}, {2, 0, 1}, {3, 0, 1}};
    int slot[8];
    CHECK(pipe_assign_slots(u, 8, slot) == 2, "two slots");
    const int want[] = {0, 1, 0, 0, 1, 1, 0, 1};
    int same = 0;
    for (int i = 0; i < 8; i++) same += slot[i] == want[i];
    CHECK(same == 8, "slots %d %d %d %d %d %d %d %d", slot[0], slot[1], slot[2], slot[3], slot[4], slot[5], slot[6],
          slot[7]);
    // A B with no F before it gets −1; chunks are told apart.
    const PipeUnit v[] = {{0, 1, 1}, {0, 0, 0}, {0, 1, 0}, {0, 0, 1}, {0, 1, 1}};
    CHECK(pipe_assign_slots(v, 5, slot) == 2 && slot[0] == -1 && slot[1] == 0 && slot[2] == 1 && slot[3] == 0 &&
          slot[4] == 1, "chunked slots %d %d %d %d %d", slot[0], slot[1], slot[2], slot[3], slot[4]);
}

static PipeUnitBytes flat_bytes(int mb, int chunk, int slot, void *user) {
    (void)mb, (void)chunk, (void)slot, (void)user;
    return (PipeUnitBytes){10, 15};
}

static PipeUnitBytes by_slot(int mb, int chunk, int slot, void *user) {
    (void)mb, (void)chunk;
    return slot < *(int *)user ? (PipeUnitBytes){10, 10} : (PipeUnitBytes){4, 9};
}

static void test_stage_peak(void) {
    PipeSpec s;
    char err[256];
    pipe_spec_init(&s, PIPE_1F1B, 4, 0, 8, 4, err, sizeof err);
    // Four contexts of 10 held, one of them in its backward at 15.
    CHECK(pipe_stage_peak(&s, 0, flat_bytes, 0) == 4 * 10 + 5, "flat peak %zu", pipe_stage_peak(&s, 0, flat_bytes, 0));
    // Rank 0 runs mb k in slot k mod 4. Slots 0, 1 hold {10, 10}, slots 2, 3 {4, 9}: four in flight hold
    // 10 + 10 + 4 + 4 = 28; the backward of a slot-2 or -3 context adds 9 − 4 = 5 → 33.
    int N = 2;
    CHECK(pipe_stage_peak(&s, 0, by_slot, &N) == 33, "slot peak %zu", pipe_stage_peak(&s, 0, by_slot, &N));
    // Rank 3 holds one context at a time: the peak is the largest backward, 10 (slot 0 only).
    CHECK(pipe_stage_peak(&s, 3, by_slot, &N) == 10, "rank 3 peak %zu", pipe_stage_peak(&s, 3, by_slot, &N));
    // All slots {4, 9}: 4·4 + 5 = 21.
    N = 0;
    CHECK(pipe_stage_peak(&s, 0, by_slot, &N) == 21, "small peak %zu", pipe_stage_peak(&s, 0, by_slot, &N));
}

static void test_simulator_errors(void) {
    PipeSpec s;
    PipeSim sim;
    char err[256] = "";
    pipe_spec_init(&s, PIPE_1F1B, 2, 0, 2, 2, err, sizeof err);
    // Rank 0 waits for B0 of rank 1, which waits for F1 of rank 0 (after B0 there): a deadlock.
    const PipeUnit dead[] = {{0, 0, 0}, {0, 0, 1}, {1, 0, 0}, {1, 0, 1}, {1, 0, 0}, {0, 0, 0}, {0, 0, 1}, {1, 0, 1}};
    CHECK(pipe_simulate_units(&s, dead, 1, 2, &sim, err, sizeof err) == -1 &&
          strstr(err, "deadlocks: rank 0 waits at unit 1, B(mb 0, chunk 0), for B(mb 0, chunk 0) of rank 1"),
          "deadlock: %s", err);
    const PipeUnit early[] = {{0, 0, 0}, {1, 0, 0}, {0, 0, 1}, {1, 0, 1}, {0, 0, 0}, {1, 0, 1}, {1, 0, 0}, {0, 0, 1}};
    CHECK(pipe_simulate_units(&s, early, 1, 2, &sim, err, sizeof err) == -1 &&
          strstr(err, "rank 1 unit 1: B(mb 1, chunk 0) comes before its own F"), "early B: %s", err);
    const PipeUnit twice[] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 1}, {1, 0, 1}, {0, 0, 0}, {1, 0, 0}, {0, 0, 1}, {1, 0, 1}};
    CHECK(pipe_simulate_units(&s, twice, 1, 2, &sim, err, sizeof err) == -1 &&
          strstr(err, "rank 0 unit 1: F(mb 0, chunk 0) runs twice"), "twice: %s", err);
    s.p = 65;
    CHECK(pipe_simulate(&s, 1, 2, &sim, err, sizeof err) == -1 && strstr(err, "at most 64 stages (got --pp 65)"),
          "too many stages: %s", err);
}

int main(void) {
    test_parse_and_names();
    test_spec_errors();
    test_layer_placement();
    test_orders();
    test_slots();
    test_all_schedules();
    test_known_values();
    test_stage_peak();
    test_simulator_errors();
    return check_summary();
}
