#include "memory/memory_model.h"
#include "arch/lora.h"
#include "memory/memo_model.h"
#include "memory/reversible_model.h"

// Per rank: TP splits heads and the 4h dimension; SP additionally splits the sequence of the
// tensors TP leaves replicated (LN inputs, column-parallel inputs, residual dropout masks).
size_t act_elements(const ActShape *sh, ActName name) {
    size_t t = sh->t > 1 ? (size_t)sh->t : 1, sp_div = sh->sp ? t : 1;
    size_t sbh = (size_t)(sh->s * sh->b * sh->h), as2b = (size_t)(sh->a * sh->s * sh->s * sh->b);
    size_t rows = (size_t)(sh->s * sh->b);
    size_t f = sh->ffn > 0 ? (size_t)sh->ffn : 4 * (size_t)sh->h;
    size_t sbf = rows * f / t;
    switch (name) {
    case ACT_LM_IN:                          // a frozen output layer (LoRA) needs no input for its gradient
        return sh->mini_seq > 1 || sh->lora_rank > 0 ? 0 : sbh / sp_div;
    case ACT_LN1_IN: case ACT_QKV_IN: case ACT_LN2_IN: case ACT_FC1_IN: case ACT_LNF_IN:
        return sbh / sp_div;
    case ACT_REV_X1: case ACT_REV_X2:        // reversible blocks' two residual streams
        return sh->reversible ? sbh / sp_div : 0;
    case ACT_LM_GRAD:                        // every row's partial sum (TP reduces it in backward)
        return sh->mini_seq > 1 ? sbh : 0;
    case ACT_Q: case ACT_PROJ_IN:            // a·d wide (h unless head_dim says otherwise)
        return rows * (size_t)act_q_width(sh) / t;
    case ACT_K: case ACT_V:                  // kv·d wide (grouped-query attention)
        return rows * (size_t)act_kv_width(sh) / t;
    case ACT_Q_NORM_IN:                      // the per-head norms' inputs (Qwen3), as wide as q and k
        return sh->qk_norm ? rows * (size_t)act_q_width(sh) / t : 0;
    case ACT_K_NORM_IN:
        return sh->qk_norm ? rows * (size_t)act_kv_width(sh) / t : 0;
    case ACT_Q_NORM_STATS:                   // 1/rms per row and head
        return sh->qk_norm ? rows * (size_t)sh->a / t : 0;
    case ACT_K_NORM_STATS:
        return sh->qk_norm ? rows * (size_t)(sh->kv > 0 ? sh->kv : sh->a) / t : 0;
    case ACT_GELU_IN: case ACT_FC2_IN: case ACT_GELU_BRANCH: case ACT_GELU_CODE:
        return sh->swiglu ? 0 : sbf;
    case ACT_GATE: case ACT_UP:
        return sh->swiglu ? sbf : 0;
    case ACT_ATTN_PROB:
        return as2b / t;
    case ACT_ATTN_MASK: case ACT_ATTN_DROP:
        return sh->dropout ? as2b / t : 0;   // without dropout attn_drop is attn_prob itself
    case ACT_DROP1_MASK: case ACT_DROP2_MASK:
        return sh->dropout ? sbh / sp_div : 0;
    case ACT_EMB_MASK:                       // a frozen embedding (LoRA) has no backward
        return sh->dropout && sh->lora_rank <= 0 ? sbh / sp_div : 0;
    case ACT_ATTN_LSE:
        return (size_t)(sh->a * sh->s * sh->b) / t;   // one per query row and head
    case ACT_LN1_STATS: case ACT_LN2_STATS: case ACT_LNF_STATS:
        return (sh->rms_norm ? 1 : 2) * rows / sp_div;   // LayerNorm: mean and 1/std per row; RMSNorm: 1/rms
    case ACT_LOGITS:
        if (sh->mini_seq > 1) return 0;
        return rows * (((size_t)sh->v + t - 1) / t);   // vocabulary-parallel, padded to a multiple of t
    default:                                 // LoRA's x·Aᵀ: every row on every TP rank
        if (act_is_lora(name) && sh->lora_rank > 0 && (sh->lora_sites >> (name - ACT_LORA_Q) & 1u))
            return rows * (size_t)sh->lora_rank;
        return 0;
    }
}

