// The memory-budget planner (memory/planner.h): a budget that holds everything keeps everything; as
// the budget falls the plan's recompute FLOPs never fall and its bytes always fit; no plan below
// the least memory any plan needs, and then the plan returned is that least one.
#include <math.h>
#include "check.h"
#include "memory/planner.h"
#include "util/common.h"

int main(void) {
    ActShape sh = {.s = 256, .b = 4, .h = 768, .a = 12, .L = 12, .v = 8192, .elem_bytes = 2, .masks = MASKS_BYTES,
                   .dropout = 1, .t = 1, .sp = 0};
    MemPlan p;
    CHECK(plan_memory(&sh, 2, 1e15, 0.0, &p) == 0, "a huge budget must fit");
    CHECK(p.n_full == 0 && p.n_sel == 0 && p.masks == MASKS_BYTES && p.tempo == 0 && p.extra_flops == 0.0,
          "a huge budget should keep everything (got %d full, %d selective, masks %d, tempo %u)", p.n_full, p.n_sel,
          (int)p.masks, p.tempo);
    size_t all = p.arena_bytes + p.scratch_bytes;
    MemPlan least;
    CHECK(plan_memory(&sh, 2, 1.0, 0.0, &least) == -1, "1 byte cannot fit");
    CHECK(least.n_full + least.n_sel == 12 && least.n_full >= 11 && least.masks == MASKS_REGEN && (least.tempo & MINI_SEQ),
          "the least-memory plan should recompute (almost) every layer in full, regenerate masks and chunk the MLP "
          "and output layer (got %d full, %d selective, masks %d, options %u)", least.n_full, least.n_sel,
          (int)least.masks, least.tempo);
    double prev_flops = -1.0;
    int steps = 0;
    for (double budget = (double)all; budget >= (double)(least.arena_bytes + least.scratch_bytes); budget *= 0.9, steps++) {
        CHECK(plan_memory(&sh, 2, budget, 0.0, &p) == 0, "budget %.0f: no plan although the least needs %zu", budget,
              least.arena_bytes);
        CHECK((double)(p.arena_bytes + p.scratch_bytes) <= budget, "budget %.0f: plan needs %zu + %zu", budget,
              p.arena_bytes, p.scratch_bytes);
        // the planner's closed-form peak is the analytic model's for the plan's policy
        MemoryPolicy pol;
        plan_policy(&p, &sh, &pol);
        ActShape psh = sh;
        psh.masks = p.masks;
        psh.mini_seq = pol.mini_seq;
        CHECK(act_peak_bytes(&psh, &pol) == p.act_peak, "budget %.0f: plan peak %zu, analytic model %zu", budget,
              p.act_peak, act_peak_bytes(&psh, &pol));
        policy_free(&pol);
        CHECK(p.extra_flops >= prev_flops, "budget %.0f: recompute FLOPs fell (%.3g < %.3g) with less memory", budget,
              p.extra_flops, prev_flops);
        prev_flops = p.extra_flops;
    }
    CHECK(steps >= 5, "only %d budgets between everything and the least", steps);
    // With an offload pool: never more recompute than without, the pool within its budget, the
    // closed form equal to the analytic model (stage slots included), and at some budget offload
    // replaces recompute outright.
    int offloaded = 0, fewer = 0;
    for (double budget = (double)all; budget >= (double)(least.arena_bytes + least.scratch_bytes); budget *= 0.9) {
        MemPlan q;
        double pool_budget = 2.0 * (double)all;
        if (plan_memory(&sh, 2, budget, 0.0, &p) != 0) continue;
        CHECK(plan_memory(&sh, 2, budget, pool_budget, &q) == 0, "budget %.0f with a pool: no plan", budget);
        CHECK(q.extra_flops <= p.extra_flops, "budget %.0f: offload raised the FLOPs %.3g > %.3g", budget, q.extra_flops,
              p.extra_flops);
        CHECK((double)q.pool_bytes <= pool_budget && (double)(q.arena_bytes + q.scratch_bytes) <= budget,
              "budget %.0f: pool %zu or device %zu over budget", budget, q.pool_bytes, q.arena_bytes + q.scratch_bytes);
        MemoryPolicy pol;
        plan_policy(&q, &sh, &pol);
        ActShape psh = sh;
        psh.masks = q.masks;
        psh.mini_seq = pol.mini_seq;
        CHECK(act_peak_bytes(&psh, &pol) == q.act_peak && act_offload_pool_bytes(&psh, &pol) == q.pool_bytes,
              "budget %.0f with a pool: plan peak %zu / pool %zu, analytic model %zu / %zu", budget, q.act_peak,
              q.pool_bytes, act_peak_bytes(&psh, &pol), act_offload_pool_bytes(&psh, &pol));
        policy_free(&pol);
        offloaded += q.offload != 0;
        fewer += q.extra_flops < p.extra_flops;
    }
    CHECK(offloaded > 0 && fewer > 0, "no budget offloaded (%d) or saved FLOPs by it (%d)", offloaded, fewer);
    printf("with an offload pool: %d budgets offload, %d of them with fewer recompute FLOPs\n", offloaded, fewer);
    // Memory that Tempo's free parts and mask bits can save costs no recompute at all.
    CHECK(plan_memory(&sh, 2, (double)all - 1.0, 0.0, &p) == 0 && p.extra_flops == 0.0 && p.passes > 0,
          "just below everything, a plan without recompute should fit (got %.3g FLOPs)", p.extra_flops);
    // A deep model plans at once (the search is O(L log L) per option set).
    ActShape deep = sh;
    deep.L = 20000;
    deep.h = 8;
    deep.a = 2;
    CHECK(plan_memory(&deep, 2, 1e9, 0.0, &p) == 0 || p.arena_bytes > 1e9, "20000 layers");
    // At a long sequence selective recompute's scratch (3s² floats per thread) no longer fits and
    // flash attention takes its place.
    ActShape lng = sh;
    lng.s = 16384;
    lng.b = 1;
    CHECK(plan_memory(&lng, 2, 8.0 * 1073741824.0, 0.0, &p) == 0 && (p.tempo & ATTN_FLASH),
          "s = 16384 in 8 GiB should plan flash attention (got options %u, scratch %zu)", p.tempo, p.scratch_bytes);
    double b;
    CHECK(parse_bytes("6GiB", &b) == 0 && b == 6.0 * 1073741824.0, "6GiB");
    CHECK(parse_bytes("512MB", &b) == 0 && b == 512e6, "512MB");
    CHECK(parse_bytes("2e9", &b) == 0 && b == 2e9, "2e9");
    CHECK(parse_bytes("-1G", &b) != 0 && parse_bytes("6 GiB", &b) != 0 && parse_bytes("lots", &b) != 0 &&
              parse_bytes("5e67", &b) != 0, "bad sizes");
    return check_summary();
}
