#include "memory/pipe_stages.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "util/common.h"

void pipe_stage_layers(const PipeSpec *s, int r, char *buf, size_t len) {
    int n = pipe_layers_per_chunk(s);
    size_t used = 0;
    buf[0] = '\0';
    for (int v = 0; v < s->V; v++) {
        int l0 = pipe_chunk_first_layer(s, r, v);
        char item[32];
        if (n == 1) snprintf(item, sizeof item, "%s%d", v ? "," : "", l0);
        else snprintf(item, sizeof item, "%s%d-%d", v ? "," : "", l0, l0 + n - 1);
        // keep room for ",…" (4 bytes) and the terminator
        if (used + strlen(item) + 5 > len) {
            snprintf(buf + used, len - used, ",…");
            return;
        }
        used += (size_t)snprintf(buf + used, len - used, "%s", item);
    }
}

static size_t chunk_layer_bytes(const PipeMemory *pm, const MemoryPolicy *pol, int rank, int v) {
    int l0 = pipe_chunk_first_layer(pm->spec, rank, v);
    size_t bytes = 0;
    for (int l = l0; l < l0 + pipe_layers_per_chunk(pm->spec); l++) bytes += act_layer_bytes(pm->sh, pol, l);
    return bytes;
}

typedef struct { const PipeMemory *pm; int rank; } RankOf;

// Its layers alone, held from the forward to the backward (no extras, no recompute rebuild).
static PipeUnitBytes layer_bytes(int mb, int chunk, int slot, void *user) {
    (void)mb;
    const RankOf *r = user;
    const MemoryPolicy *pol = slot < r->pm->keep_all ? r->pm->everything : r->pm->plan;
    size_t b = chunk_layer_bytes(r->pm, pol, r->rank, chunk);
    return (PipeUnitBytes){b, b};
}

int pipe_stage_rows(const PipeMemory *pm, PipeStageRow *rows) {
    const PipeSpec *s = pm->spec;
    int U = pipe_units_per_rank(s), largest = 0;
    PipeUnit *units = xmalloc((size_t)U * sizeof(PipeUnit));
    int *slot = xmalloc((size_t)U * sizeof(int));
    size_t emb = act_tensor_bytes(pm->sh, ACT_EMB_MASK);
    size_t head = act_model_extra_bytes(pm->sh) - emb;
    for (int r = 0; r < s->p; r++) {
        PipeStageRow *w = &rows[r];
        memset(w, 0, sizeof *w);
        pipe_stage_layers(s, r, w->layers, sizeof w->layers);
        w->n_layers = s->L / s->p;
        pipe_units(s, r, units);
        w->contexts = pipe_assign_slots(units, U, slot);
        for (int v = 0; v < s->V; v++) {
            size_t b = chunk_layer_bytes(pm, pm->plan, r, v);
            if (v == 0 || b < w->chunk_min) w->chunk_min = b;
            if (b > w->chunk_max) w->chunk_max = b;
            if (pm->keep_all > 0) {
                size_t k = chunk_layer_bytes(pm, pm->everything, r, v);
                if (k > w->chunk_keep_all) w->chunk_keep_all = k;
            }
        }
        w->embedding = r == 0 ? emb : 0;
        w->head = r == s->p - 1 ? head : 0;
        RankOf ro = {pm, r};
        w->layers_peak = pipe_stage_peak(s, r, layer_bytes, &ro);
        w->peak = pipe_rank_act_peak(pm, r);
        if (w->peak > rows[largest].peak) largest = r;
    }
    free(units);
    free(slot);
    return largest;
}
