// Softmax cross-entropy over the vocabulary, gradient written in place over the logits
// (no second vocabulary-sized buffer).
#ifndef CTRON_CROSSENTROPY_H
#define CTRON_CROSSENTROPY_H
#include <stdint.h>

// logits[n,v] -> returns Σ_rows loss; logits becomes grad_scale·(softmax − onehot(target)).
// row_loss[n] is scratch for the per-row losses (summed in order: deterministic).
double crossentropy_forward_backward(float *logits, const int32_t *targets, float *row_loss, int n, int v,
                                     float grad_scale);
// logits[n,v] -> Σ_rows loss, logits untouched (evaluation).
double crossentropy_loss(const float *logits, const int32_t *targets, float *row_loss, int n, int v);
#endif
