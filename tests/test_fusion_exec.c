// The fusion search's execution (model/remat.c): a layer that keeps the norms' inputs instead of their
// outputs (RECOMPUTE_NORM_OUT), GeLU's input instead of its output (RECOMPUTE_ACT_OUT), q, k, v's input
// instead of q, k, v (RECOMPUTE_QKV_OUT), FC1's input instead of the MLP's inner tensors
// (RECOMPUTE_FC1_OUT), the projection's input instead of ln2_in (RECOMPUTE_PROJ_OUT) and a dropout mask's
// key instead of the mask (RECOMPUTE_ATTN_MASK, _DROP1_MASK, _DROP2_MASK; bytes or bits), alone and on top
// of selective, full and Tempo's softmax fusion, and under flash attention (O and the log-sum-exp made
// again by flash's forward), trains bitwise as the layer that keeps everything
// (losses, gradients, parameters over 3 steps with dropout), for GPT-2 and llama, fp32, bf16 storage
// and mixed precision; and the ledger measures, name by name, what the analytic model and the search's
// graph predict, and the step's peak what the analytic model predicts.
#include <string.h>
#include "check.h"
#include "memory/fusion_search.h"
#include "memory/memory_model.h"
#include "model/gpt.h"
#include "train/adamw.h"
#include "util/common.h"

enum { STEPS = 3, L = 3 };

typedef struct { const char *kind; unsigned parts; MaskMode masks; } Mode;   // a layer's kind and parts

typedef struct {
    double loss[STEPS];
    float *grads, *params;
    size_t n;
} Trace;

static GPTConfig config(int llama, float dropout) {
    GPTConfig c = {.layers = L, .hidden = 48, .heads = 6, .seq = 16, .batch = 3, .vocab = 200, .dropout = dropout};
    if (llama) {
        c.arch = ARCH_LLAMA;
        c.kv_heads = 2;
        c.ffn = 96;
        c.rope_theta = 1e4f;
        c.qk_norm = llama == 2;   // Qwen3's per-head q/k norms: their inputs and 1/rms made again with q, k, v
        c.fused_proj = llama == 3;   // Phi-3: the fused q|k|v and gate|up adapters made again with their GEMMs
    }
    return c;
}

// Three steps under (kind, parts); the ledger of step 1 checked name by name on the way.
static void run(Trace *t, const GPTConfig *cfg, const char *kind, unsigned parts, MaskMode masks, int dt, const char *what) {
    MemoryPolicy pol = {0};
    char err[256];
    pol.act_dtype = dt ? ACT_BF16 : ACT_FP32;
    pol.precision = dt == 2 ? PRECISION_BF16 : PRECISION_FP32;
    pol.masks = masks;
    pol.tempo = parts;
    if (policy_build(&pol, L, kind, "uniform", 1, NULL, err, sizeof err) != 0) ctron_fatal("%s", err);
    GPT m;
    gpt_init(&m, cfg, &pol);
    gpt_init_weights(&m, 7);
    AdamW opt;
    adamw_init(&opt, m.be, m.n_params, 0.9f, 0.95f, 1e-8f, 0.1f);
    int s = cfg->seq, b = cfg->batch;
    int32_t tok[16 * 3], tgt[16 * 3];
    memset(t, 0, sizeof *t);
    for (int step = 1; step <= STEPS; step++) {
        for (int i = 0; i < s * b; i++) { tok[i] = (i * 31 + step * 7) % cfg->vocab; tgt[i] = (i * 17 + step) % cfg->vocab; }
        gpt_zero_grad(&m);
        StepCtx ctx = {11, (uint32_t)step, 0, 1};
        t->loss[step - 1] = gpt_forward(&m, tok, tgt, s, b, ctx, 1.0f / (float)(s * b));
        if (step == 1) {   // the ledger == the analytic model == the search's graph
            FusionGraph g;   // the run's own bits: flash, and LoRA's that gpt_init adds
            fusion_graph_build(&g, &m.shape, m.policy.tempo & FUSION_BASE_BITS);
            FusionMode md = {pol.kind[0], parts & FUSION_PARTS};
            size_t layer = 0, first = 0;
            for (int l = 0; l < L; l++) {
                for (int nm = 0; nm < ACT_N_LAYER; nm++) {
                    size_t got = ledger_stored_bytes(&m.ledger, (ActName)nm, l);
                    size_t want = act_layer_name_bytes(&m.shape, &m.policy, l, (ActName)nm);
                    CHECK(got == want, "%s: layer %d %s measured %zu, predicted %zu", what, l, act_name_str((ActName)nm),
                          got, want);
                    if (l == L - 1) layer += got;
                    if (l == 0) first += got;
                }
            }
            // The graph is a layer's: the last one. Layer 0 keeps the same but, under LoRA, its ln1_in and ln1_stats
            // (no input gradient: nothing reads them) where no part makes qkv_in or ln2_in again from them.
            size_t graph = fusion_bytes(&g, fusion_mode_kept(&g, md));
            CHECK(layer == graph, "%s: layer %d measured %zu, the search's graph %zu", what, L - 1, layer, graph);
            size_t ln1 = ledger_stored_bytes(&m.ledger, ACT_LN1_IN, L - 1) + ledger_stored_bytes(&m.ledger, ACT_LN1_STATS, L - 1);
            int remakes = (parts & (RECOMPUTE_NORM_OUT | RECOMPUTE_PROJ_OUT | RECOMPUTE_QKV_OUT)) != 0;
            if (!gpt_lora(&m) || !remakes)
                CHECK(first == graph - (gpt_lora(&m) ? ln1 : 0), "%s: layer 0 measured %zu, the search's graph %zu, "
                      "less %zu under LoRA", what, first, graph, gpt_lora(&m) ? ln1 : (size_t)0);
            CHECK(m.ledger.total_fwd_end == act_forward_end_bytes(&m.shape, &m.policy), "%s: end of forward %zu, "
                  "predicted %zu", what, m.ledger.total_fwd_end, act_forward_end_bytes(&m.shape, &m.policy));
        }
        gpt_backward(&m, tok, ctx);
        if (step == 1)
            CHECK(m.ledger.total_peak == act_peak_bytes(&m.shape, &m.policy), "%s: step peak %zu, predicted %zu", what,
                  m.ledger.total_peak, act_peak_bytes(&m.shape, &m.policy));
        adamw_step(&opt, &m, 2e-3f, 1.0f);
    }
    t->n = m.n_params;
    t->grads = xmalloc(m.n_params * sizeof(float));
    t->params = xmalloc(m.n_params * sizeof(float));
    memcpy(t->grads, m.grads, m.n_params * sizeof(float));
    memcpy(t->params, m.params, m.n_params * sizeof(float));
    adamw_free(&opt);
    gpt_free(&m);
    policy_free(&pol);
}

