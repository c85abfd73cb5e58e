#include "memory/memory_report.h"
#include <string.h>
#include "memory/ledger_report.h"
#include "memory/memo_model.h"

// Layers that keep the same names: one column each in the per-name table.
// input_dead: layer 0 under LoRA, which keeps no first-norm input for a dL/dx nobody reads (act_kept_layer).
typedef struct { LayerRecompute kind; int group_input; int count; int first; long memo_positions; int input_dead; } LayerClass;

static int layer_classes(const MemoryConfig *c, LayerClass *cls, int max) {
    int n = 0;
    for (int i = 0; i < stage_layer_count(&c->lay); i++) {
        int l = stage_layer(&c->lay, i);
        LayerRecompute k = c->policy.kind[l];
        int gi = k == RECOMPUTE_FULL && c->policy.group_start[l] == l;
        long pos = memo_layer_positions(&c->lay.sh, &c->policy, l);   // memo layers of another α: another class
        int dead = act_input_grad_dead(&c->lay.sh, l);
        int j = 0;
        while (j < n && !(cls[j].kind == k && cls[j].group_input == gi && cls[j].memo_positions == pos &&
                          cls[j].input_dead == dead))
            j++;
        if (j == n && n < max) cls[n++] = (LayerClass){k, gi, 0, l, pos, dead};
        if (j < n) cls[j].count++;
    }
    return n;
}

static const char *class_name(const LayerClass *k, char *buf, size_t len) {
    if (k->input_dead) snprintf(buf, len, "%s: layer 0", k->kind == RECOMPUTE_FULL ? "full" : recompute_name(k->kind));
    else if (k->kind == RECOMPUTE_FULL) snprintf(buf, len, "full:%s ×%d", k->group_input ? "input" : "inner", k->count);
    else if (k->kind == RECOMPUTE_MEMO) snprintf(buf, len, "memo:%ld ×%d", k->memo_positions, k->count);
    else snprintf(buf, len, "%s ×%d", recompute_name(k->kind), k->count);
    return buf;
}

static const char *fmt(double bytes, char *buf, size_t len) { return format_bytes(bytes, buf, len); }

// GPT-2 is the shape line alone; another family says its block: "llama: kv=8 ffn=14336, RMSNorm, SwiGLU, …".
static int is_gpt2(const ActShape *sh) { return sh->arch == ARCH_GPT2; }

static void print_family(FILE *f, const ActShape *sh) {
    if (is_gpt2(sh)) return;
    const ArchSpec *a = arch_spec((ArchKind)sh->arch);
    char d[32] = "";
    if (sh->head_dim > 0) snprintf(d, sizeof d, " d=%ld", sh->head_dim);   // heads of another width than h/a
    char w[64] = "";
    if (sh->window > 0) snprintf(w, sizeof w, " · sliding window %ld (FLOPs only)", sh->window);
    fprintf(f, "  block   %s: kv=%ld%s ffn=%ld · %s, %s MLP, %s · output layer %s%s%s%s%s\n", a->name, sh->kv, d, sh->ffn,
            a->norm == NORM_RMS ? "RMSNorm" : "LayerNorm", a->mlp == MLP_SWIGLU ? "SwiGLU" : "GeLU",
            a->pos == POS_ROPE ? "RoPE" : "learned positions", sh->untied ? "untied (lm_head)" : "tied to the embedding",
            sh->qkv_bias ? " · qkv bias" : "", sh->qk_norm ? " · q/k norms" : "",
            sh->fused_proj ? " · fused qkv_proj, gate_up_proj" : "", w);
}

// MEMO's layers: runs of layers with the same α, the positions each swaps of s (whole flash tiles) and
// recomputes in backward.
static void print_memo_layers(FILE *f, const MemoryConfig *c) {
    const ActShape *sh = &c->lay.sh;
    fprintf(f, "  memo    the first positions' tensors to host memory, the rest recomputed over their range:");
    const char *sep = "";
    for (int l = 0; l < (int)sh->L;) {
        int e = l;
        while (e + 1 < (int)sh->L && c->policy.kind[e + 1] == c->policy.kind[l] &&
               memo_layer_positions(sh, &c->policy, e + 1) == memo_layer_positions(sh, &c->policy, l))
            e++;
        if (c->policy.kind[l] == RECOMPUTE_MEMO) {
            fprintf(f, "%s layers %d-%d swap %ld of %ld positions (α %g)", sep, l, e, memo_layer_positions(sh, &c->policy, l),
                    sh->s, (double)policy_memo_alpha(&c->policy, l));
            sep = ";";
        }
        l = e + 1;
    }
    fputc('\n', f);
}

