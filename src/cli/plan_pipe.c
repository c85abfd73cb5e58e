#include "cli/plan_pipe.h"
#include <omp.h>
#include <string.h>
#include "memory/ledger_report.h"
#include "memory/pipe_stages.h"
#include "memory/stage_planner.h"

// The shape ctron train runs (train_options.c's): one micro-batch on one tensor-parallel rank.
static ActShape shape_of(const TrainOptions *o) {
    GPTConfig c = o->model;
    gpt_config_resolve(&c);
    ActShape sh = {.s = c.seq, .b = c.batch, .h = c.hidden, .a = c.heads, .L = c.layers, .v = c.vocab,
                   .elem_bytes = o->act_dtype == ACT_BF16 ? 2 : 4, .masks = o->masks, .dropout = c.dropout > 0.0f,
                   .t = o->tp, .sp = o->sp};
    // the family's block and its parameter side (untied output layer, biases) for the planner's counts
    act_shape_set_family(&sh, (ArchKind)c.arch, c.kv_heads, c.ffn, c.tie_embeddings, c.qkv_bias, c.qk_norm);
    sh.fused_proj = c.fused_proj != 0;
    sh.head_dim = gpt_shape_head_dim(&c);
    return sh;
}

int plan_print_stages(FILE *f, const TrainOptions *o, const PipeSpec *spec, double budget) {
    ActShape sh = shape_of(o);
    int threads = o->threads > 0 ? o->threads : omp_get_max_threads();
    MemoryPolicy pol;
    StagePlan sp;
    char err[512], b1[32], b2[32], b3[32];
    if (spec->p > STAGE_PLAN_MAX_STAGES) {
        fprintf(f, "the per-stage planner handles at most %d stages (got --pp %d)\n", STAGE_PLAN_MAX_STAGES, spec->p);
        return -1;
    }
    int ok = stage_plan_memory(spec, &sh, (Precision)o->precision, NULL, threads, budget, &pol, &sp, err, sizeof err) == 0;
    const GPTConfig *c = &o->model;
    char vs[32] = "", tempo[48];
    if (spec->kind == PIPE_INTERLEAVED) snprintf(vs, sizeof vs, ", V=%d", spec->V);
    if (!ok) fprintf(f, "no per-stage plan fits: %s; the least-memory plan:\n", err);
    else fprintf(f, "plan per pipeline stage for %s of activations per rank:\n", format_bytes(budget, b1, sizeof b1));
    fprintf(f, "  %s, p=%d%s, m=%d micro-batches; L=%d h=%d a=%d s=%d b=%d v=%d, t=%d%s, %s; masks %s; tempo %s%s%s\n",
            pipe_schedule_name(spec->kind), spec->p, vs, spec->m, c->layers, c->hidden, c->heads, c->seq, c->batch,
            c->vocab, o->tp, o->sp ? " +SP" : "", act_dtype_name(o->act_dtype), mask_mode_name(sp.masks),
            tempo_describe(sp.tempo, tempo, sizeof tempo), sp.tempo & MINI_SEQ ? "; mini-seq" : "",
            sp.tempo & ATTN_FLASH ? "; flash attention" : "");
    fprintf(f, "  %5s  %-18s %4s %9s %4s %14s %9s  %s\n", "stage", "layers", "full", "selective", "none",
            "peak + scratch", "of budget", "recompute per micro-batch");
    for (int r = 0; r < spec->p; r++) {
        char layers[96];
        pipe_stage_layers(spec, r, layers, sizeof layers);
        size_t total = sp.peak[r] + sp.scratch_bytes + sp.gemm_scratch_bytes;
        fprintf(f, "  %5d  %-18s %4d %9d %4d %14s %8.1f%%  %.3g GFLOP (%.1f %% of the stage's)\n", r, layers,
                sp.n_full[r], sp.n_sel[r], sp.n_layers - sp.n_full[r] - sp.n_sel[r],
                format_bytes((double)total, b1, sizeof b1), 100.0 * (double)total / budget, sp.extra_flops[r] * 1e-9,
                100.0 * sp.extra_flops[r] / sp.model_flops[r]);
    }
    fprintf(f, "  (peak: pipe_rank_act_peak, what the stage's ledger measures; scratch: attention %s%s%s on every rank,"
            " %d thread%s)\n", format_bytes((double)sp.scratch_bytes, b2, sizeof b2),
            sp.gemm_scratch_bytes ? " + bf16 GEMM operands " : "",
            sp.gemm_scratch_bytes ? format_bytes((double)sp.gemm_scratch_bytes, b3, sizeof b3) : "", threads,
            threads == 1 ? "" : "s");
    char flags[8192];
    stage_plan_flags(spec, &pol, flags, sizeof flags);
    fprintf(f, "  ctron train flags: %s\n", flags);
    policy_free(&pol);
    return ok ? 0 : -1;
}
