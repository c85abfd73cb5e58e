// Reversible transformer blocks (RevNet, Gomez et al. 2017; Reformer, Kitaev et al. 2020), GPTConfig.reversible:
// two residual streams, each block
//     y1 = x1 + Attn(x2)        Attn = Dropout(Proj(Attn(Norm1(·))))      (llama: its attention half)
//     y2 = x2 + MLP(y1)         MLP  = Dropout(FC2(GeLU(FC1(Norm2(·)))))  (llama: SwiGLU)
// The streams start equal, x1 = x2 = the embedding (Reformer), and end summed into the final norm,
// Norm(y1 + y2) (Reformer averages; a norm does not see the factor 2 but through its epsilon).
// The forward keeps no layer's tensors, only the streams (fp32, rev_x1 and rev_x2: the last block's
// outputs). The backward rebuilds each block's inputs from its outputs, top block first,
//     x2 = y2 − MLP(y1)   then   x1 = y1 − Attn(x2),
// each half's recompute keeping what a none layer keeps for the half's backward, which follows at
// once; the half's tensors are released before the next half is rebuilt. So the ledger holds the
// streams and at most one half-layer at any depth. MemoryPolicy.rev_store keeps every layer's
// tensors instead (the same architecture stored: the reference the inversion is measured against).
#ifndef CTRON_REVERSIBLE_H
#define CTRON_REVERSIBLE_H
#include "model/gpt.h"

// The embedding, the blocks and the streams' sum: returns the final norm's input (lnf_in).
float *rev_forward(GPT *m, const int32_t *tokens);
// After the head's backward (dL/d lnf_in in W_D_RES): every block's backward, top first; leaves
// dL/d(embedding output) = dL/dx1 + dL/dx2 in W_D_RES.
void rev_backward(GPT *m);
// Measurements: with m->rev_probe set, the forward copies each block's input streams to the host and
// the backward compares what it rebuilds: err[l] = max |x − x̂| / max |x| over both streams of block
// l's input (0 when the layers are stored, nothing rebuilt).
typedef struct RevProbe {
    float *x;                     // [L, 2, s_rank·b·h] the forward's inputs (host)
    double *err;                  // [L]
} RevProbe;
RevProbe *rev_probe_new(const GPT *m);
void rev_probe_free(RevProbe *p);
#endif
