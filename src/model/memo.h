// MEMO's token-wise swapping and recomputation (Zhao et al., "MEMO: Fine-grained Tensor Management For
// Ultra-long Context LLM Training", 2024) for layers of RECOMPUTE_MEMO (--memo ALPHA). Such a layer keeps
// its input (ln1_in) on the device. Its forward runs in two token ranges, positions [0, r) and [r, s)
// (r = α·s in whole flash tiles, memory/memo_model.h): the first range's tensors (every one a selective
// layer keeps but the input and the masks) are written to a stage slot and go to the host pool while
// the next range and the next layer compute; the second range's are dropped. Backward fetches the slice
// back (the next memo layer's while this one computes), recomputes positions [r, s) only from the kept
// input, with the swapped k and v as the earlier keys of the causal attention, and lays every tensor
// out whole in the arena under its own name, for the block's ordinary backward. Forward and recompute
// run the same ops on the same ranges, so the recomputed rows are bitwise the forward's. Under TP (no SP)
// every rank holds every row of x and runs the same ranges with its column shards; the row-parallel
// outputs (Proj, FC2/down) are all-reduced over the range's rows before the bias and the residual.
#ifndef CTRON_MEMO_H
#define CTRON_MEMO_H
#include "model/gpt.h"

typedef struct MemoState {
    OffloadPool *pool;            // the host pool (or --offload-dir's file); NULL when no memo layer swaps
    Ledger ledger;                // bytes in the pool, per layer and name (the swapped slices)
    uint8_t *stage;               // the arena entry memo_stage: slot 0 (span[0] bytes), then slot 1 (span[1])
    size_t span[2];               // the largest region of the layers in each slot
    size_t *pool_at;              // [layers] where each layer's slice region starts in the pool
    int *slot;                    // [layers] its slot (-1: not a memo layer, or nothing swapped)
    int *order;                   // memo layers that swap, last first (the backward's order)
    int n_order, cursor, snapped;
    int owner[2];
    uint64_t ticket[2];
} MemoState;

// After the shape and policy are set; nothing without a memo layer. Fatal for what it does not do (the
// CLI refuses these first, exit 2): SP, pipelines, reversible blocks, Tempo, Few-Bit, mini-seq,
// offload, a backend without flash_attention_forward_rows. LoRA / LoRA-FA adapters run in both token
// ranges (their x·Aᵀ kept whole).
void memo_init(GPT *m);
void memo_free(GPT *m);
static inline int memo_on(const GPT *m) { return m->memo != NULL; }
// A training forward begins: the stage goes on the arena.
void memo_begin_forward(GPT *m);
// Layer l's training forward from its kept input x; returns the block output as block_forward does.
float *memo_block_forward(GPT *m, int l, const float *x, int where);
// Backward step l: its slice is in its slot (the next memo layer's on its way); then every tensor of
// layer l whole in the arena.
void memo_fetch(GPT *m, int l);
void memo_recompute(GPT *m, int l);
void memo_layer_released(GPT *m, int l);
void memo_end_step(GPT *m);
// Positions swapped in this micro-batch (s_cur).
int memo_rows(const GPT *m, int l);
#endif