void act_shape_set_family(ActShape *sh, ArchKind arch, long kv, long ffn, int tie, int qkv_bias, int qk_norm) {
    const ArchSpec *spec = arch_spec(arch);
    sh->arch = (int)arch;
    sh->kv = kv > 0 ? kv : sh->a;
    sh->ffn = ffn > 0 ? ffn : arch_default_ffn(arch, sh->h);
    sh->rms_norm = spec->norm == NORM_RMS;
    sh->swiglu = spec->mlp == MLP_SWIGLU;
    sh->untied = tie ? tie < 0 : !spec->tied_default;
    sh->qkv_bias = qkv_bias != 0;
    sh->qk_norm = qk_norm != 0;
}

unsigned act_keep_bits(const ActShape *sh) {
    unsigned qk = sh->qk_norm ? QK_NORM_REBUILD : 0;
    if (sh->lora_rank <= 0) return qk;
    return qk | LORA_FROZEN | (sh->lora_fa ? LORA_FA : 0) | sh->lora_sites << LORA_TARGET_SHIFT;
}

int act_tempo_applies(const ActShape *sh, unsigned tempo) {
    return !(sh->swiglu && (tempo & (TEMPO_GELU | GELU_FEWBIT)));
}

int act_in_block(const ActShape *sh, ActName name) {
    switch (name) {
    case ACT_GELU_IN: case ACT_FC2_IN: case ACT_GELU_BRANCH: case ACT_GELU_CODE: return !sh->swiglu;
    case ACT_GATE: case ACT_UP: return sh->swiglu;
    case ACT_Q_NORM_IN: case ACT_K_NORM_IN: case ACT_Q_NORM_STATS: case ACT_K_NORM_STATS: return sh->qk_norm;
    default:
        if (act_is_lora(name)) return sh->lora_rank > 0 && (sh->lora_sites >> (name - ACT_LORA_Q) & 1u);
        return 1;
    }
}

size_t act_tensor_bytes(const ActShape *sh, ActName name) {
    size_t n = act_elements(sh, name);
    if (name == ACT_GELU_CODE) return (n * (size_t)sh->gelu_bits + 7) / 8;
    if (act_is_bits(name)) return (n + 7) / 8;
    if (act_is_mask(name))
        return sh->masks == MASKS_BYTES ? n : sh->masks == MASKS_BITS ? (n + 7) / 8 : 0;
    return n * (act_is_fp32_always(name) ? 4 : (size_t)sh->elem_bytes);
}

// Sites (bits of LoraSite) whose A's gradient reads each linear input.
static unsigned lora_readers(ActName name) {
    switch (name) {
    case ACT_QKV_IN: return 1u << LORA_Q | 1u << LORA_K | 1u << LORA_V | 1u << LORA_QKV;
    case ACT_PROJ_IN: return 1u << LORA_O | 1u << LORA_PROJ;
    case ACT_FC1_IN: return 1u << LORA_GATE | 1u << LORA_UP | 1u << LORA_FC | 1u << LORA_GATE_UP;
    case ACT_FC2_IN: return 1u << LORA_FC2;   // llama's down input is SwiGLU's output, made again from gate, up
    default: return 0;
    }
}

