// Token + learned position embedding, sequence-major.
#ifndef CTRON_EMBEDDING_H
#define CTRON_EMBEDDING_H
#include <stdint.h>

// tokens [s,b] -> x[s,b,h] = wte[token] + wpe[position]
void embedding_forward(float *x, const int32_t *tokens, const float *wte, const float *wpe, int s, int b, int h);
// dx [s,b,h] -> dwte[v,h] +=, dwpe[s,h] += (columns split over threads: fixed sum order, no races)
void embedding_backward(float *dwte, float *dwpe, const float *dx, const int32_t *tokens, int s, int b, int h);
#endif
