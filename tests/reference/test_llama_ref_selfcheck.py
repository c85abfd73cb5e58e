#!/usr/bin/env python3
"""Self-check of tests/reference/llama_ref.py, the transformers side of ctron's Llama parity, without ctron:
proves it reads the HF names, the [out, in] orientation, the [s, b] batch layout, both config.json
generations and the tying right, by an independent float64 computation in plain torch.

Usage: PEER_PYTHON tests/reference/test_llama_ref_selfcheck.py WORKDIR   (ctest: test_llama_ref)

For tiny random models made offline (GQA, MQA and MHA; tied and untied; FFN 176; rope_theta 5e5 and
1e4; a Qwen2 with q/k/v biases), saved with save_pretrained, it runs llama_ref.py's command line on
them (eager attention; one extra case with SDPA) and asserts:
  1. the loss, the logits [s, b, v] and every parameter's gradient (exactly the names of
     model.safetensors: a tied model has no lm_head) equal the independent computation's: RMSNorm,
     half-split RoPE with θ^(-2j/d) pairing j with j + d/2, query head j reading kv head j // (a/kv),
     SwiGLU and the causal softmax written out, weights read by name from the file as y = x Wᵀ + b;
  2. a transformers 4.x config.json (top-level rope_theta) gives the same bits as transformers 5's
     rope_parameters;
  3. the independent computation with a wrong convention (interleaved RoPE, kv head j % kv, the batch
     read [b, s], RoPE base 10000, the final norm skipped) is far from the reference: the comparison
     can fail;
  4. llama_ref.py refuses a file with an unexpected tensor, a missing tensor, a BF16 tensor, a tied
     config whose file holds lm_head.weight, and RoPE scaling, naming the problem.
"""
import json
import os
import shutil
import subprocess
import sys

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import llama_ref  # noqa: E402
from pycheck import Checks  # noqa: E402

# float64 (independent) against float32 (transformers): measured worst 2.3e-6 relative (loss, logits, gradients
# max-abs normalised; the small norm-weight and bias gradients are the worst) on these cases; a convention
# error is 0.3 or more.
TOL = 1e-5
SEQ, BATCH, VOCAB, LAYERS, HIDDEN, HEADS, FFN = 16, 3, 96, 2, 64, 4, 176

CASES = [  # name, model_type, kv heads, tied, rope_theta
    ("gqa_untied", "llama", 2, False, 5e5),
    ("mqa_tied", "llama", 1, True, 5e5),
    ("mha_untied", "llama", 4, False, 1e4),
    ("gqa_tied_qwen2", "qwen2", 2, True, 5e5),
]

check = Checks(stream=sys.stderr)


def make_model(model_dir, family, kv, tied, theta, seed):
    """A random model saved as transformers saves it, with weights large enough that every part matters:
    RMSNorm weights around 1 (not 1), biases non-zero, projections ~1/sqrt(fan_in)."""
    import transformers
    cfg_cls = transformers.LlamaConfig if family == "llama" else transformers.Qwen2Config
    model_cls = transformers.LlamaForCausalLM if family == "llama" else transformers.Qwen2ForCausalLM
    config = cfg_cls(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
                     num_attention_heads=HEADS, num_key_value_heads=kv, rms_norm_eps=1e-5, hidden_act="silu",
                     rope_parameters={"rope_theta": theta, "rope_type": "default"}, max_position_embeddings=64,
                     tie_word_embeddings=tied)
    torch.manual_seed(seed)
    model = model_cls(config)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.randn(p.shape, generator=g)
            if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
                p.copy_(1.0 + 0.2 * r)
            elif name.endswith(".bias"):
                p.copy_(0.1 * r)
            elif "embed_tokens" in name:     # tied: the output layer too, logits O(1)
                p.copy_(0.25 * r)
            else:
                p.copy_(r / p.shape[1] ** 0.5)
    model.save_pretrained(model_dir)


def make_batch(path, seed):
    rng = np.random.default_rng(seed)
    save_file({"tokens": rng.integers(0, VOCAB, (SEQ, BATCH), dtype=np.int32),
               "targets": rng.integers(0, VOCAB, (SEQ, BATCH), dtype=np.int32)}, path)


