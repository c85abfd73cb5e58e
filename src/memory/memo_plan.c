#include "memory/memo_plan.h"
#include <math.h>
#include <string.h>
#include "memory/flops.h"
#include "memory/offload_pool.h"
#include "memory/planner.h"
#include "util/common.h"

float memo_alpha_of(long r, long s) {
    if (r >= s) return 1.0f;
    float a = (float)((double)r / (double)s);
    while (memo_swap_positions(s, (double)a) < r) a = nextafterf(a, 2.0f);
    return a;
}

long memo_plan_layer_positions(const MemoPlanResult *r, int l) {
    return l % 2 == 0 && l / 2 < r->n_hi ? r->positions : r->positions_lo;
}

void memo_plan_policy(const MemoPlanResult *r, const ActShape *sh, unsigned tempo, MemoryPolicy *pol) {
    char err[64];
    memset(pol, 0, sizeof *pol);
    pol->act_dtype = sh->elem_bytes == 2 ? ACT_BF16 : ACT_FP32;
    pol->masks = sh->masks;
    pol->tempo = (tempo & ATTN_FLASH) | act_keep_bits(sh);   // what the adapters keep (the shape's)
    pol->memo_alpha = memo_alpha_of(r->positions_lo, sh->s);
    if (policy_build(pol, (int)sh->L, "memo", NULL, 1, NULL, err, sizeof err) != 0) ctron_fatal("memo_plan: %s", err);
    for (int l = 0; r->n_hi > 0 && l < pol->layers; l++) pol->alpha[l] = memo_alpha_of(memo_plan_layer_positions(r, l), sh->s);
}

// What gpt_init allocates for memo layers' attention: flash's tiles, and without flash the selective
// recompute's backward scratch (a TP rank's heads).
static size_t memo_scratch(const ActShape *sh, unsigned tempo, int threads) {
    size_t fl = plan_attention_scratch_bytes(NULL, sh, threads, ATTN_FLASH, 0);
    int t = sh->t > 1 ? sh->t : 1;
    size_t re = tempo & ATTN_FLASH ? 0
                : backend_cpu_attention_scratch_floats(ATTN_SCRATCH_RECOMPUTE, (int)sh->s, (int)sh->b, (int)sh->a / t,
                                                       (int)(sh->kv > 0 ? sh->kv : sh->a) / t, (int)act_q_width(sh) / t, threads) *
                      sizeof(float);
    return fl > re ? fl : re;
}

// The output layer on a TP rank's vocabulary share: forward, dX and dW (2 + 2 + 2 FLOPs per weight and
// position); under adapters the head is frozen (no dW), 4.
static double head_seconds(const ActShape *sh, const MemoSpeeds *sp) {
    double t = sh->t > 1 ? (double)sh->t : 1.0, passes = sh->lora_rank > 0 ? 4.0 : 6.0;
    return passes * (double)sh->s * (double)sh->b * (double)sh->h * (double)sh->v / t / sp->gemm_flops;
}

void memo_plan_evaluate(const ActShape *sh, unsigned tempo, Precision precision, int threads, const MemoSpeeds *sp,
                        long r_hi, long r_lo, int n_hi, MemoPlanResult *x) {
    memset(x, 0, sizeof *x);
    if (n_hi <= 0 || r_hi == r_lo) {
        n_hi = 0;
        r_hi = r_lo;
    }
    x->positions = r_hi;
    x->positions_lo = r_lo;
    x->n_hi = n_hi;
    x->alpha = r_hi >= sh->s ? 1.0 : (double)r_hi / (double)sh->s;
    MemoryPolicy pol;
    memo_plan_policy(x, sh, tempo, &pol);
    x->act_peak = act_peak_bytes(sh, &pol);
    x->arena_bytes = x->act_peak + (size_t)act_max_entries(&pol) * 64;
    x->scratch_bytes = memo_scratch(sh, tempo, threads) + plan_gemm_scratch_bytes(sh, precision, tempo & ATTN_FLASH, threads);
    x->pool_bytes = act_memo_pool_bytes(sh, &pol);
    x->cost = memo_layer_cost(sh, &pol, sp->gemm_flops, sp->link_bps, sp->tp_link_bps);
    x->layer = memo_layer_time(&x->cost, (double)r_hi / (double)sh->s);
    x->layer_lo = memo_layer_time(&x->cost, (double)r_lo / (double)sh->s);
    x->head_s = head_seconds(sh, sp);
    x->step_s = (double)n_hi * x->layer.layer_s + (double)(sh->L - n_hi) * x->layer_lo.layer_s + x->head_s;
    x->full_step_s = (double)sh->L * memo_layer_time(&x->cost, 0.0).layer_s + x->head_s;
    policy_free(&pol);
}

