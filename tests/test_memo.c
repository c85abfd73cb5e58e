// MEMO (--memo, model/memo.h): token-wise swapping and recomputation.
//  1. The recompute of positions [r, s) is bitwise the memo forward's own values (every tensor, every
//     position), GPT-2 and llama, flash on and off, fp32 and bf16 storage: the forward runs the layer in the
//     same two token ranges the backward recomputes.
//  2. Against the plain run (with flash: none; without: selective): α = 0 and α = 1 (one range: the whole
//     sequence) are bitwise over 3 steps; a split α is within the rounding of OpenBLAS's row-chunked sgemm,
//     which is not bitwise the whole-row call (layer 0's q: 36 % of the elements differ in their last bits
//     at fp32; with bf16 storage one element of k rounds the other way, and the rest follows from it):
//     gradients within 3e-6 relative in fp32 (measured 1.8e-6 after 3 steps), 3e-3 with bf16 storage
//     (measured 1.4e-3; the repo's bf16-storage tolerance, as Tempo's).
//     Every mask mode; a per-layer list. Without flash the memo layers' attention is the tile kernel and
//     the plain run's the standard one: within 2e-6.
//  3. The ledger: every name of every layer at the end of the forward and at the step's peak, memo_stage,
//     and the pool's swapped slices, measured == the analytic model, for α 0 .. 1, both families, flash
//     on and off, masks bytes/bits/regen, fp32/bf16, per-layer lists; and one case written out by hand.
//  4. The step-time model's parts on hand-worked numbers.
//  5. α per layer ("0:memo@0.34,1:memo@0.67,…"): the parser (values, its description, refusals naming the
//     value); the ledger == the model per layer and name for mixes, memo_stage's slots each as large as their
//     own layers' (by hand); a list whose every layer carries the --memo α is bitwise the uniform run; a mix
//     of α 0 and α 1 layers bitwise the plain run, a split mix within the split-α tolerance; and the planner
//     picks a mix where one slot of the faster α fits and two do not, pinned at fixed rates.
//  6. --static-plan: memo runs placed by the recorded plan are bitwise the default layout's; the plan's
//     saved tensors peak at the predicted bytes, memo_stage one buffer of the predicted size.
//  7. A TP rank's share (t = 2): the swapped bytes by hand, the time model's work halved (the runs under
//     mpirun: tests/test_memo_tp.sh).
//  8. Adapters (LoRA, LoRA-FA, adapter dropout) in memo layers: α 0 / α 1 bitwise the plain LoRA run (fp32 and
//     bf16 storage), split α and a per-layer mix within 3e-6; the ledger == the model (lora_* kept whole) in
//     24 configurations; LoRA-FA's swapped and kept bytes by hand; memo_plan counts the adapters.
//  9. The time model's terms for what the recompute repeats, by hand at t = 2: the attention projection's
//     all-reduce over the recomputed rows (bytes and seconds at a TP link rate) and the adapters' v·Bᵀ FLOPs at
//     r = 4, GPT-2 and llama, and the planner's step and full-recompute times carrying both.
// 10. The layer's own forward and backward under adapters, by hand at t = 2 (and the adapters' FLOPs at t = 1):
//     the adapters' GEMMs added to both, the frozen base's weight-gradient GEMMs taken from the backward, LoRA
//     and LoRA-FA, GPT-2 and llama; without adapters the 3F layer exactly.
#include <math.h>
#include <string.h>
#include <stdlib.h>
#include "check.h"
#include "memory/flops.h"
#include "memory/memo_model.h"
#include "memory/memo_plan.h"
#include "model/gpt.h"
#include "model/memo.h"
#include "model/saved.h"
#include "model/workspace.h"
#include "train/adamw.h"
#include "train/grad_norm.h"
#include "util/common.h"

enum { STEPS = 3, L = 3, S = 192, B = 2 };

// lora: 0 none, 1 LoRA, 2 LoRA-FA (rank 4 on every site of the family, with peft's dropout on the adapters'
// input, so that a token range's mask rows are the whole site's).
static GPTConfig cfg_of(int llama, int lora) {
    GPTConfig c = {.layers = L, .hidden = 32, .heads = 4, .seq = S, .batch = B, .vocab = 256, .dropout = 0.1f};
    if (lora) {
        c.lora_rank = 4;
        c.lora_alpha = 16.0f;
        c.lora_fa = lora == 2;
        c.lora_dropout = 0.1f;
    }
    if (llama) {
        c.arch = ARCH_LLAMA;
        c.kv_heads = 2;
        c.ffn = 48;
        c.qk_norm = llama == 2;   // Qwen3: the per-head q/k norms' inputs and 1/rms swapped and recomputed by rows too
        c.fused_proj = llama == 3;   // Phi-3: one adapter over q|k|v and one over gate|up, run over token ranges
        c.sliding_window = llama == 4 ? 50 : 0;   // Mistral's kind: a range's queries reach into the range before
        c.rotary_dim = llama == 4 ? 4 : 0;         // and RoPE on half of each head (partial rotary), by rows too
    }
    return c;
}

typedef struct {
    double loss[STEPS];
    float *grads[STEPS];
    float *params;
    size_t n;
    size_t peak;   // the ledger's activation peak of the run
} Trace;

typedef struct {
    int llama, flash, bf16;
    MaskMode masks;
    const char *rc, *list;
    float alpha;
    int lora;   // cfg_of's
} Setup;

static void make_policy(MemoryPolicy *pol, const Setup *u) {
    char err[256];
    memset(pol, 0, sizeof *pol);
    pol->act_dtype = u->bf16 ? ACT_BF16 : ACT_FP32;
    pol->masks = u->masks;
    pol->tempo = u->flash ? ATTN_FLASH : 0;
    pol->memo_alpha = u->alpha;
    if (policy_build(pol, L, u->rc, NULL, 1, u->list, err, sizeof err) != 0) ctron_fatal("%s", err);
}

// Setup u's model (cfg_of its family and adapters) under its policy (make_policy's, in pol).
static void init_model(GPT *m, MemoryPolicy *pol, const Setup *u) {
    make_policy(pol, u);
    GPTConfig c = cfg_of(u->llama, u->lora);
    gpt_init(m, &c, pol);
}

static void tokens(int step, int32_t *tok, int32_t *tgt) {
    for (int i = 0; i < S * B; i++) { tok[i] = (i * 37 + step * 11) % 256; tgt[i] = (i * 13 + step) % 256; }
}

// --static-plan for the runs that follow (6.): the plan's saved tensors' most bytes live at once, unaligned
// (-1: not planned), and the ledger's peak over the planned steps.
static int g_static;
static long g_plan_saved_peak, g_plan_stage;
static int g_plan_unreleased;   // temporaries the recorded step never released (held to its end)
static size_t g_replay_peak, g_predicted_peak;

// The most bytes of `kind` live at once in a recorded plan (unaligned: the ledger's measure), and the
// one memo_stage buffer's bytes (-1: none, -2: more than one).
static long plan_live_peak(const StaticPlan *p, int kind, long *stage) {
    long best = 0;
    *stage = -1;
    for (int i = 0; i < p->n; i++) {
        if (p->bufs[i].kind == kind && p->bufs[i].tag == ACT_MEMO_STAGE) *stage = *stage == -1 ? (long)p->bufs[i].bytes : -2;
        long t = p->bufs[i].start, live = 0;
        for (int j = 0; j < p->n; j++) {
            long end = p->bufs[j].end < 0 ? p->clock : p->bufs[j].end;
            if (p->bufs[j].kind == kind && p->bufs[j].start <= t && t < end) live += (long)p->bufs[j].bytes;
        }
        if (live > best) best = live;
    }
    return best;
}

// With adapters: B non-zero (peft starts it at zero, and A's gradient would be), and the policy with the
// keep bits the model adds (the analytic model reads them from it).
static void adapters_start(GPT *m, MemoryPolicy *pol) {
    if (m->cfg.lora_rank <= 0) return;
    pol->tempo = m->policy.tempo;
    for (int i = 0; i < m->n_info; i++)
        if (strstr(m->info[i].name, "lora_B"))
            for (size_t e = 0; e < m->info[i].numel; e++)
                m->params[m->info[i].offset + e] = 0.02f * sinf((float)(e * 5 + m->info[i].full_index));
    gpt_params_changed(m);
}

