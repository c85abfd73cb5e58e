// Where a step's buffers live (--static-plan). By default the arena (a stack) holds the saved
// activations and every temporary has a buffer of its own for the whole run. With a static plan,
// one step of each kind (a training forward + backward, an evaluation forward) is recorded before
// training: each saved tensor from its push to its pop, each temporary from its first use to the end
// of the scope it belongs to (a block's forward or backward pass, the embedding, the head; the
// backward's running gradient to the end of the backward). The schedule is fixed, so the offsets
// solved from those lifetimes (memory/static_plan.h) hold for every later step, which then runs in
// one block: no fragmentation, and temporaries sit in the bytes the saved tensors do not use yet.
#ifndef CTRON_STEP_MEM_H
#define CTRON_STEP_MEM_H
#include <stddef.h>
#include <stdint.h>
#include "backend/backend.h"
#include "memory/static_plan.h"

typedef enum { MEM_DEFAULT, MEM_RECORD, MEM_REPLAY } MemMode;
enum { STEP_TRAIN, STEP_EVAL, STEP_KINDS };
enum { MEM_SAVED = 0, MEM_TEMP = 1 };   // StaticPlan kinds

typedef struct {
    MemMode mode;
    StaticPlan plan[STEP_KINDS];
    int kind, next;                 // the step being recorded or replayed; replay: its next allocation
    uint8_t *block;                 // replay: the one block of every step (the larger plan's peak), a
                                    // device allocation of `be`: only offsets into it are computed here
    Backend *be;
    size_t block_bytes;
    int nkeys;                      // record: temporaries held per scope key until the key's scope ends
    int **held, *n_held, *cap_held;
    const char *(*tag_name)(int tag);   // names a tag in messages
} StepMem;

void stepmem_init(StepMem *s, int nkeys, const char *(*tag_name)(int tag));
void stepmem_free(StepMem *s);
void stepmem_record(StepMem *s);              // from now on, steps are recorded
void stepmem_begin(StepMem *s, int kind);     // a step of this kind begins
// An allocation of the running step. Returns where the plan puts it (replay), or NULL: the caller
// uses its own buffer (default; record, which also notes it). key < 0: a saved tensor, released by
// stepmem_release(*id); otherwise a temporary released when scope `key` ends.
void *stepmem_alloc(StepMem *s, size_t bytes, int what, int tag, int key, int *id);
void stepmem_release(StepMem *s, int id);
void stepmem_scope_end(StepMem *s, int key);
// Solves the recorded plans, allocates the block on the backend and replays from now on. Returns the
// block's bytes.
size_t stepmem_solve(StepMem *s, Backend *be);
#endif
