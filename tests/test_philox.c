// Philox4x32-10 against the Random123 known-answer vectors.
#include "check.h"
#include "util/philox.h"

static void kat(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1, uint32_t r0,
                uint32_t r1, uint32_t r2, uint32_t r3) {
    philox_ctr ctr = {{c0, c1, c2, c3}};
    philox_key key = {{k0, k1}};
    philox_ctr r = philox4x32_10(ctr, key);
    CHECK(r.v[0] == r0 && r.v[1] == r1 && r.v[2] == r2 && r.v[3] == r3,
          "philox4x32_10(%08x %08x %08x %08x, %08x %08x) = %08x %08x %08x %08x, expected %08x %08x %08x %08x",
          c0, c1, c2, c3, k0, k1, r.v[0], r.v[1], r.v[2], r.v[3], r0, r1, r2, r3);
}

int main(void) {
    kat(0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8);
    kat(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
        0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd);
    kat(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
        0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1);
    return check_summary();
}