static void run(Trace *t, const Setup *u) {
    MemoryPolicy pol;
    make_policy(&pol, u);
    GPTConfig c = cfg_of(u->llama, u->lora);
    GPT m;
    gpt_init(&m, &c, &pol);
    gpt_init_weights(&m, 5);
    adapters_start(&m, &pol);
    g_plan_saved_peak = g_plan_stage = -1;
    if (g_static) {
        static int32_t zeros[S * B];
        StepCtx ctx0 = {99, 1, 0, 1};
        StaticPlanReport r = gpt_plan_memory(&m, zeros, zeros, ctx0);
        CHECK(r.lower_bound <= r.peak && r.peak <= r.naive_sum && r.saved > 0 && r.temporaries > 0,
              "static plan: peak %zu, lower bound %zu, naive %zu", r.peak, r.lower_bound, r.naive_sum);
        const StaticPlan *tr = &m.mem.plan[STEP_TRAIN];
        g_plan_saved_peak = plan_live_peak(tr, MEM_SAVED, &g_plan_stage);
        g_plan_unreleased = 0;
        for (int i = 0; i < tr->n; i++) g_plan_unreleased += tr->bufs[i].kind == MEM_TEMP && tr->bufs[i].end < 0;
    }
    AdamW opt;
    adamw_init(&opt, m.be, m.n_params, 0.9f, 0.95f, 1e-8f, 0.1f);
    static int32_t tok[S * B], tgt[S * B];
    t->n = m.n_params;
    for (int step = 1; step <= STEPS; step++) {
        tokens(step, tok, tgt);
        gpt_zero_grad(&m);
        StepCtx ctx = {7, (uint32_t)step, 0, 1};
        t->loss[step - 1] = gpt_forward(&m, tok, tgt, S, B, ctx, 1.0f / (float)(S * B));
        gpt_backward(&m, tok, ctx);
        t->grads[step - 1] = xmalloc(m.n_params * sizeof(float));
        memcpy(t->grads[step - 1], m.grads, m.n_params * sizeof(float));
        adamw_step(&opt, &m, 2e-3f, grad_clip_scale(grad_global_norm(m.be, m.grads, m.n_params), 1.0f));
    }
    t->params = xmalloc(m.n_params * sizeof(float));
    memcpy(t->params, m.params, m.n_params * sizeof(float));
    g_replay_peak = t->peak = m.ledger.total_peak;
    g_predicted_peak = act_peak_bytes(&m.shape, &pol);
    adamw_free(&opt);
    gpt_free(&m);
    policy_free(&pol);
}

static double g_worst[2];   // the largest split-α gradient difference, fp32 and bf16 storage

static void trace_free(Trace *t) {
    for (int i = 0; i < STEPS; i++) free(t->grads[i]);
    free(t->params);
}

static double rel(const float *a, const float *b, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)a[i] * a[i];
    }
    return sqrt(num / den);
}

static void describe(const Setup *u, char *buf, size_t len) {
    snprintf(buf, len, "%s%s %s%s masks %s, %s α %.2f", u->llama == 4 ? "llama window 50, rotary 4 of 8" : u->llama == 3 ? "phi3" : u->llama == 2 ? "qwen3" : u->llama ? "llama" : "gpt2",
             u->lora == 2 ? " LoRA-FA" : u->lora ? " LoRA" : "", u->flash ? "flash " : "", u->bf16 ? "bf16" : "fp32",
             mask_mode_name(u->masks), u->list ? u->list : u->rc, (double)u->alpha);
}

// 2. Against the plain run, with flash.
static void test_plain(void) {
    const float alphas[] = {0.0f, 0.34f, 0.67f, 1.0f};   // 0, 64, 128, 192 positions swapped of 192
    static const int families[] = {0, 1, 2, 4};   // GPT-2, llama, Qwen3 (llama with q/k norms), a sliding window
    for (int f = 0; f < 4; f++)
        for (int bf16 = 0; bf16 < 2; bf16++) {
            int llama = families[f];
            Setup plain = {llama, 1, bf16, MASKS_BYTES, "none", NULL, 0.0f, 0};
            Trace ref;
            run(&ref, &plain);
            for (int mm = 0; mm < 3; mm++)
                for (int ai = 0; ai < 4; ai++) {
                    if (mm != 0 && ai != 1 && ai != 2) continue;   // the mask modes at the split α
                    Setup u = {llama, 1, bf16, (MaskMode)mm, "memo", NULL, alphas[ai], 0};
                    Trace t;
                    char what[160];
                    run(&t, &u);
                    describe(&u, what, sizeof what);
                    double worst = 0.0, lworst = 0.0;
                    for (int i = 0; i < STEPS; i++) {
                        double x = rel(ref.grads[i], t.grads[i], t.n), y = fabs(ref.loss[i] - t.loss[i]) / ref.loss[i];
                        if (x > worst) worst = x;
                        if (y > lworst) lworst = y;
                    }
                    if (ai == 0 || ai == 3) {   // one token range: the plain run's calls exactly
                        CHECK(memcmp(ref.loss, t.loss, sizeof t.loss) == 0, "%s: loss %.9g vs plain %.9g", what,
                              t.loss[0], ref.loss[0]);
                        int same = 1;
                        for (int i = 0; i < STEPS; i++) same &= memcmp(ref.grads[i], t.grads[i], t.n * sizeof(float)) == 0;
                        CHECK(same, "%s: gradients differ from the plain run's (rel %.3g)", what, worst);
                        CHECK(memcmp(ref.params, t.params, t.n * sizeof(float)) == 0, "%s: parameters differ", what);
                    } else {
                        // Within the tolerance; bitwise equal is allowed: the token ranges split the GEMMs by
                        // rows, which changes no row's sum where the BLAS kernel's k-order is independent of m
                        // (OpenBLAS's SKYLAKEX sgemm, session 16), and may change the last bits elsewhere
                        // (its Haswell/Zen kernels: 1e-7 relative, sessions 11-15).
                        // That the split really ran (not the plain run's calls): its ledger peak is below the
                        // plain run's, on every machine.
                        double tol = bf16 ? 3e-3 : 3e-6;
                        CHECK(worst < tol && lworst < (bf16 ? 1e-5 : 1e-7) && t.peak < ref.peak,
                              "%s: gradients rel %.3g (tolerance %.0e), loss rel %.3g, peak %zu (plain %zu)", what,
                              worst, tol, lworst, t.peak, ref.peak);
                        if (worst > g_worst[bf16]) g_worst[bf16] = worst;
                    }
                    trace_free(&t);
                }
            // a per-layer list: layers 0 and 2 memo, 1 none
            Setup u = {llama, 1, bf16, MASKS_BITS, NULL, "0:memo,1:none,2:memo", 0.5f, 0};
            Trace t;
            run(&t, &u);
            double x = rel(ref.grads[STEPS - 1], t.grads[STEPS - 1], t.n);
            CHECK(x < (bf16 ? 3e-3 : 3e-6), "%s list 0:memo,1:none,2:memo: gradients rel %.3g", llama ? "llama" : "gpt2", x);
            trace_free(&t);
            trace_free(&ref);
        }
}

