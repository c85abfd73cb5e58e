// The fusion-aware recompute search (memory/fusion_search.h): the graph's bytes are the analytic
// model's, the three policies the issue names are kept sets of the graph, the branch and bound finds the
// optimum that trying every subset finds, and at fixed rates the executable search picks specific
// modes at specific budgets.
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "memory/fusion_search.h"

static ActShape shape(long s, long b, long h, long a, int dropout, int e, MaskMode masks, int t, int sp, int llama) {
    ActShape sh = {.s = s, .b = b, .h = h, .a = a, .L = 12, .v = 8192, .elem_bytes = e, .masks = masks,
                   .dropout = dropout, .t = t, .sp = sp};
    act_shape_set_family(&sh, llama ? ARCH_LLAMA : ARCH_GPT2, llama ? a / 3 : 0, llama ? 8 * h / 3 : 0, 0, 0, 0);
    return sh;
}

// LoRA of rank r on the sites (LoraSite bits; fa: LoRA-FA), and the policy bits gpt_init adds for it.
enum { GPT2_SITES = 1u << LORA_QKV | 1u << LORA_PROJ | 1u << LORA_FC | 1u << LORA_FC2,
       LLAMA_SITES = 1u << LORA_Q | 1u << LORA_K | 1u << LORA_V | 1u << LORA_O | 1u << LORA_GATE | 1u << LORA_UP |
                     1u << LORA_DOWN };
static unsigned with_lora(ActShape *sh, int r, int fa, unsigned sites) {
    sh->lora_rank = r;
    sh->lora_sites = sites;
    sh->lora_fa = fa;
    return LORA_FROZEN | (fa ? LORA_FA : 0) | sites << LORA_TARGET_SHIFT;
}

static const FusionRates RATES = {100.0, 10.0, 0.0};   // 100 GFLOP/s, 10 GB/s: fixed, so the picks are

static unsigned set_of(const FusionGraph *g, const ActName *names, int n) {
    unsigned k = 0;
    for (int i = 0; i < n; i++) k |= fusion_bit(g, names[i]);
    return k;
}

static void check_bytes_and_modes(const ActShape *sh, unsigned base, const char *what) {
    FusionGraph g;
    fusion_graph_build(&g, sh, base);
    unsigned all = g.needs | g.fixed;   // what backward reads: every tensor but a frozen linear's unread input (LoRA)
    CHECK(fusion_bytes(&g, all) == act_layer_kind_bytes(sh, RECOMPUTE_NONE, 1, base), "%s: the graph's tensors %zu, a "
          "none layer %zu", what, fusion_bytes(&g, all), act_layer_kind_bytes(sh, RECOMPUTE_NONE, 1, base));
    if (!(base & LORA_FROZEN)) CHECK(all == (1u << g.n) - 1, "%s: backward reads every tensor", what);
    const ActName inputs[] = {ACT_QKV_IN, ACT_FC1_IN};   // LoRA-FA: candidates (the GEMM parts remake from them), unread
    if (base & LORA_FA)
        CHECK(set_of(&g, inputs, 2) && !(all & set_of(&g, inputs, 2)), "%s: under LoRA-FA backward reads no GEMM input, "
              "the graph has them", what);
    CHECK(fusion_cost(&g, &RATES, all, NULL, NULL) == 0.0, "%s: keeping everything recomputes nothing", what);
    FusionMode modes[FUSION_MAX_MODES];
    int n = fusion_modes(&g, modes);
    for (int i = 0; i < n; i++) {
        char name[128];
        size_t want = act_layer_kind_bytes(sh, modes[i].kind, 1, modes[i].parts | base);
        CHECK(fusion_bytes(&g, fusion_mode_kept(&g, modes[i])) == want, "%s: mode %s keeps %zu in the graph, %zu in "
              "the analytic model", what, fusion_mode_name(modes[i], name, sizeof name),
              fusion_bytes(&g, fusion_mode_kept(&g, modes[i])), want);
    }
    // The three policies: selective (the attention core), full (the input only), and torch.compile's
    // min-cut choice (recompute the norms and the activation, keep the GEMM outputs).
    const ActName core[] = {ACT_ATTN_PROB, ACT_ATTN_MASK, ACT_ATTN_DROP};
    const ActName cheap[] = {ACT_QKV_IN, ACT_FC1_IN, ACT_FC2_IN};
    FusionMode sel = {RECOMPUTE_SELECTIVE, 0}, full = {RECOMPUTE_FULL, 0}, tc = {RECOMPUTE_NONE, RECOMPUTE_NORM_OUT | RECOMPUTE_ACT_OUT};
    CHECK(fusion_mode_kept(&g, sel) == (all & ~set_of(&g, core, 3)), "%s: selective is all but the core", what);
    CHECK(fusion_mode_kept(&g, full) == g.fixed, "%s: full keeps the input only", what);
    CHECK(fusion_mode_kept(&g, tc) == (all & ~set_of(&g, cheap, 3)), "%s: none+norm,act is all but the norms' and "
          "the activation's outputs", what);
}

