// The activation arena: one block, used as a stack. Forward pushes each saved tensor under its
// name and layer; backward pops a layer once it has read it. Every push and pop goes to the ledger.
#ifndef CTRON_ARENA_H
#define CTRON_ARENA_H
#include <stddef.h>
#include <stdint.h>
#include "memory/ledger.h"
#include "memory/step_mem.h"

typedef struct { size_t offset, bytes; ActName name; int layer; int plan_id; } ArenaEntry;

typedef struct {
    uint8_t *base;
    size_t capacity, top;
    ArenaEntry *entries;
    int n_entries, max_entries;
    Ledger *ledger;
    StepMem *mem;      // --static-plan: pushes are recorded, then placed by the plan (base is freed)
} Arena;

void arena_init(Arena *ar, size_t capacity, int max_entries, Ledger *ledger);
void arena_free(Arena *ar);
void *arena_push(Arena *ar, ActName name, int layer, size_t bytes);
static inline int arena_mark(const Arena *ar) { return ar->n_entries; }
void arena_pop_to(Arena *ar, int mark);
// Bytes the arena needs for tensors of these sizes (each entry is aligned).
static inline size_t arena_padded(size_t bytes) { return (bytes + 63) / 64 * 64; }
#endif