// 1. Recompute == the memo forward's own values, bitwise; without flash, training near selective's.
static void test_recompute(void) {
    for (int v = 0; v < 10; v++) {   // v 8, 9: llama with a sliding window, flash off and on
        int llama = v < 8 ? v & 1 : 4, flash = v < 8 ? v >> 1 & 1 : v & 1, bf16 = v < 8 ? v >> 2 : 0;
        Setup u = {llama, flash, bf16, MASKS_BYTES, "memo", NULL, 0.34f, 0};
        MemoryPolicy pol;
        GPT m;
        init_model(&m, &pol, &u);
        gpt_init_weights(&m, 5);
        static int32_t tok[S * B], tgt[S * B];
        tokens(1, tok, tgt);
        StepCtx ctx = {7, 1, 0, 1};
        gpt_forward(&m, tok, tgt, S, B, ctx, 1.0f / (float)(S * B));
        // The last layer's forward left every tensor, all positions, in its working copies.
        int l = L - 1, r = memo_rows(&m, l), checked = 0;
        CHECK(r == 64, "α 0.34 of 192 positions: %d swapped, expected 64", r);
        float *fwd[ACT_N_LAYER] = {0};
        size_t bytes[ACT_N_LAYER] = {0};
        for (int n = 0; n < ACT_N_LAYER; n++) {
            if (!memo_swaps(&m.shape, pol.tempo, (ActName)n)) continue;
            bytes[n] = act_elements(&m.shape, (ActName)n) * sizeof(float);
            fwd[n] = xmalloc(bytes[n]);
            memcpy(fwd[n], work_slot(&m, (ActName)n, l), bytes[n]);
        }
        // as the backward does: the head leaves the arena first, then layer l is fetched and recomputed
        arena_pop_to(&m.act->arena, m.act->mark_head);
        memo_fetch(&m, l);
        memo_recompute(&m, l);
        for (int n = 0; n < ACT_N_LAYER; n++) {
            if (!fwd[n]) continue;
            // fp32: the arena's copy; bf16: the fp32 values it was packed from (the tensor's working copy)
            int packed = bf16 && !act_is_fp32_always((ActName)n);
            const float *got = packed ? work_slot(&m, (ActName)n, l) : m.act->blocks[l].saved[n];
            size_t cmp = bytes[n];
            char what[160];
            describe(&u, what, sizeof what);
            CHECK(m.act->blocks[l].saved[n] && memcmp(got, fwd[n], cmp) == 0, "%s: recomputed %s differs from the "
                  "forward's", what, act_name_str((ActName)n));
            checked++;
            free(fwd[n]);
        }
        CHECK(checked == 11 + flash, "%d tensors compared, expected %d", checked, 11 + flash);
        gpt_release(&m);
        gpt_free(&m);
        policy_free(&pol);
        if (flash || bf16) continue;
        Setup sel = {llama, 0, 0, MASKS_BYTES, "selective", NULL, 0.0f, 0};
        Trace a, b;
        run(&a, &sel);
        run(&b, &u);
        double worst = 0.0;
        for (int i = 0; i < STEPS; i++) {
            double x = rel(a.grads[i], b.grads[i], a.n);
            if (x > worst) worst = x;
        }
        CHECK(worst < 2e-6 && fabs(a.loss[0] - b.loss[0]) < 1e-6 * fabs(a.loss[0]),
              "%s standard attention: memo vs selective gradients rel %.3g, loss %.9g vs %.9g", llama ? "llama" : "gpt2",
              worst, b.loss[0], a.loss[0]);
        printf("%s without flash: memo vs selective, gradients within %.2g relative over %d steps\n",
               llama ? "llama" : "gpt2", worst, STEPS);
        trace_free(&a);
        trace_free(&b);
    }
}

// 3. Ledger == model.
static void check_ledger(const Setup *u) {
    MemoryPolicy pol;
    make_policy(&pol, u);
    GPTConfig c = cfg_of(u->llama, u->lora);
    GPT m;
    gpt_init(&m, &c, &pol);
    gpt_init_weights(&m, 5);
    adapters_start(&m, &pol);
    pol.tempo |= gpt_keep_bits(&c);   // what the family keeps (Qwen3's q/k made again from the norms' inputs)
    static int32_t tok[S * B], tgt[S * B];
    tokens(1, tok, tgt);
    StepCtx ctx = {7, 1, 0, 1};
    char what[160];
    describe(u, what, sizeof what);
    gpt_forward(&m, tok, tgt, S, B, ctx, 1.0f / (float)(S * B));
    gpt_backward(&m, tok, ctx);
    const ActShape *sh = &m.shape;
    int bad = 0;
    for (int l = 0; l < L; l++)
        for (int n = 0; n < ACT_N_LAYER; n++) {
            bad += ledger_stored_bytes(&m.ledger, (ActName)n, l) != act_layer_name_bytes(sh, &pol, l, (ActName)n);
            if (m.memo && m.memo->pool)
                bad += ledger_stored_bytes(&m.memo->ledger, (ActName)n, l) !=
                       act_memo_swap_name_bytes(sh, &pol, l, (ActName)n);
        }
    CHECK(bad == 0, "%s: %d ledger cells differ from the model", what, bad);
    CHECK(ledger_stored_bytes(&m.ledger, ACT_MEMO_STAGE, -1) == act_memo_stage_bytes(sh, &pol), "%s: memo_stage %zu vs %zu",
          what, ledger_stored_bytes(&m.ledger, ACT_MEMO_STAGE, -1), act_memo_stage_bytes(sh, &pol));
    CHECK(m.ledger.total_fwd_end == act_forward_end_bytes(sh, &pol), "%s: end of forward %zu vs %zu", what,
          m.ledger.total_fwd_end, act_forward_end_bytes(sh, &pol));
    CHECK(m.ledger.total_peak == act_peak_bytes(sh, &pol), "%s: peak %zu vs %zu", what, m.ledger.total_peak,
          act_peak_bytes(sh, &pol));
    size_t pool = m.memo && m.memo->pool ? m.memo->ledger.total_fwd_end : 0;
    CHECK(pool == act_memo_pool_bytes(sh, &pol), "%s: pool %zu vs %zu", what, pool, act_memo_pool_bytes(sh, &pol));
    CHECK(m.ledger.total_cur == 0 && (!m.memo || !m.memo->pool || m.memo->ledger.total_cur == 0),
          "%s: bytes left after backward", what);
    gpt_free(&m);
    policy_free(&pol);
}

static void test_ledger(void) {
    const float alphas[] = {0.0f, 0.34f, 0.5f, 0.67f, 1.0f};
    int cases = 0;
    for (int llama = 0; llama < 3; llama++)
        for (int flash = 0; flash < 2; flash++)
            for (int bf16 = 0; bf16 < 2; bf16++)
                for (int mm = 0; mm < 3; mm++)
                    for (int ai = 0; ai < 5; ai++) {
                        if ((mm != 0 || bf16) && ai != 1) continue;
                        Setup u = {llama, flash, bf16, (MaskMode)mm, "memo", NULL, alphas[ai], 0};
                        check_ledger(&u);
                        cases++;
                    }
    Setup lists[] = {{0, 1, 0, MASKS_BYTES, NULL, "0:memo,1:selective,2:none", 0.5f, 0},
                     {1, 0, 1, MASKS_BITS, NULL, "0:full,1-2:memo", 0.67f, 0}};
    for (int i = 0; i < 2; i++) check_ledger(&lists[i]);
    printf("ledger == model in %d memo configurations\n", cases + 2);

    // By hand: GPT-2 h32 a4 s192 b2, fp32, flash, masks bytes, α 0.34 → r = 64 positions = 128 rows.
    // Swapped per layer: qkv_in, q, k, v, proj_in, ln2_in, fc1_in 128·32·4 = 16384 each (7 → 114688),
    // gelu_in, fc2_in 128·128·4 = 65536 each, ln1/ln2 stats 128·2·4 = 1024 each, attn_lse 4·64·2·4 = 2048:
    // 114688 + 131072 + 2048 + 2048 = 249856 (each a multiple of 64: the span), stage 2 × 249856.
    Setup u = {0, 1, 0, MASKS_BYTES, "memo", NULL, 0.34f, 0};
    MemoryPolicy pol;
    GPT m;
    init_model(&m, &pol, &u);
    CHECK(act_memo_swap_bytes(&m.shape, &pol, 1) == 249856, "swapped per layer %zu, by hand 249856",
          act_memo_swap_bytes(&m.shape, &pol, 1));
    CHECK(act_memo_stage_bytes(&m.shape, &pol) == 499712, "stage %zu, by hand 499712", act_memo_stage_bytes(&m.shape, &pol));
    CHECK(act_memo_pool_bytes(&m.shape, &pol) == 3 * 249856, "pool %zu", act_memo_pool_bytes(&m.shape, &pol));
    // in backward a layer holds every swapped tensor whole (×3 of the slice: 192 of 64 positions) + both masks
    // (384·32 bytes each)
    CHECK(act_memo_working_bytes(&m.shape, &pol, 1) == 3 * 249856 + 2 * 12288, "working %zu",
          act_memo_working_bytes(&m.shape, &pol, 1));
    gpt_free(&m);
    policy_free(&pol);
}

