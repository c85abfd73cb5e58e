#include "train/pipeline.h"
#include <string.h>
#include "model/params.h"
#include "parallel/comm_device.h"
#include "util/common.h"

enum { DIR_FORWARD, DIR_BACKWARD, DIR_EVAL, DIRS };

// Messages between two stages are told apart by chunk, micro-batch and direction (MPI's guaranteed
// tag range is 0..32767; the orders on both sides agree, so a wrapped tag is never ambiguous).
static int tag_of(const Pipeline *pl, int g, int mb, int dir) { return ((g * pl->spec.m + mb) * DIRS + dir) % 32767; }

// xmalloc's blocks are aligned (not realloc-able): a bigger one and a copy.
static void *grow(void *old, size_t old_bytes, size_t new_bytes) {
    void *p = xmalloc(new_bytes);
    if (old) memcpy(p, old, old_bytes);
    free(old);
    return p;
}

static int chunk_global(const Pipeline *pl, int v) { return v * pl->spec.p + pl->stage; }
static int prev_stage(const Pipeline *pl) { return (pl->stage + pl->spec.p - 1) % pl->spec.p; }
static int next_stage(const Pipeline *pl) { return (pl->stage + 1) % pl->spec.p; }

int pipeline_init(Pipeline *pl, const PipeSpec *spec, int stage, CommGroup *pp, CommGroup *dp, int reduce_layers,
                  int s, int b, size_t act_floats) {
    memset(pl, 0, sizeof *pl);
    pl->spec = *spec;
    pl->stage = stage;
    pl->pp = pp;
    pl->dp = dp;
    pl->reduce_layers = reduce_layers && dp && dp->size > 1;
    pl->n_units = pipe_units_per_rank(spec);
    pl->units = xmalloc(sizeof(PipeUnit) * (size_t)pl->n_units);
    pl->slot_of = xmalloc(sizeof(int) * (size_t)pl->n_units);
    pipe_units(spec, stage, pl->units);
    pl->contexts = pipe_assign_slots(pl->units, pl->n_units, pl->slot_of);
    pl->act_floats = act_floats;
    pl->step_tokens = (size_t)s * b * (size_t)spec->m;
    return pl->contexts;
}

void pipeline_free(Pipeline *pl) {
    for (int i = 0; i < pl->n_bufs; i++) {
        if (pl->bufs[i].sending) comm_wait(&pl->bufs[i].req);
        pl->be->free(pl->be, pl->bufs[i].data);
    }
    if (pl->recv) pl->be->free(pl->be, pl->recv);
    free(pl->bufs);
    free(pl->layer_reqs);
    free(pl->units);
    free(pl->slot_of);
    if (pl->be) {
        pl->be->host_free(pl->be, pl->tokens);
        pl->be->host_free(pl->be, pl->targets);
    }
    memset(pl, 0, sizeof *pl);
}

size_t pipeline_buffer_bytes(const Pipeline *pl) {
    return ((size_t)pl->n_bufs + (pl->recv != NULL)) * pl->act_floats * sizeof(float);
}

// Boundary tensors live where the model's tensors do: on its backend, taken on first use.
// The step's tokens and targets too, in host memory the device copies from without a wait (the
// trainer's m->inputs_held).
static void use_backend(Pipeline *pl, GPT *m) {
    if (!pl->be) pl->be = m->be;
    if (!pl->recv) pl->recv = pl->be->alloc(pl->be, pl->act_floats * sizeof(float));
    if (!pl->tokens) {
        pl->tokens = pl->be->host_alloc(pl->be, pl->step_tokens * sizeof(int32_t));
        pl->targets = pl->be->host_alloc(pl->be, pl->step_tokens * sizeof(int32_t));
    }
}

// A buffer to write the next boundary tensor into: one whose send has completed, or a new one (the
// pool grows to what the schedule keeps in the air at once).
static PipeBuf *free_buf(Pipeline *pl) {
    for (int i = 0; i < pl->n_bufs; i++) {
        PipeBuf *q = &pl->bufs[i];
        if (q->sending && comm_test(&q->req)) q->sending = 0;
        if (!q->sending && q->local_tag < 0) return q;
    }
    pl->bufs = grow(pl->bufs, sizeof(PipeBuf) * (size_t)pl->n_bufs, sizeof(PipeBuf) * (size_t)(pl->n_bufs + 1));
    PipeBuf *q = &pl->bufs[pl->n_bufs++];
    memset(q, 0, sizeof *q);
    q->data = pl->be->alloc(pl->be, pl->act_floats * sizeof(float));
    q->local_tag = -1;
    return q;
}