// Branch and bound against every subset, at budgets from the input alone to everything.
static int check_exact(const ActShape *sh, unsigned base, const FusionRates *r, const char *what) {
    FusionGraph g;
    fusion_graph_build(&g, sh, base);
    size_t lo = fusion_bytes(&g, 0), hi = fusion_bytes(&g, (1u << g.n) - 1);
    int cases = 0;
    int steps = g.n > 19 ? 6 : 24;   // 2^20 subsets (GPT-2's four adapters): fewer budgets
    for (int k = -1; k <= steps; k++) {
        size_t budget = k < 0 ? lo - 1 : lo + (hi - lo) * (size_t)k / (size_t)steps;
        FusionCut a, b;
        int ra = fusion_search(&g, r, budget, &a), rb = fusion_search_brute(&g, r, budget, &b);
        CHECK(ra == rb && a.cost == b.cost && a.bytes == b.bytes, "%s budget %zu: search %d cost %.9g bytes %zu, every "
              "subset %d cost %.9g bytes %zu", what, budget, ra, a.cost, a.bytes, rb, b.cost, b.bytes);
        CHECK(ra != 0 || (a.bytes <= budget && fusion_bytes(&g, a.kept) == a.bytes), "%s: a cut over budget", what);
        cases++;
    }
    return cases;
}