static void print_header(FILE *f, const MemoryConfig *c, const MemorySummary *m) {
    const ActShape *sh = &c->lay.sh;
    char plan[256];
    policy_describe(&c->policy, plan, sizeof plan);
    fprintf(f, "ctron memory: %s — %s\n", c->name, c->label);
    fprintf(f, "  shape   L=%ld h=%ld a=%ld s=%ld b=%ld v=%ld\n", sh->L, sh->h, sh->a, sh->s, sh->b, sh->v);
    print_family(f, sh);
    fprintf(f, "  layout  t=%d%s p=%d m=%d · %d GPUs (dp %d) · global batch %ld, micro-batches per pipeline %ld\n",
            sh->t, sh->sp ? " +SP" : "", c->lay.p, c->lay.m, c->gpus, m->dp, c->global_batch, c->lay.microbatches);
    char tempo[48];
    fprintf(f, "  policy  recompute %s · %s activations · dropout %g, masks %s · tempo %s\n", plan,
            sh->elem_bytes == 2 ? "bf16" : "fp32", c->dropout, sh->dropout ? mask_mode_name(sh->masks) : "none",
            tempo_describe(c->policy.tempo, tempo, sizeof tempo));
    if (sh->reversible)
        fprintf(f, "  reversible blocks: no layer keeps anything through the forward; two fp32 streams; backward "
                   "rebuilds one half-layer at a time\n");
    if (c->policy.offload) {
        char what[256];
        fprintf(f, "  offload %s (kept in a pool off the device, two layers' worth staged on it)\n",
                offload_describe(c->policy.offload, what, sizeof what));
    }
    if (policy_has_memo(&c->policy)) print_memo_layers(f, c);
}

static void print_names(FILE *f, const MemoryConfig *c) {
    LayerClass cls[8];
    int n = layer_classes(c, cls, 8);
    char b[32], name[32];
    fprintf(f, "\nSaved per layer, per rank (this configuration; first stage's layers)\n  %-12s", "name");
    for (int j = 0; j < n; j++) fprintf(f, " %16s", class_name(&cls[j], name, sizeof name));
    fputc('\n', f);
    for (int a = 0; a < ACT_N_LAYER; a++) {
        if (!act_in_block(&c->lay.sh, (ActName)a)) continue;
        fprintf(f, "  %-12s", act_name_str((ActName)a));
        for (int j = 0; j < n; j++)
            fprintf(f, " %16s", fmt((double)act_layer_name_bytes(&c->lay.sh, &c->policy, cls[j].first, (ActName)a), b,
                                    sizeof b));
        fputc('\n', f);
    }
    fprintf(f, "  %-12s", "layer total");
    for (int j = 0; j < n; j++)
        fprintf(f, " %16s", fmt((double)act_layer_bytes(&c->lay.sh, &c->policy, cls[j].first), b, sizeof b));
    fputc('\n', f);
    if (policy_has_memo(&c->policy)) {   // --memo: to the host pool instead (not in the rows above)
        fprintf(f, "  %-12s", "swapped");
        for (int j = 0; j < n; j++)
            fprintf(f, " %16s", fmt((double)act_memo_swap_bytes(&c->lay.sh, &c->policy, cls[j].first), b, sizeof b));
        fprintf(f, "\n  (swapped: the first positions' slices of every tensor a none layer keeps but the s×s "
                   "ones and the masks)\n");
    }
    if (!c->policy.offload) return;
    char what[256];
    fprintf(f, "  %-12s", "offloaded");   // --offload: kept in the pool instead (not in the rows above)
    for (int j = 0; j < n; j++)
        fprintf(f, " %16s", fmt((double)act_layer_offload_bytes(&c->lay.sh, &c->policy, cls[j].first), b, sizeof b));
    fprintf(f, "\n  (offloaded: %s)\n", offload_describe(c->policy.offload, what, sizeof what));
}

