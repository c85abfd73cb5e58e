// The static memory planner (memory/static_plan.h): exact offsets and bounds on hand instances,
// alignment, random instances against brute-force references (validity, lower bound), the plan's
// quality against the lower bound, determinism, a broken plan caught, and a 20,000-buffer solve.
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "memory/static_plan.h"
#include "util/common.h"

static uint64_t rng_state;
static uint32_t lcg(void) {   // Knuth's MMIX constants; the high bits are the good ones
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33);
}

// A random step: n buffers, at most max_live live at once, sizes log-uniform-ish up to 128 KB; the
// ones still live at the end stay live (solve closes them).
static void record_random(StaticPlan *p, int n, int max_live) {
    int *live = xmalloc((size_t)max_live * sizeof *live), n_live = 0, made = 0;
    while (made < n) {
        if (n_live == 0 || (n_live < max_live && lcg() % 2 == 0)) {
            uint32_t shift = lcg() % 12;   // separate statements: the order of two calls in one is unspecified
            size_t bytes = 1 + lcg() % ((size_t)64 << shift);
            int kind = (int)(lcg() % 2);
            live[n_live++] = static_plan_alloc(p, bytes, kind, made++);
        } else {
            int k = (int)(lcg() % (uint32_t)n_live);
            static_plan_release(p, live[k]);
            live[k] = live[--n_live];
        }
    }
    free(live);
}

static size_t asize(const StaticPlan *p, int i) { return align_up(p->bufs[i].bytes, p->align); }
static long bend(const StaticPlan *p, int i) { return p->bufs[i].end < 0 ? p->clock : p->bufs[i].end; }

// Brute-force references, O(n^2) and O(n * clock): what the sweeps must agree with.
static int brute_valid(const StaticPlan *p) {
    for (int i = 0; i < p->n; i++)
        for (int j = i + 1; j < p->n; j++) {
            int live_together = p->bufs[i].start < bend(p, j) && p->bufs[j].start < bend(p, i);
            int share = p->bufs[i].offset < p->bufs[j].offset + asize(p, j) &&
                        p->bufs[j].offset < p->bufs[i].offset + asize(p, i);
            if (live_together && share) return 0;
        }
    return 1;
}

static size_t brute_lower_bound(const StaticPlan *p) {
    size_t best = 0;
    for (long t = 0; t < p->clock; t++) {
        size_t live = 0;
        for (int i = 0; i < p->n; i++)
            if (p->bufs[i].start <= t && t < bend(p, i)) live += asize(p, i);
        if (live > best) best = live;
    }
    return best;
}

static size_t brute_peak(const StaticPlan *p) {
    size_t peak = 0;
    for (int i = 0; i < p->n; i++)
        if (p->bufs[i].offset + asize(p, i) > peak) peak = p->bufs[i].offset + asize(p, i);
    return peak;
}

// LIFO pushes and pops: the best is the largest nested set, and greedy by size finds it.
static void test_stack(void) {
    StaticPlan p;
    static_plan_init(&p, 64);
    int a = static_plan_alloc(&p, 1000, 0, 0);          // 1024
    int b = static_plan_alloc(&p, 3000, 0, 1);          // 3008
    static_plan_release(&p, b);
    int c = static_plan_alloc(&p, 500, 0, 2);           // 512
    int d = static_plan_alloc(&p, 2000, 0, 3);          // 2048
    static_plan_release(&p, d);
    static_plan_release(&p, c);
    static_plan_release(&p, a);
    int e = static_plan_alloc(&p, 2000, 0, 4);          // 2048
    int f = static_plan_alloc(&p, 100, 0, 5);           // 128
    static_plan_release(&p, f);
    static_plan_release(&p, e);
    // nested sets: {a,b} 4032, {a,c,d} 3584, {e,f} 2176
    size_t expect = 1024 + 3008;
    size_t peak = static_plan_solve(&p);
    CHECK(p.lower_bound == expect, "stack: lower bound %zu, expected %zu", p.lower_bound, expect);
    CHECK(peak == expect && p.peak == expect, "stack: peak %zu, expected %zu", peak, expect);
    CHECK(p.lower_bound_time == 1, "stack: the peak is at event 1 (b pushed), got %ld", p.lower_bound_time);
    CHECK(p.naive_sum == 1024 + 3008 + 512 + 2048 + 2048 + 128, "stack: naive sum %zu", p.naive_sum);
    // b and d at 0, a above b, c in the 960-byte gap between d and a, f above e
    size_t want[6] = {3008, 0, 2048, 0, 0, 2048};
    for (int i = 0; i < 6; i++)
        CHECK(p.bufs[i].offset == want[i], "stack: buffer %d at %zu, expected %zu", i, p.bufs[i].offset, want[i]);
    CHECK(static_plan_valid(&p), "stack: plan not valid");
    static_plan_free(&p);
}

