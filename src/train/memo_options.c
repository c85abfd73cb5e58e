// MEMO's α for a memory budget on this machine (--mem-budget B --memo auto, ctron plan --memo):
// memory/memo_plan.h's search with the speeds measured here or given.
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "memory/ledger_report.h"
#include "memory/memo_plan.h"
#include "train/trainer.h"
#include "util/common.h"
#include "util/peak.h"

static int threads_of(const TrainOptions *o) { return o->threads > 0 ? o->threads : omp_get_max_threads(); }
static unsigned tempo_of(const TrainOptions *o) { return o->flash ? ATTN_FLASH : 0; }

// The host link through an offload pool of 64 MiB (host memory, or --offload-dir's file). A test hook:
// CTRON_TEST_MEMO_LINK_GBPS=X0,X1,… stands for the measurement, X_i on the launcher's world rank i
// (OMPI_COMM_WORLD_RANK or PMIX_RANK; 0 without one): ranks that measure differently.
static double measure_link(const TrainOptions *o) {
    const char *fake = getenv("CTRON_TEST_MEMO_LINK_GBPS");
    if (fake && *fake) {
        const char *rank = getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : getenv("PMIX_RANK");
        int i = rank ? atoi(rank) : 0;
        const char *at = fake;
        for (; i > 0 && strchr(at, ','); i--) at = strchr(at, ',') + 1;   // past the list: its last value
        return strtod(at, NULL) * 1e9;
    }
    char err[256];
    Backend *be = backend_open("cpu", PRECISION_FP32, err, sizeof err);
    if (!be) ctron_fatal("%s", err);
    double bps = memo_measure_link_bps(be, (size_t)64 << 20, o->offload_dir);
    backend_close(be);
    return bps;
}

// The speeds every rank plans with once train_memo_agree_speeds has run (rank 0's).
static MemoSpeeds agreed;
static int have_agreed;

// The speeds a plan uses: given (> 0), else rank 0's once agreed, else measured: the host link
// (measure_link) and the GEMM rate `ctron peak` cached or measures. The TP link's is always given
// (--tp-link-gbps: one process cannot measure it; the same flag on every rank).
static MemoSpeeds speeds(const TrainOptions *o, double link_gbps, double gemm_gflops, int *measured) {
    MemoSpeeds sp = {gemm_gflops * 1e9, link_gbps * 1e9, o->tp_link_gbps * 1e9};
    *measured = 0;
    if (have_agreed) {
        if (!(sp.link_bps > 0)) sp.link_bps = agreed.link_bps, *measured |= 1;
        if (!(sp.gemm_flops > 0)) sp.gemm_flops = agreed.gemm_flops, *measured |= 2;
    }
    // Measured once per process: the CLI's validation and the run's setup each build the policy, and two
    // measurements on a loaded machine could pick two different α mixes for one run.
    static double link_measured;
    if (!(sp.link_bps > 0)) {
        if (!(link_measured > 0)) link_measured = measure_link(o);
        sp.link_bps = link_measured;
        *measured |= 1;
    }
    if (!(sp.gemm_flops > 0)) {
        double g;
        int t = threads_of(o);
        const char *prec = o->precision == PRECISION_BF16 ? "bf16" : "fp32";
        if (peak_gflops_cached_prec(t, prec, &g) != 0) {
            g = peak_gflops_measure_prec(t, prec);
            char err[256];
            (void)peak_gflops_store_prec(t, prec, g, err, sizeof err);
        }
        sp.gemm_flops = g * 1e9;
        *measured |= 2;
    }
    return sp;
}

