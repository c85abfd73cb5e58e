#include "memory/planner.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "memory/flops.h"
#include "memory/param_count.h"
#include "backend/cpu/attention.h"
#include "util/common.h"

static void fill_policy(MemoryPolicy *pol, int L, int n_full, int n_sel) {
    for (int l = 0; l < L; l++) {
        pol->kind[l] = l < n_full ? RECOMPUTE_FULL : l < n_full + n_sel ? RECOMPUTE_SELECTIVE : RECOMPUTE_NONE;
        pol->group_start[l] = l;
    }
}

static int passes_of(MaskMode masks, unsigned tempo) {
    return (masks == MASKS_BITS ? 1 : masks == MASKS_REGEN ? 2 : 0) + !!(tempo & TEMPO_SOFTMAX) +
           !!(tempo & TEMPO_LAYERNORM) + 2 * !!(tempo & TEMPO_GELU);
}

// Floats of one kind of attention scratch, as the backend sizes it for the rank's heads and width.
static size_t backend_scratch(Backend *be, int threads, AttnScratchKind kind, const ActShape *sh) {
    int t = sh->t > 1 ? sh->t : 1, a = (int)sh->a / t, ql = (int)act_q_width(sh) / t, kv = (int)(sh->kv > 0 ? sh->kv : sh->a) / t;
    if (be) return be->attention_scratch_floats(be, kind, (int)sh->s, (int)sh->b, a, kv, ql);
    return backend_cpu_attention_scratch_floats(kind, (int)sh->s, (int)sh->b, a, kv, ql, threads > 0 ? threads : 1);
}

size_t plan_attention_scratch_bytes(Backend *be, const ActShape *sh, int threads, unsigned tempo, int any_selective) {
    if (tempo & ATTN_FLASH) return backend_scratch(be, threads, ATTN_SCRATCH_FLASH, sh) * sizeof(float);
    AttnScratchKind stored = (tempo & TEMPO_SOFTMAX) ? ATTN_SCRATCH_BACKWARD_TEMPO : ATTN_SCRATCH_BACKWARD;
    size_t floats = backend_scratch(be, threads, stored, sh);
    if (any_selective) {   // gpt_init takes the larger when some layers are selective and others not
        size_t re = backend_scratch(be, threads, ATTN_SCRATCH_RECOMPUTE, sh);
        if (re > floats) floats = re;
    }
    return floats * sizeof(float);
}

size_t plan_gemm_scratch_bytes(const ActShape *sh, Precision precision, unsigned tempo, int threads) {
    if (precision != PRECISION_BF16) return 0;
    size_t t = sh->t > 1 ? (size_t)sh->t : 1, n = (size_t)sh->s * (size_t)sh->b, h = (size_t)sh->h;
    size_t f = sh->ffn > 0 ? (size_t)sh->ffn : 4 * h, fl = f / t, vl = ((size_t)sh->v + t - 1) / t, d = (size_t)act_head_dim(sh);
    size_t ql = (size_t)act_q_width(sh) / t;
    size_t rows_mlp = sh->mini_seq > 1 ? (n + (size_t)sh->mini_seq - 1) / (size_t)sh->mini_seq : n;
    // slot 0: forward inputs (largest n·h: QKV, FC1, head; n·fl: FC2 or down) and backward dy (q, k and v
    // one at a time: at most n·h; n·fl: FC1 or gate and up; n·vl: head)
    size_t slot0 = n * h;
    if (n * ql > slot0) slot0 = n * ql;   // o's input and q's dy, when a·d is wider than h
    if (rows_mlp * fl > slot0) slot0 = rows_mlp * fl;
    if (rows_mlp * vl > slot0) slot0 = rows_mlp * vl;
    // slot 1: backward x where the GEMM does not read the arena's bf16 copy — SP's gathered inputs (QKV,
    // FC1, head: n·h) and mini-seq's chunks (FC2's ⌈n/M⌉·fl, FC1's and the head's ⌈n/M⌉·h) — and
    // attention's per-thread operands
    size_t slot1 = sh->t > 1 && sh->sp ? n * h : 0;
    // down's input, SwiGLU's output made again for its weight gradient: in fp32, packed here, unless SwiGLU
    // writes it in bf16 from the kept copies of gate and up (CTRON_BF16_COPIES, on by default)
    int copies = backend_bf16_copies(NULL, 0) == 1;
    if (sh->swiglu && sh->mini_seq <= 1 && !copies && n * fl > slot1) slot1 = n * fl;
    if (sh->mini_seq > 1) {
        if (rows_mlp * fl > slot1) slot1 = rows_mlp * fl;
        if (rows_mlp * h > slot1) slot1 = rows_mlp * h;
    }
    size_t attn = (tempo & ATTN_FLASH) ? 0 : (size_t)(threads > 0 ? threads : 1) * ATTENTION_BF16_SCRATCH(sh->s, d);
    if (attn > slot1) slot1 = attn;
    return (slot0 + slot1) * sizeof(uint16_t);
}