static void print_techniques(FILE *f, const MemoryConfig *c, const MemorySummary *m) {
    char b1[32], b2[32], form[48];
    double per = stage_layer_count(&c->lay) * stage_layer_factor(&c->lay);
    fprintf(f, "\nThe paper's comparison (Table 2, Figure 7): per layer, per rank, e = 2, k = 1, LN statistics ignored\n");
    if (!is_gpt2(&c->lay.sh))   // the same accounting for this block: GPT-2's 24 becomes 4 + 4kv/a + 4f/h
        fprintf(f, "  (the %s block in the paper's accounting, dropout on: c = %s = %g where GPT-2 has 24)\n",
                arch_spec((ArchKind)c->lay.sh.arch)->name,
                c->lay.sh.head_dim > 0 ? "4ad/h + 4kv·d/h + 4f/h" : "4 + 4kv/a + 4f/h", technique_block_constant(&c->lay.sh));
    int w = 22;   // the formula column: GPT-2's fit 22, another block's constant may be longer
    for (int k = 0; k < TECH_COUNT; k++) {
        int n = (int)strlen(technique_formula_block(&c->lay.sh, (Technique)k, form, sizeof form));
        if (n > w) w = n;
    }
    fprintf(f, "  %-23s %-*s %13s %11s %16s\n", "technique", w, "formula", "bytes/layer", "% of TP", "first stage");
    for (int k = 0; k < TECH_COUNT; k++) {
        if (!m->tech_ok[k]) {
            fprintf(f, "  %-23s %-*s %13s   (SP needs t | s)\n", technique_label((Technique)k), w,
                    technique_formula_block(&c->lay.sh, (Technique)k, form, sizeof form), "n/a");
            continue;
        }
        fprintf(f, "  %-23s %-*s %13s %9.1f %% %16s\n", technique_label((Technique)k), w,
                technique_formula_block(&c->lay.sh, (Technique)k, form, sizeof form),
                fmt((double)m->tech_layer[k], b1, sizeof b1), m->tech_pct[k], fmt(m->tech_layer[k] * per, b2, sizeof b2));
    }
    fprintf(f, "  (first stage = bytes/layer × L/p layers × %.4g for the micro-batches in flight: Eq. 5%s)\n",
            stage_layer_factor(&c->lay), stage_layer_factor(&c->lay) != stage_in_flight(&c->lay)
                                             ? ", interleaved: p × (1 + (p−1)/(pm))" : "");
}

static void print_extras(FILE *f, const MemoryConfig *c, const MemorySummary *m) {
    const ActShape *sh = &c->lay.sh;
    char b[32];
    int fl = stage_in_flight(&c->lay);
    fprintf(f, "\nModel extras on the first stage, per rank\n");
    fprintf(f, "  %-12s %14s  × %d in flight\n", "emb_mask", fmt((double)act_tensor_bytes(sh, ACT_EMB_MASK), b, sizeof b), fl);
    const ActName last[] = {ACT_LNF_IN, ACT_LNF_STATS, ACT_LM_IN, ACT_LOGITS, ACT_LM_GRAD};
    for (int i = 0; i < (int)(sizeof last / sizeof last[0]); i++) {
        if (c->lay.p == 1) fprintf(f, "  %-12s %14s\n", act_name_str(last[i]), fmt((double)act_tensor_bytes(sh, last[i]), b, sizeof b));
        else fprintf(f, "  %-12s %14s\n", act_name_str(last[i]), "(last stage)");
    }
    if (sh->reversible)   // reversible blocks: the two residual streams, fp32, the last block's outputs
        for (int k = 0; k < 2; k++)
            fprintf(f, "  %-12s %14s\n", act_name_str(k ? ACT_REV_X2 : ACT_REV_X1),
                    fmt((double)act_tensor_bytes(sh, k ? ACT_REV_X2 : ACT_REV_X1), b, sizeof b));
    if (c->policy.offload)
        fprintf(f, "  %-12s %14s  (two layers' offloaded tensors: the forward writes and the backward fetches here)\n",
                "offload_stage", fmt((double)act_offload_stage_bytes(sh, &c->policy), b, sizeof b));
    if (policy_has_memo(&c->policy))
        fprintf(f, "  %-12s %14s  (two slots of swapped slices: the forward writes and the backward fetches here)\n",
                "memo_stage", fmt((double)act_memo_stage_bytes(sh, &c->policy), b, sizeof b));
    fprintf(f, "  %-12s %14s\n", "extras", fmt(m->act.extras, b, sizeof b));
    fprintf(f, "  paper's extra term (sbhL/t)(p/L + δ_{p=1}(4/L)(1+v/h)): %s (assumes SP; no LN statistics)\n",
            fmt(m->paper_extra, b, sizeof b));
}

