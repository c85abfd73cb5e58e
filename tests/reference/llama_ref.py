#!/usr/bin/env python3
"""transformers reference for ctron's Llama parity (issue 25 item 7): LlamaForCausalLM (Qwen2ForCausalLM
for a qkv bias) in float32 on a Hugging Face model directory; writes logits, loss and every gradient.

Usage: PEER_PYTHON tests/reference/llama_ref.py [--attn eager|sdpa] MODEL_DIR BATCH OUT [MODEL_DIR BATCH OUT ...]
       llama_ref.py --requirements     the pinned versions, one pip requirement a line (scripts/peer_env.sh)
       llama_ref.py --check-versions   exit 0 iff the installed versions are the pins
Several triples share one start of Python (importing torch and transformers takes ~9 s on 2 cores).

MODEL_DIR: what `save_pretrained` writes, and what a ctron export is:
  config.json  model_type "llama" (LlamaForCausalLM), "qwen2" (Qwen2ForCausalLM: Llama + q/k/v biases;
      Llama's own attention_bias flag also gives o_proj a bias, which ctron's qkv_bias has not) or "qwen3"
      (Qwen3ForCausalLM: Llama + per-head q/k RMSNorms, .self_attn.{q,k}_norm.weight [d]) or "phi3"
      (Phi3ForCausalLM: Llama with q|k|v in one .self_attn.qkv_proj.weight [(a+2k)*d, h] and gate|up in one
      .mlp.gate_up_proj.weight [2f, h]; its RoPE may be "longrope", whose short or long factors
      transformers picks by the batch's length) or "mistral" (MistralForCausalLM: Llama's tensors). phi3
      and mistral take a sliding_window (null: none; key j seen by query i iff i - j < W). Keys:
      vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
      num_key_value_heads, rms_norm_eps, max_position_embeddings, tie_word_embeddings, hidden_act
      ("silu"), attention_bias, and the RoPE base either as transformers 5 writes it
      ("rope_parameters": {"rope_theta": T, "rope_type": "default"}) or as 4.x did (top-level
      "rope_theta"; a 4.x "rope_scaling" is refused: ctron has plain RoPE only). head_dim (d), when
      given, is any even width (q and the attention output are a*d wide); else hidden_size / heads.
  model.safetensors  every parameter under its HF name, F32, nn.Linear orientation [out, in]
      (y = x W^T + b): model.embed_tokens.weight [v, h]; per layer i model.layers.i.input_layernorm.weight
      [h], .self_attn.{q,k,v,o}_proj.weight ([a*d, h], [k*d, h], [k*d, h], [h, a*d]; rows head-major,
      d = h/a), qwen2: .self_attn.{q,k,v}_proj.bias, .post_attention_layernorm.weight [h],
      .mlp.{gate,up}_proj.weight [f, h], .mlp.down_proj.weight [h, f]; model.norm.weight [h];
      lm_head.weight [v, h] only when untied. Loaded strictly: any missing, unexpected or
      mis-shaped tensor, or a dtype other than F32, is an error.
BATCH: a safetensors file with tokens and targets, I32 [s, b], ctron's sequence-major layout (element
  [si, bi] is position si of sequence bi; transposed here to HF's [b, s]). targets are the next tokens
  already: the loss is the mean cross-entropy over all s*b positions, with no shift (HF's `labels`
  would shift them).
OUT: a safetensors file: loss F32 [1]; logits F32 [s, b, v] (sequence-major, as ctron's); grad.NAME
  F32 with NAME's shape for every tensor of model.safetensors (tied: grad.model.embed_tokens.weight
  holds both the embedding's and the output layer's parts). Metadata: the versions and attention.

Float32 throughout, as transformers runs it (its RMSNorm, softmax and rotary tables are fp32 anyway):
model.eval() (no dropout), use_cache=False, torch.manual_seed(0), deterministic algorithms.
"""
import json
import os
import sys

# The reference's versions, pinned here (scripts/peer_env.sh installs exactly these: --requirements).
PINS = {"torch": "2.15.0", "transformers": "5.24.0", "safetensors": "0.8.0", "numpy": "2.4.6", "peft": "0.21.2",
        "tokenizers": "0.23.3", "sentencepiece": "0.2.3"}
ATTN_CHOICES = ("eager", "sdpa")
FAMILIES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
            "phi3": "Phi3ForCausalLM", "mistral": "MistralForCausalLM"}


class RefError(Exception):
    """Bad input: main prints it as `llama_ref.py: error: ...` and exits 2."""


def version_mismatches():
    from importlib.metadata import PackageNotFoundError, version
    bad = []
    for pkg, want in PINS.items():
        try:
            have = version(pkg)
        except PackageNotFoundError:
            have = None
        if have != want:
            bad.append(f"{pkg} {have or 'not installed'} (pinned {want})")
    return bad


