// A stored floating-point tensor widened to fp32: F32 as it is, BF16 exactly (its bits are the top
// half of a float's), F16 exactly (every half-precision value, subnormals included, is a float).
// The source may sit at any alignment in a mapped file.
#ifndef CTRON_ST_CONVERT_H
#define CTRON_ST_CONVERT_H
#include <stddef.h>
#include "io/safetensors.h"

// IEEE binary16 bits → the float of the same value (±inf and NaN kept).
float st_f16_to_f32(uint16_t h);
// Is dtype a floating-point one st_to_f32 reads (F32, BF16, F16)?
int st_is_float(StDtype d);
// Elements [first, first + n) of t (a float dtype) as fp32 into dst. Returns -1, or the index
// (counted from first) of the first non-finite element; dst is filled either way.
long st_to_f32(const StTensor *t, size_t first, size_t n, float *dst);
// The first non-finite element of t (a float dtype), read from its bits; -1 when all are finite.
long st_find_nonfinite(const StTensor *t);
#endif
