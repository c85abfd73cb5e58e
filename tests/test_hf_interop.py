#!/usr/bin/env python3
"""ctron against transformers on Hugging Face model directories (issue 26), with the pinned peer
(tests/reference/llama_ref.py's PINS; run through peer_check.sh). Nothing is downloaded.

1. Import: transformers makes random models with save_pretrained (scripts/hf_tiny_model.py): GPT-2;
   llama with GQA, tied and untied; qwen2 with q/k/v biases; qwen3 with per-head q/k norms; phi3 with fused
   qkv_proj and gate_up_proj; mistral; sliding windows shorter than the sequence (mistral, phi3); head_dim
   other than hidden / heads;
   fp32, bf16 and fp16; sharded and not. `ctron eval --ids --dump --grads` gives transformers' logits and loss (labels = input_ids) to
   1e-5 relative and every gradient to 1e-4 (max-abs normalised, as test_parity_llama), under the
   same names (a tied output layer's gradient in the embedding's).
2. Round trip: ctron trains a few steps and exports; AutoModelForCausalLM.from_pretrained(OUT) loads it
   as it is (GPT2LMHeadModel for ctron's GPT-2) and gives ctron's logits for the checkpoint; a bf16
   export loads as bf16 and gives the logits ctron computes from the export; greedy generation from
   the GPT-2, llama3-scaled RoPE, head_dim and Qwen3 exports is ctron generate's (the KV cache past the original
   context; Qwen3's q/k norms in the cache).
3. --init-from fine-tunes (full, LoRA, LoRA-FA, rsLoRA) of those models: their exports, peft adapter
   directories and merged exports load in transformers / peft and give ctron's logits.
4. End-of-sequence ids: ctron generate ends where transformers' generate ends (generation_config.json's
   eos_token_id list), and the ids travel through --init-from, state.json and export.
5. A Llama 2-style directory (a SentencePiece-style tokenizer.json: legacy normalizer, byte fallback):
   ctron generate encodes the prompt as tokenizers does (BOS first) and continues it as transformers'
   generate; --init-from trains on text through that tokenizer; the export carries it.

usage: PEER_PYTHON test_hf_interop.py CTRON DATA WORKDIR
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import hf_tiny_model  # noqa: E402

LOGIT_TOL, LOSS_TOL, GRAD_TOL = 1e-5, 1e-5, 1e-4
failures = []
passes = 0


def check(ok, what):
    global passes
    if ok:
        passes += 1
    else:
        failures.append(what)
        print("FAIL:", what, flush=True)


def rel(got, ref):
    import numpy as np
    return float(np.abs(got.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30))


def run(*args):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))}: exit {r.returncode}: {r.stderr.strip()[-600:]}")
    return r.stdout


def write_ids(path, ids, dtype):
    import numpy as np
    from safetensors.numpy import save_file
    save_file({"input_ids": ids.astype(dtype)}, path)


def reference(model_dir, ids, dtype=None, grads=True):
    """transformers on model_dir: float32 unless dtype; logits, loss and named gradients as numpy."""
    import torch
    import transformers
    kw = {"dtype": dtype or torch.float32, "attn_implementation": "eager", "local_files_only": True}
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, **kw)
    model.eval()
    x = torch.from_numpy(ids.astype("int64"))
    out = model(input_ids=x, labels=x)
    g = {}
    if grads:
        out.loss.backward()
        g = {n: p.grad.float().numpy() for n, p in model.named_parameters()}
    return model, out.logits.detach().float().numpy(), float(out.loss.detach()), g


def dump(ctron, model, ids_path, out_path, grads=True):
    from safetensors.numpy import load_file
    run(ctron, "eval", "--model", model, "--ids", ids_path, "--dump", out_path, "--threads", "2",
        *(["--grads"] if grads else []))
    return load_file(out_path)


def compare(name, got, logits, loss, grads):
    lr = rel(got["logits"], logits)
    ls = abs(float(got["loss"][0]) - loss) / abs(loss)
    check(lr <= LOGIT_TOL, f"{name}: logits rel {lr:.2e}")
    check(ls <= LOSS_TOL, f"{name}: loss ctron {float(got['loss'][0]):.8f} transformers {loss:.8f} rel {ls:.2e}")
    worst, worst_name = 0.0, ""
    if grads:
        names = sorted(k[5:] for k in got if k.startswith("grad."))
        check(names == sorted(grads), f"{name}: gradient names {sorted(set(names) ^ set(grads))[:4]} differ")
        for n, g in grads.items():
            if "grad." + n in got:
                r = rel(got["grad." + n], g)
                check(got["grad." + n].shape == g.shape, f"{name}: grad.{n} shape {got['grad.' + n].shape} vs {g.shape}")
                check(r <= GRAD_TOL, f"{name}: grad.{n} rel {r:.2e}")
                if r > worst:
                    worst, worst_name = r, n
    print(f"{name:22s} loss {loss:.7f} (rel {ls:.1e}), logits rel {lr:.1e}, worst gradient rel {worst:.1e} {worst_name}",
          flush=True)


IMPORT_CASES = [
    # name, hf_tiny_model options, ids dtype
    ("gpt2", dict(family="gpt2", positions=40), "int64"),
    ("llama_gqa_untied_shard", dict(family="llama", kv_heads=2, max_shard_size="30KB", rope_theta=500000.0), "int32"),
    ("llama_gqa_tied_bf16", dict(family="llama", kv_heads=1, tied=True, dtype="bfloat16"), "int64"),
    ("qwen2_bias_fp16_shard", dict(family="qwen2", kv_heads=2, dtype="float16", max_shard_size="40KB"), "int64"),
    ("mistral_tied", dict(family="mistral", kv_heads=2, tied=True), "int32"),
    ("gpt2_bf16_shard", dict(family="gpt2", positions=24, dtype="bfloat16", max_shard_size="20KB"), "int32"),
    # RoPE scaling at a context where it matters (head dim 16, 19 positions; original context 16): Llama 3.1's
    # llama3 bands all taken (j 0 smoothed, 1..7 divided), and linear position interpolation
    ("llama3_rope_scaling", dict(family="llama", kv_heads=2, rope_scaling="llama3:8:1:4:16"), "int64"),
    ("llama_linear_rope", dict(family="llama", kv_heads=4, rope_theta=500.0, rope_scaling="linear:4"), "int32"),
    # YaRN (Qwen2.5's and Qwen3's long context): original context 4096 puts the ramp on frequencies 3..5 of 8
    # (0..2 extrapolated, 6.. interpolated by 4) and cos, sin × 0.1·ln 4 + 1; and every field given, untruncated
    ("qwen2_yarn_rope", dict(family="qwen2", kv_heads=2, rope_scaling="yarn:4:4096"), "int64"),
    ("llama_yarn_fields", dict(family="llama", kv_heads=1, rope_theta=1000.0, rope_scaling="yarn:8:2048:1.25:16:2:0"),
     "int32"),
    # dynamic NTK: the 19 positions run past max_position_embeddings 8, so the base grows 17-fold
    # (θ·(8·19/8 − 7)^(16/14)); the fine-tune below at 16 positions is past it too
    ("mistral_dynamic_rope", dict(family="mistral", kv_heads=2, positions=8, rope_scaling="dynamic:8"), "int64"),
    # head_dim other than hidden / heads (Mistral Nemo's config.json): heads wider (24 of 64 / 4: q and
    # the attention output 96 wide) and narrower (8, MQA, tied)
    ("mistral_head_dim24", dict(family="mistral", kv_heads=2, head_dim=24), "int64"),
    ("llama_head_dim8_tied", dict(family="llama", kv_heads=1, head_dim=8, tied=True), "int32"),
    # Qwen3: per-head q/k RMSNorms (q_norm, k_norm [d]); tied as its small models, and with wider heads, sharded
    ("qwen3_tied", dict(family="qwen3", kv_heads=2, tied=True, rope_theta=1000000.0), "int64"),
    ("qwen3_head_dim24_shard", dict(family="qwen3", kv_heads=1, head_dim=24, max_shard_size="40KB"), "int32"),
    # Phi-3: q|k|v in one qkv_proj, gate|up in one gate_up_proj (MHA as Phi-3-mini; GQA, bf16, sharded as Phi-4)
    ("phi3_mha", dict(family="phi3", kv_heads=4), "int64"),
    ("phi3_gqa_bf16_shard", dict(family="phi3", kv_heads=2, dtype="bfloat16", max_shard_size="40KB"), "int32"),
    # LongRoPE (Phi-3-mini-128k, Phi-3.5): 19 positions past an original context of 16 take the long factors
    ("phi3_longrope", dict(family="phi3", kv_heads=2, rope_scaling="longrope:16"), "int64"),
    # sliding windows shorter than the 19 positions: Mistral's (GQA) and Phi-3-mini-4k's kind (MHA, bf16)
    ("mistral_window5", dict(family="mistral", kv_heads=2, sliding_window=5), "int32"),
    ("phi3_window7_bf16", dict(family="phi3", kv_heads=4, sliding_window=7, dtype="bfloat16"), "int64"),
    # partial rotary (Phi-4-mini: 0.75 of each head, tied, LongRoPE over the 12 rotated dims' 6 frequencies)
    ("phi4mini_partial_rotary", dict(family="phi3", kv_heads=2, tied=True, partial_rotary_factor=0.75,
                                     rope_scaling="longrope:16"), "int32"),
]


def test_import(ctron, work, rng):
    for i, (name, opts, id_dtype) in enumerate(IMPORT_CASES):
        d = os.path.join(work, name)
        hf_tiny_model.make(d, seed=i, **opts)
        ids = rng.integers(0, 256, size=(3, 19))
        ids_path = os.path.join(work, name + ".ids.safetensors")
        write_ids(ids_path, ids, id_dtype)
        _, logits, loss, grads = reference(d, ids)
        compare(name, dump(ctron, d, ids_path, os.path.join(work, name + ".out.safetensors")), logits, loss, grads)
        if opts.get("sliding_window"):   # the window is not a no-op here: transformers without it is far away
            whole = windowless_logits(d, ids)
            moved = rel(whole, logits)
            check(moved > 100 * LOGIT_TOL, f"{name}: the window changes the logits only by {moved:.1e}: the case "
                                           "would not see it missing")
            print(f"{'':22s} transformers without the window: logits rel {moved:.1e}", flush=True)
        if opts.get("rope_scaling"):   # the scaling is not a no-op here: transformers without it is far away
            plain = unscaled_logits(d, ids, opts.get("rope_theta", 10000.0))
            moved = rel(plain, logits)
            check(moved > 100 * LOGIT_TOL, f"{name}: the scaling changes the logits only by {moved:.1e}: the case "
                                           "would not see it missing")
            print(f"{'':22s} transformers without the scaling: logits rel {moved:.1e} (ctron's: {LOGIT_TOL:.0e} "
                  "tolerance)", flush=True)


def unscaled_logits(model_dir, ids, theta):
    """transformers' logits of model_dir's weights with plain RoPE (its rope_parameters replaced)."""
    import torch
    import transformers
    cfg = transformers.AutoConfig.from_pretrained(model_dir, local_files_only=True)
    cfg.rope_parameters = {"rope_type": "default", "rope_theta": theta}
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, config=cfg, dtype=torch.float32,
                                                              attn_implementation="eager", local_files_only=True)
    with torch.no_grad():
        return model(input_ids=torch.from_numpy(ids.astype("int64"))).logits.float().numpy()


def windowless_logits(model_dir, ids):
    """transformers' logits of model_dir's weights attending to the whole causal prefix (sliding_window None)."""
    import torch
    import transformers
    cfg = transformers.AutoConfig.from_pretrained(model_dir, local_files_only=True)
    cfg.sliding_window = None
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, config=cfg, dtype=torch.float32,
                                                              attn_implementation="eager", local_files_only=True)
    with torch.no_grad():
        return model(input_ids=torch.from_numpy(ids.astype("int64"))).logits.float().numpy()


def train(ctron, data, run_dir, *flags):
    run(ctron, "train", "--layers", 2, "--hidden", 64, "--heads", 4, "--seq", 32, "--batch", 2, "--steps", 4,
        "--eval-every", 0, "--threads", 2, "--data", data, "--ckpt-dir", run_dir, *flags)


def test_round_trip(ctron, data, work, rng):
    import torch
    ids = rng.integers(0, 256, size=(2, 32))
    ids_path = os.path.join(work, "rt.ids.safetensors")
    write_ids(ids_path, ids, "int64")
    cases = [("rt_gpt2", (), ["--max-shard-size", "60KiB"], "GPT2LMHeadModel"),
             ("rt_llama_tied", ("--arch", "llama", "--kv-heads", 2, "--ffn-hidden", 96, "--tie-embeddings"), [],
              "LlamaForCausalLM"),
             ("rt_qwen2", ("--arch", "llama", "--kv-heads", 1, "--ffn-hidden", 96, "--qkv-bias"), [], "Qwen2ForCausalLM"),
             ("rt_llama3_rope", ("--arch", "llama", "--kv-heads", 2, "--ffn-hidden", 96, "--rope-scaling", "llama3:8:1:4:16"),
              [], "LlamaForCausalLM"),
             ("rt_head_dim", ("--arch", "llama", "--kv-heads", 2, "--ffn-hidden", 96, "--head-dim", 24), [], "LlamaForCausalLM"),
             ("rt_qwen3", ("--arch", "llama", "--kv-heads", 2, "--ffn-hidden", 96, "--head-dim", 24, "--qk-norm",
                           "--tie-embeddings"), [], "Qwen3ForCausalLM"),
             ("rt_phi3", ("--arch", "llama", "--kv-heads", 2, "--ffn-hidden", 96, "--fused-proj"), [], "Phi3ForCausalLM"),
             ("rt_mistral_window", ("--arch", "llama", "--kv-heads", 2, "--ffn-hidden", 96, "--sliding-window", 6), [],
              "MistralForCausalLM"),
             ("rt_phi3_rotary", ("--arch", "llama", "--kv-heads", 2, "--ffn-hidden", 96, "--fused-proj", "--rotary-dim", 8,
                                 "--tie-embeddings"), [], "Phi3ForCausalLM")]
    for name, flags, export_flags, cls in cases:
        run_dir, out = os.path.join(work, name), os.path.join(work, name + ".hf")
        train(ctron, data, run_dir, *flags)
        run(ctron, "export", "--hf", out, "--ckpt", run_dir, *export_flags)
        mine = dump(ctron, run_dir, ids_path, os.path.join(work, name + ".out.safetensors"), grads=False)
        # as it is: no dtype, no class named
        import transformers
        model = transformers.AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
        model.eval()
        check(type(model).__name__ == cls, f"{name}: loaded as {type(model).__name__}, expected {cls}")
        check(model.dtype == torch.float32, f"{name}: loaded as {model.dtype}")
        with torch.no_grad():
            logits = model(input_ids=torch.from_numpy(ids)).logits.numpy()
        lr = rel(mine["logits"], logits)
        check(lr <= LOGIT_TOL, f"{name}: transformers on the export vs ctron on the checkpoint: logits rel {lr:.2e}")
        print(f"{name:22s} {cls} loads the export as it is; logits rel {lr:.1e} to ctron's checkpoint", flush=True)
        if name in ("rt_gpt2", "rt_llama3_rope", "rt_head_dim", "rt_qwen3", "rt_phi3", "rt_mistral_window",
                    "rt_phi3_rotary"):
            # greedy generation from the export equals ctron generate's (llama3: the KV cache's positions through
            # the scaled table; head_dim: its widths; the window: the cache's last 6 positions)
            prompt = "In the beginning"
            got = run(ctron, "generate", "--ckpt", run_dir, "--prompt", prompt, "--tokens", 10, "--temperature", 0,
                      "--json", "--threads", 1)
            import json
            theirs = model.generate(torch.tensor([list(prompt.encode())]), max_new_tokens=10, do_sample=False)
            theirs = theirs[0, len(prompt):].tolist()
            check(json.loads(got)["tokens"] == theirs, f"{name}: greedy tokens ctron {json.loads(got)['tokens']} "
                                                        f"transformers {theirs}")
        # bf16: it loads as bf16, and in fp32 it computes what ctron computes from the export
        bf = os.path.join(work, name + ".bf16")
        run(ctron, "export", "--hf", bf, "--ckpt", run_dir, "--dtype", "bf16")
        model16 = transformers.AutoModelForCausalLM.from_pretrained(bf, local_files_only=True)
        check(model16.dtype == torch.bfloat16, f"{name}: the bf16 export loads as {model16.dtype}")
        _, logits, loss, _ = reference(bf, ids, grads=False)
        mine16 = dump(ctron, bf, ids_path, os.path.join(work, name + ".bf16.out.safetensors"), grads=False)
        lr16 = rel(mine16["logits"], logits)
        check(lr16 <= LOGIT_TOL, f"{name}: bf16 export: logits rel {lr16:.2e}")
        check(rel(mine16["logits"], mine["logits"]) > 0, f"{name}: the bf16 export computes the fp32 logits exactly")


def test_fine_tune(ctron, data, work, rng):
    """--init-from a transformers-made model (sharded; fp16), a few steps, export: transformers loads the
    export and computes the fine-tuned checkpoint's logits."""
    import numpy as np
    import torch
    import transformers
    ids = rng.integers(0, 256, size=(2, 16))
    ids_path = os.path.join(work, "ft.ids.safetensors")
    write_ids(ids_path, ids, "int64")
    for src in ("llama_gqa_untied_shard", "qwen2_bias_fp16_shard", "llama3_rope_scaling", "qwen3_head_dim24_shard",
                "phi3_gqa_bf16_shard", "phi3_longrope", "mistral_window5", "phi4mini_partial_rotary", "qwen2_yarn_rope",
                "llama_yarn_fields", "mistral_dynamic_rope"):
        run_dir, out = os.path.join(work, "ft_" + src), os.path.join(work, "ft_" + src + ".hf")
        run(ctron, "train", "--init-from", os.path.join(work, src), "--seq", 16, "--batch", 2, "--steps", 3,
            "--eval-every", 0, "--threads", 2, "--data", data, "--ckpt-dir", run_dir)
        run(ctron, "export", "--hf", out, "--ckpt", run_dir)
        mine = dump(ctron, run_dir, ids_path, os.path.join(work, "ft_" + src + ".out.safetensors"), grads=False)
        _, before, _, _ = reference(os.path.join(work, src), ids, grads=False)
        model = transformers.AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
        with torch.no_grad():
            logits = model(input_ids=torch.from_numpy(ids)).logits.numpy()
        lr = rel(mine["logits"], logits)
        check(lr <= LOGIT_TOL, f"fine-tuned {src}: transformers on the export vs ctron: logits rel {lr:.2e}")
        check(rel(before, logits) > 1e-4, f"fine-tuned {src}: the export computes the source's logits: nothing trained")
        import json
        rope = {k: v for k, v in json.load(open(os.path.join(out, "config.json")))["rope_parameters"].items()}
        theirs = json.load(open(os.path.join(work, src, "config.json")))["rope_parameters"]
        f32 = lambda d: {k: [float(np.float32(x)) for x in v] if isinstance(v, list) else v for k, v in d.items()}
        check(f32(rope) == f32(theirs),   # longrope's factors: float32 values, as transformers uses them
              f"fine-tuned {src}: the export's rope_parameters {rope} are not the source's {theirs}")
        print(f"ft_{src:19s} --init-from, 3 steps, export: transformers' logits rel {lr:.1e} to ctron's", flush=True)