def rope_theta(cfg, where):
    """The RoPE base from a config.json of either generation: transformers 5's rope_parameters or 4.x's
    top-level rope_theta (default 10000 in both)."""
    params = cfg.get("rope_parameters")
    if params is not None:
        if not isinstance(params, dict):
            raise RefError(f"{where}: rope_parameters is {params!r}, expected an object")
        kind, theta = params.get("rope_type", "default"), params.get("rope_theta", cfg.get("rope_theta", 10000.0))
    else:
        scaling = cfg.get("rope_scaling")
        kind = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
        theta = cfg.get("rope_theta", 10000.0)
    if kind == "longrope" and cfg.get("model_type") == "phi3":   # Phi-3's LongRoPE: its factors are checked below
        pass
    elif kind != "default":
        raise RefError(f"{where}: rope_type '{kind}' (expected 'default', or 'longrope' for phi3: ctron's parity cases)")
    if not isinstance(theta, (int, float)) or isinstance(theta, bool) or not theta > 1.0:
        raise RefError(f"{where}: rope_theta {theta!r} (expected a number > 1)")
    return float(theta)


def read_config(model_dir):
    where = os.path.join(model_dir, "config.json")
    try:
        with open(where) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        raise RefError(f"{where}: {e}")
    if not isinstance(cfg, dict):
        raise RefError(f"{where}: not a JSON object")
    family = cfg.get("model_type")
    if family not in FAMILIES:
        raise RefError(f"{where}: model_type {family!r} (expected one of {', '.join(FAMILIES)})")
    need = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
    for key in need:
        if not isinstance(cfg.get(key), int) or cfg[key] < 1:
            raise RefError(f"{where}: {key} is {cfg.get(key)!r}, expected a positive integer")
    h, a = cfg["hidden_size"], cfg["num_attention_heads"]
    # Qwen2Config's default for a missing num_key_value_heads is 32, not the heads: make it explicit.
    kv = cfg.get("num_key_value_heads", a)
    d = cfg.get("head_dim")
    if not isinstance(kv, int) or kv < 1 or a % kv or (d is None and h % a):
        raise RefError(f"{where}: heads {a}, kv heads {kv!r}, hidden {h}: need kv | heads (| hidden without head_dim)")
    if d is not None and (not isinstance(d, int) or d < 2 or d % 2):
        raise RefError(f"{where}: head_dim {d!r} (expected an even positive integer)")
    if family == "qwen3" and d is None:
        raise RefError(f"{where}: qwen3 without head_dim (Qwen3Config's default is 128, not hidden/heads: write it)")
    if cfg.get("hidden_act", "silu") != "silu":
        raise RefError(f"{where}: hidden_act {cfg['hidden_act']!r} (expected 'silu')")
    window = cfg.get("sliding_window")
    if family in ("phi3", "mistral") and window is not None and (not isinstance(window, int) or window < 1):
        raise RefError(f"{where}: sliding_window {window!r} (expected null or a positive integer)")
    if family == "mistral" and "sliding_window" not in cfg:
        raise RefError(f"{where}: mistral without sliding_window (MistralConfig's default is 4096: write it)")
    if family in ("qwen2", "qwen3") and cfg.get("use_sliding_window"):
        raise RefError(f"{where}: use_sliding_window true (ctron attends to the whole causal window)")
    return family, cfg, kv, rope_theta(cfg, where)


def check_weight_file(path):
    """Every tensor F32 (a bf16 file would be widened by from_pretrained and hide the harness's dtype)."""
    from safetensors import safe_open
    try:
        with safe_open(path, "np") as f:
            dtypes = {n: f.get_slice(n).get_dtype() for n in f.keys()}
    except Exception as e:  # the library's own parse errors
        raise RefError(f"{path}: {e}")
    bad = sorted(n for n, dt in dtypes.items() if dt != "F32")
    if bad:
        raise RefError(f"{path}: tensors {bad[:4]} are {dtypes[bad[0]]}, expected F32")
    return sorted(dtypes)


