// Kernels of the KV-cache inference path (model/infer.c): one sequence, dropout off. Moved here
// from infer.c unchanged, so `ctron generate` gives the same tokens as before the backend layer.
#ifndef CTRON_INFER_KERNELS_H
#define CTRON_INFER_KERNELS_H
#include <stddef.h>

// y[1,out] = x[1,in] · W[out,in]ᵀ (+ bias): sgemv reads W once, where sgemm with one row would
// first pack all of W (3x slower on small models).
void linear_forward_row(float *y, const float *x, const float *w, const float *bias, int in, int out);
// Backend.kv_attention_forward: each new token attends to the cache up to and including itself
// (causal; with a window, to its last `window` positions only), as a row of the training attention
// does; both products are matrix-vector products on the head's strided view of the cache. q rows of stride ldq ([n, a·d] heads), the cache kc, vc
// [positions, kv·d]: query head j reads kv head j / (a/kv).
void kv_attention_forward(float *ctx, const float *q, int ldq, const float *kc, const float *vc, float *scores,
                          int seq, int p0, int n, int a, int kv, int h, int window);
// y = gelu(x) elementwise.
void gelu_forward(float *y, const float *x, size_t count);
#endif
