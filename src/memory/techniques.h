// The paper's Table 2 / Figure 7 comparison: what one layer keeps per rank under each technique,
// always in the paper's own accounting (e = 2 bytes per activation, k = 1 byte per mask element,
// dropout on, LayerNorm statistics ignored), whatever precision and masks a run itself uses.
#ifndef CTRON_TECHNIQUES_H
#define CTRON_TECHNIQUES_H
#include <stddef.h>

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
#endif
