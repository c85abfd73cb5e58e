// How the model keeps a tensor for backward: the forward writes fp32 into the buffer saved_out
// gives (the arena itself when the tensor is kept in fp32, else a workspace slot); saved_done
// rounds it to bf16 when activations are stored in bf16 — the forward goes on with the rounded
// value, so recomputation sees exactly what storage would have kept — and packs it into the
// arena. The backward gets fp32 back from saved_in, which refuses a tensor the policy did not keep.
// Masks alike: kept as bytes, packed to bits, or regenerated from the Philox key.
#ifndef CTRON_SAVED_H
#define CTRON_SAVED_H
#include <stddef.h>
#include <stdint.h>
#include "model/gpt.h"

// keep: not kept (0), kept in the arena, or kept in the offload pool (written to a stage slot).
enum { KEEP_NO = 0, KEEP_ARENA = 1, KEEP_OFFLOAD = 2 };

float *saved_out(GPT *m, BlockActs *A, ActName name, int layer, size_t n, int keep);
// rounded: the op already rounded the values to bf16 (attention, GeLU do it inside their sweep).
void saved_done(GPT *m, BlockActs *A, ActName name, int layer, float *buf, size_t n, int keep, int rounded);
// saved_done for a tensor whose only reader in the rest of the forward takes its bf16 copy from saved_bf16 when
// there is one (flash on a backend whose flash multiplies bf16): kept in the arena in bf16, the copy is made and
// buf is not rounded (nothing reads it); otherwise saved_done's.
void saved_done_copy_only(GPT *m, BlockActs *A, ActName name, int layer, float *buf, size_t n, int keep);
// Will saved_done keep a bf16 copy in the arena (what saved_bf16 then returns) for `name` kept so?
int saved_as_bf16_copy(const GPT *m, ActName name, int keep);
// The arena's place for `name`'s bf16 copy, taken now (as saved_done would take it) for a kernel that writes the
// copy itself (saved_as_bf16_copy must hold); saved_bf16 and saved_in_bf16 then return it.
uint16_t *saved_copy_out(GPT *m, BlockActs *A, ActName name, int layer, size_t n);
// A tensor kept in the arena whose values are finished after later pushes (MEMO's layer writes its output,
// allocated after its own tensors, range by range between): its kept place is taken now (fp32: the buffer
// itself; bf16: the packed copy's, the values in a work slot), and saved_done_placed packs the values,
// already rounded, into it.
float *saved_out_placed(GPT *m, BlockActs *A, ActName name, int layer, size_t n);
void saved_done_placed(GPT *m, BlockActs *A, ActName name, const float *buf, size_t n);
const float *saved_in(GPT *m, BlockActs *A, ActName name, int layer, size_t n);
// The bf16 copy itself, for a GEMM that reads bf16 anyway (no unpacking, no second rounding):
// saved_bf16 in the forward, after saved_done (NULL unless kept this pass in bf16 in the arena); saved_in_bf16 in
// the backward (NULL when the tensor is kept in fp32; refuses one the policy did not keep).
const uint16_t *saved_bf16(const GPT *m, const BlockActs *A, ActName name, int keep);
const uint16_t *saved_in_bf16(GPT *m, BlockActs *A, ActName name, int layer);

uint8_t *mask_out(GPT *m, BlockActs *A, ActName name, int layer, size_t n, int keep);
void mask_done(GPT *m, BlockActs *A, ActName name, int layer, const uint8_t *buf, size_t n, int keep);
const uint8_t *mask_in(GPT *m, BlockActs *A, ActName name, int layer, size_t n);
// The mask the forward drew for `name` of layer (-1: the embedding's), drawn again into keep (one byte per
// element, the rank's positions): dropout is a pure function of its Philox key, site, step and position.
void mask_regenerate(GPT *m, ActName name, int layer, uint8_t *keep);

// Bits kept in the arena (Tempo's GeLU branch, Few-Bit codes): where to pack nbits bits, and them again.
uint8_t *bits_out(GPT *m, BlockActs *A, ActName name, int layer, size_t nbits, int keep);
const uint8_t *bits_in(GPT *m, BlockActs *A, ActName name, int layer);

// A workspace slot for tensor `name` (layer parity picks one of two for ln1_in).
void *work_slot(GPT *m, ActName name, int layer);
void work_free(GPT *m);
#endif