// With the base frozen (LoRA) a linear's input is read in backward only by: A's gradient of an adapted
// site (not under LoRA-FA); Tempo's LayerNorm backward from its output (qkv_in, fc1_in); Tempo's GeLU
// backward from its output (fc2_in); flash attention's backward, which reads the output O (proj_in).
// docs/LORA.md has the table of every backward consumer.
static int lora_input_read(unsigned tempo, ActName name) {
    unsigned sites = tempo >> LORA_TARGET_SHIFT;
    if (!(tempo & LORA_FA) && (sites & lora_readers(name))) return 1;
    switch (name) {
    case ACT_QKV_IN: return (tempo & TEMPO_LAYERNORM) != 0;
    case ACT_FC1_IN: return (tempo & (TEMPO_LAYERNORM | MINI_SEQ)) != 0;   // mini-seq's MLP runs FC1 again
    case ACT_FC2_IN: return (tempo & TEMPO_GELU) != 0;
    case ACT_PROJ_IN: return (tempo & ATTN_FLASH) != 0;
    default: return 1;
    }
}

// The mask parts sit between LoRA's site bits and the other parts (model/policy.h).
_Static_assert(LORA_TARGET_SHIFT + LORA_SITES <= 21, "LoRA's site bits overlap RECOMPUTE_ATTN_MASK");

unsigned act_mask_part(ActName name) {
    switch (name) {
    case ACT_ATTN_MASK: return RECOMPUTE_ATTN_MASK;
    case ACT_DROP1_MASK: return RECOMPUTE_DROP1_MASK;
    case ACT_DROP2_MASK: return RECOMPUTE_DROP2_MASK;
    default: return 0;
    }
}

int act_kept(LayerRecompute kind, int group_start, unsigned tempo, ActName name) {
    if (kind == RECOMPUTE_FULL) return group_start && name == ACT_LN1_IN;   // only a group's input, the checkpoint
    // LoRA: each adapted site's x·Aᵀ ([s·b, r], kept whole by a memo layer too)
    int lora_v = act_is_lora(name) && (tempo & LORA_FROZEN) && (tempo >> (LORA_TARGET_SHIFT + (name - ACT_LORA_Q)) & 1u);
    if (kind == RECOMPUTE_MEMO) return name == ACT_LN1_IN || lora_v;   // its input (and x·Aᵀ); the rest swapped or recomputed
    // Mini-seq: the MLP's inner tensors are recomputed chunk by chunk, whatever else is asked
    if ((name == ACT_GELU_IN || name == ACT_FC2_IN || name == ACT_GELU_BRANCH || name == ACT_GELU_CODE ||
         name == ACT_GATE || name == ACT_UP) &&
        (tempo & MINI_SEQ))
        return 0;
    // LoRA: the linears' inputs only where a backward still reads them
    if (act_is_lora(name)) return lora_v;
    // Qwen3: q, k and the norms' 1/rms made again from the norms' inputs in backward
    if ((tempo & QK_NORM_REBUILD) && (name == ACT_Q || name == ACT_K || name == ACT_Q_NORM_STATS || name == ACT_K_NORM_STATS))
        return 0;
    if ((tempo & LORA_FROZEN) && !lora_input_read(tempo, name)) return 0;
    // Flash attention: the log-sum-exp instead of the s×s tensors (both it and O made again by flash's
    // forward under the search's attention part)
    if (name == ACT_ATTN_LSE) return (tempo & ATTN_FLASH) && !(tempo & RECOMPUTE_ATTN_OUT);
    if ((name == ACT_ATTN_PROB || name == ACT_ATTN_MASK || name == ACT_ATTN_DROP) && (tempo & ATTN_FLASH)) return 0;
    // Tempo: what each part keeps instead (policy.h)
    if (name == ACT_GELU_BRANCH) return (tempo & TEMPO_GELU) != 0;
    if (name == ACT_GELU_CODE) return (tempo & GELU_FEWBIT) != 0;
    if (name == ACT_GELU_IN && (tempo & (TEMPO_GELU | GELU_FEWBIT))) return 0;
    if ((name == ACT_LN1_IN || name == ACT_LN2_IN) && (tempo & TEMPO_LAYERNORM)) return 0;
    if (name == ACT_ATTN_DROP && (tempo & TEMPO_SOFTMAX)) return 0;
    // Fusion-aware search's parts (policy.h): the norms' outputs, GeLU's output, the attention's output, q, k,
    // v, the MLP's inner tensors and the attention half's output made again in backward
    if ((name == ACT_QKV_IN || name == ACT_FC1_IN) && (tempo & RECOMPUTE_NORM_OUT)) return 0;
    if (name == ACT_FC2_IN && (tempo & RECOMPUTE_ACT_OUT)) return 0;
    if (name == ACT_PROJ_IN && (tempo & RECOMPUTE_ATTN_OUT)) return 0;
    if (act_is_qkv_out(name) && (tempo & RECOMPUTE_QKV_OUT)) return 0;
    if (name == ACT_LN2_IN && (tempo & RECOMPUTE_PROJ_OUT)) return 0;
    if ((name == ACT_GELU_IN || name == ACT_FC2_IN || name == ACT_GATE || name == ACT_UP) && (tempo & RECOMPUTE_FC1_OUT))
        return 0;
    if (tempo & act_mask_part(name)) return 0;   // one mask drawn again alone
    // selective: the attention core is recomputed from q, k, v
    if (kind == RECOMPUTE_SELECTIVE) return name != ACT_ATTN_PROB && name != ACT_ATTN_MASK && name != ACT_ATTN_DROP;
    return 1;
}

