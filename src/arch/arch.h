// Model families as data (DESIGN.md §10): what differs between GPT-2 and Llama is one row of
// ARCH_TABLE, and the block (model/gpt.c) switches on these enums, never on the family's name.
// Below model/, memory/ and io/: everything that needs to know a family's parts includes this.
#ifndef CTRON_ARCH_H
#define CTRON_ARCH_H

typedef enum { ARCH_GPT2, ARCH_LLAMA, ARCH_COUNT } ArchKind;
typedef enum { NORM_LAYER, NORM_RMS } NormKind;          // LayerNorm (mean, 1/std, w, b) or RMSNorm (1/rms, w)
typedef enum { MLP_GELU, MLP_SWIGLU } MlpKind;           // FC2(GeLU(FC1 x + b)) or Down(SiLU(Gate x) ⊙ Up x)
typedef enum { POS_LEARNED, POS_ROPE } PosKind;          // a position-embedding table, or rotary q and k
typedef enum { FFN_4H, FFN_8H_3 } FfnDefault;            // the FFN width when --ffn-hidden is not given

typedef struct {
    const char *name;             // --arch and state.json's model.arch
    NormKind norm;
    MlpKind mlp;
    PosKind pos;
    int linear_bias;              // every linear has a bias (GPT-2); llama has none (qkv_bias is a knob)
    int tied_default;             // the output layer is the token embedding unless said otherwise
    int can_untie, can_group_kv;  // knobs the family accepts (GPT-2: tied, MHA, 4h only)
    FfnDefault ffn_default;
    float norm_eps_default;
    float dropout_default;
} ArchSpec;

const ArchSpec *arch_spec(ArchKind k);
// The family called `name`, or -1 (the caller names the choices: arch_choices).
int arch_from_name(const char *name);
const char *arch_choices(void);   // "gpt2|llama"
// The FFN width a family uses when it is not given: 4h, or Llama's ⌈(8h/3) / 64⌉·64 (768 → 2048).
long arch_default_ffn(ArchKind k, long hidden);
#endif
