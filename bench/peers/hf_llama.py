#!/usr/bin/env python3
"""transformers peer for ctron's llama benchmark: LlamaForCausalLM training steps, fp32 or bf16.

The model is transformers' own `LlamaForCausalLM`, built from a `LlamaConfig` of the benchmark's
shape and randomly initialised (its `_init_weights`: N(0, initializer_range = 0.02), RMSNorm
gains 1), nothing downloaded:

    token embedding [v,h], L pre-RMSNorm decoder layers
        x1 = x  + o_proj(Attn(RoPE(q_proj(n)), RoPE(k_proj(n)), v_proj(n))),  n = RMSNorm(x)
        x2 = x1 + down_proj(SiLU(gate_proj(m)) * up_proj(m)),                  m = RMSNorm(x1)
    final RMSNorm, untied lm_head, mean cross-entropy over all s positions (the logits taken
    to fp32 first, as transformers' own loss does).

No biases, kv_heads = --kv-heads (grouped-query attention when < --heads), intermediate_size =
--ffn-hidden, rope_theta, rms_norm_eps as given, attention_dropout 0 (Llama has no other
dropout; --dropout must be 0).

--sliding-window W builds MistralForCausalLM (MistralConfig: Llama's block, each query attending to its
last W positions, transformers' sliding-window causal mask) instead.

--attention sdpa (the default) is transformers' `attn_implementation="sdpa"`
(F.scaled_dot_product_attention, is_causal, enable_gqa where transformers uses it); eager is its
`eager_attention_forward` (repeat_kv, matmul, additive causal mask, fp32 softmax, matmul).

--precision fp32 trains in fp32. --precision bf16 runs the forward and the loss under
torch.autocast("cpu", dtype=torch.bfloat16) (GEMMs on bf16 copies of the weights; transformers'
RMSNorm computes in fp32), backward outside it; master weights, gradients and AdamW state fp32.

--recompute full is transformers' gradient checkpointing of every decoder layer
(gradient_checkpointing_enable, reentrant); --recompute selective checkpoints only the attention
core (the attention function transformers calls, wrapped in torch.utils.checkpoint).

--lora-rank R wraps the model in peft's LoRA (`get_peft_model`, `LoraConfig(r=R,
lora_alpha=--lora-alpha, target_modules=the --lora-targets modules, lora_dropout=0, bias="none")`):
the base frozen, A Kaiming-uniform, B zero, y = W x + (alpha/r) B(A x). --lora-fa is LoRA-FA: every
lora_A gets requires_grad=False as well, so only the B matrices train. AdamW then holds only the
trainable tensors.

Training: AdamW (lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the 2-D weights, none on
the RMSNorm gains), random token batches from a seeded generator. The output (stdout, one JSON
object per line) is bench/peers/peer_loop.py's (shared with torch_gpt.py): a record per step {"step", "ms", "loss",
"fwd_ms", "bwd_ms", "opt_ms"}, then one summary {"peer": "torch", "impl": "transformers", ...},
with the saved-activation bytes of step 1's forward counted by torch_gpt.py's SavedTensorMeter
(frozen weights are parameters too, so never counted)
("block<i>" from each decoder layer's forward pre-hook, "head" from the final norm's).

The caller sets OMP_NUM_THREADS / MKL_NUM_THREADS to --threads before Python starts.
"""

import argparse
import contextlib
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch.utils.checkpoint as tcheckpoint  # noqa: E402

import peer_loop  # noqa: E402  (the step loop and summary line of both peers)
import torch_gpt  # noqa: E402  (SavedTensorMeter, make_optimizer, forward_context)

try:
    import transformers  # noqa: E402
    import transformers.modeling_utils  # noqa: E402  (ALL_ATTENTION_FUNCTIONS)
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM  # noqa: E402
    from transformers import MistralConfig, MistralForCausalLM  # noqa: E402
    from transformers.models.llama import modeling_llama  # noqa: E402
    import peft  # noqa: E402