def independent(model_dir, batch_path, rope="half", kv_of_head="div", layout="sb", theta=None, final_norm=True):
    """Loss, logits [s, b, v] and gradients in float64 from the files alone. The keywords select a wrong
    convention for the negative controls."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    W = load_file(os.path.join(model_dir, "model.safetensors"))
    batch = load_file(batch_path)
    P = {n: torch.tensor(x, dtype=torch.float64, requires_grad=True) for n, x in W.items()}
    h, a, kv, L = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["num_hidden_layers"]
    d, eps = h // a, cfg["rms_norm_eps"]
    theta = theta or cfg["rope_parameters"]["rope_theta"]
    tok, tgt = batch["tokens"], batch["targets"]
    s, b = tok.shape
    to_bs = (lambda t: t.T) if layout == "sb" else (lambda t: t.reshape(b, s))     # [b, s]
    ids, labels = torch.tensor(to_bs(tok).astype(np.int64)), torch.tensor(to_bs(tgt).astype(np.int64))

    def rms(x, name):
        return P[name] * x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)

    def lin(x, name):
        y = x @ P[name + ".weight"].T
        return y + P[name + ".bias"] if name + ".bias" in P else y

    ang = torch.arange(s, dtype=torch.float64)[:, None] * theta ** (-2.0 * torch.arange(d // 2, dtype=torch.float64) / d)
    cos, sin = ang.cos(), ang.sin()                                                  # [s, d/2]

    def rotate(t):                                                                   # [b, heads, s, d]
        if rope == "half":      # pair (j, j + d/2)
            x1, x2 = t[..., : d // 2], t[..., d // 2:]
            return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
        x1, x2 = t[..., 0::2], t[..., 1::2]                                          # pair (2j, 2j+1)
        return torch.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).flatten(-2)

    group = a // kv
    kv_index = torch.arange(a) // group if kv_of_head == "div" else torch.arange(a) % kv
    causal = torch.ones(s, s, dtype=torch.bool).triu(1)
    x = P["model.embed_tokens.weight"][ids]                                          # [b, s, h]
    for l in range(L):
        pre = f"model.layers.{l}."
        n1 = rms(x, pre + "input_layernorm.weight")
        q = rotate(lin(n1, pre + "self_attn.q_proj").view(b, s, a, d).transpose(1, 2))
        k = rotate(lin(n1, pre + "self_attn.k_proj").view(b, s, kv, d).transpose(1, 2))
        v = lin(n1, pre + "self_attn.v_proj").view(b, s, kv, d).transpose(1, 2)
        k, v = k[:, kv_index], v[:, kv_index]
        scores = (q @ k.transpose(-1, -2) / d ** 0.5).masked_fill(causal, float("-inf"))
        ctx = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(b, s, a * d)
        x = x + lin(ctx, pre + "self_attn.o_proj")
        n2 = rms(x, pre + "post_attention_layernorm.weight")
        gate, up = lin(n2, pre + "mlp.gate_proj"), lin(n2, pre + "mlp.up_proj")
        x = x + lin(gate * torch.sigmoid(gate) * up, pre + "mlp.down_proj")
    xf = rms(x, "model.norm.weight") if final_norm else x
    head = P.get("lm_head.weight", P["model.embed_tokens.weight"])
    logits = xf @ head.T                                                             # [b, s, v]
    loss = (torch.logsumexp(logits, -1) - logits.gather(-1, labels[..., None])[..., 0]).mean()
    loss.backward()
    return loss.item(), logits.detach().transpose(0, 1).numpy(), {n: (p.grad if p.grad is not None else torch.zeros_like(p)).numpy()
                                                                 for n, p in P.items()}


def rel(got, want):
    """max |got - want| / max |want| (max-abs normalised, as tests/test_parity.c)."""
    return float(np.abs(np.asarray(got, np.float64) - want).max() / max(np.abs(want).max(), 1e-30))


def compare(name, ref, exact):
    loss, logits, grads = exact
    worst = {"loss": abs(ref["loss"][0] - loss) / abs(loss), "logits": rel(ref["logits"], logits)}
    check(ref["logits"].shape == (SEQ, BATCH, VOCAB), f"{name}: logits shape {ref['logits'].shape}")
    got_names = sorted(k[len("grad."):] for k in ref if k.startswith("grad."))
    check(got_names == sorted(grads), f"{name}: gradient names {got_names} != file's {sorted(grads)}")
    for n, g in grads.items():
        if "grad." + n in ref and ref["grad." + n].shape == g.shape:
            worst[n] = rel(ref["grad." + n], g)
        else:
            check(False, f"{name}: grad.{n} missing or mis-shaped")
    for what, r in worst.items():
        check(r <= TOL, f"{name}: {what} differs from the independent computation by {r:.2e} (tolerance {TOL})")
    top = max(worst, key=worst.get)
    print(f"{name}: loss {ref['loss'][0]:.6f}, worst relative difference {worst[top]:.1e} ({top}), "
          f"{len(grads)} gradients")


def refuses(case_dir, batch, out, edit, expect, what):
    """llama_ref refuses the model directory after `edit(dir)`, with a message containing `expect`."""
    bad_dir = case_dir + "_bad"
    shutil.rmtree(bad_dir, ignore_errors=True)
    shutil.copytree(case_dir, bad_dir)
    edit(bad_dir)
    try:
        llama_ref.reference(bad_dir, batch, out)
        check(False, f"{what}: accepted")
    except llama_ref.RefError as e:
        check(expect in str(e), f"{what}: message {str(e)!r} lacks {expect!r}")
        print(f"refused ({what}): {e}"[:160])


def edit_weights(fn):
    def edit(d):
        path = os.path.join(d, "model.safetensors")
        W = load_file(path)
        fn(W)
        save_file(W, path, metadata={"format": "pt"})
    return edit


def edit_config(fn):
    def edit(d):
        path = os.path.join(d, "config.json")
        with open(path) as f:
            cfg = json.load(f)
        fn(cfg)
        with open(path, "w") as f:
            json.dump(cfg, f)
    return edit


def as_v4(cfg):
    """What transformers 4.x wrote: top-level rope_theta, torch_dtype."""
    cfg["rope_theta"] = cfg.pop("rope_parameters")["rope_theta"]
    cfg["torch_dtype"] = cfg.pop("dtype", "float32")


def main(argv):
    if len(argv) != 2:
        sys.exit(f"usage: {argv[0]} WORKDIR")
    bad = llama_ref.version_mismatches()
    if bad:
        sys.exit(f"test_llama_ref_selfcheck.py: not the pinned versions: {'; '.join(bad)}")
    work = argv[1]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    dirs = {}
    for i, (name, family, kv, tied, theta) in enumerate(CASES):
        d = os.path.join(work, name)
        make_model(d, family, kv, tied, theta, seed=100 + i)
        make_batch(d + ".batch.safetensors", seed=200 + i)
        dirs[name] = d
        names = load_file(os.path.join(d, "model.safetensors"))
        check(("lm_head.weight" in names) == (not tied), f"{name}: save_pretrained's lm_head.weight presence")
    # The 4.x config.json of the first case: same weights, rope_theta at the top level.
    v4 = dirs["gqa_untied"] + "_v4"
    shutil.copytree(dirs["gqa_untied"], v4)
    edit_config(as_v4)(v4)
    shutil.copy(dirs["gqa_untied"] + ".batch.safetensors", v4 + ".batch.safetensors")

    # 1 + 2: llama_ref's command line, every case in one start of Python.
    triples = []
    for d in list(dirs.values()) + [v4]:
        triples += [d, d + ".batch.safetensors", d + ".out.safetensors"]
    rc = subprocess.run([sys.executable, os.path.join(HERE, "llama_ref.py")] + triples).returncode
    check(rc == 0, f"llama_ref.py exited {rc}")
    if rc != 0:
        check.summary()
        return 1
    for name, d in dirs.items():
        compare(name, load_file(d + ".out.safetensors"), independent(d, d + ".batch.safetensors"))
    base, alt = load_file(dirs["gqa_untied"] + ".out.safetensors"), load_file(v4 + ".out.safetensors")
    check(sorted(base) == sorted(alt) and all(np.array_equal(base[k], alt[k]) for k in base),
          "a transformers 4.x config.json (top-level rope_theta) does not give the 5.x config's bits")
    # SDPA, in this process.
    d = dirs["gqa_tied_qwen2"]
    compare("gqa_tied_qwen2 (sdpa)", llama_ref.reference(d, d + ".batch.safetensors", d + ".sdpa.safetensors", "sdpa"),
            independent(d, d + ".batch.safetensors"))

    # 3: a wrong convention is caught.
    d = dirs["gqa_untied"]
    ref = load_file(d + ".out.safetensors")
    for label, kw in [("interleaved RoPE", {"rope": "interleaved"}), ("kv head j % kv", {"kv_of_head": "mod"}),
                      ("batch read as [b, s]", {"layout": "bs"}), ("RoPE base 10000", {"theta": 1e4}),
                      ("final norm skipped", {"final_norm": False})]:
        _, logits, _ = independent(d, d + ".batch.safetensors", **kw)
        r = rel(ref["logits"], logits)
        check(r > 1e3 * TOL, f"{label}: logits within {r:.1e} of the reference: the check cannot see it")
        print(f"wrong convention ({label}): logits differ by {r:.1e}")

    # 4: strict loading.
    batch, out = d + ".batch.safetensors", os.path.join(work, "bad.out.safetensors")
    refuses(d, batch, out, edit_weights(lambda W: W.update({"model.layers.0.self_attn.o_proj.bias":
            np.zeros(HIDDEN, np.float32)})), "o_proj.bias", "unexpected tensor")
    refuses(d, batch, out, edit_weights(lambda W: W.pop("model.norm.weight")), "model.norm.weight", "missing tensor")
    refuses(d, batch, out, edit_weights(lambda W: W.update({"model.norm.weight":
            W["model.norm.weight"].astype(np.float16)})), "F32", "F16 tensor")
    refuses(d, batch, out, edit_config(lambda c: c.update({"tie_word_embeddings": True})), "lm_head.weight",
            "tied config, file with lm_head.weight")
    refuses(d, batch, out, edit_config(lambda c: c.update({"rope_parameters": {"rope_theta": 5e5,
            "rope_type": "linear", "factor": 2.0}})), "rope_type", "RoPE scaling")
    return check.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