// "α 0.5 (64 of 128 positions swapped)", or a mix's "α per layer 0:memo@0.5,1:memo@0.25,… (64 or 32 of
// 128 positions swapped)".
static void describe_mix(const MemoPlanResult *r, const ActShape *sh, const MemoryPolicy *p, char *buf, size_t len) {
    char a[24], list[400];
    if (r->n_hi == 0) {
        snprintf(buf, len, "α %s (%ld of %ld positions swapped)", policy_alpha_text(p->memo_alpha, a, sizeof a),
                 r->positions, sh->s);
        return;
    }
    policy_describe(p, list, sizeof list);
    snprintf(buf, len, "α per layer %s (%ld of %ld positions swapped in %d layers, %ld in the other %ld)", list,
             r->positions, sh->s, r->n_hi, r->positions_lo, sh->L - r->n_hi);
}

void train_memo_agree_speeds(const TrainOptions *o, CommGroup *world) {
    float v[2] = {0.0f, 0.0f};   // GB/s and GFLOP/s: what rank 0 measured, rounded as every rank gets it
    if (world->rank == 0) {
        int measured;
        MemoSpeeds sp = speeds(o, 0.0, 0.0, &measured);
        v[0] = (float)(sp.link_bps / 1e9);
        v[1] = (float)(sp.gemm_flops / 1e9);
    }
    if (world->size > 1) comm_broadcast(world, v, 2, 0);
    agreed.link_bps = (double)v[0] * 1e9;
    agreed.gemm_flops = (double)v[1] * 1e9;
    have_agreed = 1;
}

int train_memo_policy(const TrainOptions *o, MemoryPolicy *p, char *err, size_t errlen) {
    int measured;
    // Several ranks before they agree (the CLI's validation on each rank): whether some α fits does not
    // depend on the speeds, only which one is fastest; so nothing is measured or said until the run's
    // setup plans with rank 0's speeds (train_memo_agree_speeds).
    int provisional = o->world_size > 1 && !have_agreed;
    MemoSpeeds sp = {1e9, 1e9, o->tp_link_gbps * 1e9};
    if (!provisional) sp = speeds(o, 0.0, 0.0, &measured);
    ActShape sh = train_act_shape(o);
    MemoPlanResult r;
    if (memo_plan(&sh, tempo_of(o), (Precision)o->precision, threads_of(o), o->mem_budget, o->offload_budget, &sp,
                  &r) != 0) {
        char b1[32], b2[32];
        snprintf(err, errlen, "--mem-budget %s --memo auto: no α fits; the least (α 0, every token recomputed) needs %s "
                 "(see ctron plan --memo)", format_bytes(o->mem_budget, b1, sizeof b1),
                 format_bytes((double)(r.arena_bytes + r.scratch_bytes), b2, sizeof b2));
        return -1;
    }
    memo_plan_policy(&r, &sh, tempo_of(o), p);
    p->arena_budget = (size_t)o->mem_budget - r.scratch_bytes;
    char mix[512];
    describe_mix(&r, &sh, p, mix, sizeof mix);
    static int printed;   // the same plan again (the run's setup after the CLI's validation): said once
    char tp_link[48] = "";
    if (sh.t > 1) snprintf(tp_link, sizeof tp_link, ", %.4g GB/s TP link", sp.tp_link_bps / 1e9);
    if (!provisional && !printed++)
        printf("memo plan: %s for %.4g GB/s host link, %.1f GFLOP/s%s\n", mix, sp.link_bps / 1e9, sp.gemm_flops / 1e9,
               tp_link);
    return 0;
}

