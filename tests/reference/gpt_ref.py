#!/usr/bin/python3
"""PyTorch float64 reference for ctron's GPT parity test.

Usage: /usr/bin/python3 tests/reference/gpt_ref.py IN.safetensors OUT.safetensors

File format (safetensors, read/written here with numpy + json only): an 8-byte
little-endian u64 header length N, then N bytes of JSON
  {name: {"dtype": "F32"|"I32"|"U8", "shape": [...], "data_offsets": [begin, end]},
   "__metadata__": {str: str}}   (metadata optional)
then the raw little-endian data; offsets are relative to the start of the data.

IN holds:
  __metadata__: layers, hidden, heads, seq, batch, vocab (integers) and
                dropout (probability, float), all as strings.
  tokens, targets      I32 [s, b]   sequence-major: element [si, bi]
  wte.weight [v, h], wpe.weight [s, h], ln_f.weight/bias [h], and per layer l:
  h.{l}.ln_1.weight/bias [h], h.{l}.attn.c_attn.weight [3h, h] / .bias [3h]
  (output columns [q | k | v]; head j uses columns j*d..(j+1)*d-1 of each,
  d = h/a), h.{l}.attn.c_proj.weight [h, h] / .bias [h], h.{l}.ln_2.weight/bias
  [h], h.{l}.mlp.c_fc.weight [4h, h] / .bias [4h], h.{l}.mlp.c_proj.weight
  [h, 4h] / .bias [h]. All F32, nn.Linear orientation [out, in]: y = x W^T + b.
  Only when p > 0, U8 keep-masks (1 keep, 0 drop; kept values scaled 1/(1-p)):
  mask.emb [s, b, h]; per layer mask.h.{l}.attn [b, a, s, s] (on the softmax
  probabilities, [batch, head, query, key]), mask.h.{l}.drop1 [s, b, h] (after
  the attention projection), mask.h.{l}.drop2 [s, b, h] (after FC2).

OUT holds: loss F32 [1] (mean cross-entropy over all s*b positions) and, for
every parameter N above, grad.N F32 with N's shape (grad.wte.weight includes the
embedding and the tied output-layer contributions). Everything is computed in
float64; the result is rounded to float32 only when written.
"""
import json
import math
import struct
import sys

import numpy as np
import torch

DTYPES = {"F32": np.dtype("<f4"), "I32": np.dtype("<i4"), "U8": np.dtype("u1")}


def fail(msg):
    sys.exit(f"gpt_ref.py: error: {msg}")


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        fail(f"{path}: too short for a safetensors header")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        fail(f"{path}: header length {n} exceeds file size {len(raw)}")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except ValueError as e:
        fail(f"{path}: bad JSON header: {e}")
    if not isinstance(header, dict):
        fail(f"{path}: header is not a JSON object")
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in header.items():
        try:
            dt, shape, (begin, end) = DTYPES[info["dtype"]], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            fail(f"{path}: tensor '{name}': bad entry {info!r} (dtype must be F32, I32 or U8)")
        if not (isinstance(shape, list) and all(isinstance(x, int) and x >= 0 for x in shape)):
            fail(f"{path}: tensor '{name}': bad shape {shape!r}")
        count = math.prod(shape)
        if not (0 <= begin <= end <= len(data)) or end - begin != count * dt.itemsize:
            fail(f"{path}: tensor '{name}': data_offsets {[begin, end]} do not fit "
                 f"shape {shape} of {info['dtype']} in {len(data)} data bytes")
        tensors[name] = (info["dtype"], np.frombuffer(data[begin:end], dt).reshape(shape))
    return meta, tensors


def write_safetensors(path, tensors):
    header, offset = {}, 0
    for name, arr in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    hjson = json.dumps(header).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)  # pad so the data section is 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)) + hjson)
        for arr in tensors.values():
            f.write(arr.astype("<f4").tobytes())


def param_shapes(L, h, s, v):
    shapes = {"wte.weight": [v, h], "wpe.weight": [s, h]}
    for l in range(L):
        for name, shape in [("ln_1.weight", [h]), ("ln_1.bias", [h]),
                            ("attn.c_attn.weight", [3 * h, h]), ("attn.c_attn.bias", [3 * h]),
                            ("attn.c_proj.weight", [h, h]), ("attn.c_proj.bias", [h]),
                            ("ln_2.weight", [h]), ("ln_2.bias", [h]),
                            ("mlp.c_fc.weight", [4 * h, h]), ("mlp.c_fc.bias", [4 * h]),
                            ("mlp.c_proj.weight", [h, 4 * h]), ("mlp.c_proj.bias", [h])]:
            shapes[f"h.{l}.{name}"] = shape
    shapes.update({"ln_f.weight": [h], "ln_f.bias": [h]})
    return shapes


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def mm_bf16(x, y):
    """A bf16 GEMM as autocast means it: bf16 operands, fp32 accumulation, a bf16 result."""
    return (x.bfloat16().float() @ y.bfloat16().float()).bfloat16()


