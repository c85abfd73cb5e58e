#include "train/train_dist.h"
#include <string.h>
#include "memory/ledger_report.h"
#include "memory/memo_model.h"
#include "memory/pipe_memory.h"
#include "model/memo.h"
#include "util/common.h"

// A ZeRO rank's moments over the whole local buffer, in host memory: its pieces (on the backend),
// then every rank's via all-gather.
static float *unshard_state(Zero *zero, const float *owned, size_t n) {
    float *buf = xcalloc(n * sizeof(float));
    zero_unpack(zero, owned, buf);
    zero_allgather_host(zero, buf);
    return buf;
}

// m's moments, on its backend or (ZeRO, unsharded) in host memory, into the whole model's layout.
static void gather_state(const GPT *m, const GPT *full, const float *src, int on_host, float *full_buf) {
    if (on_host) gpt_gather_to_full_host(m, full, src, full_buf);
    else gpt_gather_to_full(m, full, src, full_buf);
}

void dist_gather_whole(const GPT *m, const AdamW *opt, Zero *zero, CommGrid *grid, GPT *full, AdamW *full_opt) {
    const float *mm = opt ? opt->m : NULL, *vv = opt ? opt->v : NULL;
    float *mm_buf = NULL, *vv_buf = NULL;
    if (opt && zero) {
        mm = mm_buf = unshard_state(zero, opt->m, m->n_params);
        vv = vv_buf = unshard_state(zero, opt->v, m->n_params);
    }
    if (grid->dp_group.rank == 0) {
        gpt_gather_to_full(m, full, m->params, full->params);
        if (opt) {
            gather_state(m, full, mm, zero != NULL, full_opt->m);
            gather_state(m, full, vv, zero != NULL, full_opt->v);
            full_opt->t = opt->t;
        }
        // Each stage wrote its own tensors into a zeroed model (wte once): the sum over the stages is the
        // whole model, exactly.
        if (grid->pp > 1) {
            comm_allreduce_sum(&grid->pp_group, full->params, full->params, full->n_params);
            if (full->frozen) comm_allreduce_sum(&grid->pp_group, full->frozen, full->frozen, full->n_frozen);
            if (opt) {
                comm_allreduce_sum(&grid->pp_group, full_opt->m, full_opt->m, full->n_params);
                comm_allreduce_sum(&grid->pp_group, full_opt->v, full_opt->v, full->n_params);
            }
        }
    }
    free(mm_buf);
    free(vv_buf);
}

// ZeRO's moments are sharded from the whole model in host memory, then packed onto the backend.
void dist_load_whole(GPT *m, AdamW *opt, const Zero *zero, const GPT *full, const AdamW *full_opt) {
    gpt_shard_from_full(m, full, full->params, m->params);
    if (!opt) return;
    if (!zero) {
        gpt_shard_from_full(m, full, full_opt->m, opt->m);
        gpt_shard_from_full(m, full, full_opt->v, opt->v);
    } else {
        float *buf = xmalloc(m->n_params * sizeof(float));
        gpt_shard_from_full_host(m, full, full_opt->m, buf);
        zero_pack(zero, buf, opt->m);
        gpt_shard_from_full_host(m, full, full_opt->v, buf);
        zero_pack(zero, buf, opt->v);
        free(buf);
    }
    opt->t = full_opt->t;
}

// Byte counts travel as fp32 pairs: ⌊b / 2^16⌋ and b mod 2^16, exact below 2^40 bytes.
static void put(float *p, size_t b) { p[0] = (float)(b >> 16); p[1] = (float)(b & 0xFFFF); }
static size_t get(const float *p) { return ((size_t)p[0] << 16) + (size_t)p[1]; }

int dist_pipeline_ledger_report(FILE *f, const GPT *m, const PipeSpec *spec, CommGroup *world, int stage) {
    enum { FIELDS = 4 };
    const Ledger *lg = &m->ledger;
    PipeMemory pm = {spec, &m->shape, &m->policy, m->pp.keep_all > 0 ? &m->policy_all : NULL, m->pp.keep_all};
    size_t mine[FIELDS] = {(size_t)stage, (size_t)m->pp.contexts, lg->total_peak, pipe_rank_act_peak(&pm, stage)};
    float send[2 * FIELDS], *all = xmalloc((size_t)world->size * 2 * FIELDS * sizeof(float));
    for (int i = 0; i < FIELDS; i++) put(send + 2 * i, mine[i]);
    if (world->size > 1) comm_allgather(world, send, all, 2 * FIELDS);
    else memcpy(all, send, sizeof send);
    int bad = 0;
    char b1[32], b2[32];
    fprintf(f, "activation bytes per rank at peak (pipeline %s, p=%d, %d chunk%s per stage, m=%d micro-batches; t=%d%s):\n"
            "  measured vs predicted from the schedule (DESIGN.md §9)\n", pipe_schedule_name(spec->kind), spec->p, spec->V,
            spec->V == 1 ? "" : "s", spec->m, m->shape.t, m->shape.sp ? ", sequence parallel" : "");
    fprintf(f, "  %-5s %5s %8s %14s %14s %12s\n", "rank", "stage", "contexts", "peak", "predicted", "");
    for (int r = 0; r < world->size; r++) {
        size_t v[FIELDS];
        for (int i = 0; i < FIELDS; i++) v[i] = get(all + ((size_t)r * FIELDS + i) * 2);
        int ok = v[2] == v[3];
        bad += !ok;
        fprintf(f, "  %-5d %5zu %8zu %14zu %14zu %12s  %s\n", r, v[0], v[1], v[2], v[3],
                format_bytes((double)v[2], b1, sizeof b1), ok ? "ok" : "MISMATCH");
    }
    free(all);
    // This rank's peak by activation context (micro-batch slot), layer and name.
    fprintf(f, "  rank %d at its peak, by context (micro-batch slot), layer and name:\n", world->rank);
    for (int k = 0; k < lg->slots; k++) {
        fprintf(f, "    context %d%s: %s", k, k < m->pp.keep_all ? " (keeps every activation)" : "",
                format_bytes((double)ledger_slot_peak_total(lg, k), b2, sizeof b2));
        for (int l = -1; l < lg->layers; l++) {
            size_t layer_sum = 0;
            for (int n = 0; n < ACT_COUNT; n++) layer_sum += ledger_slot_peak_bytes(lg, k, (ActName)n, l);
            if (layer_sum == 0) continue;
            if (l < 0) fprintf(f, "; model %zu (", layer_sum);
            else fprintf(f, "; layer %d %zu (", l, layer_sum);
            const char *sep = "";
            for (int n = 0; n < ACT_COUNT; n++) {
                size_t x = ledger_slot_peak_bytes(lg, k, (ActName)n, l);
                if (x) fprintf(f, "%s%s %zu", sep, act_name_str((ActName)n), x);
                if (x) sep = ", ";
            }
            fprintf(f, ")");
        }
        fprintf(f, "\n");
    }
    return bad;
}

