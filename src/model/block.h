// The block's halves, for the reversible blocks (model/reversible.c): gpt.c's one block is the two
// halves in a row, x1 = x + Attn(x), x2 = x1 + MLP(x1); a reversible block wires them to two streams.
#ifndef CTRON_BLOCK_H
#define CTRON_BLOCK_H
#include "model/gpt.h"

// Forward (what each pass keeps: the layer's policy), again in backward keeping what a none layer keeps,
// or PASS_INVERT: that recompute with the residual undone, out = res − branch (reversible blocks).
enum { PASS_FORWARD, PASS_RECOMPUTE, PASS_INVERT };
// Where a block's output goes: the next block's input, the final LN's, nowhere (a recomputed group's
// last block), or the chunk's output buffer (m->chunk_out: the next pipeline stage's input).
enum { OUT_NEXT_BLOCK, OUT_HEAD, OUT_DISCARD, OUT_CHUNK };

// out = res + Dropout(Proj(Attn(Norm1(x)))) on the rank's rows [s_rank·b, h]; x is the kept ln1_in.
// out NULL: the output is ln2_in, allocated and kept as the pass says. Returns the output.
float *attn_half_forward(GPT *m, int l, const float *x, const float *res, float *out, int pass);
// out = res + Dropout(MLP(Norm2(x1))); x1 is the kept ln2_in. out NULL: the output goes where `where` says.
float *mlp_half_forward(GPT *m, int l, const float *x1, const float *res, float *out, int pass, int where);
// Backward of a half: dy = dL/d(its output) (read only); dL/d(its norm's input) accumulates into dx;
// the half's parameter gradients accumulate. Reads the half's kept tensors of layer l.
void attn_half_backward(GPT *m, int l, const float *dy, float *dx);
void mlp_half_backward(GPT *m, int l, const float *dy, float *dx);
// A copy of src [s_rank·b, h] as layer l's `name` (ACT_LN1_IN or ACT_LN2_IN), kept and rounded as the pass says.
float *block_half_input(GPT *m, int l, ActName name, const float *src, int pass);
// Where block l's output goes (the next block's kept input, the head's, the chunk's buffer), and its
// rounding and keeping once written (MEMO's layers, model/memo.c, write it by token ranges).
float *block_output_of(GPT *m, int l, int pass, int where);
void block_output_done(GPT *m, int l, int pass, int where, float *out);
// The embedding's output into `into` (NULL: block 0's input).
float *gpt_embedding_forward(GPT *m, const int32_t *tokens, float *into);
// The final norm's input (lnf_in, kept in a training forward; the head's arena mark), and its rounding.
float *gpt_head_input(GPT *m);
void gpt_head_input_done(GPT *m, float *x);
#endif
