// The paper's Table 2 / Figure 7 comparison: what one layer keeps per rank under each technique,
// always in the paper's own accounting (e = 2 bytes per activation, k = 1 byte per mask element,
// dropout on, LayerNorm statistics ignored), whatever precision and masks a run itself uses.
#ifndef CTRON_TECHNIQUES_H
#define CTRON_TECHNIQUES_H
#include <stddef.h>
#include "memory/memory_model.h"

typedef enum {
    TECH_NO_PARALLEL,      // t = 1, no recompute: sbh(34 + 5as/h)
    TECH_TP,               // the baseline: sbh(10 + 24/t + 5as/(ht))
    TECH_TP_SP,            // sbh(34/t + 5as/(ht))
    TECH_TP_SELECTIVE,     // sbh(10 + 24/t)
    TECH_TP_SP_SELECTIVE,  // 34sbh/t
    TECH_FULL,             // 2sbh: only the layer input (TP without SP, as in Table 2)
    TECH_COUNT
} Technique;

const char *technique_label(Technique k);   // "TP + SP + selective"
const char *technique_key(Technique k);     // "tp_sp_selective" (JSON)
const char *technique_formula(Technique k); // "34sbh/t"
// Sequence parallelism needs t | s; 0 when this technique cannot be applied to the shape.
int technique_applies(long s, int t, Technique k);
// Bytes one layer keeps on one rank, computed with the analytic model (memory_model.h).
size_t technique_layer_bytes(long s, long b, long h, long a, int t, Technique k);
// The same for any family's block: s, b, h, a, t and the family fields (kv, ffn, norm, MLP) of fam, in
// the paper's accounting (e = 2, k = 1, dropout on, norm statistics ignored). Every block keeps
// sbh(10 + c/t + 5as/(ht)) under the TP baseline with c = 4 + 4kv/a + 4f/h: q and the projection
// input 2 + 2, k and v 4kv/a, the MLP's two f-wide tensors 4f/h (GeLU's input and output, or SwiGLU's
// gate and up); GPT-2 (kv = a, f = 4h) has c = 24. GPT-2's shape gives technique_layer_bytes.
size_t technique_layer_bytes_block(const ActShape *fam, Technique k);
// c of that formula, and the technique's formula written with it ("sbh(10+19/t+5as/(ht))" for Llama 3
// 8B; GPT-2's are technique_formula's strings).
double technique_block_constant(const ActShape *fam);
const char *technique_formula_block(const ActShape *fam, Technique k, char *buf, size_t len);
#endif