static void print_stage(FILE *f, const MemoryConfig *c, const MemorySummary *m) {
    char b[32], b2[32], b3[32];
    int n = stage_layer_count(&c->lay);
    fprintf(f, "\nFirst pipeline stage, per rank\n");
    fprintf(f, "  %-34s %d of %ld", "layers on the stage", n, c->lay.sh.L);
    if (c->lay.m > 1) fprintf(f, " (%d chunks of %d)", c->lay.m, n / c->lay.m);
    fprintf(f, "\n  %-34s %d, holding %.4g × its layers' activations (Eq. 5%s)\n", "micro-batches in flight",
            stage_in_flight(&c->lay), stage_layer_factor(&c->lay),
            stage_layer_factor(&c->lay) != stage_in_flight(&c->lay) ? ", interleaved" : "");
    fprintf(f, "  %-34s %14s\n", "activations of its layers", fmt(m->act.layers, b, sizeof b));
    fprintf(f, "  %-34s %14s\n", "model extras", fmt(m->act.extras, b, sizeof b));
    fprintf(f, "  %-34s %14s\n", "held at the end of the forward", fmt(m->act.held, b, sizeof b));
    fprintf(f, "  %-34s %14s\n", "recomputed in backward (largest)", fmt(m->act.working, b, sizeof b));
    if (c->policy.offload)
        fprintf(f, "  %-34s %14s  (host memory or a file, not in the peak)\n", "in the offload pool",
                fmt(m->act.offloaded, b, sizeof b));
    if (policy_has_memo(&c->policy))
        fprintf(f, "  %-34s %14s  (host memory or a file, not in the peak)\n", "in MEMO's host pool",
                fmt(m->act.memo_pool, b, sizeof b));
    fprintf(f, "  %-34s %14s%s\n", "activation peak of the step", fmt(m->act.peak, b, sizeof b),
            c->lay.p == 1 ? "" : "  (upper bound: held + largest recompute)");
    fprintf(f, "  %-34s %14.4g\n", "parameters", m->params);
    int b16 = c->lay.sh.lora_rank > 0 && c->lay.sh.base_bf16;   // LoRA's frozen base in bf16
    fprintf(f, "  %-34s %14s\n", b16 ? "  weights (base 2 B, adapters 4 B)" : "  weights (fp32, 4 B)",
            fmt(m->param_bytes, b, sizeof b));
    fprintf(f, "  %-34s %14s\n", "  gradients (fp32, 4 B)", fmt(m->grad_bytes, b, sizeof b));
    fprintf(f, "  %-34s %14s\n", "  AdamW m and v (fp32, 8 B)", fmt(m->adam_bytes, b, sizeof b));
    fprintf(f, "  %-34s %14s  (activations %s + state %s)\n", "total per rank", fmt(m->total_bytes, b, sizeof b),
            fmt(m->act.peak, b2, sizeof b2), fmt(m->state_bytes, b3, sizeof b3));
}

static void print_flops(FILE *f, const MemoryConfig *c, const MemorySummary *m) {
    fprintf(f, "\nWork per iteration (global batch %ld sequences)\n", c->global_batch);
    // Eq. 7 is GPT-2's block; another family's is three times its forward (flops.h's FlopBlock)
    fprintf(f, "  %-34s %.4g PFLOP\n", is_gpt2(&c->lay.sh) ? "model FLOPs (Eq. 7)" : "model FLOPs (3 × the forward)",
            m->model_flops / 1e15);
    fprintf(f, "  %-34s %.4g PFLOP (+%.1f %%)\n", "hardware FLOPs (with recompute)", m->hw_flops / 1e15,
            100.0 * (m->hw_flops / m->model_flops - 1.0));
    if (m->mfu < 0) {
        fprintf(f, "  MFU/HFU: give --iter-time SECONDS (and --gpus, --peak-tflops)\n");
        return;
    }
    fprintf(f, "  %-34s %.4g s%s · %d GPUs × %g TFLOP/s\n", "iteration time", c->iter_time,
            c->iter_time_from_paper ? " (paper, Table 5)" : "", c->gpus, c->peak_tflops);
    fprintf(f, "  %-34s %.2f %%\n", "MFU", 100.0 * m->mfu);
    fprintf(f, "  %-34s %.2f %%\n", "HFU", 100.0 * m->hfu);
}

