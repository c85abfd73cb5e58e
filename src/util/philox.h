// Philox4x32-10 counter-based generator (Salmon et al., SC'11): a pure
// function of (counter, key), so any random value can be regenerated anywhere.
#ifndef CTRON_PHILOX_H
#define CTRON_PHILOX_H
#include <stdint.h>
#include "util/hd.h"

typedef struct { uint32_t v[4]; } philox_ctr;
typedef struct { uint32_t v[2]; } philox_key;

philox_ctr philox4x32_10(philox_ctr ctr, philox_key key);

// The ten rounds, inline for every caller (the CPU function above and the CUDA kernels): one source,
// so a mask drawn on the GPU equals the CPU's bit for bit.
CT_HD philox_ctr philox4x32_10_inline(philox_ctr c, philox_key k) {
    for (int r = 0; r < 10; r++) {
        if (r > 0) { k.v[0] += 0x9E3779B9u; k.v[1] += 0xBB67AE85u; }
        uint64_t p0 = (uint64_t)0xD2511F53u * c.v[0];
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c.v[2];
        philox_ctr out = {{(uint32_t)(p1 >> 32) ^ c.v[1] ^ k.v[0], (uint32_t)p1,
                           (uint32_t)(p0 >> 32) ^ c.v[3] ^ k.v[1], (uint32_t)p0}};
        c = out;
    }
    return c;
}

// Streams: the top byte of ctr.v[3] says what the numbers are for, so that
// dropout, initialisation and data sampling never share a counter.
enum { PHILOX_DROPOUT = 0, PHILOX_INIT = 1, PHILOX_DATA = 2, PHILOX_SAMPLE = 3 };

static inline philox_key philox_key_from_seed(uint64_t seed) {
    philox_key k = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    return k;
}

#endif