int memo_plan(const ActShape *sh, unsigned tempo, Precision precision, int threads, double budget, double pool_budget,
              const MemoSpeeds *sp, MemoPlanResult *out) {
    // the grid, and one layer's time at each point (the same for every layer: a layer's own r decides it)
    long n_grid = (sh->s + MEMO_TILE - 1) / MEMO_TILE + 1;
    long *grid = xcalloc(sizeof(long) * (size_t)n_grid);
    double *layer_s = xcalloc(sizeof(double) * (size_t)n_grid);
    MemoPlanResult best, x;
    memo_plan_evaluate(sh, tempo, precision, threads, sp, 0, 0, 0, &x);
    for (long i = 0; i < n_grid; i++) {
        grid[i] = i * MEMO_TILE < sh->s ? i * MEMO_TILE : sh->s;
        layer_s[i] = memo_layer_time(&x.cost, (double)grid[i] / (double)sh->s).layer_s;
    }
    double all_bytes = x.cost.swap_bytes;   // a layer's pool bytes at all s positions; at r, r/s of them
    int even = (int)(sh->L + 1) / 2, found = 0;
    for (long lo = 0; lo < n_grid; lo++)
        for (long hi = lo; hi < n_grid; hi++) {
            if (hi > lo && !(layer_s[hi] < layer_s[lo])) continue;   // a slower r_hi: the uniform r_lo is better
            int n_hi = hi > lo ? even : 0;
            if (n_hi && pool_budget > 0) {   // as many r_hi layers as the host pool holds
                double lo_pool = (double)sh->L * all_bytes * (double)grid[lo] / (double)sh->s;
                double extra = all_bytes * (double)(grid[hi] - grid[lo]) / (double)sh->s;
                double room = (pool_budget - lo_pool) / extra;
                if (room < (double)n_hi) n_hi = room < 1.0 ? 0 : (int)room;
                if (!n_hi) continue;
            }
            // as many r_hi layers as may be, or one: with r_lo = 0 a single swapping layer needs one stage slot
            for (int k = 0; k < (n_hi > 1 ? 2 : 1); k++) {
                int n = k ? 1 : n_hi;
                double t = (double)n * layer_s[hi] + (double)(sh->L - n) * layer_s[lo] + x.head_s;
                if (found && !(t < best.step_s * (1.0 - 1e-12))) continue;
                memo_plan_evaluate(sh, tempo, precision, threads, sp, grid[hi], grid[lo], n, &x);
                int fits = (double)(x.arena_bytes + x.scratch_bytes) <= budget &&
                           (pool_budget <= 0 || (double)x.pool_bytes <= pool_budget);
                if (fits) {
                    best = x;
                    found = 1;
                }
            }
        }
    if (!found) memo_plan_evaluate(sh, tempo, precision, threads, sp, 0, 0, 0, &best);
    free(grid);
    free(layer_s);
    *out = best;
    return found ? 0 : -1;
}

double memo_measure_link_bps(Backend *be, size_t bytes, const char *dir) {
    char err[640];
    OffloadPool *pool = offload_pool_open(be, bytes, dir, err, sizeof err);
    if (!pool) ctron_fatal("%s", err);
    void *buf = be->alloc(be, bytes);
    be->memset(be, buf, 1, bytes);
    double best_out = 0.0, best_in = 0.0;
    for (int i = 0; i < 3; i++) {   // the best of three, each way (the first touches the pages)
        double t0 = now_seconds();
        offload_pool_wait(pool, offload_pool_store(pool, 0, buf, bytes));
        double t1 = now_seconds();
        offload_pool_wait(pool, offload_pool_load(pool, 0, buf, bytes));
        double t2 = now_seconds();
        if (t1 > t0 && (double)bytes / (t1 - t0) > best_out) best_out = (double)bytes / (t1 - t0);
        if (t2 > t1 && (double)bytes / (t2 - t1) > best_in) best_in = (double)bytes / (t2 - t1);
    }
    be->free(be, buf);
    offload_pool_close(pool);
    return best_out < best_in ? best_out : best_in;
}