// A big early temporary, a long-lived buffer, then two temporaries: one fits the gap the first left.
static void test_gap(void) {
    StaticPlan p;
    static_plan_init(&p, 64);
    int a = static_plan_alloc(&p, 4096, 1, 0);   // t0  A [0,2)
    int b = static_plan_alloc(&p, 1024, 0, 1);   // t1  B [1,8): long-lived
    static_plan_release(&p, a);                  // t2
    int c = static_plan_alloc(&p, 2048, 1, 2);   // t3  C [3,5)
    int d = static_plan_alloc(&p, 1024, 1, 3);   // t4  D [4,6)
    static_plan_release(&p, c);                  // t5
    static_plan_release(&p, d);                  // t6
    int e = static_plan_alloc(&p, 1024, 1, 4);   // t7  E [7,9)
    static_plan_release(&p, b);                  // t8
    static_plan_release(&p, e);                  // t9
    // order A, C, B, D, E: A at 0; C at 0 (A is gone); B above A; D in the gap [2048, 4096) between
    // C and B; E below B. Peak = lower bound = A + B at t1.
    CHECK(static_plan_solve(&p) == 5120, "gap: peak %zu, expected 5120", p.peak);
    CHECK(p.lower_bound == 5120 && p.naive_sum == 9216, "gap: lower bound %zu (5120), naive %zu (9216)",
          p.lower_bound, p.naive_sum);
    size_t want[5] = {0, 4096, 0, 2048, 0};
    for (int i = 0; i < 5; i++)
        CHECK(p.bufs[i].offset == want[i], "gap: buffer %d at %zu, expected %zu", i, p.bufs[i].offset, want[i]);
    CHECK(static_plan_live_bytes(&p, 1, 0) == 1024 && static_plan_live_bytes(&p, 1, 1) == 4096 &&
          static_plan_live_bytes(&p, 1, -1) == 5120, "gap: live bytes by kind at the peak");
    CHECK(static_plan_valid(&p), "gap: plan not valid");
    static_plan_free(&p);
}

// Best fit, not first fit: N has a 192-byte gap at 0 and a 128-byte one at 320; it takes the
// smaller. Units of 64 bytes below.
static void test_best_fit(void) {
    StaticPlan p;
    static_plan_init(&p, 64);
    int a = static_plan_alloc(&p, 7 * 64, 0, 0);   // t0  A [0,2)
    int q = static_plan_alloc(&p, 2 * 64, 0, 1);   // t1  Q [1,9)
    static_plan_release(&p, a);                    // t2
    int b = static_plan_alloc(&p, 3 * 64, 0, 2);   // t3  B [3,5)
    int pb = static_plan_alloc(&p, 2 * 64, 0, 3);  // t4  P [4,8)
    static_plan_release(&p, b);                    // t5
    int n = static_plan_alloc(&p, 2 * 64, 0, 4);   // t6  N [6,7)
    static_plan_release(&p, n);                    // t7
    static_plan_release(&p, pb);                   // t8
    static_plan_release(&p, q);                    // t9
    // order A, B, Q, P, N: A 0; B 0; Q above A (7); P in the gap between B and Q (3);
    // N: gaps [0,3) and [5,7) among P, Q: best fit 5
    CHECK(static_plan_solve(&p) == 9 * 64 && p.lower_bound == 9 * 64, "best fit: peak %zu, lower bound %zu (576)",
          p.peak, p.lower_bound);
    size_t want[5] = {0, 7 * 64, 0, 3 * 64, 5 * 64};
    for (int i = 0; i < 5; i++)
        CHECK(p.bufs[i].offset == want[i], "best fit: buffer %d at %zu, expected %zu", i, p.bufs[i].offset, want[i]);
    CHECK(static_plan_valid(&p), "best fit: plan not valid");
    // a broken plan must be caught: N onto P (live together), then N onto A (never live together: fine)
    p.bufs[n].offset = p.bufs[pb].offset + 64;
    CHECK(!static_plan_valid(&p), "best fit: N overlapping P by 64 bytes went unnoticed");
    p.bufs[n].offset = 0;
    CHECK(static_plan_valid(&p), "best fit: N over A's bytes is fine, they are never live together");
    static_plan_free(&p);
}

static void test_alignment(void) {
    StaticPlan p;
    static_plan_init(&p, 64);
    static_plan_alloc(&p, 1, 0, 0);
    static_plan_alloc(&p, 63, 0, 1);
    static_plan_alloc(&p, 65, 0, 2);
    static_plan_alloc(&p, 0, 0, 3);   // holds no bytes
    static_plan_solve(&p);            // all live to the end, all together
    CHECK(p.naive_sum == 64 + 64 + 128 && p.lower_bound == 256 && p.peak == 256,
          "alignment: 1, 63, 65 should count 64, 64, 128 (naive %zu, lower bound %zu, peak %zu)", p.naive_sum,
          p.lower_bound, p.peak);
    CHECK(p.bufs[2].offset == 0 && p.bufs[0].offset == 128 && p.bufs[1].offset == 192,
          "alignment: offsets %zu %zu %zu, expected 128 192 0", p.bufs[0].offset, p.bufs[1].offset, p.bufs[2].offset);
    CHECK(static_plan_valid(&p), "alignment: plan not valid");
    // still live, so releasing now is allowed, and a second solve sees the new end
    static_plan_release(&p, 2);
    static_plan_solve(&p);
    CHECK(p.peak == 256 && p.bufs[2].end == 4, "alignment: re-solve after a release (peak %zu, end %ld)", p.peak,
          p.bufs[2].end);
    static_plan_free(&p);
}