int train_print_memo_plan(FILE *f, const TrainOptions *o, double budget, double link_gbps, double gemm_gflops) {
    int measured;
    MemoSpeeds sp = speeds(o, link_gbps, gemm_gflops, &measured);
    ActShape sh = train_act_shape(o);
    MemoPlanResult r;
    int ok = memo_plan(&sh, tempo_of(o), (Precision)o->precision, threads_of(o), budget, o->offload_budget, &sp, &r) == 0;
    char b1[32], b2[32], b3[32], b4[32];
    char tp_text[32] = "", tp_link[64] = "";   // a TP rank's share: its bytes and its work; the TP link
    if (sh.t > 1) snprintf(tp_text, sizeof tp_text, " t=%ld (per rank)", (long)sh.t);
    if (sh.t > 1) snprintf(tp_link, sizeof tp_link, ", TP link %.2f GB/s (given)", sp.tp_link_bps / 1e9);
    fprintf(f, "memo plan for %s of activations per rank: %s\n", format_bytes(budget, b1, sizeof b1),
            ok ? "every layer memo" : "nothing fits");
    fprintf(f, "  L=%ld h=%ld a=%ld s=%ld b=%ld v=%ld%s, %s activations, %s attention; host link %.2f GB/s (%s), "
               "%.1f GFLOP/s (%s)%s\n", sh.L, sh.h, sh.a, sh.s, sh.b, sh.v, tp_text, sh.elem_bytes == 2 ? "bf16" : "fp32",
            o->flash ? "flash" : "standard", sp.link_bps / 1e9, measured & 1 ? "measured" : "given", sp.gemm_flops / 1e9,
            measured & 2 ? "measured sgemm peak" : "given", tp_link);
    MemoryPolicy pol;
    memo_plan_policy(&r, &sh, tempo_of(o), &pol);
    char mix[512], list[400], a[24];
    describe_mix(&r, &sh, &pol, mix, sizeof mix);
    fprintf(f, "  %s, the rest recomputed\n", mix);
    fprintf(f, "  predicted activation peak %s (arena %zu) + attention%s scratch %s; host pool %s\n",
            format_bytes((double)r.act_peak, b1, sizeof b1), r.arena_bytes, o->precision == PRECISION_BF16 ? " and GEMM" : "",
            format_bytes((double)r.scratch_bytes, b2, sizeof b2), format_bytes((double)r.pool_bytes, b3, sizeof b3));
    for (int k = 0; k < (r.n_hi ? 2 : 1); k++) {
        const MemoTime *t = k == 0 && r.n_hi ? &r.layer : &r.layer_lo;
        long again = sh.s - (k == 0 && r.n_hi ? r.positions : r.positions_lo);   // the recomputed positions
        char lora_term[48] = "", tp_term[96] = "";   // the adapters' part of the recompute; its repeated all-reduce
        if (sh.lora_rank > 0)
            snprintf(lora_term, sizeof lora_term, " (adapters %.3g ms)", r.cost.lora_s * (double)again / (double)sh.s * 1e3);
        if (sh.t > 1)
            snprintf(tp_term, sizeof tp_term, ", TP all-reduce again %.3g ms (%.0f B)", t->tp_s * 1e3,
                     memo_recompute_tp_bytes(&sh, again));
        fprintf(f, "  per layer%s: forward %.3g ms, backward %.3g ms, recompute %.3g ms%s%s, transfer %.3g ms each way, "
                   "stall %.3g ms\n", !r.n_hi ? "" : k == 0 ? " at r_hi" : " at r_lo", t->forward_s * 1e3,
                t->backward_s * 1e3, t->recompute_s * 1e3, lora_term, tp_term, t->transfer_s * 1e3, t->stall_s * 1e3);
    }
    fprintf(f, "  predicted step %.4g s per micro-batch; full recompute (every position recomputed) %.4g s: %s\n",
            r.step_s, r.full_step_s, r.step_s < r.full_step_s ? "memo is faster" : "no faster");
    if (ok && r.n_hi == 0)
        fprintf(f, "  ctron train flags: --memo %s%s\n", policy_alpha_text(pol.memo_alpha, a, sizeof a),
                o->flash ? " --attention flash" : "");
    else if (ok) {
        policy_describe(&pol, list, sizeof list);
        fprintf(f, "  ctron train flags: --recompute-layers %s%s\n", list, o->flash ? " --attention flash" : "");
    }
    policy_free(&pol);
    (void)b4;
    return ok ? 0 : -1;
}
