// The activation arena: one block, used as a stack. Forward pushes each saved tensor under its
// name and layer; backward pops a layer once it has read it. Every push and pop goes to the ledger.
// The block is a device allocation of the model's backend (DESIGN.md §8): the arena hands out
// pointers into it and never reads or writes its bytes.
#ifndef CTRON_ARENA_H
#define CTRON_ARENA_H
#include <stddef.h>
#include <stdint.h>
#include "backend/backend.h"
#include "memory/ledger.h"
#include "memory/step_mem.h"

typedef struct { size_t offset, bytes; ActName name; int layer; int plan_id; } ArenaEntry;

typedef struct {
    Backend *be;       // where the block lives
    uint8_t *base;     // device memory (NULL once a static plan has replaced it)
    size_t capacity, top;
    ArenaEntry *entries;
    int n_entries, max_entries;
    Ledger *ledger;
    int slot;          // the ledger slot it counts in (its activation context)
    StepMem *mem;      // --static-plan: pushes are recorded, then placed by the plan (base is freed)
} Arena;

void arena_init(Arena *ar, Backend *be, size_t capacity, int max_entries, Ledger *ledger);
void arena_free(Arena *ar);
// The block goes back to the backend (a static plan places every step in its own block); entries stay.
void arena_release_block(Arena *ar);
void *arena_push(Arena *ar, ActName name, int layer, size_t bytes);
static inline int arena_mark(const Arena *ar) { return ar->n_entries; }
void arena_pop_to(Arena *ar, int mark);
// Bytes the arena needs for tensors of these sizes (each entry is aligned).
static inline size_t arena_padded(size_t bytes) { return (bytes + 63) / 64 * 64; }
#endif