// Random instances: the sweeps agree with brute force, the bounds hold, the plan is near the bound.
static void test_random(void) {
    StaticPlan p;
    static_plan_init(&p, 64);
    rng_state = 42;
    double sum_ratio = 0, max_ratio = 0;
    int runs = 50, bad = 0;
    for (int r = 0; r < runs; r++) {
        static_plan_reset(&p);
        record_random(&p, 200, 2 + r % 40);
        static_plan_solve(&p);
        size_t naive = 0;
        for (int i = 0; i < p.n; i++) naive += asize(&p, i);
        bad += !static_plan_valid(&p) || !brute_valid(&p) || p.lower_bound != brute_lower_bound(&p) ||
               p.peak != brute_peak(&p) || p.naive_sum != naive || p.lower_bound > p.peak || p.peak > p.naive_sum;
        double ratio = (double)p.peak / (double)p.lower_bound;
        sum_ratio += ratio;
        if (ratio > max_ratio) max_ratio = ratio;
        // corrupt one offset: the sweep and brute force must agree on the result
        int i = (int)(lcg() % (uint32_t)p.n), j = (int)(lcg() % (uint32_t)p.n);
        p.bufs[i].offset = p.bufs[j].offset;
        bad += static_plan_valid(&p) != brute_valid(&p);
    }
    double mean = sum_ratio / runs;
    printf("random: %d instances of 200 buffers, peak / lower bound mean %.4f, max %.4f\n", runs, mean, max_ratio);
    CHECK(bad == 0, "random: %d disagreements with brute force or broken bounds", bad);
    CHECK(mean < 1.15 && max_ratio < 1.5, "random: peak / lower bound mean %.4f, max %.4f", mean, max_ratio);
    static_plan_free(&p);
}

// Same recording, same offsets: solving twice, and recording again into a reset plan.
static void test_determinism(void) {
    StaticPlan p;
    static_plan_init(&p, 64);
    rng_state = 7;
    record_random(&p, 2000, 300);
    static_plan_solve(&p);
    size_t *first = xmalloc((size_t)p.n * sizeof *first);
    for (int i = 0; i < p.n; i++) first[i] = p.bufs[i].offset;
    size_t peak = p.peak;
    static_plan_solve(&p);
    int same = p.peak == peak;
    for (int i = 0; i < p.n; i++) same &= p.bufs[i].offset == first[i];
    CHECK(same, "determinism: a second solve moved buffers");
    static_plan_reset(&p);
    rng_state = 7;
    record_random(&p, 2000, 300);
    static_plan_solve(&p);
    same = p.peak == peak;
    for (int i = 0; i < p.n; i++) same &= p.bufs[i].offset == first[i];
    CHECK(same && p.clock > 0, "determinism: the same recording after reset placed buffers differently");
    free(first);
    static_plan_free(&p);
}

static void test_large(void) {
    StaticPlan p;
    static_plan_init(&p, 64);
    rng_state = 2024;
    record_random(&p, 20000, 2000);
    double t0 = now_seconds();
    static_plan_solve(&p);
    double t1 = now_seconds();
    int ok = static_plan_valid(&p);
    double t2 = now_seconds();
    printf("large: 20000 buffers, solve %.3f s, valid %.3f s; peak %zu, lower bound %zu (x%.4f), naive %zu\n",
           t1 - t0, t2 - t1, p.peak, p.lower_bound, (double)p.peak / (double)p.lower_bound, p.naive_sum);
    CHECK(ok, "large: plan not valid");
    CHECK(p.lower_bound <= p.peak && p.peak <= p.naive_sum, "large: bounds broken");
    static_plan_free(&p);
}

// Misuse is fatal: run it in a child and expect exit status 1.
static int dies(void (*fn)(void)) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        fn();
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 1;
}

static void release_twice(void) {
    StaticPlan p;
    static_plan_init(&p, 64);
    int id = static_plan_alloc(&p, 10, 0, 0);
    static_plan_release(&p, id);
    static_plan_release(&p, id);
}

static void release_unknown(void) {
    StaticPlan p;
    static_plan_init(&p, 64);
    static_plan_alloc(&p, 10, 0, 0);
    static_plan_release(&p, 1);
}

int main(void) {
    test_stack();
    test_gap();
    test_best_fit();
    test_alignment();
    test_random();
    test_determinism();
    test_large();
    CHECK(dies(release_twice), "releasing a buffer twice should be fatal");
    CHECK(dies(release_unknown), "releasing an unknown id should be fatal");
    return check_summary();
}
