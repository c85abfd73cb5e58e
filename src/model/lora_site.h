// A LoRA adapter on one linear site (arch/lora.h): y = W x + (α/r)·B(A x), forward and backward, with
// the base's own GEMM done by the caller. Keeps v = (α/r)·x Aᵀ [s·b, r] under the site's ledger name
// (ACT_LORA_Q + site); B's gradient reads it and A's reads dY·B.
//   dB = dYᵀ v;   dv = dY·B;   du = (α/r)·dv;   dA = duᵀ x (LoRA only);   dx += du·A.
#ifndef CTRON_LORA_SITE_H
#define CTRON_LORA_SITE_H
#include "model/gpt.h"

static inline int lora_on(const GPT *m, LoraSite s) { return m->cfg.lora_rank > 0 && (m->cfg.lora_targets >> s & 1u); }
static inline ActName lora_act(LoraSite s) { return (ActName)(ACT_LORA_Q + s); }

// Up to three output blocks of one column-parallel site (GPT-2's c_attn: q, k, v; else one): B's rows
// [row0[k], row0[k] + cols[k]) feed y[k] (row stride ld[k]).
typedef struct {
    int blocks;
    float *y[3];
    int ld[3], cols[3], row0[3];
} LoraOut;

// Column-parallel base (its output columns split over TP): x [n, in] is the whole (gathered) input,
// x16 its kept bf16 copy or NULL; adds to each block of out (n = s·b rows). keep: saved.h's KEEP_*.
void lora_column_forward(GPT *m, int l, LoraSite s, const float *x, const uint16_t *x16, int in, const LoraOut *out,
                         int keep);
// dy of each block (same layout as out, y = dL/dy), x the input (NULL under LoRA-FA): dx [n, in] += the
// adapter's part (this rank's partial sum, as the base's).
void lora_column_backward(GPT *m, int l, LoraSite s, const LoraOut *dy, const float *x, const uint16_t *x16, int in,
                          float *dx, int ldx);
// Row-parallel base (its input columns split): x [n, in_l] this rank's input columns; the partial
// x·Aᵀ is summed over TP; adds to y [nr, out] (the rank's rows after the base's reduction: s/t rows from
// s0 under SP, all rows otherwise). y NULL: only v is made and kept (a recomputed group's last block,
// whose output nobody reads).
void lora_row_forward(GPT *m, int l, LoraSite s, const float *x, const uint16_t *x16, int in_l, float *y, int out,
                      int keep);
// dy [n, out] (all rows, as the base's backward gets it), x [n, in_l] (NULL under LoRA-FA); dx [n, in_l] +=.
void lora_row_backward(GPT *m, int l, LoraSite s, const float *dy, const float *x, const uint16_t *x16, int in_l,
                       float *dx, int out);
#endif