// Hands a written buffer to stage dst: a non-blocking send, or with one stage the local mailbox.
static void give(Pipeline *pl, PipeBuf *q, int dst, int tag) {
    if (pl->spec.p == 1) {
        q->local_tag = tag;
        return;
    }
    comm_device_isend(pl->pp, q->data, pl->act_floats, dst, tag, &q->req);
    q->sending = 1;
}

// The boundary tensor of `tag` from stage src; blocks until it arrives (the time is the bubble).
// Returns the mailbox buffer with one stage (released by release_local), else pl->recv.
static const float *take(Pipeline *pl, int src, int tag) {
    if (pl->spec.p == 1) {
        for (int i = 0; i < pl->n_bufs; i++)
            if (pl->bufs[i].local_tag == tag) return pl->bufs[i].data;
        ctron_fatal("pipeline: no chunk output with tag %d on the one stage (schedule out of order)", tag);
    }
    CommRequest req;
    comm_device_irecv(pl->pp, pl->recv, pl->act_floats, src, tag, &req);
    double t0 = now_seconds();
    comm_wait(&req);
    pl->wait_s += now_seconds() - t0;
    return pl->recv;
}

static void release_local(Pipeline *pl, const float *data) {
    for (int i = 0; data && pl->spec.p == 1 && i < pl->n_bufs; i++)
        if (pl->bufs[i].data == data) pl->bufs[i].local_tag = -1;
}

static void wait_sends(Pipeline *pl) {
    for (int i = 0; i < pl->n_bufs; i++)
        if (pl->bufs[i].sending) {
            comm_wait(&pl->bufs[i].req);
            pl->bufs[i].sending = 0;
        }
}

static void push_req(Pipeline *pl, CommRequest r) {
    if (pl->n_layer_reqs == pl->cap_layer_reqs) {
        int cap = pl->cap_layer_reqs ? 2 * pl->cap_layer_reqs : 64;
        pl->layer_reqs = grow(pl->layer_reqs, sizeof(CommRequest) * (size_t)pl->n_layer_reqs, sizeof(CommRequest) * (size_t)cap);
        pl->cap_layer_reqs = cap;
    }
    pl->layer_reqs[pl->n_layer_reqs++] = r;
}

// Layered gradient accumulation: layer l's gradient is complete (its last micro-batch is done), so its
// data-parallel sum starts now, while the earlier layers compute.
static void reduce_layer(Pipeline *pl, GPT *m, int l) {
    float *part[BLOCK_BUFFERS_MAX];
    size_t count[BLOCK_BUFFERS_MAX];
    int n = block_buffers(m, &m->g, l, part, count);
    for (int i = 0; i < n; i++) {
        CommRequest r;
        comm_device_iallreduce_sum(pl->dp, part[i], count[i], &r);
        push_req(pl, r);
    }
}

// Did reduce_layer sum this gradient with its layer's buffers? By place, not by name: the families name
// their layers' tensors differently (GPT-2 "h.N.", llama "model.layers.N."), and LoRA's adapters are not
// in the base's buffers.
static int reduced_with_layer(GPT *m, const float *g) {
    for (int l = 0; l < m->cfg.layers; l++) {
        if (!gpt_owns_layer(m, l)) continue;
        float *part[BLOCK_BUFFERS_MAX];
        size_t count[BLOCK_BUFFERS_MAX];
        int n = block_buffers(m, &m->g, l, part, count);
        for (int i = 0; i < n; i++)
            if (part[i] && g >= part[i] && g < part[i] + count[i]) return 1;
    }
    return 0;
}

void pipeline_finish_dp(Pipeline *pl, GPT *m) {
    for (int i = 0; i < pl->n_layer_reqs; i++) comm_wait(&pl->layer_reqs[i]);
    pl->n_layer_reqs = 0;
    for (int i = 0; i < m->n_info; i++) {   // the tensors outside the layers: embeddings, final norm, adapters
        float *g = m->grads + m->info[i].offset;
        if (!reduced_with_layer(m, g)) comm_device_allreduce_sum(pl->dp, g, g, m->info[i].numel);
    }
}