// The TP traffic a remade GEMM repeats, priced on the link (fusion_graph.c's op_comm), worked by hand at S
// (fp32 activations: the collectives move fp32 [s·b, h] = 4·256·4·768 = 3,145,728 bytes, of which one rank of
// two sends half per all-gather or reduce-scatter and all of it per all-reduce).
static void check_tp_traffic(void) {
    const double full = 4.0 * 256 * 4 * 768, LINK = 0.5;   // GB/s
    const FusionRates priced = {100.0, 10.0, LINK};
    struct { int t, sp; unsigned parts; double bytes; const char *what; } cases[] = {
        {2, 1, RECOMPUTE_NORM_OUT | RECOMPUTE_QKV_OUT | RECOMPUTE_FC1_OUT | RECOMPUTE_PROJ_OUT, 3 * full / 2,
         "SP: q/k/v's and FC1's inputs all-gathered, Proj's sums reduce-scattered"},
        {2, 1, RECOMPUTE_NORM_OUT | RECOMPUTE_ACT_OUT | RECOMPUTE_ATTN_OUT | RECOMPUTE_DROP1_MASK, 0.0,
         "SP: no GEMM made again"},
        {2, 0, RECOMPUTE_NORM_OUT | RECOMPUTE_QKV_OUT | RECOMPUTE_FC1_OUT, 0.0, "TP: every row at hand"},
        {2, 0, RECOMPUTE_PROJ_OUT, full, "TP: Proj's sums all-reduced"},
        {4, 1, RECOMPUTE_FC1_OUT | RECOMPUTE_PROJ_OUT, 2 * full * 3 / 4, "SP over 4 ranks"},
        {1, 0, RECOMPUTE_QKV_OUT | RECOMPUTE_FC1_OUT | RECOMPUTE_PROJ_OUT, 0.0, "one rank"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ActShape sh = shape(256, 4, 768, 12, 1, 4, MASKS_BYTES, cases[i].t, cases[i].sp, 0);
        FusionGraph g;
        fusion_graph_build(&g, &sh, 0);
        unsigned kept = fusion_mode_kept(&g, (FusionMode){RECOMPUTE_SELECTIVE, cases[i].parts});
        double extra = fusion_cost(&g, &priced, kept, NULL, NULL) - fusion_cost(&g, &RATES, kept, NULL, NULL);
        CHECK(fusion_comm_bytes(&g, kept) == cases[i].bytes, "t %d, %s: %.0f bytes again, by hand %.0f", cases[i].t,
              cases[i].what, fusion_comm_bytes(&g, kept), cases[i].bytes);
        CHECK(fabs(extra - cases[i].bytes / (LINK * 1e9)) <= 1e-12, "t %d, %s: the link adds %.9g s, by hand %.9g s",
              cases[i].t, cases[i].what, extra, cases[i].bytes / (LINK * 1e9));
    }
    // Plain TP 2 at S, 9 MB a layer: unpriced, the search remakes Proj (43.5 ms); its all-reduce at 0.5 GB/s
    // (3,145,728 bytes: 6.29 ms) makes q, k, v's GEMM the cheaper one (48.9 ms, no traffic: every row at hand).
    ActShape tp = shape(256, 4, 768, 12, 1, 4, MASKS_BYTES, 2, 0, 0);
    FusionGraph g;
    fusion_graph_build(&g, &tp, 0);
    struct { const FusionRates *r; const char *pick; double ms; } picks[] = {
        {&RATES, "selective+norm,attn,fc1,proj,drop1_mask", 43.507}, {&priced, "selective+norm,qkv,fc1,drop1_mask", 48.855}};
    for (int i = 0; i < 2; i++) {
        FusionMode md;
        FusionCut cut, best;
        char nm[128];
        fusion_search_modes(&g, picks[i].r, 9000000, &md, &cut);
        fusion_search(&g, picks[i].r, 9000000, &best);
        CHECK(strcmp(fusion_mode_name(md, nm, sizeof nm), picks[i].pick) == 0 && fabs(cut.cost * 1e3 - picks[i].ms) < 5e-4 &&
              cut.cost <= best.cost * (1 + 1e-12), "TP 2 at 9 MB, link %.1f GB/s: picked %s at %.4f ms (the graph's "
              "optimum %.4f ms), expected %s at %.3f ms", picks[i].r->link_gbps, nm, cut.cost * 1e3, best.cost * 1e3,
              picks[i].pick, picks[i].ms);
    }
}

int main(void) {
    ActShape shapes[] = {
        shape(16, 2, 64, 4, 1, 4, MASKS_BYTES, 1, 0, 0),   // GPT-2, dropout, fp32, byte masks
        shape(16, 2, 64, 4, 0, 2, MASKS_BYTES, 1, 0, 0),   // no dropout, bf16
        shape(32, 2, 64, 4, 1, 2, MASKS_BITS, 2, 1, 0),    // TP 2 + SP, bit masks
        shape(16, 2, 64, 4, 1, 4, MASKS_REGEN, 1, 0, 0),   // regenerated masks
        shape(16, 2, 48, 6, 0, 4, MASKS_BYTES, 1, 0, 1),   // llama, GQA 6/2, ffn 128
        shape(16, 2, 48, 6, 1, 2, MASKS_BYTES, 2, 1, 1),   // llama, dropout, TP 2 + SP
        shape(256, 4, 768, 12, 1, 4, MASKS_BYTES, 1, 0, 0),   // S
        shape(16, 2, 64, 4, 1, 4, MASKS_BYTES, 1, 0, 0),   // flash: O and the log-sum-exp, no s×s tensors
        shape(32, 2, 64, 4, 1, 2, MASKS_BITS, 2, 1, 0),
        shape(16, 2, 48, 6, 1, 2, MASKS_BYTES, 2, 1, 1),
        shape(256, 4, 768, 12, 1, 4, MASKS_BYTES, 1, 0, 0),
        shape(16, 2, 64, 4, 1, 4, MASKS_BYTES, 1, 0, 0),   // LoRA
        shape(16, 2, 64, 4, 1, 2, MASKS_BITS, 1, 0, 0),    // LoRA-FA
        shape(16, 2, 48, 6, 1, 4, MASKS_BYTES, 1, 0, 1),   // llama LoRA-FA, flash
        shape(16, 2, 48, 6, 0, 2, MASKS_BYTES, 2, 1, 1),   // llama LoRA, TP 2 + SP
    };
    const char *names[] = {"gpt2 fp32", "gpt2 bf16 p0", "gpt2 tp2+sp bits", "gpt2 regen", "llama", "llama tp2+sp",
                           "S", "gpt2 flash", "gpt2 flash tp2+sp bits", "llama flash tp2+sp", "S flash", "gpt2 lora",
                           "gpt2 lora-fa bits", "llama lora-fa flash", "llama lora tp2+sp"};
    unsigned bases[] = {0, 0, 0, 0, 0, 0, 0, ATTN_FLASH, ATTN_FLASH, ATTN_FLASH, ATTN_FLASH, 0, 0, 0, 0};
    _Static_assert(sizeof bases / sizeof bases[0] == sizeof shapes / sizeof shapes[0], "a base per shape");
    // LoRA rank 4 (the frozen base: backward reads a linear's input only for A's gradient; LoRA-FA none):
    // GPT-2 on every site; llama on v, o and down (flash, LoRA-FA) and on q and v (TP 2 + SP)
    bases[11] = with_lora(&shapes[11], 4, 0, GPT2_SITES);
    bases[12] = with_lora(&shapes[12], 4, 1, GPT2_SITES);
    bases[13] = with_lora(&shapes[13], 4, 1, 1u << LORA_V | 1u << LORA_O | 1u << LORA_DOWN) | ATTN_FLASH;
    bases[14] = with_lora(&shapes[14], 4, 0, 1u << LORA_Q | 1u << LORA_V);
    int cases = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        check_bytes_and_modes(&shapes[i], bases[i], names[i]);
        cases += check_exact(&shapes[i], bases[i], &RATES, names[i]);
        if (shapes[i].t > 1)   // TP priced
            cases += check_exact(&shapes[i], bases[i], &(FusionRates){100.0, 10.0, 0.05}, names[i]);
    }
    printf("branch and bound == every subset at %d (shape, budget) cases\n", cases);

    // The picks at S (GPT-2: dropout 0.1, fp32, byte masks) and S-llama (no dropout), rates fixed: from
    // everything kept down to the input alone. The pointwise parts (Tempo's softmax fusion, the norms,
    // GeLU) come before selective's attention core, then the attention's output made again by a second
    // attention forward, then the GEMM parts (q, k, v; FC1; the projection), all of them before full
    // recompute, which is picked only where nothing else fits.
    // Every pick costs what the graph's optimum costs (it keeps the norms' statistics too, 16 or 8 KiB):
    // a single mask drawn again alone is a part of its own (RECOMPUTE_DROP1_MASK, ...).
    struct { int cfg; size_t budget; int rc; const char *pick; } picks[] = {   // cfg: 1 llama, 2 flash, 4 LoRA, 8 LoRA-FA
        {0, 80232448, 0, "none+softmax"},   // as cheap as none (fused), fewer bytes
        {0, 70000000, 0, "none+softmax"},
        {0, 50000000, 0, "none+softmax,norm,act"},
        {0, 40000000, 0, "selective+act"},
        {0, 34000000, 0, "selective+norm,act"},
        {0, 30000000, 0, "selective+norm,act,attn"},
        {0, 25000000, 0, "selective+norm,act,qkv"},              // q, k, v made again by their GEMMs
        {0, 21000000, 0, "selective+norm,fc1"},                  // FC1 and GeLU again (fc1 drops fc2_in too)
        {0, 20000000, 0, "selective+norm,fc1,drop1_mask"},       // a mask drawn again alone, not proj_in (drop1's
                                                                 // and drop2's cost the same: the first found stays)
        {0, 15000000, 0, "selective+norm,attn,fc1,proj"},        // ln2_in again: the projection and the residual
        {0, 12000000, 0, "selective+norm,qkv,fc1"},
        {0, 8000000, 0, "selective+norm,attn,qkv,fc1"},
        {0, 5000000, 0, "selective+norm,attn,qkv,fc1,proj"},     // everything but the input and the masks
        {0, 3000000, -1, "full"},
        {1, 50339840, 0, "none"},
        {1, 45000000, 0, "none+norm"},
        {1, 38000000, 0, "selective"},
        {1, 32000000, 0, "selective+norm"},
        {1, 30000000, 0, "selective+norm,attn"},
        {1, 25000000, 0, "selective+norm,attn,qkv"},
        {1, 20000000, 0, "selective+norm,attn,qkv,proj"},        // the attention half again, gate and up kept
        {1, 15000000, 0, "selective+norm,fc1"},                  // gate and up again
        {1, 12000000, 0, "selective+norm,attn,fc1"},
        {1, 10000000, 0, "selective+norm,attn,fc1,proj"},
        {1, 8000000, 0, "selective+norm,attn,qkv,fc1"},
        {1, 3145728, 0, "full"},
        // Flash (O and the log-sum-exp kept, no s×s tensors): "attn" is flash's forward again (both made at
        // once: 4·b·s²·h FLOPs, no fusion), selective alone is none (it carries "attn"). Each pick costs the
        // graph's optimum (asserted below for every row).
        {2, 80000000, 0, "none"},                                // 51,970,048 bytes: O and the lse, no s×s tensors
        {2, 40000000, 0, "none+act"},
        {2, 30000000, 0, "selective+norm,act,attn"},             // flash's forward again (selective: no-op under flash)
        {2, 25000000, 0, "none+norm,act,qkv"},
        {2, 20000000, 0, "selective+norm,act,attn,qkv,drop1_mask"},
        {2, 15000000, 0, "selective+norm,attn,fc1,proj"},
        {2, 10000000, 0, "none+norm,qkv,fc1,drop1_mask,drop2_mask"},
        {2, 5000000, 0, "selective+norm,attn,qkv,fc1,proj"},
        {3, 50000000, 0, "none"},                                // 37,806,080 bytes
        {3, 30000000, 0, "selective+norm,attn"},
        {3, 25000000, 0, "selective+norm,attn,qkv"},
        {3, 20000000, 0, "selective+norm,attn,qkv,proj"},
        {3, 15000000, 0, "none+norm,fc1"},
        {3, 10000000, 0, "none+norm,qkv,fc1"},
        {3, 5000000, 0, "full"},
        // LoRA rank 16 on every site (S: GPT-2 LoRA; S-llama LoRA-FA, with and without flash): each site's x·Aᵀ
        // always kept, the q/k/v, FC1 and Proj parts add the adapters' terms from it. Under LoRA-FA no GEMM's
        // input is kept (nothing reads it), so a remade GEMM output costs its norm too: rc 1 marks the budgets
        // where the graph's optimum keeps fc1_in (an input no backward reads) to skip norm2, which no mode can.
        {4, 90000000, 0, "none+softmax"},                        // 67,911,680 bytes (262,144 of them x·Aᵀ)
        {4, 50000000, 0, "none+softmax,norm,act"},
        {4, 30000000, 0, "selective+norm,act,attn,drop1_mask"},
        {4, 20000000, 0, "selective+norm,fc1,drop1_mask"},
        {4, 10000000, 0, "selective+norm,qkv,fc1,drop1_mask,drop2_mask"},
        {9, 50000000, 0, "none"},                                // 41,361,408: no qkv_in, proj_in, fc1_in
        {9, 30000000, 0, "selective"},
        {9, 20000000, 1, "selective+fc1"},                       // 71.09 ms; the optimum keeps fc1_in: 70.46 ms
        {9, 15000000, 0, "selective+fc1"},
        {9, 8000000, 0, "selective+qkv,fc1"},
        {11, 30000000, 0, "selective+attn"},                     // flash's forward again
        {11, 20000000, 1, "none+fc1"},                           // 67.06 ms; the optimum keeps fc1_in: 66.43 ms
        {11, 10000000, 0, "none+qkv,fc1"},
    };
    for (size_t i = 0; i < sizeof picks / sizeof picks[0]; i++) {
        int llama = picks[i].cfg & 1, flash = picks[i].cfg >> 1 & 1, lora = picks[i].cfg >> 2;
        ActShape S = llama ? shape(256, 4, 768, 12, 0, 4, MASKS_BYTES, 1, 0, 1) : shapes[6];
        unsigned base = (flash ? ATTN_FLASH : 0) | (lora ? with_lora(&S, 16, lora == 2, llama ? LLAMA_SITES : GPT2_SITES) : 0);
        char sn[48];
        snprintf(sn, sizeof sn, "%s%s%s", llama ? "S-llama" : "S", flash ? " flash" : "",
                 lora == 2 ? " LoRA-FA" : lora ? " LoRA" : "");
        FusionGraph g;
        fusion_graph_build(&g, &S, base);
        FusionMode md;
        FusionCut cut, best;
        char nm[128], kept[300];
        int rc = fusion_search_modes(&g, &RATES, picks[i].budget, &md, &cut);
        fusion_mode_name(md, nm, sizeof nm);
        CHECK(rc == (picks[i].rc == 1 ? 0 : picks[i].rc) && strcmp(nm, picks[i].pick) == 0, "%s budget %zu: picked %s (%d), expected %s (%d)",
              sn, picks[i].budget, nm, rc, picks[i].pick, picks[i].rc);
        int rb = fusion_search(&g, &RATES, picks[i].budget, &best);
        CHECK(rb == rc && best.cost <= cut.cost * (1 + 1e-12), "the graph's optimum is never worse than an executable mode");
        if (picks[i].rc == 1)   // the optimum keeps fc1_in, which LoRA-FA's layers never keep (no mode can)
            CHECK(cut.cost > best.cost * (1 + 1e-9) && (best.kept & fusion_bit(&g, ACT_FC1_IN)) &&
                      !(cut.kept & fusion_bit(&g, ACT_FC1_IN)), "%s budget %zu: the optimum keeps fc1_in and costs less",
                  sn, picks[i].budget);
        else
            CHECK(cut.cost <= best.cost * (1 + 1e-12), "%s budget %zu: %s costs %.6g ms, the graph's "
                  "optimum %.6g ms", sn, picks[i].budget, nm, cut.cost * 1e3, best.cost * 1e3);
        printf("%-21s budget %9zu: %-22s %9zu bytes %8.3f ms | graph optimum %9zu bytes %8.3f ms, drops %s\n",
               sn, picks[i].budget, nm, cut.bytes, cut.cost * 1e3, best.bytes,
               best.cost * 1e3, fusion_set_describe(&g, ((1u << g.n) - 1) & ~best.kept, 0, kept, sizeof kept));
    }
    check_tp_traffic();
    return check_summary();
}