def test_tokenizer_export(ctron, data, work):
    """A BPE run's export: AutoTokenizer loads its tokenizer.json as it is and encodes as tokenizers does."""
    import tokenizers
    import transformers
    text = os.path.join(work, "bpe.txt")
    with open(data, "rb") as f, open(text, "wb") as g:
        g.write(f.read(200000))
    tok = os.path.join(work, "bpe.tokenizer.json")
    run(ctron, "tokenize", "train", "--vocab", 400, "--in", text, "--out", tok)
    run(ctron, "train", "--layers", 1, "--hidden", 32, "--heads", 2, "--seq", 32, "--batch", 2, "--steps", 2,
        "--vocab", 400, "--eval-every", 0, "--threads", 2, "--data", text, "--tokenizer", tok,
        "--ckpt-dir", os.path.join(work, "bpe_run"))
    out = os.path.join(work, "bpe.hf")
    run(ctron, "export", "--hf", out, "--ckpt", os.path.join(work, "bpe_run"))
    auto = transformers.AutoTokenizer.from_pretrained(out, local_files_only=True)
    sample = "And God said, Let there be light: and there was light. 1234 ünïcödé  spaces\n\nend"
    ref = tokenizers.Tokenizer.from_file(os.path.join(out, "tokenizer.json")).encode(sample).ids
    got = auto(sample, add_special_tokens=False)["input_ids"]
    # transformers 5 names its tokenizers-backed class TokenizersBackend (4.x: PreTrainedTokenizerFast)
    check(getattr(auto, "is_fast", False), f"AutoTokenizer loaded {type(auto).__name__}, not a fast tokenizer")
    check(got == ref and len(got) > 10, f"AutoTokenizer's ids {got[:12]}... tokenizers' {ref[:12]}...")
    check(auto.decode(got) == sample, f"AutoTokenizer's decode: {auto.decode(got)!r}")
    print(f"bpe export             AutoTokenizer loads it ({type(auto).__name__}); {len(got)} ids equal tokenizers', decode round-trips",
          flush=True)


