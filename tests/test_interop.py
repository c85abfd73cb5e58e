"""Checkpoint interop with Python.

usage: test_interop.py CTRON CKPT_TOOL DATA WORKDIR

1. ctron trains a few steps and saves a checkpoint.
2. Python reads model.safetensors with the `safetensors` package (or, when it is not installed,
   with this file's numpy reader, and says so) and compares every tensor with what ctron holds
   (tests/ckpt_tool.c dump): Conv1D weights are ctron's transposed, the rest identical, bit for bit.
3. A GPT-2 forward written here in PyTorch (float64, Conv1D convention y = x @ W + b) on that state
   dict gives the logits of ctron's KV-cache path: the orientation is the Hugging Face one.
4. Python writes new weights as a safetensors file (its own tensor order); ctron loads exactly
   them, generates from them and resumes training on them; an extra tensor is refused.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pycheck import Checks  # noqa: E402

try:
    import safetensors
    import safetensors.numpy as stnp
    HAVE_ST = True
except ImportError:
    HAVE_ST = False

check = Checks()


# numpy fallback for the format (used only without the safetensors package)
DT = {"F32": np.float32, "I32": np.int32, "U8": np.uint8}


def np_load(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        b0, b1 = info["data_offsets"]
        out[name] = np.frombuffer(data[b0:b1], dtype=DT[info["dtype"]]).reshape(info["shape"]).copy()
    return out, meta


def np_save(tensors, path, meta):
    header, off = {"__metadata__": meta}, 0
    for name in sorted(tensors):
        a = tensors[name]
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name in sorted(tensors):
            f.write(np.ascontiguousarray(tensors[name], dtype="<f4").tobytes())


def load(path):
    if HAVE_ST:
        with safetensors.safe_open(path, framework="numpy") as f:
            meta = f.metadata() or {}
        return stnp.load_file(path), meta
    return np_load(path)


def save(tensors, path, meta):
    if HAVE_ST:
        stnp.save_file(tensors, path, metadata=meta)
    else:
        np_save(tensors, path, meta)


def is_conv1d(name, arr):
    return name.startswith("h.") and arr.ndim == 2


def ctron_view(tool, ckpt, work):
    out = os.path.join(work, "dump.f32")
    lines = subprocess.run([tool, "dump", ckpt, out], check=True, capture_output=True, text=True).stdout
    flat = np.fromfile(out, dtype=np.float32)
    view = {}
    for line in lines.splitlines():
        e = json.loads(line)
        n = int(np.prod(e["shape"]))
        view[e["name"]] = flat[e["offset"]:e["offset"] + n].reshape(e["shape"])
    return view


def gpt2_forward(sd, tokens, L, heads):
    """GPT-2 on a Hugging Face state dict (Conv1D: y = x @ W + b), float64, one sequence."""
    import torch
    T = {k: torch.tensor(v, dtype=torch.float64) for k, v in sd.items()}
    s = len(tokens)
    x = T["wte.weight"][torch.tensor(tokens)] + T["wpe.weight"][:s]
    h = x.shape[1]
    d = h // heads
    ln = lambda x, p: torch.nn.functional.layer_norm(x, (h,), T[p + ".weight"], T[p + ".bias"], 1e-5)
    gelu = lambda x: 0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x ** 3)))
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool), 1)
    for l in range(L):
        p = f"h.{l}."
        qkv = ln(x, p + "ln_1") @ T[p + "attn.c_attn.weight"] + T[p + "attn.c_attn.bias"]
        q, k, v = (t.reshape(s, heads, d).transpose(0, 1) for t in qkv.split(h, dim=1))
        att = (q @ k.transpose(1, 2)) / d ** 0.5
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        ctx = (att @ v).transpose(0, 1).reshape(s, h)
        x = x + ctx @ T[p + "attn.c_proj.weight"] + T[p + "attn.c_proj.bias"]
        m = gelu(ln(x, p + "ln_2") @ T[p + "mlp.c_fc.weight"] + T[p + "mlp.c_fc.bias"])
        x = x + m @ T[p + "mlp.c_proj.weight"] + T[p + "mlp.c_proj.bias"]
    return (ln(x, "ln_f") @ T["wte.weight"].T).numpy()


def main(argv):
    ctron, tool, data, work = argv[1:5]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    print("safetensors package:", safetensors.__version__ if HAVE_ST else
          "not installed, reading and writing with this test's numpy code instead")
    L, H, A, S, V = 2, 32, 4, 16, 260
    run = os.path.join(work, "run")
    subprocess.run([ctron, "train", "--layers", str(L), "--hidden", str(H), "--heads", str(A), "--seq", str(S),
                    "--batch", "2", "--vocab", str(V), "--steps", "3", "--threads", "2", "--data", data,
                    "--eval-every", "0", "--eval-batches", "1", "--ckpt-dir", run],
                   check=True, stdout=subprocess.DEVNULL)
    step = os.path.join(run, "step_00000003")

    # 2. the file, read by Python, against ctron's own view
    sd, meta = load(os.path.join(step, "model.safetensors"))
    mine = ctron_view(tool, step, work)
    check(meta.get("format") == "pt", f"metadata {meta} lacks format=pt")
    check(set(sd) == set(mine), f"names differ: {sorted(set(sd) ^ set(mine))}")
    expect = {"wte.weight": (V, H), "wpe.weight": (S, H), "h.0.attn.c_attn.weight": (H, 3 * H),
              "h.0.attn.c_attn.bias": (3 * H,), "h.1.attn.c_proj.weight": (H, H), "h.0.mlp.c_fc.weight": (H, 4 * H),
              "h.1.mlp.c_proj.weight": (4 * H, H), "ln_f.bias": (H,)}
    for name, shape in expect.items():
        check(sd[name].shape == shape, f"{name} has shape {sd[name].shape}, GPT-2 has {shape}")
    exact = 0
    for name, arr in sd.items():
        ref = mine[name].T if is_conv1d(name, arr) else mine[name]
        same = arr.dtype == np.float32 and arr.shape == ref.shape and np.array_equal(arr.view(np.uint32),
                                                                                  ref.view(np.uint32))
        check(same, f"{name}: the file and ctron differ")
        exact += same
    print(f"  {exact}/{len(sd)} tensors bit-identical to ctron's (Conv1D ones transposed)")
    opt, _ = load(os.path.join(step, "optimizer.safetensors"))
    check(set(opt) == {f"{p}.{n}" for p in "mv" for n in sd}, "optimizer names are not m.<name>, v.<name>")
    check(all(opt[f"m.{n}"].shape == sd[n].shape == opt[f"v.{n}"].shape for n in sd), "optimizer shapes differ")
    state = json.load(open(os.path.join(step, "state.json")))
    check(state["step"] == 3 and state["optimizer"]["t"] == 3 and state["model"]["layers"] == L and
          state["model"]["vocab"] == V and state["format"] == "ctron-checkpoint", f"state.json: {state}")

    # 3. semantics: a Conv1D GPT-2 forward on the state dict gives ctron's logits
    try:
        import torch  # noqa: F401
        tokens = [int(t) for t in np.random.default_rng(3).integers(0, V, S)]
        out = os.path.join(work, "logits.f32")
        subprocess.run([tool, "logits", step, out] + [str(t) for t in tokens], check=True)
        got = np.fromfile(out, dtype=np.float32).reshape(S, V)
        ref = gpt2_forward(sd, tokens, L, A)
        err = np.abs(got - ref).max() / np.abs(ref).max()
        check(err < 1e-5, f"ctron's KV-cache logits differ from the GPT-2 forward by {err:.3g}")
        print(f"  GPT-2 forward (PyTorch, Conv1D convention) vs ctron KV cache: relative error {err:.3g}")
    except ImportError:
        print("  torch not installed: skipping the GPT-2 forward comparison")

    # 4. a checkpoint written by Python
    rng = np.random.default_rng(7)
    new = {n: (rng.standard_normal(a.shape) * 0.05).astype(np.float32) for n, a in sd.items()}
    py = os.path.join(work, "py", "step_00000003")
    os.makedirs(py)
    save(new, os.path.join(py, "model.safetensors"), {"format": "pt"})
    shutil.copy(os.path.join(step, "optimizer.safetensors"), py)
    shutil.copy(os.path.join(step, "state.json"), py)
    back = ctron_view(tool, os.path.join(work, "py"), work)
    ok = all(np.array_equal(back[n], new[n].T if is_conv1d(n, a) else new[n]) for n, a in new.items())
    check(ok, "ctron did not load the tensors Python wrote")
    print("  ctron loads the Python-written file:", "exactly" if ok else "WRONG")
    g = subprocess.run([ctron, "generate", "--ckpt", os.path.join(work, "py"), "--tokens", "20", "--json",
                        "--threads", "2"], capture_output=True, text=True)
    toks = json.loads(g.stdout)["tokens"] if g.returncode == 0 else []
    check(g.returncode == 0 and len(toks) == 20 and all(0 <= t < V for t in toks), f"generate: {g.stderr}")
    r = subprocess.run([ctron, "train", "--resume", os.path.join(work, "py"), "--steps", "5", "--threads", "2"],
                       capture_output=True, text=True)
    check(r.returncode == 0 and "resumed from" in r.stdout, f"resume from the Python checkpoint: {r.stderr}")
    # an extra tensor is refused with its name
    new["lm_head.weight"] = new["wte.weight"].copy()
    save(new, os.path.join(py, "model.safetensors"), {"format": "pt"})
    g = subprocess.run([ctron, "generate", "--ckpt", py, "--tokens", "2"], capture_output=True, text=True)
    check(g.returncode == 1 and "lm_head.weight" in g.stderr, f"extra tensor: rc {g.returncode}, {g.stderr}")

    return check.summary()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