except ImportError as e:          # the caller's Python is not the peer venv (scripts/peer_env.sh)
    print(f"hf_llama.py: cannot import transformers: {e} (run it with the venv of "
          f"scripts/peer_env.sh)", file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    ap = argparse.ArgumentParser(description="transformers LlamaForCausalLM peer for ctron benchmarks")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=0, help="key/value heads (default --heads)")
    ap.add_argument("--ffn-hidden", type=int, default=0, help="intermediate_size (required)")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--norm-eps", type=float, default=1e-5)
    ap.add_argument("--qk-norm", action="store_true",
                    help="Qwen3's per-head q/k RMSNorms: transformers' Qwen3ForCausalLM (head_dim hidden/heads)")
    ap.add_argument("--sliding-window", type=int, default=0,
                    help="MistralForCausalLM with this sliding_window (default 0: LlamaForCausalLM)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--recompute", choices=["none", "full", "selective"], default="none")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--attention", choices=["sdpa", "eager"], default="sdpa")
    ap.add_argument("--lora-rank", type=int, default=0,
                    help="train peft LoRA adapters of this rank on a frozen base (default 0: full "
                         "fine-tuning)")
    ap.add_argument("--lora-alpha", type=float, default=8.0, help="peft's lora_alpha (default 8)")
    ap.add_argument("--lora-targets", default=",".join(LORA_TARGETS),
                    help="comma-separated llama linears (default all seven: %(default)s)")
    ap.add_argument("--lora-fa", action="store_true",
                    help="LoRA-FA: lora_A frozen at its initialisation (requires_grad=False)")
    args = ap.parse_args(argv)
    targets = [t for t in args.lora_targets.split(",") if t]
    bad = [t for t in targets if t not in LORA_TARGETS]
    if args.lora_rank < 0 or bad or not targets:
        ap.error(f"--lora-rank {args.lora_rank} --lora-targets {args.lora_targets}: expected a rank "
                 f">= 0 and targets among {','.join(LORA_TARGETS)}")
    if args.lora_fa and not args.lora_rank:
        ap.error("--lora-fa: expected --lora-rank R > 0 beside it")
    args.lora_targets = targets
    if args.kv_heads == 0:
        args.kv_heads = args.heads
    for name in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq", "batch", "vocab",
                 "steps", "threads"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} {getattr(args, name)}: expected an integer >= 1")
    if args.hidden % args.heads or args.heads % args.kv_heads:
        ap.error(f"--hidden {args.hidden}, --heads {args.heads}, --kv-heads {args.kv_heads}: "
                 f"expected heads | hidden and kv-heads | heads")
    if args.sliding_window < 0 or (args.sliding_window and (args.qk_norm or args.recompute == "selective")):
        ap.error(f"--sliding-window {args.sliding_window}: expected an integer >= 0, and not with --qk-norm or "
                 f"--recompute selective (MistralForCausalLM is neither Qwen3's nor modeling_llama's module)")
    if args.qk_norm and args.recompute == "selective":   # checkpoint_attention_core patches modeling_llama's
        ap.error("--qk-norm --recompute selective: the attention-core checkpoint is Llama's module only")
    if args.dropout != 0.0:
        ap.error(f"--dropout {args.dropout}: expected 0 (Llama has no dropout sites but attention's)")
    return args


def build_model(args):
    shape = dict(vocab_size=args.vocab, hidden_size=args.hidden,
                 intermediate_size=args.ffn_hidden, num_hidden_layers=args.layers,
                 num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                 max_position_embeddings=args.seq, rms_norm_eps=args.norm_eps,
                 rope_parameters={"rope_type": "default", "rope_theta": args.rope_theta},
                 tie_word_embeddings=False, attention_bias=False,
                 attention_dropout=0.0, hidden_act="silu", use_cache=False)
    if args.qk_norm:   # Qwen3: its config's head_dim defaults to 128, so it is given
        cfg = Qwen3Config(**shape, head_dim=args.hidden // args.heads, use_sliding_window=False)
    elif args.sliding_window:   # Mistral: Llama's block with a window (head_dim given: MistralConfig's default is None)
        shape.pop("attention_bias")
        cfg = MistralConfig(**shape, sliding_window=args.sliding_window, head_dim=args.hidden // args.heads)
    else:
        cfg = LlamaConfig(**shape, mlp_bias=False)
    cfg._attn_implementation = args.attention
    cls = Qwen3ForCausalLM if args.qk_norm else MistralForCausalLM if args.sliding_window else LlamaForCausalLM
    model = cls(cfg).float()
    if args.recompute == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    elif args.recompute == "selective":
        checkpoint_attention_core(args.attention)
    return model


# ctron's --lora-targets words and the llama modules peft adapts for them.
LORA_TARGETS = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj",
                "gate": "gate_proj", "up": "up_proj", "down": "down_proj"}
CONFIG_KEYS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq", "batch", "vocab",
               "dropout", "rope_theta", "norm_eps", "steps", "recompute", "lr", "seed", "precision",
               "attention", "sliding_window", "lora_rank", "lora_alpha", "lora_targets", "lora_fa")


