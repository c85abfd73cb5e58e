#include "memory/memo_plan.h"
#include <string.h>
#include "memory/flops.h"
#include "memory/offload_pool.h"
#include "memory/planner.h"
#include "util/common.h"

void memo_plan_policy(const MemoPlanResult *r, const ActShape *sh, unsigned tempo, MemoryPolicy *pol) {
    char err[64];
    memset(pol, 0, sizeof *pol);
    pol->act_dtype = sh->elem_bytes == 2 ? ACT_BF16 : ACT_FP32;
    pol->masks = sh->masks;
    pol->tempo = tempo & ATTN_FLASH;
    pol->memo_alpha = (float)r->alpha;
    if (policy_build(pol, (int)sh->L, "memo", NULL, 1, NULL, err, sizeof err) != 0) ctron_fatal("memo_plan: %s", err);
}

// What gpt_init allocates for memo layers' attention: flash's tiles, and without flash the selective
// recompute's backward scratch.
static size_t memo_scratch(const ActShape *sh, unsigned tempo, int threads) {
    size_t fl = plan_attention_scratch_bytes(NULL, sh, threads, ATTN_FLASH, 0);
    size_t re = tempo & ATTN_FLASH ? 0
                : backend_cpu_attention_scratch_floats(ATTN_SCRATCH_RECOMPUTE, (int)sh->s, (int)sh->b, (int)sh->a,
                                                       (int)(sh->kv > 0 ? sh->kv : sh->a), (int)sh->h, threads) *
                      sizeof(float);
    return fl > re ? fl : re;
}

static void evaluate(const ActShape *sh, unsigned tempo, Precision precision, int threads, const MemoSpeeds *sp,
                     long r, MemoPlanResult *x) {
    memset(x, 0, sizeof *x);
    x->positions = r;
    x->alpha = r >= sh->s ? 1.0 : (double)r / (double)sh->s;
    MemoryPolicy pol;
    memo_plan_policy(x, sh, tempo, &pol);
    x->act_peak = act_peak_bytes(sh, &pol);
    x->arena_bytes = x->act_peak + (size_t)act_max_entries(&pol) * 64;
    x->scratch_bytes = memo_scratch(sh, tempo, threads) + plan_gemm_scratch_bytes(sh, precision, tempo & ATTN_FLASH, threads);
    x->pool_bytes = act_memo_pool_bytes(sh, &pol);
    x->cost = memo_layer_cost(sh, &pol, sp->gemm_flops, sp->link_bps);
    x->layer = memo_layer_time(&x->cost, (double)r / (double)sh->s);
    x->head_s = 6.0 * (double)sh->s * (double)sh->b * (double)sh->h * (double)sh->v / sp->gemm_flops;
    x->step_s = (double)sh->L * x->layer.layer_s + x->head_s;
    x->full_step_s = (double)sh->L * memo_layer_time(&x->cost, 0.0).layer_s + x->head_s;
    policy_free(&pol);
}

int memo_plan(const ActShape *sh, unsigned tempo, Precision precision, int threads, double budget, double pool_budget,
              const MemoSpeeds *sp, MemoPlanResult *out) {
    MemoPlanResult best, x;
    int found = 0;
    for (long r = 0;; r = r + MEMO_TILE < sh->s ? r + MEMO_TILE : sh->s) {
        evaluate(sh, tempo, precision, threads, sp, r, &x);
        int fits = (double)(x.arena_bytes + x.scratch_bytes) <= budget && (pool_budget <= 0 || (double)x.pool_bytes <= pool_budget);
        if (fits && (!found || x.step_s < best.step_s)) {
            best = x;
            found = 1;
        }
        if (r >= sh->s) break;
    }
    if (!found) evaluate(sh, tempo, precision, threads, sp, 0, &best);
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