def test_eos(ctron, data, work):
    """End-of-sequence ids: generation ends where transformers' generate ends (generation_config.json's
    eos_token_id list), and the ids travel through --init-from, the checkpoint and export."""
    import json
    import torch
    import transformers
    src = os.path.join(work, "llama_gqa_untied_shard")
    prompt = "In the beginning"
    x = torch.tensor([list(prompt.encode())])
    model = transformers.AutoModelForCausalLM.from_pretrained(src, local_files_only=True).eval()
    free = model.generate(x, max_new_tokens=12, do_sample=False)[0, len(prompt):].tolist()
    k = next(i for i in range(3, len(free)) if free[i] not in free[:i])   # its first new token from the 4th on
    d = os.path.join(work, "eos_model")
    shutil.copytree(src, d)
    gen = json.load(open(os.path.join(d, "generation_config.json")))
    gen["eos_token_id"] = [255 if free[k] != 255 else 254, free[k]]   # two ends; the first never drawn here
    json.dump(gen, open(os.path.join(d, "generation_config.json"), "w"))
    model = transformers.AutoModelForCausalLM.from_pretrained(d, local_files_only=True).eval()
    theirs = model.generate(x, max_new_tokens=12, do_sample=False)[0, len(prompt):].tolist()
    got = json.loads(run(ctron, "generate", "--model", d, "--prompt", prompt, "--tokens", 12, "--temperature", 0,
                         "--json", "--threads", 1))
    check(theirs == free[:k + 1], f"transformers did not stop at {free[k]}: {theirs}")
    check(got["tokens"] == theirs and got["stop"] == "eos", f"eos: ctron {got['tokens']} ({got['stop']}), "
                                                           f"transformers {theirs}")
    got = json.loads(run(ctron, "generate", "--model", d, "--prompt", prompt, "--tokens", 12, "--temperature", 0,
                         "--json", "--threads", 1, "--ignore-eos"))
    check(got["tokens"] == free and got["stop"] == "length", f"--ignore-eos: {got['tokens']} ({got['stop']})")
    run_dir, out = os.path.join(work, "eos_run"), os.path.join(work, "eos_run.hf")
    run(ctron, "train", "--init-from", d, "--seq", 16, "--batch", 2, "--steps", 2, "--eval-every", 0, "--threads", 2,
        "--data", data, "--ckpt-dir", run_dir)
    run(ctron, "export", "--hf", out, "--ckpt", run_dir)
    step = sorted(p for p in os.listdir(run_dir) if p.startswith("step_"))[-1]
    state = json.load(open(os.path.join(run_dir, step, "state.json")))["model"]
    exported = [json.load(open(os.path.join(out, f)))["eos_token_id"] for f in ("config.json", "generation_config.json")]
    check(state.get("eos_token_ids") == gen["eos_token_id"] and exported == [gen["eos_token_id"]] * 2,
          f"eos ids through the checkpoint ({state.get('eos_token_ids')}) and export ({exported}): {gen['eos_token_id']}")
    # The source's declared context too: a run at --seq 16 does not shrink it in the export.
    ctx = json.load(open(os.path.join(d, "config.json")))["max_position_embeddings"]
    got_ctx = json.load(open(os.path.join(out, "config.json")))["max_position_embeddings"]
    check(ctx > 16 and state.get("max_position_embeddings") == ctx and got_ctx == ctx,
          f"max_position_embeddings: source {ctx}, state.json {state.get('max_position_embeddings')}, export {got_ctx}")
    print(f"eos                    generation ends at {free[k]} after {k + 1} tokens as transformers'; the ids go "
          "through --init-from, state.json and export", flush=True)