void memory_report_text(FILE *f, const MemoryConfig *c) {
    MemorySummary m;
    memory_summarize(c, &m);
    print_header(f, c, &m);
    print_names(f, c);
    print_techniques(f, c, &m);
    print_extras(f, c, &m);
    print_stage(f, c, &m);
    print_flops(f, c, &m);
}

void memory_report_compare(FILE *f, const MemoryConfig *cs, int n) {
    char b[32], b2[32], b3[32];
    fprintf(f, "Activation memory per layer per rank, percent of the TP baseline (the paper's Figure 7; e = 2, k = 1)\n");
    const Technique cols[] = {TECH_TP_SP, TECH_TP_SELECTIVE, TECH_TP_SP_SELECTIVE, TECH_FULL, TECH_NO_PARALLEL};
    fprintf(f, "  %-12s %3s %12s %9s %9s %11s %9s %9s %14s\n", "model", "t", "TP baseline", "TP+SP", "TP+sel",
            "TP+SP+sel", "full", "t=1", "SP+sel/layer");
    for (int i = 0; i < n; i++) {
        MemorySummary m;
        memory_summarize(&cs[i], &m);
        fprintf(f, "  %-12s %3d %12s", cs[i].name, cs[i].lay.sh.t, fmt((double)m.tech_layer[TECH_TP], b, sizeof b));
        const int width[] = {9, 9, 11, 9, 9};
        for (int k = 0; k < 5; k++) {
            if (m.tech_ok[cols[k]]) fprintf(f, " %*.1f%%", width[k] - 1, m.tech_pct[cols[k]]);
            else fprintf(f, " %*s", width[k], "n/a");
        }
        fprintf(f, " %14s\n", m.tech_ok[TECH_TP_SP_SELECTIVE] ? fmt((double)m.tech_layer[TECH_TP_SP_SELECTIVE], b, sizeof b) : "n/a");
    }
    char plan[256];
    policy_describe(&cs[0].policy, plan, sizeof plan);
    fprintf(f, "\nFirst pipeline stage per rank, this configuration (%srecompute %s, %s activations, masks %s)\n",
            cs[0].lay.sh.sp ? "SP, " : "", plan, cs[0].lay.sh.elem_bytes == 2 ? "bf16" : "fp32",
            cs[0].lay.sh.dropout ? mask_mode_name(cs[0].lay.sh.masks) : "none");
    fprintf(f, "  %-12s %3s %3s %2s %6s %9s %13s %13s %13s %8s %8s\n", "model", "t", "p", "m", "layers", "in flight",
            "activations", "param state", "total", "MFU", "HFU");
    for (int i = 0; i < n; i++) {
        MemorySummary m;
        memory_summarize(&cs[i], &m);
        const StageLayout *lay = &cs[i].lay;
        fprintf(f, "  %-12s %3d %3d %2d %6d %9.4g %13s %13s %13s", cs[i].name, lay->sh.t, lay->p, lay->m,
                stage_layer_count(lay), stage_layer_factor(lay), fmt(m.act.peak, b, sizeof b),
                fmt(m.state_bytes, b2, sizeof b2), fmt(m.total_bytes, b3, sizeof b3));
        if (m.mfu >= 0) fprintf(f, " %7.2f%% %7.2f%%\n", 100.0 * m.mfu, 100.0 * m.hfu);
        else fprintf(f, " %8s %8s\n", "-", "-");
    }
}

