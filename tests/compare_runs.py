"""Compare two training runs: per-step losses from their --log files and the final checkpoint's
tensors (relative L2 distance over all tensors of each file). Exit 0 when every figure is below tol.

usage: compare_runs.py REF_LOG REF_STEPDIR LOG STEPDIR [--files model,optimizer] [--tol 1e-5] [--steps N]

Relative L2 rather than elementwise: Adam turns rounding-level differences in near-zero gradients
into lr-sized steps, so a max-abs measure sees ~1e-4 where the models agree."""
import argparse, json, struct, sys
import numpy as np


def losses(path):
    return [json.loads(line)["loss"] for line in open(path)]


def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]], "<f4")
            for k, v in hdr.items() if k != "__metadata__"}


def rel_l2(a_path, b_path):
    ta, tb = tensors(a_path), tensors(b_path)
    assert ta.keys() == tb.keys() and all(ta[k].shape == tb[k].shape for k in ta), "tensor sets differ"
    num = sum(float(np.sum((ta[k].astype(np.float64) - tb[k]) ** 2)) for k in ta)
    den = sum(float(np.sum(ta[k].astype(np.float64) ** 2)) for k in ta)
    return (num / den) ** 0.5


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ref_log"), ap.add_argument("ref_dir"), ap.add_argument("log"), ap.add_argument("dir")
    ap.add_argument("--files", default="model,optimizer")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--name", default="run")
    a = ap.parse_args()
    la, lb = losses(a.ref_log), losses(a.log)
    worst = max(abs(x - y) / abs(x) for x, y in zip(la, lb)) if len(la) == len(lb) == a.steps else float("inf")
    figs = {f: rel_l2(f"{a.ref_dir}/{f}.safetensors", f"{a.dir}/{f}.safetensors") for f in a.files.split(",")}
    print(f"{a.name}: loss rel {worst:.1e} over {len(lb)} steps, "
          + ", ".join(f"{f} rel L2 {v:.1e}" for f, v in figs.items()))
    sys.exit(0 if worst < a.tol and all(v < a.tol for v in figs.values()) else 1)


if __name__ == "__main__":
    main()