def load_model(model_dir, attn):
    """transformers' own loader on the directory, float32, with any missing/unexpected/mis-shaped key an error."""
    import torch
    import transformers
    family, cfg, kv, theta = read_config(model_dir)
    names = check_weight_file(os.path.join(model_dir, "model.safetensors"))
    tied = bool(cfg.get("tie_word_embeddings", False))
    if tied and "lm_head.weight" in names:    # transformers would quietly untie them
        raise RefError(f"{model_dir}: tie_word_embeddings is true but model.safetensors holds lm_head.weight")
    cls = getattr(transformers, FAMILIES[family])
    model, info = cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attn,
                                      output_loading_info=True, local_files_only=True)
    problems = {k: sorted(v) for k, v in info.items() if v}
    if problems:
        raise RefError(f"{model_dir}: the weights do not load strictly: {problems}")
    if tied != (model.lm_head.weight is model.model.embed_tokens.weight):
        raise RefError(f"{model_dir}: tie_word_embeddings {tied} but transformers tied={not tied}")
    params = dict(model.named_parameters())      # a tied lm_head.weight is embed_tokens.weight's alias
    if sorted(params) != names:
        raise RefError(f"{model_dir}: model.safetensors names {sorted(set(names) ^ set(params))} "
                       f"differ from {FAMILIES[family]}'s parameters")
    # The RoPE base really used: transformers' inverse frequencies against θ^(-2j/d) from config.json (d: the
    # rotated dims, int(head_dim · partial_rotary_factor) for Phi-3's partial rotary).
    rope = cfg.get("rope_parameters") or {}
    d = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    d = int(d * rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0)))
    want = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    if rope.get("rope_type") == "longrope":   # before any forward: the short factors (the long ones past the original)
        want = want / torch.tensor(rope["short_factor"], dtype=torch.float64)
    got = model.model.rotary_emb.inv_freq.double()
    if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-6, atol=0):
        raise RefError(f"{model_dir}: transformers' rotary frequencies are not rope_theta {theta}'s")
    if model.config.num_key_value_heads != kv:
        raise RefError(f"{model_dir}: transformers read {model.config.num_key_value_heads} kv heads, config says {kv}")
    if getattr(model.config, "sliding_window", None) != cfg.get("sliding_window"):
        raise RefError(f"{model_dir}: transformers read sliding_window {model.config.sliding_window!r}, config says "
                       f"{cfg.get('sliding_window')!r}")
    model.eval()
    return model, cfg


def read_batch(path, vocab):
    import numpy as np
    from safetensors.numpy import load_file
    try:
        t = load_file(path)
    except Exception as e:
        raise RefError(f"{path}: {e}")
    if set(t) != {"tokens", "targets"}:
        raise RefError(f"{path}: holds {sorted(t)}, expected exactly tokens and targets")
    tok, tgt = t["tokens"], t["targets"]
    for n, x in (("tokens", tok), ("targets", tgt)):
        if x.dtype != np.int32 or x.ndim != 2 or x.shape != tok.shape or x.size == 0:
            raise RefError(f"{path}: {n} is {x.dtype} {list(x.shape)}, expected int32 [s, b] like tokens")
        if x.min() < 0 or x.max() >= vocab:
            raise RefError(f"{path}: {n} has ids outside [0, {vocab})")
    return tok, tgt


def reference(model_dir, batch_path, out_path, attn="eager"):
    """One parity case: forward, mean cross-entropy, backward; writes OUT and returns its tensors."""
    import numpy as np
    import torch
    import transformers
    from safetensors.numpy import save_file
    torch.manual_seed(0)
    model, cfg = load_model(model_dir, attn)
    tok, tgt = read_batch(batch_path, cfg["vocab_size"])
    s, b = tok.shape
    if s > cfg.get("max_position_embeddings", s):
        raise RefError(f"{batch_path}: s = {s} exceeds max_position_embeddings {cfg['max_position_embeddings']}")
    ids = torch.from_numpy(tok.T.astype(np.int64)).contiguous()                      # [b, s]
    labels = torch.from_numpy(tgt.T.astype(np.int64)).reshape(-1)
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=ids, use_cache=False).logits                             # [b, s, v]
    loss = torch.nn.functional.cross_entropy(logits.float().reshape(s * b, -1), labels)
    loss.backward()
    out = {"loss": np.array([loss.item()], dtype=np.float32),
           "logits": logits.detach().transpose(0, 1).contiguous().numpy().astype(np.float32)}  # [s, b, v]
    for name, p in model.named_parameters():
        if p.grad is None:
            raise RefError(f"{model_dir}: {name} got no gradient")
        out["grad." + name] = p.grad.detach().numpy().astype(np.float32)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__, "attn": attn,
            "class": type(model).__name__}
    save_file(out, out_path, metadata=meta)
    return out


def main(argv):
    args = argv[1:]
    if args == ["--requirements"]:
        print("\n".join(f"{k}=={v}" for k, v in PINS.items()))
        return 0
    if args == ["--check-versions"]:
        bad = version_mismatches()
        print("llama_ref.py: " + ("; ".join(bad) if bad else "versions are the pins"))
        return 1 if bad else 0
    attn = "eager"
    if args[:1] == ["--attn"]:
        if len(args) < 2 or args[1] not in ATTN_CHOICES:
            print(f"llama_ref.py: error: --attn {args[1] if len(args) > 1 else ''!r} (expected one of "
                  f"{', '.join(ATTN_CHOICES)})", file=sys.stderr)
            return 2
        attn, args = args[1], args[2:]
    if not args or len(args) % 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    bad = version_mismatches()
    if bad:
        print(f"llama_ref.py: error: not the pinned versions: {'; '.join(bad)} (run scripts/peer_env.sh "
              f"and use the python it prints)", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import torch
    torch.use_deterministic_algorithms(True)
    try:
        for i in range(0, len(args), 3):
            out = reference(*args[i:i + 3], attn=attn)
            print(f"llama_ref: {args[i]}: loss {out['loss'][0]:.7f} ({attn})")
    except RefError as e:
        print(f"llama_ref.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