double pipeline_train_step(Pipeline *pl, GPT *m, const Dataset *ds, const PipeStep *st) {
    const GPTConfig *c = &m->cfg;
    int s = c->seq, b = c->batch, n = pipe_layers_per_chunk(&pl->spec), G = pl->spec.p * pl->spec.V;
    size_t n_tok = (size_t)s * b;
    use_backend(pl, m);
    pl->wait_s = pl->fwd_s = pl->bwd_s = 0.0;
    for (int mb = 0; mb < pl->spec.m; mb++)
        dataset_train_batch(ds, s, b, st->order, st->seed, (uint32_t)st->step, st->sample0 + (uint32_t)(mb * b),
                            st->samples_per_step, pl->tokens + mb * n_tok, pl->targets + mb * n_tok);
    double loss = 0.0;
    for (int i = 0; i < pl->n_units; i++) {
        PipeUnit u = pl->units[i];
        int g = chunk_global(pl, u.chunk), l0 = g * n, l1 = l0 + n, first = g == 0, last = g == G - 1;
        const int32_t *tokens = pl->tokens + u.mb * n_tok, *targets = pl->targets + u.mb * n_tok;
        gpt_use_context(m, pl->slot_of[i]);
        if (!u.backward) {
            StepCtx ctx = {st->seed, (uint32_t)st->step, st->sample0 + (uint32_t)(u.mb * b), 1};
            const float *in = first ? NULL : take(pl, prev_stage(pl), tag_of(pl, g - 1, u.mb, DIR_FORWARD));
            PipeBuf *out = last ? NULL : free_buf(pl);
            int t0 = phase_mark(st->marks);
            loss += gpt_forward_chunk(m, l0, l1, tokens, targets, in, out ? out->data : NULL, s, b, ctx, st->grad_scale);
            phase_end(st->marks, PHASE_FORWARD, t0);
            release_local(pl, in);
            if (out) give(pl, out, next_stage(pl), tag_of(pl, g, u.mb, DIR_FORWARD));
        } else {
            const float *d_out = last ? NULL : take(pl, next_stage(pl), tag_of(pl, g + 1, u.mb, DIR_BACKWARD));
            PipeBuf *d_in = first ? NULL : free_buf(pl);
            int t0 = phase_mark(st->marks);
            gpt_backward_chunk(m, l0, l1, tokens, d_out, d_in ? d_in->data : NULL);
            phase_end(st->marks, PHASE_BACKWARD, t0);
            release_local(pl, d_out);
            if (d_in) give(pl, d_in, prev_stage(pl), tag_of(pl, g, u.mb, DIR_BACKWARD));
            if (pl->reduce_layers && u.mb == pl->spec.m - 1)
                for (int l = l0; l < l1; l++) reduce_layer(pl, m, l);
        }
    }
    wait_sends(pl);
    return loss;
}

double pipeline_eval_batch(Pipeline *pl, GPT *m, const int32_t *tokens, const int32_t *targets, int s, int b) {
    int n = pipe_layers_per_chunk(&pl->spec), G = pl->spec.p * pl->spec.V;
    StepCtx ctx = {0, 0, 0, 0};
    double loss = 0.0;
    use_backend(pl, m);
    gpt_use_context(m, 0);
    for (int v = 0; v < pl->spec.V; v++) {
        int g = chunk_global(pl, v), l0 = g * n, first = g == 0, last = g == G - 1;
        const float *in = first ? NULL : take(pl, prev_stage(pl), tag_of(pl, g - 1, 0, DIR_EVAL));
        PipeBuf *out = last ? NULL : free_buf(pl);
        loss += gpt_forward_chunk(m, l0, l0 + n, tokens, targets, in, out ? out->data : NULL, s, b, ctx, 0.0f);
        gpt_release(m);
        release_local(pl, in);
        if (out) give(pl, out, next_stage(pl), tag_of(pl, g, 0, DIR_EVAL));
    }
    wait_sends(pl);
    if (pl->spec.p > 1) {   // the last stage has the loss: a double as two floats (high part and remainder)
        float pair[2] = {(float)loss, (float)(loss - (double)(float)loss)};
        comm_broadcast(pl->pp, pair, 2, pl->spec.p - 1);
        loss = (double)pair[0] + (double)pair[1];
    }
    return loss;
}
