#include "arch/lora.h"
#include "memory/param_count.h"

size_t param_layer_count(const ActShape *sh) {
    const ArchSpec *spec = arch_spec((ArchKind)sh->arch);
    size_t t = sh->t > 1 ? (size_t)sh->t : 1, h = (size_t)sh->h, qw = (size_t)act_q_width(sh);
    size_t kvw = (size_t)act_kv_width(sh), f = sh->ffn > 0 ? (size_t)sh->ffn : 4 * h;
    size_t mats = sh->swiglu ? 2 : 1, bias = spec->linear_bias != 0;
    size_t qkv = (qw + 2 * kvw) / t, fl = f / t;
    size_t norms = 2 * (spec->norm == NORM_LAYER ? 2 * h : h) + (sh->qk_norm ? 2 * (size_t)act_head_dim(sh) : 0);   // + q/k norms (replicated)
    size_t in = qkv * h + (bias || sh->qkv_bias ? qkv : 0);   // q, k, v (column-parallel)
    size_t out = (qw / t) * h + bias * h;                    // o (row-parallel; its bias replicated)
    size_t mlp = mats * fl * h + bias * mats * fl + h * fl + bias * h;
    return norms + in + out + mlp;
}

size_t param_final_norm_count(const ActShape *sh) {
    return arch_spec((ArchKind)sh->arch)->norm == NORM_LAYER ? 2 * (size_t)sh->h : (size_t)sh->h;
}

size_t param_position_count(const ActShape *sh) {
    return arch_spec((ArchKind)sh->arch)->pos == POS_LEARNED ? (size_t)sh->s * (size_t)sh->h : 0;
}

int param_vocab_matrices(const ActShape *sh) { return sh->untied ? 2 : 1; }

size_t param_model_count(const ActShape *sh) {
    ActShape one = *sh;
    one.t = 1;
    return (size_t)sh->L * param_layer_count(&one) + (size_t)param_vocab_matrices(sh) * (size_t)sh->v * (size_t)sh->h +
           param_position_count(sh) + param_final_norm_count(sh);
}

size_t param_lora_layer_count(const ActShape *sh, int b_matrices) {
    if (sh->lora_rank <= 0) return 0;
    size_t t = sh->t > 1 ? (size_t)sh->t : 1, h = (size_t)sh->h, qw = (size_t)act_q_width(sh), r = (size_t)sh->lora_rank;
    size_t kvw = (size_t)act_kv_width(sh), f = sh->ffn > 0 ? (size_t)sh->ffn : 4 * h, sum = 0;
    for (int s = 0; s < LORA_SITES; s++) {
        if (!(sh->lora_sites >> s & 1u)) continue;
        const LoraSiteRow *row = lora_site((LoraSite)s);
        size_t in = (size_t)lora_width(row->in, (long)h, (long)qw, (long)kvw, (long)f);
        size_t out = (size_t)lora_width(row->out, (long)h, (long)qw, (long)kvw, (long)f);
        // column-parallel: A [r, in] replicated, B [out/t, r]; row-parallel: A [r, in/t], B [out, r] replicated
        int column = row->parallel == LORA_COLUMN;
        sum += b_matrices ? r * (column ? out / t : out) : r * (column ? in : in / t);
    }
    return sum;
}