def test_sentencepiece(ctron, data, work):
    """A Llama 2-style model directory: its tokenizer.json is SentencePiece-style BPE (the legacy
    normalizer, byte fallback, the Replace/ByteFallback/Fuse/Strip decoder; the fuzz corpus's
    llama2_legacy_tiny.json, 300 tokens). ctron generate's prompt ids are tokenizers' (with the BOS
    its template adds) and the continuation is transformers' greedy generate; --no-bos drops the BOS;
    --init-from trains on the KJV encoded by it and the export's tokenizer.json is the same file."""
    import json
    import tokenizers
    import torch
    import transformers
    src_tok = os.path.join(HERE, "fuzz", "corpus", "hf_tokenizer", "llama2_legacy_tiny.json")
    tok = tokenizers.Tokenizer.from_file(src_tok)
    d = os.path.join(work, "llama2_sp")
    hf_tiny_model.make(d, family="llama", kv_heads=2, vocab=320, positions=64)
    shutil.copy(src_tok, os.path.join(d, "tokenizer.json"))
    prompt = "In the beginning God créated 中"
    ids = tok.encode(prompt).ids
    check(ids[0] == 1 and any(3 <= i < 259 for i in ids), f"the prompt's ids {ids}: BOS first and byte-fallback tokens")
    model = transformers.AutoModelForCausalLM.from_pretrained(d, local_files_only=True).eval()
    theirs = model.generate(torch.tensor([ids]), max_new_tokens=10, do_sample=False)[0, len(ids):].tolist()
    got = json.loads(run(ctron, "generate", "--model", d, "--prompt", prompt, "--tokens", 10, "--temperature", 0,
                         "--json", "--threads", 1, "--ignore-eos"))
    check(got["prompt_tokens"] == len(ids) and got["tokens"] == theirs,
          f"llama2 tokenizer: ctron {got['prompt_tokens']} prompt ids, {got['tokens']}; transformers {len(ids)}, {theirs}")
    nobos = json.loads(run(ctron, "generate", "--model", d, "--prompt", prompt, "--tokens", 1, "--temperature", 0,
                           "--json", "--threads", 1, "--no-bos"))
    check(nobos["prompt_tokens"] == len(ids) - 1, f"--no-bos: {nobos['prompt_tokens']} prompt ids, want {len(ids) - 1}")
    run_dir, out = os.path.join(work, "llama2_sp_run"), os.path.join(work, "llama2_sp_run.hf")
    log = run(ctron, "train", "--init-from", d, "--seq", 32, "--batch", 2, "--steps", 2, "--eval-every", 0,
              "--threads", 2, "--data", data, "--ckpt-dir", run_dir)
    run(ctron, "export", "--hf", out, "--ckpt", run_dir)
    same = open(os.path.join(out, "tokenizer.json"), "rb").read() == open(src_tok, "rb").read()
    check(same, "the export's tokenizer.json is not the model directory's")
    import re
    kjv_ids = len(tok.encode(open(data, encoding="utf-8").read()).ids)
    m = re.search(r"(\d+) train / (\d+) val tokens", log)
    check(m is not None and int(m.group(1)) + int(m.group(2)) == kjv_ids,
          f"the run's data is not the KJV through the tokenizer ({kjv_ids} ids): {log[:400]}")
    print(f"llama2 tokenizer       generate: {len(ids)} prompt ids (BOS, byte fallback) and 10 tokens as transformers'; "
          f"--init-from trains on {kjv_ids} KJV ids; the export carries tokenizer.json", flush=True)


