// A LoRA adapter on one linear site (arch/lora.h): y = W x + (α/r)·B(A x), forward and backward, with
// the base's own GEMM done by the caller. Keeps v = (α/r)·x Aᵀ [s·b, r] under the site's ledger name
// (ACT_LORA_Q + site); B's gradient reads it and A's reads dY·B.
//   dB = dYᵀ v;   dv = dY·B;   du = (α/r)·dv;   dA = duᵀ x (LoRA only);   dx += du·A.
#ifndef CTRON_LORA_SITE_H
#define CTRON_LORA_SITE_H
#include "model/gpt.h"

static inline int lora_on(const GPT *m, LoraSite s) { return m->cfg.lora_rank > 0 && (m->cfg.lora_targets >> s & 1u); }
static inline ActName lora_act(LoraSite s) { return (ActName)(ACT_LORA_Q + s); }

// Up to three output blocks of one column-parallel site (a fused q|k|v: q, k, v; a fused gate|up: gate, up;
// else one): B's rows [row0[k], row0[k] + cols[k]) feed y[k] (row stride ld[k]). In the backward, y16[k] when
// set: dy's block as a bf16 copy (row stride ld[k] elements) that a kernel wrote for the GEMMs (SwiGLU's
// backward), read instead of y[k].
typedef struct {
    int blocks;
    float *y[3];
    int ld[3], cols[3], row0[3];
    const uint16_t *y16[3];
} LoraOut;

// The q, k, v sites (GPT-2's c_attn and fused llama's qkv_proj; llama's q, k, v) and their output blocks:
// the fused site's adapter feeds all three (B's rows q|k|v), llama's q, k and v adapters one each.
enum { LORA_QKV_SITE_COUNT = 4 };
static inline LoraSite lora_qkv_site(int i) {
    static const LoraSite sites[LORA_QKV_SITE_COUNT] = {LORA_QKV, LORA_Q, LORA_K, LORA_V};
    return sites[i];
}
static inline LoraOut lora_qkv_outs(const GPT *m, LoraSite s, float *q, float *k, float *v) {
    int ql = m->ql, kvl = m->kvl;
    if (s == LORA_QKV) return (LoraOut){3, {q, k, v}, {ql, kvl, kvl}, {ql, kvl, kvl}, {0, ql, ql + kvl}, {NULL}};
    float *y = s == LORA_Q ? q : s == LORA_K ? k : v;
    int w = s == LORA_Q ? ql : kvl;
    return (LoraOut){1, {y}, {w}, {w}, {0}, {NULL}};
}

// The gate and up sites (fused llama's gate_up_proj; llama's gate, up) and their output blocks [s·b, fl]:
// the fused site's adapter feeds both (B's rows gate|up).
enum { LORA_GATE_UP_SITE_COUNT = 3 };
static inline LoraSite lora_gate_up_site(int i) {
    static const LoraSite sites[LORA_GATE_UP_SITE_COUNT] = {LORA_GATE_UP, LORA_GATE, LORA_UP};
    return sites[i];
}
static inline LoraOut lora_gate_up_outs(const GPT *m, LoraSite s, float *gate, float *up) {
    int fl = m->fl;
    if (s == LORA_GATE_UP) return (LoraOut){2, {gate, up}, {fl, fl}, {fl, fl}, {0, fl}, {NULL}};
    return (LoraOut){1, {s == LORA_GATE ? gate : up}, {fl}, {fl}, {0}, {NULL}};
}

// A site's v = (α/r)·x Aᵀ [s·b, r] as the GEMMs read it: fp32, and its kept bf16 copy or NULL (either
// may be NULL where the other is the operand).
typedef struct { const float *f32; const uint16_t *bf16; } LoraV;

// Column-parallel base (its output columns split over TP): x [n, in] is the whole (gathered) input,
// x16 its kept bf16 copy or NULL; adds to each block of out (n = s·b rows; no blocks: v only). keep:
// saved.h's KEEP_*. Returns v.
LoraV lora_column_forward(GPT *m, int l, LoraSite s, const float *x, const uint16_t *x16, int in, const LoraOut *out,
                          int keep);
// dy of each block (same layout as out, y = dL/dy), x the input (NULL under LoRA-FA): dx [n, in] += the
// adapter's part (this rank's partial sum, as the base's; dx NULL where nothing reads it).
void lora_column_backward(GPT *m, int l, LoraSite s, const LoraOut *dy, const float *x, const uint16_t *x16, int in,
                          float *dx, int ldx);
// Row-parallel base (its input columns split): x [n, in_l] this rank's input columns; the partial
// x·Aᵀ is summed over TP; adds to y [nr, out] (the rank's rows after the base's reduction: s/t rows from
// s0 under SP, all rows otherwise). y NULL: only v is made and kept (a recomputed group's last block,
// whose output nobody reads).
void lora_row_forward(GPT *m, int l, LoraSite s, const float *x, const uint16_t *x16, int in_l, float *y, int out,
                      int keep);
// y [nr, out] += v·Bᵀ of the rank's rows (the tail of lora_row_forward).
void lora_row_add(GPT *m, int l, LoraSite s, LoraV v, float *y, int out);
// dy [n, out] (all rows, as the base's backward gets it; dy16: its bf16 copy for the GEMMs, or NULL), x [n, in_l]
// (NULL under LoRA-FA); dx [n, in_l] +=.
void lora_row_backward(GPT *m, int l, LoraSite s, const float *dy, const uint16_t *dy16, const float *x,
                       const uint16_t *x16, int in_l, float *dx, int out);
// Layer l's kept v of site s (the backward's operand).
LoraV lora_v_kept(GPT *m, int l, LoraSite s);
// out's blocks += (α/r)·B(A x) of a column site from its kept v: lora_column_forward's tail, for a GEMM output
// made again in backward (model/remat.c) — the forward's operands, so the forward's bits.
void lora_column_add(GPT *m, int l, LoraSite s, const LoraOut *out);

// Mini-seq's chunked MLP (model/mini_mlp.c), rows [r0, r0 + rows) of the sequence; x, the blocks of y and
// dy, and dx point at row r0, v is the whole [s·b, r] tensor. Adapters' dropout masks are the whole input's,
// so a chunk's rows get the bits the unchunked site would.
// Each block of y += v's rows·B_kᵀ.
void lora_chunk_add(GPT *m, int l, LoraSite s, LoraV v, const LoraOut *y, int r0, int rows);
// A site's v rows from its input rows x [rows, in_l] (a row-parallel site's summed over TP; scaled), into v
// (MEMO's token ranges use it for column sites too: their input is whole on every rank).
void lora_v_rows(GPT *m, int l, LoraSite s, const float *x, int in_l, float *v, int r0, int rows);
// Each block of out (whole tensors, row 0) gets rows [r0, r0 + rows) += v's rows·B_kᵀ (MEMO's token ranges).
void lora_rows_add_out(GPT *m, int l, LoraSite s, LoraV v, const LoraOut *out, int r0, int rows);
// dB_k += dy_kᵀ·v, dv = Σ_k dy_k·B_k, then A's gradient (x given, A trains) and dx [rows, in] += from dv.
void lora_chunk_backward(GPT *m, int l, LoraSite s, const LoraOut *dy, LoraV v, const float *x, int in, float *dx,
                         int ldx, int r0, int rows);
#endif