int act_input_grad_dead(const ActShape *sh, int l) {
    return l + sh->first_layer == 0 && sh->lora_rank > 0 && !sh->reversible;
}

// act_kept for a layer of this kind at index l, less what only a dead input gradient's first norm reads.
static int kept_at(const ActShape *sh, LayerRecompute kind, int group_start, unsigned tempo, int l, ActName name) {
    if (!act_kept(kind, group_start, tempo, name)) return 0;
    int dead_none = act_input_grad_dead(sh, l) && (kind == RECOMPUTE_NONE || kind == RECOMPUTE_SELECTIVE);
    // Tempo's norm keeps qkv_in for Norm1's backward from its output, which layer 0 under LoRA does not run:
    // it stays only where an adapter's dA reads it (model/remat.c's parts are refused with Tempo's norm)
    if (name == ACT_QKV_IN && dead_none && (tempo & TEMPO_LAYERNORM))
        return act_kept(kind, group_start, tempo & ~(unsigned)TEMPO_LAYERNORM, name);
    int first_norm = name == ACT_LN1_IN || name == ACT_LN1_STATS;
    // model/remat.c makes qkv_in again from them (NORM_OUT; QKV_OUT where qkv_in is not kept), ln2_in from ln1_in
    int qkv_in_again = (tempo & RECOMPUTE_NORM_OUT) ||
                       ((tempo & RECOMPUTE_QKV_OUT) && !act_kept(RECOMPUTE_NONE, 1, tempo, ACT_QKV_IN));
    int rebuilt_from = qkv_in_again || (tempo & RECOMPUTE_PROJ_OUT);
    return !(first_norm && dead_none && !rebuilt_from);
}

int act_kept_layer(const ActShape *sh, const MemoryPolicy *p, int l, ActName name) {
    LayerRecompute kind = p ? p->kind[l] : RECOMPUTE_NONE;
    return kept_at(sh, kind, p ? p->group_start[l] == l : 1, p ? p->tempo : 0, l, name);
}

int act_kept_rebuilt(const ActShape *sh, unsigned tempo, int l, ActName name) {
    return kept_at(sh, RECOMPUTE_NONE, 1, tempo, l, name);
}

size_t act_layer_name_bytes(const ActShape *sh, const MemoryPolicy *p, int l, ActName name) {
    if (act_offloaded(p, name)) return 0;
    if (sh->reversible && !(p && p->rev_store)) return 0;   // inverted in backward: nothing kept
    return act_kept_layer(sh, p, l, name) ? act_tensor_bytes(sh, name) : 0;
}

