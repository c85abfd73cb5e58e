// The text sample at the end of `ctron train --sample N`: KV-cache generation (model/generate.h)
// from the trained model, decoded with the run's tokenizer.
#ifndef CTRON_SAMPLE_H
#define CTRON_SAMPLE_H
#include <stdint.h>
#include <stdio.h>
#include "model/gpt.h"
#include "tokenizer/bpe.h"

// Continues prompt by n_new tokens (bpe NULL: byte-level), writing the text to out as it is drawn.
void sample_text(GPT *m, const Bpe *bpe, const char *prompt, int n_new, float temperature, int top_k,
                 uint64_t seed, FILE *out);
#endif