size_t plan_rank_params(const ActShape *sh) {
    size_t t = sh->t > 1 ? (size_t)sh->t : 1, vl = ((size_t)sh->v + t - 1) / t;
    return (size_t)param_vocab_matrices(sh) * vl * (size_t)sh->h + param_position_count(sh) +
           (size_t)sh->L * param_layer_count(sh) + param_final_norm_count(sh);
}

// The bytes the budget holds: the arena, the attention scratch and mixed precision's GEMM scratch.
static size_t budget_bytes(const MemPlan *p) { return p->arena_bytes + p->scratch_bytes + p->gemm_scratch_bytes; }

// a better than b: fewer recompute FLOPs, then less offload traffic, then fewer extra passes, then fewer bytes
static int better(const MemPlan *a, const MemPlan *b) {
    if (a->extra_flops != b->extra_flops) return a->extra_flops < b->extra_flops;
    if (a->pool_bytes != b->pool_bytes) return a->pool_bytes < b->pool_bytes;
    if (a->passes != b->passes) return a->passes < b->passes;
    return budget_bytes(a) < budget_bytes(b);
}

// The peak of the plan F full (groups of one, first), S selective, the rest none, in closed form:
// the end of the forward, or the backward of the last full layer (layers 0..F−1 held, the last one
// rebuilt on its checkpoint). Every other backward point holds less than the end of the forward.
// With offload, each kind's bill is what stays on the device; its offloaded bytes go to the pool
// and its region (64-byte aligned tensors) sizes the stage: two slots of the largest region. Layer 0, the
// plan's first, has bills of its own (first_*): under LoRA it keeps no first-norm input (act_kept_layer),
// nor does its recompute pass where it is the only full layer (first_work).
typedef struct {
    size_t none, sel, ck, work, first_work, extras, emb;
    size_t off[3], span[3];
    size_t first[3], first_off[3], first_span[3];
} LayerBills;
enum { K_NONE, K_SEL, K_CK };

// Layer 0's kind in the plan: full when any layer is (they come first), else selective when any is.
static int first_kind(int nf, int ns) { return nf > 0 ? K_CK : ns > 0 ? K_SEL : K_NONE; }
// The device bill of any other layer of kind i; layer 0's is first[i].
static size_t kind_dev(const LayerBills *k, int i) { return i == K_NONE ? k->none : i == K_SEL ? k->sel : k->ck; }

static size_t plan_stage(const LayerBills *k, int L, int nf, int ns) {
    int counts[3] = {L - nf - ns, ns, nf}, layers = 0, k0 = first_kind(nf, ns);
    counts[k0]--;   // layer 0 counted on its own
    size_t span = k->first_span[k0];
    layers += span > 0;
    for (int i = 0; i < 3; i++)
        if (counts[i] > 0 && k->span[i] > 0) {
            layers += counts[i];
            if (k->span[i] > span) span = k->span[i];
        }
    return (size_t)(layers < 2 ? layers : 2) * span;
}

static size_t plan_pool(const LayerBills *k, int L, int nf, int ns) {
    int k0 = first_kind(nf, ns);
    return (size_t)(L - nf - ns) * k->off[K_NONE] + (size_t)ns * k->off[K_SEL] + (size_t)nf * k->off[K_CK] -
           (k->off[k0] - k->first_off[k0]);
}

