#!/usr/bin/env python3
"""The cluster planner against step times measured on a GPU: every config of bench/gpu_bench.py's JSON
files (ctron, llm.c, PyTorch eager / torch.compile, peft) predicted by `ctron plan --cluster` for one GPU
at the config's shape (t = p = d = 1, the whole batch one micro-batch, no recompute, flash attention,
bf16), beside each implementation's measured ms/step and the planner's error against it.

The planner models a well-tuned stack (cuBLAS-class GEMMs at 0.75 of peak, fused element-wise kernels,
cuDNN-class attention: docs/PLANNER.md), so torch.compile is the implementation it should come
closest to; ctron's distance from the prediction is what its CUDA backend still leaves on the table.

usage: planner_gpu_check.py --ctron build/ctron [--gpu h100-80g] [--max-error IMPL=PCT ...] GPU_BENCH.json ...
(later files win where two measured the same config and implementation). --max-error: exit 1 when the
planner is further than PCT % from IMPL's measured time in any config (test_planner_gpu_check holds it to
torch.compile's, the stack it models)."""
import argparse
import json
import subprocess
import sys

IMPL_ORDER = ["torch-compile", "torch-eager", "llmc", "peft-lora", "peft-lora-fa", "ctron", "ctron-lora-fa"]


def plan_cmd(ctron, gpu, c, impl):
    """`ctron plan --cluster` for config c on one GPU; impl picks LoRA-FA where it names it."""
    cmd = [ctron, "plan", "--cluster", "--gpu", gpu, "--gpus-per-node", "1", "--nodes", "1", "--attention", "flash",
           "--layers", str(c["layers"]), "--hidden", str(c["hidden"]), "--heads", str(c["heads"]),
           "--vocab", str(c["vocab"]), "--seq", str(c["seq"]), "--global-batch", str(c["batch"]),
           "--layout", f"t=1,p=1,v=1,d=1,mb={c['batch']},sp=off,recompute=none,zero=0", "--json"]
    if c.get("arch") == "llama":
        cmd += ["--arch", "llama", "--kv-heads", str(c["kv"]), "--ffn-hidden", str(c["ffn"])]
    if "lora_rank" in c:
        cmd += ["--lora-rank", str(c["lora_rank"])]
        if impl.endswith("lora-fa"):
            cmd += ["--lora-fa"]
    return cmd


def predict(ctron, gpu, c, impl):
    p = subprocess.run(plan_cmd(ctron, gpu, c, impl), capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise SystemExit(f"planner_gpu_check: ctron plan failed (exit {p.returncode}): {p.stderr.strip()[-300:]}")
    lay = json.loads(p.stdout)["layouts"][0]
    return lay["step_s"] * 1e3, lay["parts"]


def load(paths):
    """{config: (config dict, {impl: ms})} and the devices the files name."""
    out, devices = {}, set()
    for path in paths:
        try:
            d = json.load(open(path))
        except (OSError, ValueError) as e:
            raise SystemExit(f"planner_gpu_check: {path}: {e}")
        if not isinstance(d, dict) or "results" not in d or "configs" not in d:
            raise SystemExit(f"planner_gpu_check: {path}: not a gpu_bench.py JSON (no 'results' and 'configs')")
        devices.add(d.get("device", "unknown"))
        for r in d["results"]:
            if r.get("ms_median") is None:
                continue
            cfg = r["config"]
            out.setdefault(cfg, (d["configs"][cfg], {}))[1][r["impl"]] = r["ms_median"]
    return out, devices


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+")
    ap.add_argument("--ctron", default="build/ctron")
    ap.add_argument("--gpu", default="h100-80g")
    ap.add_argument("--max-error", action="append", default=[], metavar="IMPL=PCT")
    a = ap.parse_args()
    bounds = {}
    for spec in a.max_error:
        impl, _, pct = spec.partition("=")
        try:
            bounds[impl] = float(pct)
        except ValueError:
            raise SystemExit(f"planner_gpu_check: --max-error '{spec}': expected IMPL=PCT, e.g. torch-compile=20")
    runs, devices = load(a.json)
    if not runs:
        raise SystemExit("planner_gpu_check: no measured step times in " + ", ".join(a.json))
    print(f"measured on: {', '.join(sorted(devices))}; predicted for --gpu {a.gpu}\n")
    print("| config | implementation | measured ms | planner ms | planner vs measured |")
    print("|---|---|---:|---:|---:|")
    failed, checked = [], 0
    for cfg, (c, impls) in runs.items():
        for impl in sorted(impls, key=lambda i: IMPL_ORDER.index(i) if i in IMPL_ORDER else len(IMPL_ORDER)):
            pred, _ = predict(a.ctron, a.gpu, c, impl)
            ms = impls[impl]
            err = 100.0 * (pred - ms) / ms
            print(f"| {cfg} | {impl} | {ms:.1f} | {pred:.1f} | {err:+.1f} % |")
            if impl in bounds:
                checked += 1
                if abs(err) > bounds[impl]:
                    failed.append(f"{cfg} {impl}: {err:+.1f} % (bound {bounds[impl]:g} %)")
    missing = [i for i in bounds if not any(i in impls for _, impls in runs.values())]
    if missing:
        print("planner_gpu_check: no measurement of " + ", ".join(missing), file=sys.stderr)
        return 1
    for f in failed:
        print(f"planner_gpu_check: FAIL {f}", file=sys.stderr)
    if bounds:
        print(f"\nplanner_gpu_check: {checked - len(failed)} of {checked} bounded rows within their bound")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
