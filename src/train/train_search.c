// --recompute search: the fusion-aware search (memory/fusion_search.h) for the run's shape, priced by
// this machine's rates, as a MemoryPolicy's kind and parts.
#include <string.h>
#include "memory/ledger_report.h"
#include "train/trainer.h"
#include "util/common.h"
#include "util/membw.h"
#include "util/peak.h"

void train_search_rates(TrainOptions *o) {
    if (!(o->search_gflops > 0)) {
        double g = 0.0;
        const char *prec = o->precision == PRECISION_BF16 ? "bf16" : "fp32";
        if (o->peak_gflops > 0) g = o->peak_gflops;
        else if (peak_gflops_cached_prec(o->threads, prec, &g) != 0) g = peak_gflops_measure_prec(o->threads, prec);
        o->search_gflops = g;
    }
    if (!(o->search_gbps > 0)) o->search_gbps = membw_measure_gbps(o->threads);
}

int train_search_pick(const TrainOptions *o, FusionGraph *g, FusionMode *pick, FusionCut *cut, FusionCut *best,
                      char *err, size_t errlen) {
    ActShape sh = train_act_shape(o);
    FusionRates r = {o->search_gflops > 0 ? o->search_gflops : 1.0, o->search_gbps > 0 ? o->search_gbps : 1.0,
                     o->search_link_gbps};
    fusion_graph_build(g, &sh, (o->flash ? ATTN_FLASH : 0) | gpt_keep_bits(&o->model));
    size_t budget = (size_t)o->act_budget_layer;
    fusion_search(g, &r, budget, best);
    if (fusion_search_modes(g, &r, budget, pick, cut) == 0) return 0;
    char b1[32], b2[32];
    snprintf(err, errlen, "--act-budget-layer %s: no recompute mode fits; the least a layer keeps is %s (full recompute: "
             "its input)", format_bytes(o->act_budget_layer, b1, sizeof b1), format_bytes((double)cut->bytes, b2, sizeof b2));
    return -1;
}

void train_print_search(FILE *f, const TrainOptions *o) {
    FusionGraph g;
    FusionMode md;
    FusionCut cut, best;
    char err[256], name[128], b1[32], b2[32], dropped[256];
    if (train_search_pick(o, &g, &md, &cut, &best, err, sizeof err) != 0) return;
    unsigned all = (1u << g.n) - 1;
    char link[96] = "";
    if (o->search_link_gbps > 0)   // TP: the collectives the remade GEMMs repeat, priced on the link
        snprintf(link, sizeof link, ", %.1f GB/s TP link", o->search_link_gbps);
    fprintf(f, "  recompute search: %s per layer at %.1f GFLOP/s, %.1f GB/s%s: %s keeps %s (%zu bytes), recomputes "
            "%.3f ms per layer (TP traffic %.0f bytes); drops %s\n", format_bytes(o->act_budget_layer, b1, sizeof b1),
            o->search_gflops, o->search_gbps, link, fusion_mode_name(md, name, sizeof name),
            format_bytes((double)cut.bytes, b2, sizeof b2), cut.bytes, cut.cost * 1e3, fusion_comm_bytes(&g, cut.kept),
            fusion_set_describe(&g, all & ~cut.kept, 0, dropped, sizeof dropped));
    fprintf(f, "  recompute search: the graph's optimum keeps %zu bytes, recomputes %.3f ms per layer; drops %s\n",
            best.bytes, best.cost * 1e3, fusion_set_describe(&g, all & ~best.kept, 0, dropped, sizeof dropped));
}