static size_t plan_peak(const LayerBills *k, int L, int nf, int ns) {
    size_t stage = plan_stage(k, L, nf, ns);
    int k0 = first_kind(nf, ns);
    size_t fwd = k->extras + stage + (size_t)nf * k->ck + (size_t)ns * k->sel + (size_t)(L - nf - ns) * k->none -
                 (kind_dev(k, k0) - k->first[k0]);
    size_t last_full = nf ? k->emb + stage + (size_t)nf * k->ck + (nf == 1 ? k->first_work : k->work) : 0;
    return fwd > last_full ? fwd : last_full;
}

// One layer of a kind under an offload set (layer 0 when first): its device bill, offloaded bytes and region.
static void kind_bill(const ActShape *sh, LayerRecompute kind, unsigned tempo, unsigned offload, int first,
                      size_t *dev, size_t *off, size_t *span) {
    int start = 0;
    MemoryPolicy one = {.layers = 1, .kind = &kind, .group_start = &start, .tempo = tempo};
    *dev = *off = *span = 0;
    for (int n = 0; n < ACT_N_LAYER; n++) {
        if (first ? !act_kept_layer(sh, &one, 0, (ActName)n) : !act_kept(kind, 1, tempo, (ActName)n)) continue;
        size_t b = act_tensor_bytes(sh, (ActName)n);
        if (n < ACT_N_OFFLOADABLE && (offload >> n & 1u)) { *off += b; *span += (b + 63) / 64 * 64; }
        else *dev += b;
    }
}

static LayerBills bills_of(const ActShape *sh, unsigned tempo, unsigned offload) {
    LayerBills k;
    kind_bill(sh, RECOMPUTE_NONE, tempo, offload, 0, &k.none, &k.off[K_NONE], &k.span[K_NONE]);
    kind_bill(sh, RECOMPUTE_SELECTIVE, tempo, offload, 0, &k.sel, &k.off[K_SEL], &k.span[K_SEL]);
    kind_bill(sh, RECOMPUTE_FULL, tempo, offload, 0, &k.ck, &k.off[K_CK], &k.span[K_CK]);
    const LayerRecompute kinds[3] = {RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL};
    for (int i = 0; i < 3; i++) kind_bill(sh, kinds[i], tempo, offload, 1, &k.first[i], &k.first_off[i], &k.first_span[i]);
    k.work = act_group_working_bytes(sh, tempo, 1, 1);   // a later layer rebuilt alone; layer 0 below
    k.first_work = act_group_working_bytes(sh, tempo, 0, 1);
    k.extras = act_model_extra_bytes(sh);
    k.emb = act_tensor_bytes(sh, ACT_EMB_MASK);
    return k;
}

// The offload sets tried: none, then the largest tensors of a none layer first, one more at a time
// (each set is the smallest traffic that frees its bytes among sets of as many tensors).
static int offload_sets(const ActShape *sh, unsigned tempo, double offload_budget, unsigned *sets) {
    int n = 0, order[ACT_N_LAYER], k = 0;
    sets[n++] = 0;
    if (offload_budget <= 0) return n;
    for (int a = 0; a < ACT_N_OFFLOADABLE; a++)
        if (act_kept(RECOMPUTE_NONE, 1, tempo, (ActName)a) && act_tensor_bytes(sh, (ActName)a) > 0) order[k++] = a;
    for (int i = 1; i < k; i++)   // by bytes, largest first (insertion sort: ≤ 20 names)
        for (int j = i; j > 0 && act_tensor_bytes(sh, (ActName)order[j]) > act_tensor_bytes(sh, (ActName)order[j - 1]); j--) {
            int x = order[j]; order[j] = order[j - 1]; order[j - 1] = x;
        }
    unsigned set = 0;
    for (int i = 0; i < k; i++) {
        set |= 1u << order[i];
        sets[n++] = set;
    }
    return n;
}

int plan_memory(const ActShape *sh, int threads, double budget, double offload_budget, MemPlan *out) {
    return plan_memory_precision(sh, PRECISION_FP32, NULL, threads, budget, offload_budget, out);
}