def add_lora(model, args):
    """peft's LoRA on model's targeted linears (A Kaiming-uniform, B zero, no dropout, no bias),
    the base frozen; under --lora-fa every lora_A frozen too. The model itself without a rank."""
    if not args.lora_rank:
        return model
    cfg = peft.LoraConfig(r=args.lora_rank, lora_alpha=args.lora_alpha, lora_dropout=0.0,
                          bias="none", target_modules=[LORA_TARGETS[t] for t in args.lora_targets])
    model = peft.get_peft_model(model, cfg)
    if args.lora_fa:
        for name, p in model.named_parameters():
            if "lora_A" in name:
                p.requires_grad_(False)
    return model


def checkpoint_attention_core(attention):
    """Wraps the attention function transformers calls (for sdpa: the registered one; for eager:
    modeling_llama's module-level default) in torch.utils.checkpoint: q, k, v are kept, the core
    runs again in backward. The causal mask it is given stays what transformers makes for
    `attention`."""
    base = (transformers.modeling_utils.ALL_ATTENTION_FUNCTIONS["sdpa"] if attention == "sdpa"
            else modeling_llama.eager_attention_forward)

    def core(module, q, k, v, mask, **kw):
        return base(module, q, k, v, mask, **kw)[0]

    def checkpointed(module, q, k, v, mask, **kw):
        out = tcheckpoint.checkpoint(lambda q_, k_, v_: core(module, q_, k_, v_, mask, **kw),
                                     q, k, v, use_reentrant=True)
        return out, None

    if attention == "sdpa":
        transformers.modeling_utils.ALL_ATTENTION_FUNCTIONS["sdpa"] = checkpointed
    else:
        modeling_llama.eager_attention_forward = checkpointed


def meter_regions(model, meter):
    """Forward pre-hooks that tell the meter which decoder layer (or the head) is running."""
    for i, layer in enumerate(model.model.layers):
        layer.register_forward_pre_hook(lambda _m, _a, i=i: setattr(meter, "region", f"block{i}"))
    model.model.norm.register_forward_pre_hook(lambda _m, _a: setattr(meter, "region", "head"))


def loss_of(model, idx, tgt, vocab):
    logits = model(input_ids=idx, use_cache=False).logits
    return F.cross_entropy(logits.float().view(-1, vocab), tgt.reshape(-1))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    peer_loop.check_threads("hf_llama.py", args.threads, ("OMP_NUM_THREADS", "MKL_NUM_THREADS"))
    torch.manual_seed(args.seed)
    llama = build_model(args)
    model = add_lora(llama, args)
    model.train()
    opt = torch_gpt.make_optimizer(model, args.lr)
    meter = torch_gpt.SavedTensorMeter(model)
    meter_regions(llama, meter)

    def forward(idx, tgt, metered):
        meter.region = "embed"
        with (meter.hooks() if metered else contextlib.nullcontext()), \
                torch_gpt.forward_context(args.precision):
            return loss_of(model, idx, tgt, args.vocab)

    recs = peer_loop.train(args, forward, opt)
    extra = {"impl": "transformers", "torch_version": torch.__version__,
             "transformers_version": transformers.__version__,
             "precision": args.precision, "attention": args.attention,
             "config": {k: getattr(args, k) for k in CONFIG_KEYS}}
    if args.lora_rank:
        extra["peft_version"] = peft.__version__
    peer_loop.summary(args, model, meter, recs, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