def autocast_gemm_sound():
    """Whether this PyTorch's CPU bf16 GEMM accumulates in fp32. Some builds (Debian's 1.13 below AVX-512)
    accumulate in bf16: a k = 256 product is then off by ~3e-2 where one output rounding is 2^-9."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 256, generator=g), torch.randn(256, 64, generator=g)
    ref = x.bfloat16().float() @ y.bfloat16().float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = (x @ y).float()
    return ((got - ref).abs().max() / ref.abs().max()).item() <= 2.0 ** -7


def forward(P, M, tokens, targets, L, a, p, mm=torch.matmul):
    """Loss of the GPT model. P: float64 params, M: float64 keep-masks without the "mask." prefix.
    mm: the GEMM (mm_bf16 gives autocast's rounding where this PyTorch's own bf16 GEMM is unsound)."""
    s, b = tokens.shape
    h = P["wte.weight"].shape[1]
    d = h // a
    drop = (lambda x, m: x * m / (1.0 - p)) if p > 0 else (lambda x, m: x)
    ln = lambda x, pre: torch.nn.functional.layer_norm(x, (h,), P[pre + ".weight"], P[pre + ".bias"], 1e-5)
    lin = lambda x, pre: mm(x, P[pre + ".weight"].t()) + P[pre + ".bias"]
    x = P["wte.weight"][tokens] + P["wpe.weight"][:s, None, :]              # [s, b, h]
    x = drop(x, M.get("emb"))
    causal = torch.ones(s, s, dtype=torch.bool).triu(1)                     # key > query
    for l in range(L):
        pre = f"h.{l}"
        qkv = lin(ln(x, pre + ".ln_1"), pre + ".attn.c_attn")               # [s, b, 3h]
        q, k, vv = (t.reshape(s, b, a, d).permute(1, 2, 0, 3) for t in qkv.split(h, dim=-1))
        scores = mm(q, k.transpose(-1, -2)) / math.sqrt(d)                  # [b, a, s, s]
        probs = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
        ctx = mm(drop(probs, M.get(pre + ".attn")), vv)                      # [b, a, s, d]
        ctx = ctx.permute(2, 0, 1, 3).reshape(s, b, h)
        x1 = x + drop(lin(ctx, pre + ".attn.c_proj"), M.get(pre + ".drop1"))
        mlp = lin(gelu_tanh(lin(ln(x1, pre + ".ln_2"), pre + ".mlp.c_fc")), pre + ".mlp.c_proj")
        x = x1 + drop(mlp, M.get(pre + ".drop2"))
    logits = mm(ln(x, "ln_f"), P["wte.weight"].t())                          # [s, b, v]
    return torch.nn.functional.cross_entropy(logits.float().reshape(s * b, -1), targets.reshape(-1))   # fp32, as autocast


def load(path):
    meta, T = read_safetensors(path)
    try:
        L, h, a, s, b, v = (int(meta[k]) for k in "layers hidden heads seq batch vocab".split())
        p = float(meta["dropout"])
    except (KeyError, ValueError, TypeError) as e:
        fail(f"{path}: __metadata__ must hold integers layers, hidden, heads, seq, batch, vocab and float dropout ({e!r})")
    if min(L, h, a, s, b, v) < 1 or h % a or not 0.0 <= p < 1.0:
        fail(f"{path}: bad sizes L={L} h={h} a={a} s={s} b={b} v={v} p={p} "
             f"(need all >= 1, h % a == 0, 0 <= p < 1)")
    want = {n: ("F32", sh) for n, sh in param_shapes(L, h, s, v).items()}
    want.update({"tokens": ("I32", [s, b]), "targets": ("I32", [s, b])})
    if p > 0:
        want["mask.emb"] = ("U8", [s, b, h])
        for l in range(L):
            want.update({f"mask.h.{l}.attn": ("U8", [b, a, s, s]),
                         f"mask.h.{l}.drop1": ("U8", [s, b, h]),
                         f"mask.h.{l}.drop2": ("U8", [s, b, h])})
    missing, extra = sorted(set(want) - set(T)), sorted(set(T) - set(want))
    if missing or extra:
        fail(f"{path}: missing tensors {missing}, unexpected tensors {extra} (p={p}, L={L})")
    for n, (dt, sh) in want.items():
        if T[n][0] != dt or list(T[n][1].shape) != sh:
            fail(f"{path}: tensor '{n}' is {T[n][0]} {list(T[n][1].shape)}, expected {dt} {sh}")
    for n in ("tokens", "targets"):
        if T[n][1].min() < 0 or T[n][1].max() >= v:
            fail(f"{path}: '{n}' has ids outside [0, {v})")
    if p > 0 and any(T[n][1].max() > 1 for n in want if n.startswith("mask.")):
        fail(f"{path}: mask values must be 0 or 1")
    precision = meta.get("precision", "fp64")
    if precision not in ("fp64", "bf16"):
        fail(f"{path}: precision '{precision}' (expected fp64 or bf16)")
    # bf16: fp32 master weights, the forward under CPU autocast (PyTorch's mixed precision)
    ft = torch.float32 if precision == "bf16" else torch.float64
    P = {n: torch.tensor(T[n][1], dtype=ft, requires_grad=True) for n in param_shapes(L, h, s, v)}
    M = {n[len("mask."):]: torch.tensor(T[n][1], dtype=ft) for n in want if n.startswith("mask.")}
    tok, tgt = (torch.tensor(T[n][1], dtype=torch.int64) for n in ("tokens", "targets"))
    return P, M, tok, tgt, L, a, p, precision


def main(argv):
    if len(argv) != 3:
        sys.exit(f"usage: {argv[0]} IN.safetensors OUT.safetensors")
    P, M, tok, tgt, L, a, p, precision = load(argv[1])
    if precision == "bf16" and autocast_gemm_sound():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = forward(P, M, tok, tgt, L, a, p)
    elif precision == "bf16":
        print("gpt_ref: this PyTorch's CPU bf16 GEMM does not accumulate in fp32: autocast's rounding done explicitly")
        loss = forward(P, M, tok, tgt, L, a, p, mm=mm_bf16).float()
    else:
        loss = forward(P, M, tok, tgt, L, a, p)
    loss.backward()
    out = {"loss": np.array([loss.item()], dtype=np.float32)}
    out.update({"grad." + n: t.grad.float().numpy().astype(np.float32) for n, t in P.items()})
    write_safetensors(argv[2], out)


if __name__ == "__main__":
    main(sys.argv)