int dist_ledger_report(FILE *f, const GPT *m, CommGroup *world) {
    enum { FIELDS = 6 };
    const Ledger *lg = &m->ledger;
    size_t mine[FIELDS] = {ledger_layer_stored(lg, 0, 0), act_layer_bytes(&m->shape, &m->policy, 0), lg->total_fwd_end,
                           act_forward_end_bytes(&m->shape, &m->policy), lg->total_peak,
                           act_peak_bytes(&m->shape, &m->policy)};
    float send[2 * FIELDS], *all = xmalloc((size_t)world->size * 2 * FIELDS * sizeof(float));
    for (int i = 0; i < FIELDS; i++) put(send + 2 * i, mine[i]);
    comm_allgather(world, send, all, 2 * FIELDS);
    int bad = 0;
    char b1[32], b2[32], b3[32], b4[32];
    fprintf(f, "activation bytes per rank (t=%d%s): measured vs predicted for the layout\n", m->shape.t,
            m->shape.sp ? ", sequence parallel" : "");
    fprintf(f, "  %-5s %13s %13s %12s %12s %12s %12s\n", "rank", "layer 0", "predicted", "fwd end", "predicted",
            "peak", "predicted");
    for (int r = 0; r < world->size; r++) {
        size_t v[FIELDS];
        for (int i = 0; i < FIELDS; i++) v[i] = get(all + ((size_t)r * FIELDS + i) * 2);
        int ok = v[0] == v[1] && v[2] == v[3] && v[4] == v[5];
        bad += !ok;
        fprintf(f, "  %-5d %13zu %13zu %12s %12s %12s %12s  %s\n", r, v[0], v[1], format_bytes((double)v[2], b1, sizeof b1),
                format_bytes((double)v[3], b2, sizeof b2), format_bytes((double)v[4], b3, sizeof b3),
                format_bytes((double)v[5], b4, sizeof b4), ok ? "ok" : "MISMATCH");
    }
    free(all);
    return bad;
}

// Layer-and-name cells of this rank's ledger, and of its memo pool, that differ from the model.
static size_t memo_cells_off(const GPT *m) {
    size_t off = 0;
    const Ledger *pool = m->memo && m->memo->pool ? &m->memo->ledger : NULL;
    for (int l = 0; l < m->cfg.layers; l++)
        for (int n = 0; n < ACT_N_LAYER; n++) {
            off += ledger_stored_bytes(&m->ledger, (ActName)n, l) != act_layer_name_bytes(&m->shape, &m->policy, l, (ActName)n);
            if (pool)
                off += ledger_stored_bytes(pool, (ActName)n, l) != act_memo_swap_name_bytes(&m->shape, &m->policy, l, (ActName)n);
        }
    return off;
}

int dist_memo_report(FILE *f, const GPT *m, CommGroup *world) {
    enum { FIELDS = 4 };
    size_t mine[FIELDS] = {memo_cells_off(m), m->memo && m->memo->pool ? m->memo->ledger.total_fwd_end : 0,
                           act_memo_pool_bytes(&m->shape, &m->policy), act_memo_stage_bytes(&m->shape, &m->policy)};
    float send[2 * FIELDS], *all = xmalloc((size_t)world->size * 2 * FIELDS * sizeof(float));
    for (int i = 0; i < FIELDS; i++) put(send + 2 * i, mine[i]);
    comm_allgather(world, send, all, 2 * FIELDS);
    int bad = 0;
    fprintf(f, "memo per rank: every layer's and name's bytes (arena and pool) against the model\n");
    fprintf(f, "  %-5s %10s %14s %14s %14s\n", "rank", "cells off", "pool", "predicted", "memo_stage");
    for (int r = 0; r < world->size; r++) {
        size_t v[FIELDS];
        for (int i = 0; i < FIELDS; i++) v[i] = get(all + ((size_t)r * FIELDS + i) * 2);
        int ok = v[0] == 0 && v[1] == v[2];
        bad += !ok;
        fprintf(f, "  %-5d %10zu %14zu %14zu %14zu  %s\n", r, v[0], v[1], v[2], v[3], ok ? "ok" : "MISMATCH");
    }
    free(all);
    return bad;
}
