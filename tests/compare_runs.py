"""Compare two training runs: per-step losses from their --log files and the final checkpoint's
tensors (relative L2 distance over all tensors of each file). Exit 0 when every figure is below tol.

usage: compare_runs.py REF_LOG REF_STEPDIR LOG STEPDIR [--files model,optimizer] [--tol 1e-5] [--steps N]
                       [--scale SCALE_LOG SCALE_STEPDIR --ratio R --min-scale X]

Relative L2 rather than elementwise: Adam turns rounding-level differences in near-zero gradients
into lr-sized steps, so a max-abs measure sees ~1e-4 where the models agree.

--scale replaces the fixed tol by a relative one: each figure must be below R times the same figure
between REF and SCALE (for bf16: the reference run again in fp32, i.e. what bf16 rounding itself does
to this model; docs/BACKENDS.md derives why a layout stays well inside it). Every SCALE figure must
exceed --min-scale, or the comparison would be against nothing (bf16 not engaged)."""
import argparse, json, struct, sys
import numpy as np


def losses(path):
    return [json.loads(line)["loss"] for line in open(path)]


def tensors(path):
    """Every tensor as fp32: F32 as it is, BF16 (a --base-dtype bf16 run's frozen base) widened exactly."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        b = raw[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]]
        out[k] = (np.frombuffer(b, "<u2").astype(np.uint32) << 16).view(np.float32) if v["dtype"] == "BF16" \
            else np.frombuffer(b, "<f4")
    return out


def rel_l2(a_path, b_path):
    ta, tb = tensors(a_path), tensors(b_path)
    assert ta.keys() == tb.keys() and all(ta[k].shape == tb[k].shape for k in ta), "tensor sets differ"
    num = sum(float(np.sum((ta[k].astype(np.float64) - tb[k]) ** 2)) for k in ta)
    den = sum(float(np.sum(ta[k].astype(np.float64) ** 2)) for k in ta)
    return (num / den) ** 0.5


def figures(ref_log, ref_dir, log, dir_, files, steps):
    """{"loss": worst relative per-step loss difference, file: relative L2 of the file's tensors}"""
    la, lb = losses(ref_log), losses(log)
    worst = max(abs(x - y) / abs(x) for x, y in zip(la, lb)) if len(la) == len(lb) == steps else float("inf")
    out = {"loss": worst}
    out.update({f: rel_l2(f"{ref_dir}/{f}.safetensors", f"{dir_}/{f}.safetensors") for f in files})
    return out, len(lb)


def explain(a, files):
    """Per-step losses and the tensors that differ most, printed before the verdict."""
    for i, (x, y) in enumerate(zip(losses(a.ref_log), losses(a.log))):
        print(f"{a.name}: step {i + 1} loss {x!r} vs {y!r}, rel {abs(x - y) / abs(x):.1e}")
    rows = []
    for f in files:
        ta, tb = tensors(f"{a.ref_dir}/{f}.safetensors"), tensors(f"{a.dir}/{f}.safetensors")
        for k in ta:
            x, y = ta[k].astype(np.float64), tb[k].astype(np.float64)
            norm = float(np.linalg.norm(x))
            rows.append((float(np.linalg.norm(x - y)) / (norm or 1.0), norm, f"{f}:{k}"))
    for rel, norm, k in sorted(rows, reverse=True)[:a.worst]:
        print(f"{a.name}: {k} rel L2 {rel:.1e} (norm {norm:.2e})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ref_log"), ap.add_argument("ref_dir"), ap.add_argument("log"), ap.add_argument("dir")
    ap.add_argument("--files", default="model,optimizer")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--name", default="run")
    ap.add_argument("--scale", nargs=2, metavar=("SCALE_LOG", "SCALE_STEPDIR"))
    ap.add_argument("--ratio", type=float, default=0.5)
    ap.add_argument("--min-scale", type=float, default=0.0)
    ap.add_argument("--worst", type=int, default=0, metavar="N",
                    help="also print each step's loss difference and the N tensors furthest apart (relative L2, "
                         "with the reference's norm): where a difference comes from")
    a = ap.parse_args()
    files = a.files.split(",")
    figs, n = figures(a.ref_log, a.ref_dir, a.log, a.dir, files, a.steps)
    if a.worst:
        explain(a, files)
    label = lambda f: "loss rel" if f == "loss" else f"{f} rel L2"
    if not a.scale:
        print(f"{a.name}: loss rel {figs['loss']:.1e} over {n} steps, "
              + ", ".join(f"{label(f)} {figs[f]:.1e}" for f in files))
        sys.exit(0 if all(v < a.tol for v in figs.values()) else 1)
    scale, _ = figures(a.ref_log, a.ref_dir, a.scale[0], a.scale[1], files, a.steps)
    print(f"{a.name}: " + ", ".join(f"{label(f)} {v:.1e} = {v / scale[f]:.2f} x {scale[f]:.1e}"
                                    for f, v in figs.items())
          + f" (limit {a.ratio:g} x)")
    weak = [f for f, s in scale.items() if not s > a.min_scale]
    if weak:
        print(f"{a.name}: the scale run is within {a.min_scale:g} of the reference in {', '.join(weak)}: "
              "nothing to measure against")
    sys.exit(0 if not weak and all(v < a.ratio * scale[f] for f, v in figs.items()) else 1)


if __name__ == "__main__":
    main()
