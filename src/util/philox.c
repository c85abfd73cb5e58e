#include "util/philox.h"

philox_ctr philox4x32_10(philox_ctr ctr, philox_key key) { return philox4x32_10_inline(ctr, key); }
