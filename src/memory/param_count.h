// Parameters of the model an ActShape describes, from its shape and its family's row (arch/arch.h)
// alone: what model/params.c lays out, without including model/ (tests/test_memory_llama.c holds the
// two equal). Per tensor-parallel rank: column-parallel weights and biases (q, k, v, the MLP's input
// linears) hold 1/t of their rows, row-parallel weights (o, down) 1/t of their columns; norms and the
// row-parallel biases are replicated. The vocabulary-sized matrices are the caller's to place (which
// stage holds them, and its rows per rank).
#ifndef CTRON_PARAM_COUNT_H
#define CTRON_PARAM_COUNT_H
#include <stddef.h>
#include "memory/memory_model.h"

// One block on one rank (sh->t; t divides a, kv and the FFN width). GPT-2: 12h²/t + 7h/t + 6h.
// Llama: (h + 2·kv·d)·h/t + h²/t + 3·f·h/t + 2h (q, k, v, o, gate, up, down, two RMSNorm weights).
size_t param_layer_count(const ActShape *sh);
// The final norm (LayerNorm: weight and bias, 2h; RMSNorm: h) and the learned position table (s·h;
// 0 for RoPE): the model-level tensors that are not vocabulary-sized.
size_t param_final_norm_count(const ActShape *sh);
size_t param_position_count(const ActShape *sh);
// Vocabulary-sized matrices of the whole model: the token embedding, and the output layer when untied.
int param_vocab_matrices(const ActShape *sh);
// The whole model at t = 1, p = 1: gpt_num_params.
size_t param_model_count(const ActShape *sh);
// LoRA (arch/lora.h): one block's adapter matrices on one rank, A's (b_matrices 0) or B's (1), over the
// shape's lora_sites: Σ r·in (A) and Σ out·r (B), with the TP split of each site (model/adapters.c).
size_t param_lora_layer_count(const ActShape *sh, int b_matrices);
#endif
