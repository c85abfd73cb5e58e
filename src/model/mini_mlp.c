#include "model/mini_mlp.h"
#include "model/family.h"
#include "model/linear.h"
#include "model/workspace.h"

void mini_chunk_rows(int n, int M, int c, int *r0, int *r1) {
    int per = (n + M - 1) / M;
    *r0 = c * per < n ? c * per : n;
    *r1 = *r0 + per < n ? *r0 + per : n;
}

MiniAdapters mini_adapters(const GPT *m) {
    MiniAdapters ad = {{0}, {LORA_GATE, LORA_UP, LORA_DOWN}, {{0}}, NULL};
    if (!swiglu(m)) ad.site[0] = LORA_FC, ad.site[1] = LORA_SITES, ad.site[2] = LORA_FC2;
    else if (m->cfg.fused_proj) ad.site[0] = LORA_GATE_UP, ad.site[1] = LORA_SITES;
    for (int i = 0; i < 3; i++) ad.on[i] = ad.site[i] != LORA_SITES && lora_on(m, ad.site[i]);
    return ad;
}

// Column site i's output blocks in the chunk's buffers: GPT-2's fc into a; gate|up, gate, up into a and b.
static LoraOut chunk_out(const GPT *m, const MiniAdapters *ad, int i, float *a, float *b) {
    int fl = m->fl;
    if (!swiglu(m)) return (LoraOut){1, {a}, {fl}, {fl}, {0}, {NULL}};
    return lora_gate_up_outs(m, ad->site[i], a, b);
}

// The chunk's hidden activations from x rows [r0, r0+nc): GPT-2's FC1 (+ its adapter) into mini_a, bias +
// GeLU into mini_b; llama's gate and up (+ adapters) into mini_a and mini_b, SwiGLU into mini_c. Returns
// the hidden rows the down projection reads.
static const float *chunk_hidden(GPT *m, int l, const BlockTensors *w, const float *x_all, const MiniAdapters *ad,
                                 int r0, int nc) {
    int h = m->cfg.hidden, fl = m->fl;
    const float *x = x_all + (size_t)r0 * h;
    float *a = ws(m, W_MINI_A), *b = ws(m, W_MINI_B);
    linear_fwd(m, a, fl, x, h, w->fc1_w, NULL, nc, h, fl);
    if (swiglu(m)) linear_fwd(m, b, fl, x, h, w->fc1_w + (size_t)fl * h, NULL, nc, h, fl);
    for (int i = 0; i < 2; i++) {
        LoraOut o = chunk_out(m, ad, i, a, b);
        if (ad->on[i]) lora_chunk_add(m, l, ad->site[i], ad->v[i], &o, r0, nc);
    }
    if (!swiglu(m)) {
        m->be->bias_gelu_forward(m->be, b, a, w->fc1_b, nc, fl, m->policy.act_dtype == ACT_BF16);
        return b;
    }
    m->be->swiglu_forward(m->be, ws(m, W_MINI_C), a, b, fl, nc, fl, 0);
    return ws(m, W_MINI_C);
}

void mini_mlp_forward(GPT *m, int l, const BlockTensors *w, const float *x_all, const MiniAdapters *ad, float *out) {
    int h = m->cfg.hidden, fl = m->fl, n = m->s_cur * m->b_cur, r0, r1;
    for (int c = 0; c < m->policy.mini_seq; c++) {
        mini_chunk_rows(n, m->policy.mini_seq, c, &r0, &r1);
        if (r1 <= r0) continue;
        const float *hidden = chunk_hidden(m, l, w, x_all, ad, r0, r1 - r0);
        if (ad->on[2]) lora_v_rows(m, l, ad->site[2], hidden, fl, ad->down_v, r0, r1 - r0);
        if (out) linear_fwd(m, out + (size_t)r0 * h, h, hidden, fl, w->fc2_w, NULL, r1 - r0, fl, h);
    }
}

// One chunk's backward from its output gradient: the hidden activations again, the down projection's
// backward (+ adapter) into mini_d (llama) or mini_c (GPT-2), SwiGLU's or GeLU's, then gate and up's or
// FC1's (+ adapters) into out's rows.
static void chunk_backward(GPT *m, int l, const BlockTensors *w, const BlockTensors *g, const float *x_all,
                           const MiniAdapters *ad, const float *d_out, float *out, int r0, int nc) {
    int h = m->cfg.hidden, fl = m->fl;
    size_t fh = (size_t)fl * h;
    const float *x = x_all + (size_t)r0 * h, *dy = d_out + (size_t)r0 * h;
    float *dx = out + (size_t)r0 * h, *a = ws(m, W_MINI_A), *b = ws(m, W_MINI_B);
    const float *hidden = chunk_hidden(m, l, w, x_all, ad, r0, nc);
    float *d_hidden = ws(m, swiglu(m) ? W_MINI_D : W_MINI_C);   // GPT-2's GeLU backward runs in place over it
    linear_bwd(m, d_hidden, fl, 0, g->fc2_w, NULL, dy, h, hidden, fl, w->fc2_w, nc, fl, h);
    LoraOut d_down = {1, {(float *)dy}, {h}, {h}, {0}, {NULL}};
    if (ad->on[2]) lora_chunk_backward(m, l, ad->site[2], &d_down, ad->v[2], hidden, fl, d_hidden, fl, r0, nc);
    if (swiglu(m)) {   // dgate, dup in place over gate and up
        m->be->swiglu_backward(m->be, a, b, fl, NULL, d_hidden, a, b, fl, nc, fl, 0);
        linear_bwd(m, dx, h, 0, g->fc1_w, NULL, a, fl, x, h, w->fc1_w, nc, h, fl);
        linear_bwd(m, dx, h, 1, g->fc1_w ? g->fc1_w + fh : NULL, NULL, b, fl, x, h, w->fc1_w + fh, nc, h, fl);
    } else {
        m->be->gelu_backward(m->be, d_hidden, d_hidden, a, (size_t)nc * fl);
        linear_bwd(m, dx, h, 0, g->fc1_w, g->fc1_b, d_hidden, fl, x, h, w->fc1_w, nc, h, fl);
        a = d_hidden;
    }
    for (int i = 0; i < 2; i++) {   // dgate and dup (SwiGLU), or GPT-2's d(gelu_in) in a
        LoraOut d = chunk_out(m, ad, i, a, b);
        if (ad->on[i]) lora_chunk_backward(m, l, ad->site[i], &d, ad->v[i], x, h, dx, h, r0, nc);
    }
}

void mini_mlp_backward(GPT *m, int l, const BlockTensors *w, const BlockTensors *g, const float *x_all,
                       const MiniAdapters *ad, const float *d_out, float *out) {
    int n = m->s_cur * m->b_cur, r0, r1;
    for (int c = 0; c < m->policy.mini_seq; c++) {
        mini_chunk_rows(n, m->policy.mini_seq, c, &r0, &r1);
        if (r1 > r0) chunk_backward(m, l, w, g, x_all, ad, d_out, out, r0, r1 - r0);
    }
}