cJSON *memory_report_json(const MemoryConfig *c) {
    MemorySummary m;
    memory_summarize(c, &m);
    const ActShape *sh = &c->lay.sh;
    char plan[256];
    policy_describe(&c->policy, plan, sizeof plan);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", c->name);
    cJSON *shape = cJSON_AddObjectToObject(o, "shape");
    cJSON_AddNumberToObject(shape, "layers", (double)sh->L);
    cJSON_AddNumberToObject(shape, "hidden", (double)sh->h);
    cJSON_AddNumberToObject(shape, "heads", (double)sh->a);
    cJSON_AddNumberToObject(shape, "seq", (double)sh->s);
    cJSON_AddNumberToObject(shape, "micro_batch", (double)sh->b);
    cJSON_AddNumberToObject(shape, "vocab", (double)sh->v);
    if (!is_gpt2(sh)) {   // GPT-2's JSON is as it was
        cJSON_AddStringToObject(shape, "arch", arch_spec((ArchKind)sh->arch)->name);
        cJSON_AddNumberToObject(shape, "kv_heads", (double)sh->kv);
        cJSON_AddNumberToObject(shape, "ffn", (double)sh->ffn);
        cJSON_AddBoolToObject(shape, "tied", !sh->untied);
        cJSON_AddBoolToObject(shape, "qkv_bias", sh->qkv_bias);
        if (sh->head_dim > 0) cJSON_AddNumberToObject(shape, "head_dim", (double)sh->head_dim);   // absent: h/a
        if (sh->qk_norm) cJSON_AddBoolToObject(shape, "qk_norm", 1);                              // absent: none
        if (sh->fused_proj) cJSON_AddBoolToObject(shape, "fused_proj", 1);                        // absent: split
        if (sh->window > 0) cJSON_AddNumberToObject(shape, "sliding_window", (double)sh->window);   // absent: none
    }
    if (sh->reversible) cJSON_AddBoolToObject(shape, "reversible", 1);   // absent: the standard block
    cJSON *lay = cJSON_AddObjectToObject(o, "layout");
    cJSON_AddNumberToObject(lay, "tp", sh->t);
    cJSON_AddBoolToObject(lay, "sp", sh->sp);
    cJSON_AddNumberToObject(lay, "pp", c->lay.p);
    cJSON_AddNumberToObject(lay, "interleave", c->lay.m);
    cJSON_AddNumberToObject(lay, "gpus", c->gpus);
    cJSON_AddNumberToObject(lay, "dp", m.dp);
    cJSON_AddNumberToObject(lay, "global_batch", (double)c->global_batch);
    cJSON_AddNumberToObject(lay, "microbatches_per_pipeline", (double)c->lay.microbatches);
    cJSON *pol = cJSON_AddObjectToObject(o, "policy");
    cJSON_AddStringToObject(pol, "recompute", plan);
    cJSON_AddStringToObject(pol, "act_dtype", sh->elem_bytes == 2 ? "bf16" : "fp32");
    char tempo[48];
    cJSON_AddStringToObject(pol, "tempo", tempo_describe(c->policy.tempo, tempo, sizeof tempo));
    cJSON_AddStringToObject(pol, "dropout_masks", mask_mode_name(sh->masks));
    char offload[256];
    cJSON_AddStringToObject(pol, "offload", offload_describe(c->policy.offload, offload, sizeof offload));
    cJSON_AddNumberToObject(pol, "dropout", c->dropout);

    cJSON *classes = cJSON_AddArrayToObject(o, "layer_classes");
    LayerClass cls[8];
    int n = layer_classes(c, cls, 8);
    for (int j = 0; j < n; j++) {
        cJSON *k = cJSON_CreateObject();
        cJSON_AddStringToObject(k, "recompute", recompute_name(cls[j].kind));
        if (cls[j].kind == RECOMPUTE_FULL) cJSON_AddBoolToObject(k, "group_input", cls[j].group_input);
        cJSON_AddBoolToObject(k, "input_gradient", !cls[j].input_dead);
        cJSON_AddNumberToObject(k, "layers", cls[j].count);
        cJSON *bytes = cJSON_AddObjectToObject(k, "bytes");
        for (int a = 0; a < ACT_N_LAYER; a++)
            if (act_in_block(sh, (ActName)a))
                cJSON_AddNumberToObject(bytes, act_name_str((ActName)a),
                                        (double)act_layer_name_bytes(sh, &c->policy, cls[j].first, (ActName)a));
        cJSON_AddNumberToObject(k, "total", (double)act_layer_bytes(sh, &c->policy, cls[j].first));
        cJSON_AddNumberToObject(k, "offloaded", (double)act_layer_offload_bytes(sh, &c->policy, cls[j].first));
        cJSON_AddNumberToObject(k, "memo_swapped", (double)act_memo_swap_bytes(sh, &c->policy, cls[j].first));
        if (cls[j].kind == RECOMPUTE_MEMO) {
            cJSON_AddNumberToObject(k, "memo_alpha", policy_memo_alpha(&c->policy, cls[j].first));
            cJSON_AddNumberToObject(k, "memo_positions", (double)memo_layer_positions(sh, &c->policy, cls[j].first));
        }
        cJSON_AddItemToArray(classes, k);
    }

    cJSON *paper = cJSON_AddObjectToObject(o, "paper_comparison");
    double per = stage_layer_count(&c->lay) * stage_layer_factor(&c->lay);
    for (int k = 0; k < TECH_COUNT; k++) {
        cJSON *t = cJSON_AddObjectToObject(paper, technique_key((Technique)k));
        cJSON_AddStringToObject(t, "label", technique_label((Technique)k));
        char form[48];
        cJSON_AddStringToObject(t, "formula", technique_formula_block(sh, (Technique)k, form, sizeof form));
        cJSON_AddBoolToObject(t, "applies", m.tech_ok[k]);
        cJSON_AddNumberToObject(t, "bytes_per_layer", (double)m.tech_layer[k]);
        cJSON_AddNumberToObject(t, "percent_of_tp", m.tech_pct[k]);
        cJSON_AddNumberToObject(t, "first_stage_bytes", (double)m.tech_layer[k] * per);
    }

    cJSON *ex = cJSON_AddObjectToObject(o, "extras");
    cJSON_AddNumberToObject(ex, "emb_mask", (double)act_tensor_bytes(sh, ACT_EMB_MASK));
    cJSON_AddNumberToObject(ex, "emb_mask_in_flight", stage_in_flight(&c->lay));
    const ActName last[] = {ACT_LNF_IN, ACT_LNF_STATS, ACT_LM_IN, ACT_LOGITS, ACT_LM_GRAD};
    for (int i = 0; i < (int)(sizeof last / sizeof last[0]); i++)
        cJSON_AddNumberToObject(ex, act_name_str(last[i]), c->lay.p == 1 ? (double)act_tensor_bytes(sh, last[i]) : 0.0);
    cJSON_AddNumberToObject(ex, "offload_stage", (double)act_offload_stage_bytes(sh, &c->policy));
    cJSON_AddNumberToObject(ex, "memo_stage", (double)act_memo_stage_bytes(sh, &c->policy));
    if (sh->reversible) {
        cJSON_AddNumberToObject(ex, "rev_x1", (double)act_tensor_bytes(sh, ACT_REV_X1));
        cJSON_AddNumberToObject(ex, "rev_x2", (double)act_tensor_bytes(sh, ACT_REV_X2));
    }
    cJSON_AddNumberToObject(ex, "total", m.act.extras);
    cJSON_AddNumberToObject(ex, "paper_formula", m.paper_extra);

    cJSON *st = cJSON_AddObjectToObject(o, "first_stage");
    cJSON_AddNumberToObject(st, "layers", stage_layer_count(&c->lay));
    cJSON_AddNumberToObject(st, "in_flight", stage_in_flight(&c->lay));
    cJSON_AddNumberToObject(st, "layer_factor", stage_layer_factor(&c->lay));
    cJSON_AddNumberToObject(st, "layers_bytes", m.act.layers);
    cJSON_AddNumberToObject(st, "extras_bytes", m.act.extras);
    cJSON_AddNumberToObject(st, "held_bytes", m.act.held);
    cJSON_AddNumberToObject(st, "recompute_working_bytes", m.act.working);
    cJSON_AddNumberToObject(st, "activation_peak_bytes", m.act.peak);
    cJSON_AddNumberToObject(st, "offload_pool_bytes", m.act.offloaded);
    cJSON_AddNumberToObject(st, "memo_pool_bytes", m.act.memo_pool);
    cJSON_AddNumberToObject(st, "parameters", m.params);
    cJSON_AddNumberToObject(st, "param_bytes", m.param_bytes);
    cJSON_AddNumberToObject(st, "grad_bytes", m.grad_bytes);
    cJSON_AddNumberToObject(st, "adam_bytes", m.adam_bytes);
    cJSON_AddNumberToObject(st, "total_bytes", m.total_bytes);

    cJSON *fl = cJSON_AddObjectToObject(o, "flops");
    cJSON_AddNumberToObject(fl, "model_per_iteration", m.model_flops);
    cJSON_AddNumberToObject(fl, "hardware_per_iteration", m.hw_flops);
    if (m.mfu >= 0) {
        cJSON_AddNumberToObject(fl, "iter_time_s", c->iter_time);
        cJSON_AddBoolToObject(fl, "iter_time_from_paper", c->iter_time_from_paper);
        cJSON_AddNumberToObject(fl, "gpus", c->gpus);
        cJSON_AddNumberToObject(fl, "peak_tflops", c->peak_tflops);
        cJSON_AddNumberToObject(fl, "mfu", m.mfu);
        cJSON_AddNumberToObject(fl, "hfu", m.hfu);
    }
    return o;
}