// 4. The time model: a layer of 10 ms forward (4 ms attention, 2 ms down projection), 1 GB swappable at 10 GB/s.
static void test_time_model(void) {
    MemoLayerCost c = {0.010, 0.004, 0.002, 1e9, 1e10, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    MemoTime t = memo_layer_time(&c, 0.5);
    // recompute: 0.5·(10 − 4 − 2) ms + (1 − 0.25)·4 ms = 5 ms; transfer 50 ms; the forward hides 10 ms of
    // it, the backward 20 + 5 ms: stall 40 + 25 ms
    CHECK(fabs(t.recompute_s - 0.005) < 1e-12, "recompute %.9g", t.recompute_s);
    CHECK(fabs(t.transfer_s - 0.05) < 1e-12, "transfer %.9g", t.transfer_s);
    CHECK(fabs(t.stall_s - 0.065) < 1e-12, "stall %.9g", t.stall_s);
    CHECK(fabs(t.layer_s - (0.03 + 0.005 + 0.065)) < 1e-12, "layer %.9g", t.layer_s);
    MemoTime none = memo_layer_time(&c, 0.0), all = memo_layer_time(&c, 1.0);
    CHECK(fabs(none.layer_s - 0.038) < 1e-12 && none.stall_s == 0.0, "α 0: full recompute's 38 ms, got %.9g", none.layer_s);
    CHECK(fabs(all.recompute_s) < 1e-15 && fabs(all.transfer_s - 0.1) < 1e-12, "α 1: no recompute, 100 ms transfer");
}


// 5. α per layer.
static void test_alpha_parse(void) {
    MemoryPolicy p;
    char err[256], desc[128];
    memset(&p, 0, sizeof p);
    CHECK(policy_build(&p, 3, NULL, NULL, 1, "0-1:memo@0.25,2:memo@0.5", err, sizeof err) == 0, "mixed list: %s", err);
    CHECK(p.alpha[0] == 0.25f && p.alpha[1] == 0.25f && p.alpha[2] == 0.5f, "alphas %g %g %g", (double)p.alpha[0],
          (double)p.alpha[1], (double)p.alpha[2]);
    CHECK(policy_memo_alpha(&p, 1) == 0.25 && policy_memo_mixed(&p) && !policy_memo_needs_alpha(&p), "accessors");
    policy_describe(&p, desc, sizeof desc);
    CHECK(strcmp(desc, "0-1:memo@0.25,2:memo@0.5") == 0, "described as '%s'", desc);
    policy_free(&p);
    p.memo_alpha = 0.75f;
    CHECK(policy_build(&p, 3, NULL, NULL, 1, "0:memo@0.5,1:memo,2:none", err, sizeof err) == 0, "%s", err);
    CHECK(policy_memo_alpha(&p, 0) == 0.5 && policy_memo_alpha(&p, 1) == 0.75 && policy_memo_needs_alpha(&p),
          "layer 1 takes --memo's α: %g", policy_memo_alpha(&p, 1));
    policy_free(&p);
    const struct { const char *list, *want; } bad[] = {
        {"0:memo@1.5,1-2:none", "memo α 1.5 is not in [0, 1]"},  {"0-2:memo@-0.25", "memo α -0.25 is not in [0, 1]"},
        {"0:memo@,1-2:none", "cannot parse '0:memo@'"},           {"0:memo@x,1-2:none", "cannot parse '0:memo@x'"},
        {"0:memo@0.5x,1-2:none", "cannot parse '0:memo@0.5x'"},   {"0:full@0.5,1-2:none", "cannot parse '0:full@0.5'"},
        {"0:memo@nan,1-2:none", "cannot parse '0:memo@nan'"},     {"0:memo@0.5@1,1-2:none", "cannot parse"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        int rc = policy_build(&p, 3, NULL, NULL, 1, bad[i].list, err, sizeof err);
        CHECK(rc == -1 && strstr(err, bad[i].want), "'%s': rc %d, '%s' (wanted '%s')", bad[i].list, rc, err, bad[i].want);
        policy_free(&p);
    }
}

static void expect_same(const Trace *a, const Trace *b, const char *what) {
    int same = memcmp(a->loss, b->loss, sizeof a->loss) == 0 && memcmp(a->params, b->params, a->n * sizeof(float)) == 0;
    for (int i = 0; i < STEPS; i++) same &= memcmp(a->grads[i], b->grads[i], a->n * sizeof(float)) == 0;
    CHECK(same, "%s: not bitwise (loss %.9g vs %.9g)", what, a->loss[0], b->loss[0]);
}

static void test_alpha_mixed(void) {
    // the ledger, per layer and name, for mixes (the pool's cells are checked per layer by check_ledger)
    Setup mixes[] = {{0, 1, 0, MASKS_BYTES, NULL, "0:memo@0.34,1:memo@1,2:memo@0", 0.0f, 0},
                     {1, 0, 1, MASKS_BITS, NULL, "0:memo@0.67,1:none,2:memo", 0.34f, 0},
                     {0, 1, 1, MASKS_REGEN, NULL, "0:memo@1,1:memo@0.34,2:memo@0.67", 0.0f, 0},
                     {1, 1, 0, MASKS_BYTES, NULL, "0:full,1:memo@0.34,2:memo@1", 0.0f, 0}};
    for (int i = 0; i < 4; i++) check_ledger(&mixes[i]);
    // by hand (GPT-2 h32 a4 s192 b2 fp32 flash, test_ledger's figures): a layer's slice is 249856 bytes at
    // 64 positions, 499712 at 128. Layers 0 and 2 share slot 0, layer 1 has slot 1.
    const struct { const char *list; size_t stage, pool; } hand[] = {
        {"0:memo@0.34,1:memo@0.67,2:memo@0.34", 249856 + 499712, 2 * 249856 + 499712},
        {"0:memo@0.67,1:memo@0.34,2:memo@0.34", 499712 + 249856, 2 * 249856 + 499712},
        {"0:memo@0.67,1:memo@0,2:memo@0.34", 499712 + 249856, 499712 + 249856},   // layer 1 swaps nothing: 2 has slot 1
        {"0:memo@0.67,1:memo@0.34,2:memo@0.67", 499712 + 249856, 2 * 499712 + 249856}};
    for (int i = 0; i < 4; i++) {
        Setup u = {0, 1, 0, MASKS_BYTES, NULL, hand[i].list, 0.0f, 0};
        MemoryPolicy pol;
        GPT m;
        init_model(&m, &pol, &u);
        CHECK(act_memo_stage_bytes(&m.shape, &pol) == hand[i].stage && act_memo_pool_bytes(&m.shape, &pol) == hand[i].pool,
              "%s: stage %zu pool %zu, by hand %zu %zu", hand[i].list, act_memo_stage_bytes(&m.shape, &pol),
              act_memo_pool_bytes(&m.shape, &pol), hand[i].stage, hand[i].pool);
        gpt_free(&m);
        policy_free(&pol);
    }
    for (int llama = 0; llama < 2; llama++) {
        char what[96];
        // every layer's own α equal to --memo's: the uniform run, bitwise
        Setup uni = {llama, 1, 0, MASKS_BITS, "memo", NULL, 0.34f, 0}, own = {llama, 1, 0, MASKS_BITS, NULL, "0-2:memo@0.34", 0.9f, 0};
        Trace a, b;
        run(&a, &uni);
        run(&b, &own);
        snprintf(what, sizeof what, "%s 0-2:memo@0.34 vs --memo 0.34", llama ? "llama" : "gpt2");
        expect_same(&a, &b, what);
        trace_free(&a);
        trace_free(&b);
        // layers of α 0 and 1 (one token range each): the plain run, bitwise; a split mix within tolerance
        Setup plain = {llama, 1, 0, MASKS_BYTES, "none", NULL, 0.0f, 0}, ends = {llama, 1, 0, MASKS_BYTES, NULL,
                                                                              "0:memo@0,1:memo@1,2:memo@0", 0.0f, 0};
        Setup split = {llama, 1, 0, MASKS_BYTES, NULL, "0:memo@0.34,1:memo@1,2:memo@0.67", 0.0f, 0};
        Trace ref, t;
        run(&ref, &plain);
        run(&t, &ends);
        snprintf(what, sizeof what, "%s 0:memo@0,1:memo@1,2:memo@0 vs plain", llama ? "llama" : "gpt2");
        expect_same(&ref, &t, what);
        trace_free(&t);
        run(&t, &split);
        double worst = 0.0;
        for (int i = 0; i < STEPS; i++) {
            double x = rel(ref.grads[i], t.grads[i], t.n);
            if (x > worst) worst = x;
        }
        // bitwise equal allowed, as in test_plain (a row split of a GEMM may or may not move the last bits)
        CHECK(worst < 3e-6 && t.peak < ref.peak, "%s split mix: gradients rel %.3g (tolerance 3e-6), peak %zu (plain %zu)",
              llama ? "llama" : "gpt2", worst, t.peak, ref.peak);
        printf("%s mix 0:memo@0.34,1:memo@1,2:memo@0.67 against the plain run: gradients within %.2g relative\n",
               llama ? "llama" : "gpt2", worst);
        trace_free(&t);
        trace_free(&ref);
    }
}

// The planner at fixed rates (1000 GB/s, 100 GFLOP/s: swapping is free, so more α is faster): GPT-2
// h32 a4 s192 b2 L3 fp32 flash. The device budget that holds slot 0 at 128 positions and slot 1 at 64 but
// not both at 128 gets the mix 0:memo@0.67,1:memo@0.34,2:memo@0.67; a larger one uniform α 1; one that holds
// a single slot at 64 lets one layer swap; a pool budget between takes as many α-1 layers as it holds.
static void test_alpha_plan(void) {
    Setup u = {0, 1, 0, MASKS_BYTES, "memo", NULL, 0.0f, 0};
    MemoryPolicy pol;
    GPT m;
    init_model(&m, &pol, &u);
    ActShape sh = m.shape;
    gpt_free(&m);
    policy_free(&pol);
    MemoSpeeds sp = {100e9, 1000e9, 0.0};
    MemoPlanResult x64, x128, x192, mix, r;
    memo_plan_evaluate(&sh, ATTN_FLASH, PRECISION_FP32, 1, &sp, 64, 64, 0, &x64);
    memo_plan_evaluate(&sh, ATTN_FLASH, PRECISION_FP32, 1, &sp, 128, 128, 0, &x128);
    memo_plan_evaluate(&sh, ATTN_FLASH, PRECISION_FP32, 1, &sp, 192, 192, 0, &x192);
    memo_plan_evaluate(&sh, ATTN_FLASH, PRECISION_FP32, 1, &sp, 128, 64, 2, &mix);
    CHECK(x64.step_s > mix.step_s && mix.step_s > x128.step_s && x128.step_s > x192.step_s, "times %g %g %g %g",
          x64.step_s, mix.step_s, x128.step_s, x192.step_s);
    CHECK(mix.arena_bytes > x64.arena_bytes && mix.arena_bytes < x128.arena_bytes, "the mix's arena %zu between %zu and %zu",
          mix.arena_bytes, x64.arena_bytes, x128.arena_bytes);
    double budget = (double)(mix.arena_bytes + mix.scratch_bytes);
    CHECK(memo_plan(&sh, ATTN_FLASH, PRECISION_FP32, 1, budget, 0, &sp, &r) == 0 && r.n_hi == 2 && r.positions == 128 &&
          r.positions_lo == 64, "budget %.0f: n_hi %d r %ld/%ld, wanted the mix 2 × 128, 64", budget, r.n_hi,
          r.positions, r.positions_lo);
    CHECK(memo_plan_layer_positions(&r, 0) == 128 && memo_plan_layer_positions(&r, 1) == 64 &&
          memo_plan_layer_positions(&r, 2) == 128, "the mix's layers");
    memo_plan_policy(&r, &sh, ATTN_FLASH, &pol);
    char desc[128];
    policy_describe(&pol, desc, sizeof desc);
    CHECK(strcmp(desc, "0:memo@0.6666667,1:memo@0.33333334,2:memo@0.6666667") == 0, "the plan's policy '%s'", desc);
    for (int l = 0; l < 3; l++)
        CHECK(memo_layer_positions(&sh, &pol, l) == memo_plan_layer_positions(&r, l), "layer %d's α reads back", l);
    policy_free(&pol);
    CHECK(memo_plan(&sh, ATTN_FLASH, PRECISION_FP32, 1, budget - 1, 0, &sp, &r) == 0 && r.n_hi == 0 && r.positions == 64,
          "a byte less: uniform 64, got n_hi %d r %ld", r.n_hi, r.positions);
    CHECK(memo_plan(&sh, ATTN_FLASH, PRECISION_FP32, 1, 1e12, 0, &sp, &r) == 0 && r.n_hi == 0 && r.positions == 192,
          "no limit: uniform α 1, got n_hi %d r %ld", r.n_hi, r.positions);
    // room for one slot at 64 positions only: one layer swaps (r_lo = 0, the others recompute everything)
    MemoPlanResult one;
    memo_plan_evaluate(&sh, ATTN_FLASH, PRECISION_FP32, 1, &sp, 64, 0, 1, &one);
    budget = (double)(one.arena_bytes + one.scratch_bytes);
    CHECK(one.arena_bytes < x64.arena_bytes && memo_plan(&sh, ATTN_FLASH, PRECISION_FP32, 1, budget, 0, &sp, &r) == 0 &&
          r.n_hi == 1 && r.positions == 64 && r.positions_lo == 0, "one slot: n_hi %d r %ld/%ld, wanted 1 × 64, 0", r.n_hi,
          r.positions, r.positions_lo);
    // pool budget of 2 layers at 192 and one at 128: 2 × 749568 + 499712 (a layer's slice is 3904 bytes a position)
    double pool = 2.0 * (double)x192.pool_bytes / 3.0 + (double)x128.pool_bytes / 3.0;
    CHECK(memo_plan(&sh, ATTN_FLASH, PRECISION_FP32, 1, 1e12, pool, &sp, &r) == 0 && r.n_hi == 2 && r.positions == 192 &&
          r.positions_lo == 128 && (double)r.pool_bytes == pool, "pool %.0f: n_hi %d r %ld/%ld pool %zu", pool, r.n_hi,
          r.positions, r.positions_lo, r.pool_bytes);
}

// 6. --static-plan: the memo layers' kept slices, stage and recompute temporaries are intervals of the
// recorded step; every later step runs in the plan's block, bitwise the default layout, and the plan's
// saved tensors peak at the analytic model's bytes (memo_stage one buffer of act_memo_stage_bytes).
static void test_static_plan(void) {
    Setup cases[] = {{0, 1, 0, MASKS_BYTES, NULL, "0:memo@1,1:memo@0.34,2:memo@0.67", 0.0f, 0},
                     {1, 0, 1, MASKS_BITS, "memo", NULL, 0.5f, 0},
                     {0, 0, 0, MASKS_REGEN, NULL, "0:memo@0.67,1:none,2:memo@0.34", 0.0f, 0},
                     {1, 1, 0, MASKS_BYTES, NULL, "0:full,1:memo@0.34,2:memo@1", 0.0f, 0}};
    for (int i = 0; i < 4; i++) {
        char what[160];
        describe(&cases[i], what, sizeof what);
        Trace a, b;
        g_static = 0;
        run(&a, &cases[i]);
        g_static = 1;
        run(&b, &cases[i]);
        g_static = 0;
        snprintf(what + strlen(what), sizeof what - strlen(what), " --static-plan");
        expect_same(&a, &b, what);
        MemoryPolicy pol;
        make_policy(&pol, &cases[i]);
        GPTConfig c = cfg_of(cases[i].llama, 0);
        GPT m;
        gpt_init(&m, &c, &pol);
        long stage = (long)act_memo_stage_bytes(&m.shape, &pol);
        gpt_free(&m);
        policy_free(&pol);
        CHECK(g_plan_unreleased == 0, "%s: %d temporaries live to the step's end (the recompute's scope)", what,
              g_plan_unreleased);
        CHECK(g_plan_saved_peak == (long)g_predicted_peak && g_replay_peak == g_predicted_peak && g_plan_stage == stage,
              "%s: plan's saved peak %ld, replayed ledger peak %zu, predicted %zu; stage buffer %ld, predicted %ld", what,
              g_plan_saved_peak, g_replay_peak, g_predicted_peak, g_plan_stage, stage);
        trace_free(&a);
        trace_free(&b);
    }
}

// 7. A TP rank's share (t = 2, no SP): GPT-2 h32 a4 s192 b2 fp32 flash. Swapped bytes a position: qkv_in,
// ln2_in, fc1_in whole rows (3 × 2·32·4), q, k, v, proj_in the rank's 16 columns (4 × 2·16·4), gelu_in and
// fc2_in its 64 (2 × 2·64·4), the statistics whole (2 × 16), attn_lse its 2 heads (2·2·4): 2352, against
// one process's 3904; the layer's work, attention and down projection half of one process's.
static void test_tp_share(void) {
    Setup u = {0, 1, 0, MASKS_BYTES, "memo", NULL, 1.0f, 0};
    MemoryPolicy pol;
    GPT m;
    init_model(&m, &pol, &u);
    ActShape one = m.shape, two = m.shape;
    gpt_free(&m);
    two.t = 2;
    MemoLayerCost c1 = memo_layer_cost(&one, &pol, 1e11, 1e10, 0.0), c2 = memo_layer_cost(&two, &pol, 1e11, 1e10, 0.0);
    CHECK(c1.swap_bytes == 3904.0 * S && c2.swap_bytes == 2352.0 * S, "bytes of every position: %.0f and %.0f, by hand "
          "%d and %d", c1.swap_bytes, c2.swap_bytes, 3904 * S, 2352 * S);
    CHECK(act_memo_swap_bytes(&two, &pol, 0) == (size_t)2352 * S && act_memo_pool_bytes(&two, &pol) == (size_t)3 * 2352 * S,
          "a rank's slice %zu, pool %zu", act_memo_swap_bytes(&two, &pol, 0), act_memo_pool_bytes(&two, &pol));
    CHECK(fabs(c2.fwd_s * 2.0 - c1.fwd_s) < 1e-15 && fabs(c2.attn_s * 2.0 - c1.attn_s) < 1e-15 &&
          fabs(c2.down_s * 2.0 - c1.down_s) < 1e-15 && c1.fwd_s > 0.0, "a rank's work: forward %g of %g", c2.fwd_s, c1.fwd_s);
    policy_free(&pol);
}

// 9. What the recompute repeats, priced (model/memo.c's recompute_rows: positions [r, s) without the block's
// output, each adapter's v kept). Worked by hand at h 32, s 192, b 2, t 2, r = 64 (α 1/3: 128 positions,
// 256 rows recomputed):
//  - TP: one all-reduce, Proj's [256, 32] fp32 = 32768 bytes, 2(t − 1)/t of it on the ring = 32768 bytes a
//    rank sends (at every position 49152); at 10 GB/s 3.2768 µs per layer; at t = 1 none.
//  - adapters at rank 4, v·Bᵀ only (x·Aᵀ kept), the down projection's not (FC2 is not redone), B's rows on the
//    rank: GPT-2 qkv 2·256·4·48 + proj 2·256·4·32 + fc 2·256·4·64 = 294912 FLOPs; llama (kv 2, ffn 48) q
//    2·256·4·16 + k, v 2 × 2·256·4·8 + o 2·256·4·32 + gate, up 2 × 2·256·4·24 = 229376. At 100 GFLOP/s the
//    GPT-2 layer's recompute grows by 2.94912 µs.
static void test_recompute_terms(void) {
    const double tp_bps = 1e10, gemm = 1e11, link = 1e10, a = 64.0 / S;
    const double lora_flops[2] = {294912.0, 229376.0};
    for (int llama = 0; llama < 2; llama++) {
        Setup u = {llama, 1, 0, MASKS_BYTES, "memo", NULL, 1.0f / 3.0f, 1};
        MemoryPolicy pol;
        make_policy(&pol, &u);
        GPTConfig c = cfg_of(llama, 1), c0 = cfg_of(llama, 0);
        GPT m;
        gpt_init(&m, &c, &pol);
        ActShape lora = m.shape;
        gpt_free(&m);
        gpt_init(&m, &c0, &pol);
        ActShape plain = m.shape;
        gpt_free(&m);
        ActShape lora2 = lora, plain2 = plain;
        lora2.t = plain2.t = 2;
        const char *fam = llama ? "llama" : "gpt2";
        // the repeated all-reduce
        CHECK(memo_recompute_tp_bytes(&plain2, S - 64) == 32768.0 && memo_recompute_tp_bytes(&plain2, S) == 49152.0 &&
              memo_recompute_tp_bytes(&plain, S - 64) == 0.0, "%s: TP bytes of 128 positions %.0f (by hand 32768), of all "
              "%.0f (49152), at t 1 %.0f (0)", fam, memo_recompute_tp_bytes(&plain2, S - 64), memo_recompute_tp_bytes(&plain2, S),
              memo_recompute_tp_bytes(&plain, S - 64));
        MemoLayerCost c2 = memo_layer_cost(&plain2, &pol, gemm, link, tp_bps), c1 = memo_layer_cost(&plain, &pol, gemm, link, tp_bps);
        MemoTime t2 = memo_layer_time(&c2, a), t1 = memo_layer_time(&c1, a);
        MemoLayerCost c2free = c2;
        c2free.tp_link_bps = 0.0;   // no rate: not priced
        MemoTime t2free = memo_layer_time(&c2free, a);
        CHECK(c2.tp_bytes == 49152.0 && fabs(t2.tp_s - 3.2768e-6) < 1e-18 && t1.tp_s == 0.0 && c1.tp_bytes == 0.0 &&
              t2free.tp_s == 0.0, "%s t 2: the recompute's all-reduce %.6g s at 10 GB/s (by hand 3.2768e-6), t 1 %.3g", fam,
              t2.tp_s, t1.tp_s);
        CHECK(fabs(t2.layer_s - (t2free.layer_s + 3.2768e-6)) < 1e-15 && t2.recompute_s == t2free.recompute_s,
              "%s t 2: the layer %.9g s = unpriced %.9g + the all-reduce", fam, t2.layer_s, t2free.layer_s);
        // the adapters
        double want = lora_flops[llama];
        CHECK(memo_recompute_lora_flops(&lora2, S - 64) == want && memo_recompute_lora_flops(&plain2, S - 64) == 0.0,
              "%s t 2 r 4: the adapters' recompute %.0f FLOPs (by hand %.0f)", fam, memo_recompute_lora_flops(&lora2, S - 64), want);
        MemoLayerCost cl = memo_layer_cost(&lora2, &pol, gemm, link, tp_bps);
        MemoTime tl = memo_layer_time(&cl, a);
        CHECK(fabs(cl.lora_s - want * 1.5 / gemm) < 1e-18 && fabs(tl.recompute_s - t2.recompute_s - want / gemm) < 1e-15 &&
              c2.lora_s == 0.0, "%s t 2 r 4: adapters %.6g s at every position, the recompute grows %.6g s (by hand %.6g)", fam,
              cl.lora_s, tl.recompute_s - t2.recompute_s, want / gemm);
        // the planner prices both: a rank's step at α 1/3 and full recompute's (every position: L all-reduces
        // of 49152 bytes and L·1.5 of the adapters' FLOPs)
        MemoSpeeds sp = {gemm, link, tp_bps}, unpriced = {gemm, link, 0.0};
        MemoPlanResult x, y;
        memo_plan_evaluate(&lora2, ATTN_FLASH, PRECISION_FP32, 1, &sp, 64, 64, 0, &x);
        memo_plan_evaluate(&lora2, ATTN_FLASH, PRECISION_FP32, 1, &unpriced, 64, 64, 0, &y);
        CHECK(fabs(x.layer.tp_s - 3.2768e-6) < 1e-18 && fabs(x.step_s - y.step_s - L * 3.2768e-6) < 1e-15 &&
              fabs(x.full_step_s - y.full_step_s - L * 49152.0 / tp_bps) < 1e-15 &&
              fabs(x.layer.recompute_s - y.layer.recompute_s) == 0.0 && fabs(x.cost.lora_s - want * 1.5 / gemm) < 1e-18,
              "%s: the plan's step %.9g s against %.9g unpriced, full recompute %.9g against %.9g", fam, x.step_s, y.step_s,
              x.full_step_s, y.full_step_s);
        policy_free(&pol);
    }
}

// 10. The layer's own forward and backward under adapters (issue 29), a TP rank's at t = 2 (h 32, s 192, b 2,
// r 4 on every site; rows = 384, so one width of an adapter GEMM is 2·384·4 = 3072 FLOPs). The rank's widths
// (column site: in h, out/t of B; row site: in/t of A, out h):
//   GPT-2 qkv 32 → 48, proj 16 → 32, fc 32 → 64, fc2 64 → 32: Σin 144, Σout 176
//   llama (kv 2: k/v width 16, FFN 48) q 32 → 16, k, v 32 → 8, o 16 → 32, gate, up 32 → 24, down 24 → 32:
//   Σin 200, Σout 144
// The adapters' forward (x·Aᵀ, v·Bᵀ) 3072·(Σin + Σout): GPT-2 983040, llama 1056768; their backward (dB, dv,
// dx: 3072·(2Σout + Σin), + dA 3072·Σin under LoRA): GPT-2 1966080 (LoRA-FA 1523712), llama 2113536 (1499136).
// At t = 1 (GPT-2 Σin 224, Σout 288; llama 240, 224): forward 1572864 and 1425408, backward 3145728 (LoRA-FA
// 2457600) and 2850816 (2113536).
// The base on the rank: forward F (linears + causal core) GPT-2 7077888 of which the core A 2359296, llama
// 5308416 (A 2359296). Its backward without LoRA 2F; with the base frozen only the dX GEMMs and attention's
// backward, F + A: GPT-2 9437184, llama 7667712 (the dW GEMMs skipped, F − A: 4718592 and 2949120).
// So per layer at 100 GFLOP/s:
//   GPT-2 LoRA    forward 8060928, backward 9437184 + 1966080 = 11403264 (before: 7077888 and 14155776)
//   GPT-2 LoRA-FA forward 8060928, backward 9437184 + 1523712 = 10960896
//   llama LoRA    forward 6365184, backward 7667712 + 2113536 = 9781248  (before: 5308416 and 10616832)
//   llama LoRA-FA forward 6365184, backward 7667712 + 1499136 = 9166848
// and at α 1/3 (no stall at 10 GB/s) the layer against the plain one: + adapters' forward and backward − the
// skipped dW + section 9's recompute (294912 GPT-2, 229376 llama): GPT-2 −1474560 (LoRA-FA −1916928), llama
// +450560 (LoRA-FA −163840) FLOPs.
static void test_lora_layer_terms(void) {
    const double gemm = 1e11, link = 1e10, tp_bps = 1e10, a = 64.0 / S;
    const double adapter_fwd[2] = {983040.0, 1056768.0}, adapter_bwd[2][2] = {{1966080.0, 1523712.0}, {2113536.0, 1499136.0}};
    const double fwd1[2] = {1572864.0, 1425408.0}, bwd1[2][2] = {{3145728.0, 2457600.0}, {2850816.0, 2113536.0}};
    const double base_fwd[2] = {7077888.0, 5308416.0}, attn = 2359296.0;
    const double backward[2][2] = {{11403264.0, 10960896.0}, {9781248.0, 9166848.0}};
    const double layer_delta[2][2] = {{-1474560.0, -1916928.0}, {450560.0, -163840.0}};
    for (int llama = 0; llama < 2; llama++) {
        const char *fam = llama ? "llama" : "gpt2";
        Setup u = {llama, 1, 0, MASKS_BYTES, "memo", NULL, 1.0f / 3.0f, 0};
        MemoryPolicy pol;
        make_policy(&pol, &u);
        GPTConfig c0 = cfg_of(llama, 0);
        GPT m;
        gpt_init(&m, &c0, &pol);
        ActShape plain = m.shape;
        gpt_free(&m);
        plain.t = 2;
        MemoLayerCost cp = memo_layer_cost(&plain, &pol, gemm, link, tp_bps);
        MemoTime tp = memo_layer_time(&cp, a);
        CHECK(cp.lora_fwd_s == 0.0 && cp.lora_bwd_s == 0.0 && cp.frozen_s == 0.0 && tp.forward_s == cp.fwd_s &&
                  tp.backward_s == 2.0 * cp.fwd_s && tp.layer_s == 3.0 * cp.fwd_s + tp.recompute_s + tp.tp_s + tp.stall_s,
              "%s without adapters: forward %.9g backward %.9g (F %.9g), no adapter terms", fam, tp.forward_s, tp.backward_s,
              cp.fwd_s);
        CHECK(fabs(cp.fwd_s - base_fwd[llama] / gemm) < 1e-18 && fabs(cp.attn_s - attn / gemm) < 1e-18,
              "%s t 2: the base's forward %.9g s (by hand %.9g), its core %.9g s", fam, cp.fwd_s, base_fwd[llama] / gemm,
              cp.attn_s);
        for (int fa = 0; fa < 2; fa++) {
            const char *kind = fa ? "LoRA-FA" : "LoRA";
            GPTConfig c = cfg_of(llama, 1 + fa);
            gpt_init(&m, &c, &pol);
            ActShape lora1 = m.shape;
            gpt_free(&m);
            ActShape lora2 = lora1;
            lora2.t = 2;
            FlopPair f1 = flops_lora_layer(&lora1, B), f2 = flops_lora_layer(&lora2, B), none = flops_lora_layer(&plain, B);
            CHECK(f2.fwd == adapter_fwd[llama] && f2.bwd == adapter_bwd[llama][fa] && f1.fwd == fwd1[llama] &&
                      f1.bwd == bwd1[llama][fa] && none.fwd == 0.0 && none.bwd == 0.0,
                  "%s %s r 4: the adapters' FLOPs forward %.0f backward %.0f at t 2 (by hand %.0f, %.0f), %.0f and %.0f at "
                  "t 1 (%.0f, %.0f)", fam, kind, f2.fwd, f2.bwd, adapter_fwd[llama], adapter_bwd[llama][fa], f1.fwd, f1.bwd,
                  fwd1[llama], bwd1[llama][fa]);
            MemoLayerCost cl = memo_layer_cost(&lora2, &pol, gemm, link, tp_bps);
            MemoTime tl = memo_layer_time(&cl, a);
            double want_fwd = (base_fwd[llama] + adapter_fwd[llama]) / gemm, want_bwd = backward[llama][fa] / gemm;
            CHECK(fabs(tl.forward_s - want_fwd) < 1e-18 && fabs(tl.backward_s - want_bwd) < 1e-18 &&
                      fabs(cl.frozen_s - (base_fwd[llama] - attn) / gemm) < 1e-18,
                  "%s %s t 2: per layer forward %.9g s, backward %.9g s (by hand %.9g, %.9g), the skipped dW %.9g s", fam,
                  kind, tl.forward_s, tl.backward_s, want_fwd, want_bwd, cl.frozen_s);
            CHECK(tl.stall_s == 0.0 && tp.stall_s == 0.0 &&
                      fabs(tl.layer_s - tp.layer_s - layer_delta[llama][fa] / gemm) < 1e-15 &&
                      fabs(tl.layer_s - (tl.forward_s + tl.backward_s + tl.recompute_s + tl.tp_s)) < 1e-18,
                  "%s %s t 2 α 1/3: the layer %.9g s against the plain %.9g s, %+.6g s (by hand %+.6g)", fam, kind,
                  tl.layer_s, tp.layer_s, tl.layer_s - tp.layer_s, layer_delta[llama][fa] / gemm);
            // the planner's layer and step carry them: L layers of the LoRA layer's time + the output layer
            MemoSpeeds sp = {gemm, link, tp_bps};
            MemoPlanResult x;
            memo_plan_evaluate(&lora2, ATTN_FLASH, PRECISION_FP32, 1, &sp, 64, 64, 0, &x);
            CHECK(fabs(x.layer.backward_s - want_bwd) < 1e-18 && fabs(x.layer.forward_s - want_fwd) < 1e-18 &&
                      fabs(x.step_s - (L * tl.layer_s + x.head_s)) < 1e-15,
                  "%s %s: the plan's layer forward %.9g backward %.9g, step %.9g s", fam, kind, x.layer.forward_s,
                  x.layer.backward_s, x.step_s);
            // the frozen output layer: forward and dX only, 4·s·b·h·v on the rank's half of the vocabulary
            double head = 4.0 * (double)lora2.s * (double)lora2.b * (double)lora2.h * (double)lora2.v / 2.0 / gemm;
            CHECK(fabs(x.head_s - head) < 1e-18, "%s %s: the frozen output layer %.9g s (by hand 4·s·b·h·v/t: %.9g)", fam,
                  kind, x.head_s, head);
        }
        policy_free(&pol);
    }
}

// 8. Adapters (LoRA, LoRA-FA) in memo layers: both token ranges run them, each site's v = (α/r)·x·Aᵀ kept
// whole (not swapped). Against the plain run (flash, no recompute), GPT-2 and llama: α 0 and α 1 bitwise
// (loss, the adapters' gradients — the frozen base's are zero — and parameters over 3 steps), also with
// bf16 storage; a split α and a per-layer mix within fp32's 3e-6; the gradients of A (LoRA) and B non-zero.
// The ledger == the model per layer and name (lora_* whole, LoRA-FA keeping no linear input, so swapping
// none) at several α, per-layer lists, bf16, standard attention; and by hand: GPT-2 LoRA-FA α 0.34 swaps q, k,
// v, proj_in, ln2_in, gelu_in, the statistics and attn_lse (not qkv_in, fc1_in, fc2_in) and keeps 4 × 384·4·4
// bytes of lora_* per layer. Phi-3's fused q|k|v and gate|up sites (one adapter each) the same way.
static void test_lora(void) {
    const float alphas[] = {0.0f, 0.34f, 1.0f};
    int ledgers = 0;
    for (int llama = 0; llama < 4; llama++)   // GPT-2, llama and Phi-3's fused sites
        for (int lora = 1; lora <= 2 && llama != 2; lora++) {
            for (int ai = 0; ai < 3; ai++) {
                Setup u = {llama, 1, 0, MASKS_BYTES, "memo", NULL, alphas[ai], lora};
                check_ledger(&u);
                ledgers++;
            }
            Setup more[] = {{llama, 1, 0, MASKS_BITS, NULL, "0-1:memo@0.25,2:memo@0.67", 0.0f, lora},
                            {llama, 1, 1, MASKS_BYTES, "memo", NULL, 0.5f, lora},
                            {llama, 0, 0, MASKS_REGEN, NULL, "0:memo@0.5,1:none,2:memo@1", 0.0f, lora}};
            for (int i = 0; i < 3; i++, ledgers++) check_ledger(&more[i]);
            for (int bf16 = 0; bf16 < 2; bf16++) {
                Setup plain = {llama, 1, bf16, MASKS_BYTES, "none", NULL, 0.0f, lora};
                Trace ref;
                run(&ref, &plain);
                double a_grad = 0.0, b_grad = 0.0;   // the adapters' gradient norms² (the base's are zero)
                {
                    MemoryPolicy pol;
                    make_policy(&pol, &plain);
                    GPTConfig c = cfg_of(llama, lora);
                    GPT m;
                    gpt_init(&m, &c, &pol);
                    for (int i = 0; i < m.n_info; i++)
                        for (size_t e = 0; e < m.info[i].numel; e++) {
                            double g = ref.grads[0][m.info[i].offset + e];
                            if (strstr(m.info[i].name, "lora_A")) a_grad += g * g;
                            else if (strstr(m.info[i].name, "lora_B")) b_grad += g * g;
                            else if (g != 0.0) a_grad = -1e30;   // a frozen base weight with a gradient
                        }
                    gpt_free(&m);
                    policy_free(&pol);
                }
                CHECK(b_grad > 0.0 && (lora == 2 ? a_grad == 0.0 : a_grad > 0.0), "%s %s: adapters' gradients "
                      "norm² A %.3g B %.3g", llama ? "llama" : "gpt2", lora == 2 ? "LoRA-FA" : "LoRA", a_grad, b_grad);
                const char *lists[] = {NULL, NULL, NULL, "0-1:memo@0.25,2:memo@0.67"};
                const float as[] = {0.0f, 1.0f, 0.34f, 0.0f};
                for (int k = 0; k < 4; k++) {
                    if (bf16 && k >= 2) continue;
                    Setup u = {llama, 1, bf16, MASKS_BYTES, lists[k] ? NULL : "memo", lists[k], as[k], lora};
                    Trace t;
                    char what[160];
                    run(&t, &u);
                    describe(&u, what, sizeof what);
                    if (k < 2) {
                        expect_same(&ref, &t, what);
                    } else {
                        double worst = 0.0;
                        for (int i = 0; i < STEPS; i++) {
                            double x = rel(ref.grads[i], t.grads[i], t.n);
                            if (x > worst) worst = x;
                        }
                        CHECK(worst < 3e-6 && t.peak < ref.peak, "%s: adapters' gradients rel %.3g against the "
                              "plain run (tolerance 3e-6; 0 allowed), peak %zu (plain %zu)", what, worst, t.peak,
                              ref.peak);
                        printf("%s: adapters' gradients within %.2g of the plain run\n", what, worst);
                    }
                    trace_free(&t);
                }
                trace_free(&ref);
            }
        }
    printf("ledger == model in %d memo configurations with adapters\n", ledgers);
    // by hand: GPT-2 LoRA-FA fp32 flash α 0.34 (64 positions = 128 rows): q, k, v, proj_in, ln2_in 5 × 16384,
    // gelu_in 65536, the statistics 2 × 1024, attn_lse 2048 = 151552 swapped; lora_qkv, lora_proj, lora_fc,
    // lora_fc2 4 × 384·4·4 = 24576 kept whole.
    Setup u = {0, 1, 0, MASKS_BYTES, "memo", NULL, 0.34f, 2};
    MemoryPolicy pol;
    GPT m;
    init_model(&m, &pol, &u);
    pol.tempo = m.policy.tempo;
    size_t kept = 0;
    for (int n = ACT_LORA_Q; n <= ACT_LORA_GATE_UP; n++) kept += act_layer_name_bytes(&m.shape, &pol, 1, (ActName)n);
    CHECK(act_memo_swap_bytes(&m.shape, &pol, 1) == 151552 && kept == 24576 &&
          act_layer_bytes(&m.shape, &pol, 1) == 24576 + 384 * 32 * 4,
          "LoRA-FA α 0.34: swapped %zu (by hand 151552), lora_* %zu (24576), layer %zu", act_memo_swap_bytes(&m.shape, &pol, 1),
          kept, act_layer_bytes(&m.shape, &pol, 1));
    // the planner's policy carries the shape's LoRA bits: its predicted peak at 64 positions is the run's
    MemoSpeeds sp = {100e9, 1000e9, 0.0};
    MemoPlanResult x;
    memo_plan_evaluate(&m.shape, ATTN_FLASH, PRECISION_FP32, 1, &sp, 64, 64, 0, &x);
    CHECK(x.act_peak == act_peak_bytes(&m.shape, &pol) && x.pool_bytes == 3 * 151552, "memo plan with LoRA-FA: peak "
          "%zu, the model's %zu; pool %zu", x.act_peak, act_peak_bytes(&m.shape, &pol), x.pool_bytes);
    gpt_free(&m);
    policy_free(&pol);
}

int main(void) {
    test_lora_layer_terms();
    test_recompute_terms();
    test_lora();
    test_tp_share();
    test_static_plan();
    test_alpha_parse();
    test_alpha_plan();
    test_alpha_mixed();
    test_time_model();
    test_ledger();
    test_recompute();
    test_plain();
    printf("with flash, split α against the plain run: gradients within %.2g (fp32), %.2g (bf16 storage); α 0 and 1 "
           "bitwise\n", g_worst[0], g_worst[1]);
    return check_summary();
}
