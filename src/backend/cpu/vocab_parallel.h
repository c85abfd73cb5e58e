// Vocabulary-parallel embedding and cross-entropy (Megatron): a TP rank holds rows v0 .. v0+vl−1 of
// the tied embedding wte, so its logits are the columns v0 .. v0+vl−1 of the full logits. The full
// logits are never gathered: cross-entropy combines three numbers per row from every rank.
// Columns at or beyond n_valid (the vocabulary padded to a multiple of t) are not part of the model.
#ifndef CTRON_VOCAB_PARALLEL_H
#define CTRON_VOCAB_PARALLEL_H
#include <stdint.h>

// tokens [n] -> x[n,h] = wte[token − v0] for the rank's tokens, 0 for the others (summed over ranks).
void embedding_vocab_forward(float *x, const int32_t *tokens, const float *wte, int v0, int vl, int n, int h);
// The same from a bf16 table (--base-dtype bf16): each row widened exactly to fp32.
void embedding_vocab_forward16(float *x, const int32_t *tokens, const uint16_t *wte16, int v0, int vl, int n, int h);
// x[s,b,h] += wpe[s0 + position]: the rows of positions s0 .. s0+s−1.
void embedding_add_positions(float *x, const float *wpe, int s0, int s, int b, int h);
// dx[n,h] -> dwte[token − v0] += for the rank's tokens (columns over threads: fixed sum order).
void embedding_vocab_backward(float *dwte, const float *dx, const int32_t *tokens, int v0, int vl, int n, int h);
// dx[s,b,h] -> dwpe[s0 + position] +=
void embedding_positions_backward(float *dwpe, const float *dx, int s0, int s, int b, int h);

// logits[n,vl] -> part[n,3] = (max, Σ exp(z − max), z[target] or 0 when another rank holds it).
void crossentropy_vocab_partial(float *part, const float *logits, const int32_t *targets, int n, int vl, int v0,
                                int n_valid);
// Every rank's part [t][n][3] (the same on all ranks) -> lse[n]; returns Σ_rows loss.
double crossentropy_vocab_combine(float *lse, float *row_loss, const float *parts, int t, int n);
// logits become grad_scale·(softmax − onehot(target)) over the rank's columns; padded columns 0.
void crossentropy_vocab_backward(float *logits, const float *lse, const int32_t *targets, int n, int vl, int v0,
                                 int n_valid, float grad_scale);
#endif
