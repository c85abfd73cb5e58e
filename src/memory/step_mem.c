#include "memory/step_mem.h"
#include <string.h>
#include "util/common.h"

void stepmem_init(StepMem *s, int nkeys, const char *(*tag_name)(int tag)) {
    memset(s, 0, sizeof *s);
    s->nkeys = nkeys;
    s->tag_name = tag_name;
    s->held = xcalloc(sizeof(int *) * (size_t)nkeys);
    s->n_held = xcalloc(sizeof(int) * (size_t)nkeys);
    s->cap_held = xcalloc(sizeof(int) * (size_t)nkeys);
    for (int k = 0; k < STEP_KINDS; k++) static_plan_init(&s->plan[k], 64);
}

void stepmem_free(StepMem *s) {
    for (int k = 0; k < s->nkeys; k++) free(s->held[k]);
    free(s->held); free(s->n_held); free(s->cap_held);
    for (int k = 0; k < STEP_KINDS; k++) static_plan_free(&s->plan[k]);
    if (s->block) s->be->free(s->be, s->block);
    memset(s, 0, sizeof *s);
}

void stepmem_record(StepMem *s) { s->mode = MEM_RECORD; }

void stepmem_begin(StepMem *s, int kind) {
    s->kind = kind;
    s->next = 0;
    if (s->mode == MEM_RECORD) static_plan_reset(&s->plan[kind]);
}

static void hold(StepMem *s, int key, int id) {
    if (key >= s->nkeys) ctron_fatal("step memory: scope key %d of %d", key, s->nkeys);
    if (s->n_held[key] == s->cap_held[key]) {
        int cap = s->cap_held[key] ? 2 * s->cap_held[key] : 16;
        int *h = xmalloc(sizeof(int) * (size_t)cap);
        if (s->n_held[key]) memcpy(h, s->held[key], sizeof(int) * (size_t)s->n_held[key]);
        free(s->held[key]);
        s->held[key] = h;
        s->cap_held[key] = cap;
    }
    s->held[key][s->n_held[key]++] = id;
}

void *stepmem_alloc(StepMem *s, size_t bytes, int what, int tag, int key, int *id) {
    if (id) *id = -1;
    if (s->mode == MEM_DEFAULT) return NULL;
    StaticPlan *p = &s->plan[s->kind];
    if (s->mode == MEM_RECORD) {
        int i = static_plan_alloc(p, bytes, what, tag);
        if (id) *id = i;
        if (key >= 0) hold(s, key, i);
        return NULL;
    }
    // The schedule is fixed: allocation k of a step is the one recorded as k, or the plan is wrong.
    if (s->next >= p->n || p->bufs[s->next].bytes != bytes || p->bufs[s->next].tag != tag)
        ctron_fatal("static memory plan: allocation %d of this %s step (%s, %zu bytes) is not the planned one (%s, "
                    "%zu bytes of %d)", s->next, s->kind == STEP_TRAIN ? "training" : "evaluation", s->tag_name(tag),
                    bytes, s->next < p->n ? s->tag_name(p->bufs[s->next].tag) : "none",
                    s->next < p->n ? p->bufs[s->next].bytes : 0, p->n);
    const PlanBuf *b = &p->bufs[s->next++];
    return s->block + b->offset;
}

void stepmem_release(StepMem *s, int id) {
    if (s->mode == MEM_RECORD && id >= 0) static_plan_release(&s->plan[s->kind], id);
}

void stepmem_scope_end(StepMem *s, int key) {
    if (s->mode != MEM_RECORD) return;
    for (int i = 0; i < s->n_held[key]; i++) static_plan_release(&s->plan[s->kind], s->held[key][i]);
    s->n_held[key] = 0;
}

size_t stepmem_solve(StepMem *s, Backend *be) {
    size_t bytes = 0;
    for (int k = 0; k < STEP_KINDS; k++) {
        for (int key = 0; key < s->nkeys; key++) s->n_held[key] = 0;
        size_t peak = static_plan_solve(&s->plan[k]);
        if (!static_plan_valid(&s->plan[k])) ctron_fatal("static memory plan: overlapping buffers (a solver bug)");
        if (peak > bytes) bytes = peak;
    }
    s->be = be;
    s->block = be->alloc(be, bytes);
    s->block_bytes = bytes;
    s->mode = MEM_REPLAY;
    return bytes;
}
