// Philox4x32-10 counter-based generator (Salmon et al., SC'11): a pure
// function of (counter, key), so any random value can be regenerated anywhere.
#ifndef CTRON_PHILOX_H
#define CTRON_PHILOX_H
#include <stdint.h>

typedef struct { uint32_t v[4]; } philox_ctr;
typedef struct { uint32_t v[2]; } philox_key;

philox_ctr philox4x32_10(philox_ctr ctr, philox_key key);

// Streams: the top byte of ctr.v[3] says what the numbers are for, so that
// dropout, initialisation and data sampling never share a counter.
enum { PHILOX_DROPOUT = 0, PHILOX_INIT = 1, PHILOX_DATA = 2, PHILOX_SAMPLE = 3 };

static inline philox_key philox_key_from_seed(uint64_t seed) {
    philox_key k = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    return k;
}

#endif