size_t act_layer_offload_name_bytes(const ActShape *sh, const MemoryPolicy *p, int l, ActName name) {
    if (!act_offloaded(p, name)) return 0;
    return act_kept_layer(sh, p, l, name) ? act_tensor_bytes(sh, name) : 0;
}

size_t act_layer_names_sum(const ActShape *sh, const MemoryPolicy *p, int l, ActNameBytesFn fn, size_t align) {
    size_t sum = 0;
    for (int n = 0; n < ACT_N_LAYER; n++) sum += (fn(sh, p, l, (ActName)n) + align - 1) / align * align;
    return sum;
}

size_t act_layer_offload_bytes(const ActShape *sh, const MemoryPolicy *p, int l) {
    return act_layer_names_sum(sh, p, l, act_layer_offload_name_bytes, 1);
}

size_t act_layer_offload_span(const ActShape *sh, const MemoryPolicy *p, int l) {
    return act_layer_names_sum(sh, p, l, act_layer_offload_name_bytes, 64);
}

size_t act_offload_stage_bytes(const ActShape *sh, const MemoryPolicy *p) {
    size_t span = 0;
    int layers = 0;
    for (int l = 0; p && p->offload && l < sh->L; l++) {
        size_t x = act_layer_offload_span(sh, p, l);
        layers += x > 0;
        if (x > span) span = x;
    }
    return (layers < 2 ? (size_t)layers : 2) * span;
}

size_t act_offload_pool_bytes(const ActShape *sh, const MemoryPolicy *p) {
    size_t sum = 0;
    for (int l = 0; p && p->offload && l < sh->L; l++) sum += act_layer_offload_bytes(sh, p, l);
    return sum;
}

size_t act_layer_core_bytes(const ActShape *sh, const MemoryPolicy *p, int l) {
    size_t sum = 0;
    for (int n = 0; n < ACT_N_CORE; n++) sum += act_layer_name_bytes(sh, p, l, (ActName)n);
    return sum;
}

size_t act_layer_bytes(const ActShape *sh, const MemoryPolicy *p, int l) {
    size_t sum = 0;
    for (int n = 0; n < ACT_N_LAYER; n++) sum += act_layer_name_bytes(sh, p, l, (ActName)n);
    return sum;
}

size_t act_model_extra_bytes(const ActShape *sh) {
    return act_tensor_bytes(sh, ACT_EMB_MASK) + act_tensor_bytes(sh, ACT_LNF_IN) +
           act_tensor_bytes(sh, ACT_LNF_STATS) + act_tensor_bytes(sh, ACT_LM_IN) + act_tensor_bytes(sh, ACT_LOGITS) +
           act_tensor_bytes(sh, ACT_LM_GRAD) + act_tensor_bytes(sh, ACT_REV_X1) + act_tensor_bytes(sh, ACT_REV_X2);
}

size_t act_forward_end_bytes(const ActShape *sh, const MemoryPolicy *p) {
    size_t sum = act_model_extra_bytes(sh) + act_offload_stage_bytes(sh, p) + act_memo_stage_bytes(sh, p);
    for (int l = 0; l < sh->L; l++) sum += act_layer_bytes(sh, p, l);
    return sum;
}

// What recomputed layer l holds during its backward besides its input: a none-policy layer's bill (with
// the policy's Tempo parts) without ln1_in.
static size_t layer_recomputed_bytes(const ActShape *sh, unsigned tempo, int l) {
    size_t sum = 0;
    for (int n = 0; n < ACT_N_LAYER; n++)
        if (n != ACT_LN1_IN && act_kept_rebuilt(sh, tempo, l, (ActName)n)) sum += act_tensor_bytes(sh, (ActName)n);
    return sum;
}

size_t act_layer_kind_bytes(const ActShape *sh, LayerRecompute kind, int group_start, unsigned tempo) {
    size_t sum = 0;
    for (int n = 0; n < ACT_N_LAYER; n++)
        if (act_kept(kind, group_start, tempo, (ActName)n)) sum += act_tensor_bytes(sh, (ActName)n);
    return sum;
}