int plan_memory_precision(const ActShape *base, Precision precision, Backend *be, int threads, double budget,
                          double offload_budget, MemPlan *out) {
    int L = (int)base->L, t = base->t > 1 ? base->t : 1;
    MemoryPolicy pol;
    policy_default(&pol, L);
    pol.tempo = act_keep_bits(base);   // the arena's entries: LoRA's x·Aᵀ names among them (gpt.c's capacity)
    size_t align = (size_t)act_max_entries(&pol) * 64;
    policy_free(&pol);
    double B = (double)base->b, s = (double)base->s, h = (double)base->h, v = (double)base->v;
    FlopBlock blk = flops_block_of(base);
    double model = (flops_model_block(B, L, s, h, v, &blk) + flops_lora_delta(base, B)) / t, full_flops = flops_recompute_full_block(B, s, h, 1, &blk);
    MemPlan best = {0}, smallest = {0};
    int found = 0, have_smallest = 0;
    MaskMode modes[3] = {MASKS_BYTES, MASKS_BITS, MASKS_REGEN};
    for (int mi = 0; mi < (base->dropout ? 3 : 1); mi++)
        for (unsigned opt = 0; opt < 32; opt++) {
            unsigned tempo = (opt & 7) | (opt & 8 ? MINI_SEQ : 0) | (opt & 16 ? ATTN_FLASH : 0) | act_keep_bits(base);
            if ((tempo & MINI_SEQ) && (tempo & TEMPO_GELU)) continue;      // no GeLU input to replace
            if ((tempo & ATTN_FLASH) && (tempo & TEMPO_SOFTMAX)) continue;  // no softmax output to fuse
            if (!act_tempo_applies(base, tempo)) continue;                  // SwiGLU: no GeLU
            // Mini-seq's recompute is priced for GeLU's MLP (FC1 again): not offered to SwiGLU's (gate and
            // up again), which a run still takes by hand (--mini-seq)
            if (base->swiglu && (tempo & MINI_SEQ)) continue;
            ActShape sh = *base;
            sh.masks = modes[mi];
            sh.gelu_bits = 0;
            sh.mini_seq = tempo & MINI_SEQ ? PLAN_MINI_SEQ : 0;
            unsigned sets[ACT_N_LAYER + 1];
            int n_sets = offload_sets(&sh, tempo, offload_budget, sets);
            for (int oi = 0; oi < n_sets; oi++) {
            LayerBills k = bills_of(&sh, tempo, sets[oi]);
            size_t gemm = plan_gemm_scratch_bytes(&sh, precision, tempo, threads);   // the same for every nf, ns
            double flash_flops = tempo & ATTN_FLASH ? L * flops_recompute_selective(B, s, h) : 0.0;
            double mini_flops = tempo & MINI_SEQ ? L * 8.0 * B * s * h * h : 0.0;
            for (int nf = 0; nf <= L; nf++) {
                // the least memory with nf full layers: every other layer selective
                MemPlan p = {nf, L - nf, modes[mi], tempo, plan_peak(&k, L, nf, L - nf), 0, 0, 0.0, model,
                             passes_of(modes[mi], tempo), sets[oi], plan_pool(&k, L, nf, L - nf), gemm, 0};
                p.arena_bytes = p.act_peak + align;
                p.scratch_bytes = plan_attention_scratch_bytes(be, &sh, threads, tempo, L - nf > 0);
                p.extra_flops = ((L - nf) * flops_recompute_selective(B, s, h) + nf * full_flops + mini_flops + flash_flops) / t;
                size_t total = budget_bytes(&p);
                if ((double)p.pool_bytes > offload_budget) continue;   // even all-selective overflows the pool
                if (!have_smallest || total < budget_bytes(&smallest) ||
                    (total == budget_bytes(&smallest) && better(&p, &smallest))) {
                    smallest = p;
                    have_smallest = 1;
                }
                if ((double)total > budget || (double)p.pool_bytes > offload_budget) continue;
                // memory and the pool fall and FLOPs rise with each selective layer: the fewest that fit
                // (the scratch is selective's as soon as one layer is)
                int lo = 0, hi = L - nf;
                while (lo < hi) {
                    int mid = (lo + hi) / 2;
                    size_t scratch = plan_attention_scratch_bytes(be, &sh, threads, tempo, mid > 0);
                    if ((double)(plan_peak(&k, L, nf, mid) + align + scratch + gemm) <= budget &&
                        (!sets[oi] || (double)plan_pool(&k, L, nf, mid) <= offload_budget))
                        hi = mid;
                    else lo = mid + 1;
                }
                p.n_sel = lo;
                p.act_peak = plan_peak(&k, L, nf, lo);
                p.pool_bytes = plan_pool(&k, L, nf, lo);
                p.arena_bytes = p.act_peak + align;
                p.scratch_bytes = plan_attention_scratch_bytes(be, &sh, threads, tempo, lo > 0);
                p.extra_flops = (lo * flops_recompute_selective(B, s, h) + nf * full_flops + mini_flops + flash_flops) / t;
                if (!found || better(&p, &best)) {
                    best = p;
                    found = 1;
                }
            }
            }
        }
    *out = found ? best : smallest;
    out->weight_copy_bytes = precision == PRECISION_BF16 ? plan_rank_params(base) * sizeof(uint16_t) : 0;
    // The flags name only what some layer of the plan keeps (selective keeps no attn_prob, say).
    unsigned kept = 0;
    int counts[3] = {L - out->n_full - out->n_sel, out->n_sel, out->n_full};
    LayerRecompute kinds[3] = {RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL};
    for (int i = 0; i < 3; i++)
        for (int n = 0; counts[i] > 0 && n < ACT_N_OFFLOADABLE; n++)
            if (act_kept(kinds[i], 1, out->tempo, (ActName)n)) kept |= 1u << n;
    out->offload &= kept;
    return found ? 0 : -1;
}

