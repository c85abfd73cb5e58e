#include "model/workspace.h"
#include "model/base16.h"
#include <string.h>
#include "model/saved.h"
#include "util/common.h"

static const char *work_name(WorkName w) {
    static const char *names[W_COUNT] = {"ws_out", "ws_gather", "ws_gather2", "d_res", "d_tmp", "d_q", "d_k",
                                         "d_v", "d_4h", "attn_scratch", "mini_a", "mini_b", "mini_c", "mini_logits", "ffn",
                                         "d_up", "mini_d", "d_res2", "lora_out", "lora_r", "lora_mask", "x16"};
    return w < W_COUNT ? names[w] : "?";
}

const char *mem_tag_name(int tag) {
    static char buf[48];
    if (tag >= TAG_WS) return work_name((WorkName)(tag - TAG_WS));
    if (tag >= TAG_WORK) {
        snprintf(buf, sizeof buf, "working copy of %s", act_name_str((ActName)(tag - TAG_WORK)));
        return buf;
    }
    return act_name_str((ActName)tag);
}

float *ws(GPT *m, WorkName w) {
    if (m->mem.mode == MEM_DEFAULT) return m->ws[w];
    if (m->ws_memo[w]) return m->ws_memo[w];
    int key = w == W_D_RES ? scope_key(m, SCOPE_BWD) : m->scope;
    float *p = stepmem_alloc(&m->mem, m->ws_bytes[w], MEM_TEMP, TAG_WS + (int)w, key, NULL);
    m->ws_memo[w] = p ? p : m->ws[w];
    return m->ws_memo[w];
}

static void forget(GPT *m, int keep_d_res) {
    float *d_res = m->ws_memo[W_D_RES];
    memset(m->ws_memo, 0, sizeof m->ws_memo);
    if (keep_d_res) m->ws_memo[W_D_RES] = d_res;
}

void scope_begin(GPT *m, int key) {
    m->scope = key;
    forget(m, key != scope_key(m, SCOPE_BWD));
}

void scope_end(GPT *m, int key) {
    stepmem_scope_end(&m->mem, key);
    forget(m, key != scope_key(m, SCOPE_BWD));
}

int tensor_scope(const GPT *m, ActName name, int layer) {
    if (layer >= 0) return layer;
    return scope_key(m, name == ACT_EMB_MASK ? SCOPE_EMB : SCOPE_HEAD);
}

StaticPlanReport gpt_plan_memory(GPT *m, const int32_t *tokens, const int32_t *targets, StepCtx ctx) {
    StaticPlanReport r;
    memset(&r, 0, sizeof r);
    if (m->mem.mode != MEM_DEFAULT) ctron_fatal("gpt_plan_memory: the step memory is planned already");
    int s = m->cfg.seq, b = m->cfg.batch;
    stepmem_record(&m->mem);
    ctx.train = 1;
    gpt_forward(m, tokens, targets, s, b, ctx, 1.0f / (float)(s * b));
    gpt_backward(m, tokens, ctx);
    ctx.train = 0;
    gpt_forward(m, tokens, targets, s, b, ctx, 0.0f);
    gpt_zero_grad(m);
    memset(m->comm_bytes, 0, sizeof m->comm_bytes);
    r.default_bytes = m->act->arena.capacity + m->workspace_bytes;

    r.block = stepmem_solve(&m->mem, m->be);
    const StaticPlan *tr = &m->mem.plan[STEP_TRAIN], *ev = &m->mem.plan[STEP_EVAL];
    r.buffers = tr->n;
    for (int i = 0; i < tr->n; i++) r.saved += tr->bufs[i].kind == MEM_SAVED;
    r.temporaries = r.buffers - r.saved;
    r.peak = tr->peak;
    r.lower_bound = tr->lower_bound;
    r.naive_sum = tr->naive_sum;
    r.saved_at_peak = static_plan_live_bytes(tr, tr->lower_bound_time, MEM_SAVED);
    r.eval_peak = ev->peak;
    r.eval_lower_bound = ev->lower_bound;

    // The default storage is not used again: every step is placed in the block.
    arena_release_block(&m->act->arena);
    for (int w = 0; w < W_COUNT; w++) { m->be->free(m->be, m->ws[w]); m->ws[w] = NULL; }
    work_free(m);
    m->workspace_bytes = (2 * (size_t)s * b + 3 * (size_t)s * b * (size_t)m->tp.t) * sizeof(float);
    if (m->base16) m->workspace_bytes += base16_stage_bytes(m);   // not planned: the widened base vectors
    return r;
}
