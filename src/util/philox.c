#include "util/philox.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline philox_ctr philox_round(philox_ctr c, philox_key k) {
    uint64_t p0 = (uint64_t)PHILOX_M0 * c.v[0];
    uint64_t p1 = (uint64_t)PHILOX_M1 * c.v[2];
    philox_ctr out = {{(uint32_t)(p1 >> 32) ^ c.v[1] ^ k.v[0], (uint32_t)p1,
                       (uint32_t)(p0 >> 32) ^ c.v[3] ^ k.v[1], (uint32_t)p0}};
    return out;
}

philox_ctr philox4x32_10(philox_ctr ctr, philox_key key) {
    for (int r = 0; r < 10; r++) {
        if (r > 0) { key.v[0] += PHILOX_W0; key.v[1] += PHILOX_W1; }
        ctr = philox_round(ctr, key);
    }
    return ctr;
}
