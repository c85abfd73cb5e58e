#!/usr/bin/python3
"""The GEMM floor of a training step on one core, and what it allows against a peer (issues 25, 27).

Lists every GEMM a step of the config needs (full fine-tuning, LoRA or LoRA-FA), times each shape alone
on one thread with the better of OpenBLAS and oneDNN (build/tests/gemm_floor), and sums them. The sum
is generous to the implementation it bounds:
  - nothing but the GEMMs: no norms, RoPE, SwiGLU, softmax, cross-entropy, optimizer, copies;
  - every GEMM at the speed it reaches alone with warm caches (best of several calls);
  - attention as two GEMMs per head and direction over the causal half only (counted at the full
    square's speed), no recompute of the probabilities;
  - under LoRA the frozen layer 0's dX of q, k, v (the gradient into the frozen embedding) skipped.
So no implementation that runs its GEMMs with these libraries on this core can take less CPU time per
step. A peer's measured CPU seconds per step over the floor is the most any such implementation can
be faster than that peer:

    /usr/bin/python3 bench/gemm_floor.py --config S-llama --modes full,lora,lora-fa \\
        --peer full=8.31 --peer lora=6.71

Writes bench/results/<date>-gemm-floor[-SUFFIX].md (and .json) with --suffix.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench as rb  # noqa: E402

# llama's seven adapter sites (in, out) as functions of (h, kv width, ffn); GPT-2's four
SITES = {
    "llama": [("q", "h", "h"), ("k", "h", "kv"), ("v", "h", "kv"), ("o", "h", "h"),
              ("gate", "h", "f"), ("up", "h", "f"), ("down", "f", "h")],
    "gpt2": [("qkv", "h", "3h"), ("proj", "h", "h"), ("fc", "h", "f"), ("fc2", "f", "h")],
}


def widths(c):
    h = c["hidden"]
    kv = h // c["heads"] * c.get("kv_heads", c["heads"])
    f = c.get("ffn", 4 * h)
    return {"h": h, "kv": kv, "f": f, "3h": 3 * h}


def step_gemms(c, mode, rank):
    """[(label, ta, tb, m, n, k, count)] of one training step (row-major C[m,n] = op(A)·op(B))."""
    arch = rb.arch_of(c)
    w = widths(c)
    n, L, V, h = c["seq"] * c["batch"], c["layers"], c["vocab"], c["hidden"]
    d, s = h // c["heads"], c["seq"]
    out = []
    frozen = mode != "full"
    for name, i, o in SITES[arch]:
        fi, fo = w[i], w[o]
        out.append((f"{name}.fwd", 0, 1, n, fo, fi, L))
        dx_layers = L - 1 if frozen and name in ("q", "k", "v", "qkv") else L   # layer 0's dX into the embedding
        out.append((f"{name}.dx", 0, 0, n, fi, fo, dx_layers))
        if not frozen:
            out.append((f"{name}.dw", 1, 0, fo, fi, n, L))
        if frozen:
            out.append((f"{name}.xA", 0, 1, n, rank, fi, L))
            out.append((f"{name}.uB", 0, 1, n, fo, rank, L))
            out.append((f"{name}.dB", 1, 0, fo, rank, n, L))
            out.append((f"{name}.dv", 0, 0, n, rank, fo, L))
            out.append((f"{name}.dvA", 0, 0, n, fi, rank, dx_layers))
            if mode == "lora":
                out.append((f"{name}.dA", 1, 0, rank, fi, n, L))
    heads = L * c["batch"] * c["heads"] * 0.5   # causal: the lower triangle only
    out += [("attn.qk", 0, 1, s, s, d, heads), ("attn.pv", 0, 0, s, d, s, heads),
            ("attn.dp", 0, 1, s, s, d, heads), ("attn.dv", 1, 0, s, d, s, heads),
            ("attn.dq", 0, 0, s, d, s, heads), ("attn.dk", 1, 0, s, d, s, heads)]
    out.append(("head.fwd", 0, 1, n, V, h, 1))
    out.append(("head.dx", 0, 0, n, h, V, 1))
    if not frozen:
        out.append(("head.dw", 1, 0, V, h, n, 1))
    return out


def run_floor(binary, gemms, repeats):
    text = "".join(f"{g[0]} {g[1]} {g[2]} {g[3]} {g[4]} {g[5]} {g[6]}\n" for g in gemms)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    r = subprocess.run([binary, str(repeats)], input=text, capture_output=True, text=True, env=env, check=True)
    rows, total = [], None
    for line in r.stdout.splitlines():
        f = line.split()
        if f[0] == "total":
            total = (float(f[1]), float(f[2]))
        else:
            rows.append(dict(label=f[0], m=int(f[1]), n=int(f[2]), k=int(f[3]), count=float(f[4]),
                             openblas=float(f[5]), dnnl=float(f[6]), seconds=float(f[7])))
    return rows, total


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="S-llama", choices=sorted(rb.CONFIGS))
    ap.add_argument("--modes", default="full,lora,lora-fa", help="comma-separated: full, lora, lora-fa")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--binary", default=os.path.join(rb.ROOT, "build", "tests", "gemm_floor"))
    ap.add_argument("--peer", action="append", default=[],
                    help="MODE=CPU_S: a measured CPU s/step to set against the floor (repeatable)")
    ap.add_argument("--target", type=float, default=1.3)
    ap.add_argument("--suffix", default="")
    ap.add_argument("--out-dir", default=os.path.join(rb.HERE, "results"))
    a = ap.parse_args(argv)
    c = rb.CONFIGS[a.config]
    modes = a.modes.split(",")
    for mode in modes:
        if mode not in ("full", "lora", "lora-fa"):
            ap.error(f"--modes: expected full, lora or lora-fa, got '{mode}'")
    if a.rank < 1 or a.repeats < 1:
        ap.error(f"--rank and --repeats: expected positive integers, got {a.rank} and {a.repeats}")
    if not os.access(a.binary, os.X_OK):
        ap.error(f"--binary: {a.binary} is not an executable (build it: cmake --build build --target gemm_floor)")
    peers = {}
    for p in a.peer:
        mode, _, sec = p.partition("=")
        try:
            value = float(sec)
        except ValueError:
            value = -1.0
        if mode not in modes or not value > 0:
            ap.error(f"--peer: expected MODE=CPU_SECONDS with MODE one of {a.modes} and seconds > 0, got '{p}'")
        peers.setdefault(mode, []).append(value)
    lines = [f"# GEMM floor of a {a.config} step on one core (`bench/gemm_floor.py`)", "",
             f"config {a.config}: {json.dumps(c)}; LoRA rank {a.rank} on every site", "",
             "| mode | GEMM GFLOP | floor CPU s | floor GFLOP/s | peer CPU s | peer / floor (the most any "
             "implementation can gain) |", "|---|---:|---:|---:|---|---|"]
    result = {"config": a.config, "rank": a.rank, "modes": {}}
    for mode in modes:
        rows, (gflop, sec) = run_floor(a.binary, step_gemms(c, mode, a.rank), a.repeats)
        result["modes"][mode] = dict(rows=rows, gflop=gflop, seconds=sec, peers=peers.get(mode, []))
        ps = peers.get(mode, [])
        ratio = ", ".join(f"{p / sec:.2f}" + (" (< target)" if p / sec < a.target else "") for p in ps) or "–"
        lines.append(f"| {mode} | {gflop:.1f} | {sec:.3f} | {gflop / sec:.1f} | "
                     f"{', '.join(f'{p:.2f}' for p in ps) or '–'} | {ratio} |")
        print(lines[-1], flush=True)
    lines += ["", "Per GEMM (last mode): label m n k count, OpenBLAS / oneDNN GFLOP/s, seconds at the better:", ""]
    for r in rows:
        lines.append(f"    {r['label']:10s} {r['m']:5d} {r['n']:5d} {r['k']:5d} {r['count']:7g}  "
                     f"{r['openblas']:6.1f} {r['dnnl']:6.1f}  {r['seconds']:.4f}")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.suffix:
        stem = os.path.join(a.out_dir, f"{datetime.date.today().isoformat()}-gemm-floor-{a.suffix}")
        with open(stem + ".md", "w") as f:
            f.write(text)
        with open(stem + ".json", "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