void plan_policy(const MemPlan *p, const ActShape *sh, MemoryPolicy *pol) {
    policy_default(pol, (int)sh->L);
    pol->act_dtype = sh->elem_bytes == 2 ? ACT_BF16 : ACT_FP32;
    pol->masks = p->masks;
    pol->tempo = p->tempo;
    pol->mini_seq = p->tempo & MINI_SEQ ? PLAN_MINI_SEQ : 0;   // ATTN_FLASH rides in tempo
    pol->offload = p->offload;
    fill_policy(pol, (int)sh->L, p->n_full, p->n_sel);
}

void plan_flags(const MemPlan *p, int layers, char *buf, size_t len) {
    char list[128] = "", tempo[48];
    int k = 0;
    if (p->n_full) k += snprintf(list + k, sizeof list - (size_t)k, "0-%d:full", p->n_full - 1);
    if (p->n_sel)
        k += snprintf(list + k, sizeof list - (size_t)k, "%s%d-%d:selective", k ? "," : "", p->n_full,
                      p->n_full + p->n_sel - 1);
    if (p->n_full + p->n_sel < layers)
        snprintf(list + k, sizeof list - (size_t)k, "%s%d-%d:none", k ? "," : "", p->n_full + p->n_sel, layers - 1);
    char offload[192] = "";
    if (p->offload) {
        char what[160];
        snprintf(offload, sizeof offload, " --offload %s", offload_describe(p->offload, what, sizeof what));
    }
    snprintf(buf, len, "--recompute-layers %s --dropout-masks %s --tempo %s%s%s%s", list, mask_mode_name(p->masks),
             tempo_describe(p->tempo, tempo, sizeof tempo), p->tempo & MINI_SEQ ? " --mini-seq 4" : "",
             p->tempo & ATTN_FLASH ? " --attention flash" : "", offload);
}

int parse_bytes(const char *text, double *out) {
    char *end;
    double v = strtod(text, &end);
    if (end == text || !(v > 0) || !isfinite(v)) return -1;
    static const struct { const char *suffix; double scale; } units[] = {
        {"", 1}, {"B", 1}, {"K", 1024}, {"KB", 1e3}, {"KiB", 1024}, {"M", 1048576}, {"MB", 1e6}, {"MiB", 1048576},
        {"G", 1073741824.0}, {"GB", 1e9}, {"GiB", 1073741824.0}, {"T", 1099511627776.0}, {"TB", 1e12},
        {"TiB", 1099511627776.0}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].suffix) == 0) {
            // above 2^60 bytes (an exabyte) a size means nothing here, and it must fit a size_t (fuzzing)
            if (v * units[i].scale > PARSE_BYTES_MAX) return -1;
            *out = v * units[i].scale;
            return 0;
        }
    return -1;
}
