#!/usr/bin/env python3
"""Makes a small random Hugging Face model directory offline, with transformers' own save_pretrained
(docs/HF.md; no hub, nothing downloaded). Run it with the peer venv's python (scripts/peer_env.sh):

    PY=$(bash scripts/peer_env.sh)      # or: bash scripts/peer_env.sh --path, once it is installed
    $PY scripts/hf_tiny_model.py OUT [--family gpt2|llama|mistral|qwen2|qwen3|phi3] [--layers 2] [--hidden 64]
        [--heads 4] [--kv-heads 2] [--ffn 176] [--vocab 256] [--positions 256] [--tied]
        [--rope-theta 10000]
        [--rope-scaling none|linear:F|llama3:F:LOW:HIGH:ORIG|yarn:F:ORIG[:ATT:BF:BS:TRUNC]|dynamic:F]
        [--sliding-window W] [--partial-rotary-factor F] [--dtype float32|bfloat16|float16]
        [--max-shard-size 5GB] [--seed 0]

OUT gets config.json, generation_config.json and model.safetensors (or model-0000K-of-0000N.safetensors
and model.safetensors.index.json when --max-shard-size cuts it), as save_pretrained writes them. The
weights are the class's random initialisation with the norms and biases moved off 1 and 0 (so that
every parameter matters); vocab 256 makes byte-level text usable as data (ctron eval --data FILE).
"""
import argparse
import os
import sys

FAMILIES = {"gpt2": ("GPT2Config", "GPT2LMHeadModel"), "llama": ("LlamaConfig", "LlamaForCausalLM"),
            "mistral": ("MistralConfig", "MistralForCausalLM"), "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
            "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"), "phi3": ("Phi3Config", "Phi3ForCausalLM")}


def rope_parameters(a):
    """rope_parameters of --rope-theta and --rope-scaling (ctron's --rope-scaling syntax)."""
    kind, *nums = a.rope_scaling.split(":")
    p = {"rope_type": "default" if kind == "none" else kind, "rope_theta": a.rope_theta}
    if a.partial_rotary_factor != 1.0:   # phi3: RoPE on int(head_dim · F) dims (Phi-4-mini's 0.75)
        p["partial_rotary_factor"] = a.partial_rotary_factor
    if kind in ("linear", "dynamic"):   # dynamic NTK scales past --positions (max_position_embeddings)
        p["factor"] = float(nums[0])
    elif kind == "llama3":
        p.update(factor=float(nums[0]), low_freq_factor=float(nums[1]), high_freq_factor=float(nums[2]),
                 original_max_position_embeddings=int(nums[3]))
    elif kind == "yarn" and len(nums) in (2, 6):   # YaRN: factor, original context [, attention, betas, truncate]
        p.update(factor=float(nums[0]), original_max_position_embeddings=int(nums[1]))
        if len(nums) == 6:
            p.update(attention_factor=float(nums[2]), beta_fast=float(nums[3]), beta_slow=float(nums[4]),
                     truncate=bool(int(nums[5])))
    elif kind == "longrope" and a.family == "phi3":   # Phi-3's LongRoPE: factors away from 1, per frequency
        half = int((a.head_dim or a.hidden // a.heads) * a.partial_rotary_factor) // 2
        p.update(short_factor=[1.0 + 0.1 * j for j in range(half)], long_factor=[2.0 + 0.5 * j for j in range(half)])
    elif kind != "none":
        sys.exit(f"hf_tiny_model.py: --rope-scaling {a.rope_scaling}: expected none, linear:F, llama3:F:LOW:HIGH:ORIG, "
                 "yarn:F:ORIG[:ATTENTION:BETA_FAST:BETA_SLOW:TRUNCATE], dynamic:F or (phi3) longrope:ORIG")
    return p


def build_config(transformers, a):
    cls = getattr(transformers, FAMILIES[a.family][0])
    if a.family == "gpt2":
        return cls(vocab_size=a.vocab, n_embd=a.hidden, n_layer=a.layers, n_head=a.heads, n_positions=a.positions,
                   tie_word_embeddings=True, bos_token_id=None, eos_token_id=None)
    extra = {"sliding_window": a.sliding_window or None} if a.family in ("mistral", "phi3") else {}
    if a.family == "phi3":   # Phi3Config's default pad id 32000 would lie outside a small vocabulary
        extra["pad_token_id"] = None
        if a.rope_scaling.startswith("longrope:"):   # the context LongRoPE switches at: Phi3Config's own key
            extra["original_max_position_embeddings"] = int(a.rope_scaling.split(":")[1])
    if a.head_dim:   # heads of another width than hidden / heads (Mistral Nemo's config.json has head_dim)
        extra["head_dim"] = a.head_dim
    if a.family == "qwen3":   # Qwen3Config's own default head_dim is 128, not hidden / heads
        extra["head_dim"] = a.head_dim or a.hidden // a.heads
    return cls(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.ffn, num_hidden_layers=a.layers,
               num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, max_position_embeddings=a.positions,
               rms_norm_eps=1e-5, tie_word_embeddings=a.tied,
               rope_parameters=rope_parameters(a),
               bos_token_id=None, eos_token_id=None, **extra)


def make(out, **kw):
    """The model directory OUT (the options of the command line as keywords); returns the model (float32)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    a = parse_args([out] + [f"--{k.replace('_', '-')}={v}" for k, v in kw.items() if v is not True and v is not False]
                   + [f"--{k.replace('_', '-')}" for k, v in kw.items() if v is True])
    if a.family == "gpt2" and not a.tied:
        a.tied = True   # GPT2LMHeadModel ties its output layer
    torch.manual_seed(a.seed)
    model = getattr(transformers, FAMILIES[a.family][1])(build_config(transformers, a))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:   # norms and biases: away from their initial 1 and 0
                p.add_(0.1 * torch.randn_like(p))
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[a.dtype]
    model.to(dtype).save_pretrained(out, max_shard_size=a.max_shard_size)
    return model


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--family", choices=sorted(FAMILIES), default="llama")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=0, help="each head's width (default hidden / heads)")
    p.add_argument("--ffn", type=int, default=176)
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--positions", type=int, default=256)
    p.add_argument("--tied", action="store_true")
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--rope-scaling", default="none")
    p.add_argument("--partial-rotary-factor", type=float, default=1.0,
                   help="phi3: RoPE on the first int(head_dim * F) dims of each head (default 1: all)")
    p.add_argument("--sliding-window", type=int, default=0,
                   help="mistral, phi3: each query attends to its last W positions (default 0: none)")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    p.add_argument("--max-shard-size", default="5GB")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


if __name__ == "__main__":
    args = parse_args(sys.argv[1:])
    if os.path.exists(args.out):
        sys.exit(f"hf_tiny_model.py: error: '{args.out}' exists")
    opts = {k: v for k, v in vars(args).items() if k != "out"}
    make(args.out, **opts)
    print(f"hf_tiny_model.py: wrote a {args.family} model ({args.dtype}) to {args.out}")
