// Drawing the next token from logits: temperature, top-k, and a uniform number from Philox keyed
// by the seed (stream PHILOX_SAMPLE, counter = the token's index), so a seed fixes the output.
#ifndef CTRON_SAMPLER_H
#define CTRON_SAMPLER_H
#include <stdint.h>
#include "util/philox.h"

typedef struct {
    float temperature;    // 0: greedy (argmax)
    int top_k;            // 0: the whole vocabulary
    philox_key key;
    int vocab;
    int *cand;            // scratch [vocab]: candidate ids
    double *prob;         // scratch [vocab]
} Sampler;

void sampler_init(Sampler *s, int vocab, float temperature, int top_k, uint64_t seed);
void sampler_free(Sampler *s);
// Token number index of the generation, from logits[vocab]. Ties go to the lower id.
int32_t sampler_draw(Sampler *s, const float *logits, uint32_t index);
#endif
