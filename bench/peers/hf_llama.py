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

--attention sdpa (the default) is transformers' `attn_implementation="sdpa"`
(F.scaled_dot_product_attention, is_causal, enable_gqa where transformers uses it); eager is its
`eager_attention_forward` (repeat_kv, matmul, additive causal mask, fp32 softmax, matmul).

--precision fp32 trains in fp32. --precision bf16 runs the forward and the loss under
torch.autocast("cpu", dtype=torch.bfloat16) (GEMMs on bf16 copies of the weights; transformers'
RMSNorm computes in fp32), backward outside it; master weights, gradients and AdamW state fp32.

--recompute full is transformers' gradient checkpointing of every decoder layer
(gradient_checkpointing_enable, reentrant); --recompute selective checkpoints only the attention
core (the attention function transformers calls, wrapped in torch.utils.checkpoint).

Training: AdamW (lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the 2-D weights, none on
the RMSNorm gains), random token batches from a seeded generator. The output (stdout, one JSON
object per line) is bench/peers/torch_gpt.py's: a record per step {"step", "ms", "loss",
"fwd_ms", "bwd_ms", "opt_ms"}, then one summary {"peer": "torch", "impl": "transformers", ...},
with the saved-activation bytes of step 1's forward counted by torch_gpt.py's SavedTensorMeter
("block<i>" from each decoder layer's forward pre-hook, "head" from the final norm's).

The caller sets OMP_NUM_THREADS / MKL_NUM_THREADS to --threads before Python starts.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch.utils.checkpoint as tcheckpoint  # noqa: E402

import torch_gpt  # noqa: E402  (SavedTensorMeter, _NullMeter, make_optimizer, forward_context)

try:
    import transformers  # noqa: E402
    import transformers.modeling_utils  # noqa: E402  (ALL_ATTENTION_FUNCTIONS)
    from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
    from transformers.models.llama import modeling_llama  # noqa: E402
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
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--recompute", choices=["none", "full", "selective"], default="none")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--attention", choices=["sdpa", "eager"], default="sdpa")
    args = ap.parse_args(argv)
    if args.kv_heads == 0:
        args.kv_heads = args.heads
    for name in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq", "batch", "vocab",
                 "steps", "threads"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} {getattr(args, name)}: expected an integer >= 1")
    if args.hidden % args.heads or args.heads % args.kv_heads:
        ap.error(f"--hidden {args.hidden}, --heads {args.heads}, --kv-heads {args.kv_heads}: "
                 f"expected heads | hidden and kv-heads | heads")
    if args.dropout != 0.0:
        ap.error(f"--dropout {args.dropout}: expected 0 (Llama has no dropout sites but attention's)")
    return args


def build_model(args):
    cfg = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden,
                      intermediate_size=args.ffn_hidden, num_hidden_layers=args.layers,
                      num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                      max_position_embeddings=args.seq, rms_norm_eps=args.norm_eps,
                      rope_parameters={"rope_type": "default", "rope_theta": args.rope_theta},
                      tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                      attention_dropout=0.0, hidden_act="silu", use_cache=False)
    cfg._attn_implementation = args.attention
    model = LlamaForCausalLM(cfg).float()
    if args.recompute == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    elif args.recompute == "selective":
        checkpoint_attention_core(args.attention)
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
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if os.environ.get(var) != str(args.threads):
            print(f"hf_llama.py: warning: {var}={os.environ.get(var)!r}, expected {args.threads} "
                  f"(set it before starting Python)", file=sys.stderr)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = build_model(args)
    model.train()
    opt = torch_gpt.make_optimizer(model, args.lr)
    gen = torch.Generator().manual_seed(args.seed + 1)
    meter = torch_gpt.SavedTensorMeter(model)
    meter_regions(model, meter)

    step_ms, losses, phases = [], [], []
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        idx = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen)
        tgt = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen)
        t_fwd = time.perf_counter()
        meter.region = "embed"
        if step == 1:                  # the warm-up step's forward is metered
            with meter.hooks(), torch_gpt.forward_context(args.precision):
                loss = loss_of(model, idx, tgt, args.vocab)
        else:
            with torch_gpt.forward_context(args.precision):
                loss = loss_of(model, idx, tgt, args.vocab)
        t_bwd = time.perf_counter()
        loss.backward()
        t_opt = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t1 = time.perf_counter()
        ms = (t1 - t0) * 1e3
        lv = loss.item()
        step_ms.append(ms)
        losses.append(lv)
        rec = {"step": step, "ms": round(ms, 3), "loss": lv,
               "fwd_ms": round((t_bwd - t_fwd) * 1e3, 3),
               "bwd_ms": round((t_opt - t_bwd) * 1e3, 3),
               "opt_ms": round((t1 - t_opt) * 1e3, 3)}
        phases.append(rec)
        print(json.dumps(rec), flush=True)

    regions = meter.by_region()
    block_bytes = [regions.get(f"block{i}", 0) for i in range(args.layers)]
    timed = step_ms[1:] if len(step_ms) > 1 else step_ms
    summary = {
        "peer": "torch", "impl": "transformers",
        "torch_version": torch.__version__, "transformers_version": transformers.__version__,
        "precision": args.precision, "attention": args.attention,
        "threads": torch.get_num_threads(),
        "config": {k: getattr(args, k) for k in ("layers", "hidden", "heads", "kv_heads",
                                                 "ffn_hidden", "seq", "batch", "vocab", "dropout",
                                                 "rope_theta", "norm_eps", "steps", "recompute",
                                                 "lr", "seed", "precision", "attention")},
        "n_params": sum(p.numel() for p in model.parameters()),
        "saved_bytes_total": sum(regions.values()),
        "saved_bytes_per_layer": sum(block_bytes) / args.layers,
        "saved_bytes_blocks": block_bytes,
        "saved_bytes_embed": regions.get("embed", 0),
        "saved_bytes_head": regions.get("head", 0),
        "ms_median": statistics.median(timed) if timed else None,
        "ms_steps": [round(m, 3) for m in step_ms],
        "fwd_ms_median": torch_gpt._phase_median(phases, "fwd_ms"),
        "bwd_ms_median": torch_gpt._phase_median(phases, "bwd_ms"),
        "opt_ms_median": torch_gpt._phase_median(phases, "opt_ms"),
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