def test_peft(ctron, data, work, rng):
    """LoRA and LoRA-FA fine-tunes of transformers' own models: the --lora-out directory loads with
    PeftModel.from_pretrained onto the HF base and gives the logits ctron computes for the LoRA
    checkpoint (its adapters merged); the --merge export loads in transformers and gives them too."""
    import torch
    import transformers
    import peft
    ids = rng.integers(0, 256, size=(2, 16))
    ids_path = os.path.join(work, "peft.ids.safetensors")
    write_ids(ids_path, ids, "int64")
    # (mistral_head_dim24: q's adapters B [a·d, r], o's A [r, a·d] with a·d = 96 ≠ h = 64)
    for src, targets in (("llama_gqa_untied_shard", "q,k,v,o,gate,up,down"), ("gpt2", "qkv,proj,fc,fc2"),
                         ("mistral_head_dim24", "q,o,down"), ("qwen3_tied", "q,k,v,o,gate,up,down"),
                         ("phi3_mha", "qkv,o,gate_up,down")):
        for fa in ((), ("--lora-fa",), ("--lora-rslora",)):   # rsLoRA: peft's use_rslora, alpha/sqrt(r)
            name = f"peft_{src}{ {(): '', ('--lora-fa',): '_fa', ('--lora-rslora',): '_rslora'}[fa] }"
            run_dir, out, merged = (os.path.join(work, name + x) for x in ("", ".adapter", ".merged"))
            base = os.path.join(work, src)
            run(ctron, "train", "--init-from", base, "--lora-rank", 4, "--lora-alpha", 16, "--lora-targets", targets,
                *fa, "--lr", "1e-2", "--seq", 16, "--batch", 2, "--steps", 3, "--eval-every", 0, "--threads", 2,
                "--data", data, "--ckpt-dir", run_dir, "--lora-out", out)
            run(ctron, "export", "--hf", merged, "--ckpt", run_dir, "--merge")
            mine = dump(ctron, run_dir, ids_path, os.path.join(work, name + ".out.safetensors"), grads=False)
            model = peft.PeftModel.from_pretrained(
                transformers.AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, local_files_only=True),
                out)
            model.eval()
            x = torch.from_numpy(ids)
            with torch.no_grad():
                theirs = model(input_ids=x).logits.float().numpy()
                plain = model.get_base_model()
                with model.disable_adapter():
                    bare = plain(input_ids=x).logits.float().numpy()
                m2 = transformers.AutoModelForCausalLM.from_pretrained(merged, local_files_only=True).eval()
                merged_logits = m2(input_ids=x).logits.float().numpy()
            lr = rel(mine["logits"], theirs)
            check(lr <= LOGIT_TOL, f"{name}: peft on the adapter directory vs ctron's LoRA checkpoint: logits rel {lr:.2e}")
            check(rel(bare, theirs) > 1e-4, f"{name}: the adapters change nothing: nothing trained")
            lm = rel(mine["logits"], merged_logits)
            check(lm <= LOGIT_TOL, f"{name}: transformers on the --merge export: logits rel {lm:.2e}")
            print(f"{name:34s} PeftModel.from_pretrained: logits rel {lr:.1e}; --merge export {lm:.1e}", flush=True)
            if fa == ("--lora-rslora",):   # the adapter directory onto the HF base, read by ctron: peft's logits
                import json
                check(json.load(open(os.path.join(out, "adapter_config.json")))["use_rslora"] is True,
                      f"{name}: adapter_config.json's use_rslora is not true")
                from safetensors.numpy import load_file
                got = os.path.join(work, name + ".adapter.out.safetensors")
                run(ctron, "eval", "--model", base, "--adapter", out, "--ids", ids_path, "--dump", got, "--threads", 2)
                la = rel(load_file(got)["logits"], theirs)
                check(la <= LOGIT_TOL, f"{name}: ctron eval --model BASE --adapter DIR vs peft: logits rel {la:.2e}")


def main(argv):
    if len(argv) != 4:
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    ctron, data, work = argv[1:]
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    import numpy as np
    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    torch.use_deterministic_algorithms(True)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = np.random.default_rng(26)
    try:
        test_import(ctron, work, rng)
        test_round_trip(ctron, data, work, rng)
        test_fine_tune(ctron, data, work, rng)
        test_tokenizer_export(ctron, data, work)
        test_eos(ctron, data, work)
        test_sentencepiece(ctron, data, work)
        test_peft(ctron, data, work, rng)
    except RuntimeError as e:
        check(False, str(e))
    print(f"{passes} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
