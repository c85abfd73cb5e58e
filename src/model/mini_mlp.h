// Mini-Sequence's MLP (Luo et al.): FC1, GeLU, FC2 (llama: gate, up, SwiGLU, down) one chunk of the
// sequence at a time, nothing of the MLP's inside kept; the backward makes each chunk again and runs
// its backward at once. With LoRA the MLP's adapters run inside the chunks (model/lora_site.h).
#ifndef CTRON_MINI_MLP_H
#define CTRON_MINI_MLP_H
#include "model/gpt.h"
#include "model/lora_site.h"
#include "model/params.h"

// Rows [*r0, *r1) of chunk c when n rows (sequence-major: whole positions) are cut into M chunks.
void mini_chunk_rows(int n, int M, int c, int *r0, int *r1);

// The MLP's adapters for the chunks: the column sites' (gate and up, or fc) v, made whole from the MLP's
// input before the chunks; the row site's (down, fc2) v, made chunk by chunk into down_v (forward) or
// read back (backward). on[i] = 0: that site has none. Sites: {gate, up, down}, {gate|up, -, down} or
// {fc, -, fc2}.
typedef struct {
    int on[3];
    LoraSite site[3];
    LoraV v[3];
    float *down_v;
} MiniAdapters;

MiniAdapters mini_adapters(const GPT *m);
// x_all [s·b, h]: the whole (gathered) norm output. out [s·b, h] (the rank's partial sum under TP): the
// MLP's output; NULL: only the down adapter's v (a recomputed group's last block).
void mini_mlp_forward(GPT *m, int l, const BlockTensors *w, const float *x_all, const MiniAdapters *ad, float *out);
// From dL/d(MLP output) d_out (all rows): dL/dx (the rank's partial sum) into out, weight and adapter
// gradients accumulated.
void mini_mlp_backward(GPT *m, int l, const BlockTensors *w, const BlockTensors *g, const float *x_all,
                       const MiniAdapters *ad, const float *d_out, float *out);
#endif