size_t act_group_working_bytes(const ActShape *sh, unsigned tempo, int g0, int n) {
    size_t sum = 0;
    for (int l = g0; l < g0 + n; l++) {   // the later layers' inputs are kept too unless Tempo's norm drops them
        sum += layer_recomputed_bytes(sh, tempo, l);
        if (l > g0 && act_kept_rebuilt(sh, tempo, l, ACT_LN1_IN)) sum += act_tensor_bytes(sh, ACT_LN1_IN);
    }
    return sum;
}

size_t act_recompute_working_bytes(const ActShape *sh, const MemoryPolicy *p, int l) {
    if (p && p->kind[l] == RECOMPUTE_MEMO) return act_memo_working_bytes(sh, p, l);
    if (!p || p->kind[l] != RECOMPUTE_FULL) return 0;
    // At the last layer of a group the whole group is recomputed on top of its checkpoint (held
    // already); the later layers' inputs are kept too unless Tempo's LayerNorm drops them.
    int g0 = p->group_start[l];
    int last = l + 1 == sh->L || p->kind[l + 1] != RECOMPUTE_FULL || p->group_start[l + 1] != g0;
    return last ? act_group_working_bytes(sh, p->tempo, g0, l - g0 + 1) : 0;
}

size_t act_peak_bytes(const ActShape *sh, const MemoryPolicy *p) {
    if (sh->reversible) return act_rev_peak_bytes(sh, p);
    size_t peak = act_forward_end_bytes(sh, p);
    // Backward releases the head first, then each layer after its backward. Before layer l's
    // backward the embedding mask and layers 0..l are held, plus what l's policy recomputes (a
    // selective layer recomputes its attention core one (sequence, head) at a time inside the
    // backward, in per-thread workspace: nothing extra is held for it).
    size_t below = act_tensor_bytes(sh, ACT_EMB_MASK) + act_offload_stage_bytes(sh, p) + act_memo_stage_bytes(sh, p);
    for (int l = 0; l < sh->L; l++) {
        size_t held = below + act_layer_bytes(sh, p, l) + act_recompute_working_bytes(sh, p, l);
        if (held > peak) peak = held;
        below += act_layer_bytes(sh, p, l);
    }
    return peak;
}

void act_chunk_bytes(const ActShape *sh, const MemoryPolicy *p, int l0, int l1, size_t *stored, size_t *backward_peak) {
    size_t below = l0 == 0 ? act_tensor_bytes(sh, ACT_EMB_MASK) : 0, layers = 0;
    for (int l = l0; l < l1; l++) layers += act_layer_bytes(sh, p, l);
    size_t head = l1 == sh->L ? act_model_extra_bytes(sh) - act_tensor_bytes(sh, ACT_EMB_MASK) : 0;
    *stored = below + layers + head;
    size_t peak = *stored;
    for (int l = l0; l < l1; l++) {   // before layer l's backward: the layers below it, l, and what l rebuilds
        size_t held = below + act_layer_bytes(sh, p, l) + act_recompute_working_bytes(sh, p, l);
        if (held > peak) peak = held;
        below += act_layer_bytes(sh, p, l);
    }
    *backward_peak = peak;
}

int act_max_entries(const MemoryPolicy *p) {
    // Entries per layer: the per-layer names but the two a family never keeps (GPT-2 has no gate and up,
    // llama no gelu_in, fc2_in or GeLU bits) and the q/k norms' four (never kept, or Qwen3's two inputs kept
    // in place of q and k), LoRA's (one per adapted site), and the model-level tensors.
    int L = p ? p->layers : 0, lora = 0;
    for (unsigned sites = p && (p->tempo & LORA_FROZEN) ? p->tempo >> LORA_TARGET_SHIFT : 0; sites; sites >>= 1)
        lora += sites & 1u;
    return (ACT_Q_NORM_IN - 2 + lora) * L + 9;
}
