// Text sampling from a trained model (byte-level tokens), temperature sampling from Philox.
#ifndef CTRON_SAMPLE_H
#define CTRON_SAMPLE_H
#include <stdint.h>
#include <stdio.h>
#include "model/gpt.h"

// Continues prompt[0..n_prompt) by n_new tokens, writing each new byte to out as it is drawn.
void sample_bytes(GPT *m, const int32_t *prompt, int n_prompt, int n_new, float temperature, uint64_t seed,
                  FILE *out);
#endif