static void trace_free(Trace *t) {
    free(t->grads);
    free(t->params);
}

int main(void) {
    static const char *DT[] = {"fp32", "bf16", "mixed bf16"};
    static const Mode modes[] = {
        {"none", RECOMPUTE_NORM_OUT | RECOMPUTE_ACT_OUT, MASKS_BYTES},
        {"none", RECOMPUTE_NORM_OUT, MASKS_BYTES},
        {"none", RECOMPUTE_ACT_OUT, MASKS_BYTES},
        {"selective", RECOMPUTE_NORM_OUT | RECOMPUTE_ACT_OUT, MASKS_BYTES},
        {"selective", RECOMPUTE_NORM_OUT | RECOMPUTE_ACT_OUT | RECOMPUTE_ATTN_OUT, MASKS_BYTES},
        {"selective", RECOMPUTE_ATTN_OUT, MASKS_BYTES},
        {"none", TEMPO_SOFTMAX | RECOMPUTE_NORM_OUT | RECOMPUTE_ACT_OUT, MASKS_BYTES},
        {"full", RECOMPUTE_NORM_OUT | RECOMPUTE_ACT_OUT, MASKS_BYTES},   // the group's recompute keeps what a none+parts layer keeps
        // the GEMM parts: q, k, v and the MLP's inner tensors made again (alone, on the norms, on the
        // attention's second forward, on selective and full)
        {"none", RECOMPUTE_QKV_OUT, MASKS_BYTES},
        {"none", RECOMPUTE_FC1_OUT, MASKS_BYTES},
        {"selective", RECOMPUTE_NORM_OUT | RECOMPUTE_FC1_OUT, MASKS_BYTES},
        {"selective", RECOMPUTE_NORM_OUT | RECOMPUTE_QKV_OUT | RECOMPUTE_FC1_OUT, MASKS_BYTES},
        {"selective", RECOMPUTE_NORM_OUT | RECOMPUTE_ATTN_OUT | RECOMPUTE_QKV_OUT | RECOMPUTE_FC1_OUT, MASKS_BYTES},
        {"selective", RECOMPUTE_ATTN_OUT | RECOMPUTE_QKV_OUT, MASKS_BYTES},
        {"none", TEMPO_SOFTMAX | RECOMPUTE_QKV_OUT | RECOMPUTE_FC1_OUT, MASKS_BYTES},
        {"full", RECOMPUTE_NORM_OUT | RECOMPUTE_QKV_OUT | RECOMPUTE_FC1_OUT, MASKS_BYTES},
        // ln2_in made again by the projection and the residual (on a kept or a remade proj_in)
        {"none", RECOMPUTE_PROJ_OUT, MASKS_BYTES},
        {"selective", RECOMPUTE_NORM_OUT | RECOMPUTE_ATTN_OUT | RECOMPUTE_QKV_OUT | RECOMPUTE_PROJ_OUT, MASKS_BYTES},
        {"selective", RECOMPUTE_NORM_OUT | RECOMPUTE_ACT_OUT | RECOMPUTE_ATTN_OUT | RECOMPUTE_QKV_OUT | RECOMPUTE_FC1_OUT |
                          RECOMPUTE_PROJ_OUT, MASKS_BYTES},
        {"selective", RECOMPUTE_NORM_OUT | RECOMPUTE_FC1_OUT | RECOMPUTE_PROJ_OUT, MASKS_BYTES},
        // one dropout mask drawn again alone (kept as bytes or bits otherwise): read by the dropout's backward,
        // Proj's remade residual (drop1), the standard and Tempo's attention backward (attn_mask)
        {"none", RECOMPUTE_DROP1_MASK, MASKS_BYTES},
        {"none", RECOMPUTE_DROP2_MASK, MASKS_BYTES},
        {"none", RECOMPUTE_ATTN_MASK, MASKS_BYTES},
        {"none", RECOMPUTE_DROP2_MASK, MASKS_BITS},
        {"none", TEMPO_SOFTMAX | RECOMPUTE_ATTN_MASK, MASKS_BITS},
        {"none", RECOMPUTE_PROJ_OUT | RECOMPUTE_DROP1_MASK, MASKS_BYTES},   // drawn once, read by the residual and the backward
        {"selective", RECOMPUTE_NORM_OUT | RECOMPUTE_FC1_OUT | RECOMPUTE_DROP1_MASK, MASKS_BYTES},   // the pick at S, 20 MB a layer
        {"selective", RECOMPUTE_NORM_OUT | RECOMPUTE_ATTN_OUT | RECOMPUTE_FC1_OUT | RECOMPUTE_PROJ_OUT | RECOMPUTE_DROP2_MASK, MASKS_BYTES},
        {"none", RECOMPUTE_NORM_OUT | RECOMPUTE_DROP1_MASK | RECOMPUTE_DROP2_MASK | RECOMPUTE_ATTN_MASK, MASKS_BYTES},
    };
    // Flash attention (O and the log-sum-exp kept): "attn" is flash's forward again (O and the log-sum-exp
    // at once, for Proj's weight gradient and flash's backward), the GEMM parts remake what flash reads.
    enum { F = ATTN_FLASH };
    static const Mode flash_modes[] = {
        {"none", F | RECOMPUTE_NORM_OUT | RECOMPUTE_ACT_OUT, MASKS_BYTES},
        {"selective", F | RECOMPUTE_ATTN_OUT, MASKS_BYTES},
        {"none", F | RECOMPUTE_QKV_OUT, MASKS_BYTES},
        {"none", F | RECOMPUTE_FC1_OUT, MASKS_BYTES},
        {"none", F | RECOMPUTE_PROJ_OUT, MASKS_BYTES},
        {"selective", F | RECOMPUTE_ATTN_OUT | RECOMPUTE_QKV_OUT, MASKS_BYTES},   // flash's forward on remade q, k, v
        {"selective", F | RECOMPUTE_ATTN_OUT | RECOMPUTE_PROJ_OUT | RECOMPUTE_DROP1_MASK, MASKS_BYTES},
        {"selective", F | RECOMPUTE_NORM_OUT | RECOMPUTE_ACT_OUT | RECOMPUTE_ATTN_OUT | RECOMPUTE_QKV_OUT |
                          RECOMPUTE_FC1_OUT | RECOMPUTE_PROJ_OUT, MASKS_BYTES},
        {"none", F | RECOMPUTE_NORM_OUT | RECOMPUTE_DROP1_MASK | RECOMPUTE_DROP2_MASK, MASKS_BITS},
        {"full", F | RECOMPUTE_NORM_OUT | RECOMPUTE_QKV_OUT | RECOMPUTE_FC1_OUT, MASKS_BYTES},
    };
    // LoRA (with --lora-dropout 0.1) and LoRA-FA (rank 2 on every site, the base frozen; 3 steps, so B is
    // no longer 0 when the GEMM parts remake q, k, v, the MLP's tensors and ln2_in with the adapters' terms from their kept x·Aᵀ; under
    // LoRA-FA the GEMMs' inputs are not kept, so the norms (or the attention) make them again first).
    static const Mode lora_modes[] = {
        {"none", RECOMPUTE_QKV_OUT, MASKS_BYTES},
        {"none", RECOMPUTE_FC1_OUT, MASKS_BYTES},
        {"none", RECOMPUTE_PROJ_OUT, MASKS_BYTES},
        {"none", RECOMPUTE_NORM_OUT | RECOMPUTE_ACT_OUT, MASKS_BYTES},
        {"selective", RECOMPUTE_ATTN_OUT | RECOMPUTE_PROJ_OUT | RECOMPUTE_DROP1_MASK, MASKS_BYTES},
        {"selective", RECOMPUTE_NORM_OUT | RECOMPUTE_ACT_OUT | RECOMPUTE_ATTN_OUT | RECOMPUTE_QKV_OUT |
                          RECOMPUTE_FC1_OUT | RECOMPUTE_PROJ_OUT, MASKS_BYTES},
        {"full", RECOMPUTE_NORM_OUT | RECOMPUTE_QKV_OUT | RECOMPUTE_FC1_OUT, MASKS_BYTES},
    };
    struct { const char *name; unsigned ref; int lora; size_t n; const Mode *modes; } sets[] = {
        {"", 0, 0, sizeof modes / sizeof modes[0], modes},
        {" (flash)", F, 0, sizeof flash_modes / sizeof flash_modes[0], flash_modes},
        {" (LoRA, dropout 0.1)", 0, 1, sizeof lora_modes / sizeof lora_modes[0], lora_modes},
        {" (LoRA-FA)", 0, 2, sizeof lora_modes / sizeof lora_modes[0], lora_modes},
        {" (flash, LoRA-FA)", F, 2, sizeof flash_modes / sizeof flash_modes[0], flash_modes},
    };
    struct { int llama; float p; const char *name; } fams[] = {
        {0, 0.1f, "gpt2"}, {1, 0.0f, "llama"}, {1, 0.1f, "llama p0.1"}, {2, 0.1f, "qwen3 p0.1"}, {3, 0.1f, "phi3 p0.1"}};
    int runs = 0;
    for (size_t set = 0; set < sizeof sets / sizeof sets[0]; set++)
    for (int f = 0; f < 5; f++)
        for (int dt = 0; dt < 3; dt++) {
            if (fams[f].llama == 3 && !sets[set].lora) continue;   // Phi-3's base is llama's; its adapters differ
            GPTConfig cfg = config(fams[f].llama, fams[f].p);
            if (sets[set].lora) {
                cfg.lora_rank = 2;
                cfg.lora_fa = sets[set].lora == 2;
                cfg.lora_dropout = sets[set].lora == 1 ? 0.1f : 0.0f;   // A's gradient: a remade input, dropped
            }
            Trace ref;
            char what[160];
            snprintf(what, sizeof what, "%s %s none%s", fams[f].name, DT[dt], sets[set].name);
            run(&ref, &cfg, "none", sets[set].ref, MASKS_BYTES, dt, what);
            const Mode *md = sets[set].modes;
            for (size_t i = 0; i < sets[set].n; i++) {
                const char *kind = md[i].kind;
                unsigned mp = md[i].parts;
                MaskMode mm = md[i].masks;
                if (fams[f].llama && mp == RECOMPUTE_ACT_OUT) continue;   // llama has no GeLU output
                Trace t;
                char parts[96];
                snprintf(what, sizeof what, "%s %s %s+%s%s, %s masks", fams[f].name, DT[dt], kind,
                         fusion_parts_name(mp, parts, sizeof parts), sets[set].name, mask_mode_name(mm));
                run(&t, &cfg, kind, mp, mm, dt, what);
                CHECK(memcmp(ref.loss, t.loss, sizeof t.loss) == 0, "%s: losses differ (%.9g vs %.9g)", what, ref.loss[0],
                      t.loss[0]);
                CHECK(memcmp(ref.grads, t.grads, t.n * sizeof(float)) == 0, "%s: gradients differ", what);
                CHECK(memcmp(ref.params, t.params, t.n * sizeof(float)) == 0, "%s: parameters differ", what);
                trace_free(&t);
                runs++;
            }
            trace_free(&ref);
        }
    printf("%d runs with the norms', GeLU's, q/k/v's, the MLP's tensors, the attention's output (standard, flash, LoRA) "
           "and the dropout masks made again in backward: bitwise the runs that keep them\n", runs);
    return check_summary();
}
