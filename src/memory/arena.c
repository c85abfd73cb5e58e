#include "memory/arena.h"
#include "util/common.h"

void arena_init(Arena *ar, Backend *be, size_t capacity, int max_entries, Ledger *ledger) {
    ar->be = be;
    ar->base = be->alloc(be, capacity);
    ar->capacity = capacity;
    ar->top = 0;
    ar->entries = xmalloc((size_t)max_entries * sizeof(ArenaEntry));
    ar->n_entries = 0;
    ar->max_entries = max_entries;
    ar->ledger = ledger;
    ar->slot = 0;
    ar->mem = NULL;
}

void arena_release_block(Arena *ar) {
    if (ar->base) ar->be->free(ar->be, ar->base);
    ar->base = NULL;
}

void arena_free(Arena *ar) {
    arena_release_block(ar);
    free(ar->entries);
    ar->entries = NULL;
}

void *arena_push(Arena *ar, ActName name, int layer, size_t bytes) {
    size_t padded = arena_padded(bytes);
    // The arena is sized from the analytic model: running out means the model and the code disagree.
    if (ar->top + padded > ar->capacity || ar->n_entries == ar->max_entries)
        ctron_fatal("activation arena overflow pushing %s (layer %d, %zu bytes): %zu of %zu bytes used",
                    act_name_str(name), layer, bytes, ar->top, ar->capacity);
    ArenaEntry *e = &ar->entries[ar->n_entries++];
    e->offset = ar->top;
    e->bytes = bytes;
    e->name = name;
    e->layer = layer;
    e->plan_id = -1;
    ar->top += padded;
    ledger_add_slot(ar->ledger, ar->slot, name, layer, bytes);
    void *planned = ar->mem ? stepmem_alloc(ar->mem, bytes, MEM_SAVED, (int)name, -1, &e->plan_id) : NULL;
    return planned ? planned : ar->base + e->offset;
}

void arena_pop_to(Arena *ar, int mark) {
    while (ar->n_entries > mark) {
        ArenaEntry *e = &ar->entries[--ar->n_entries];
        ledger_sub_slot(ar->ledger, ar->slot, e->name, e->layer, e->bytes);
        if (ar->mem) stepmem_release(ar->mem, e->plan_id);
        ar->top = e->offset;
    }
}
