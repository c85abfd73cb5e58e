#!/usr/bin/env python3
"""ctron plan --cluster against published end-to-end training runs (issue 28).

Reads bench/validation/published_runs.tsv, predicts every row's step with `ctron plan --cluster
--layout ... --json`, converts the published figure to seconds per step and prints predicted vs
published with the error, per row and as the mean |error| and the worst row of the calibration and
of the check rows. --max-* make it a test: exit 1 when a bound is exceeded. --svg draws predicted
against published. Standard library only.

  python3 bench/planner_validate.py --ctron build/ctron [--markdown] [--svg docs/planner_validation.svg]
"""
import argparse
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, "validation", "published_runs.tsv")
SHAPE_FLAGS = {"L": "--layers", "h": "--hidden", "a": "--heads", "v": "--vocab", "s": "--seq"}
ROLES = {"calib": "calibration: Megatron-LM 2022, the rows the constants were chosen against",
         "check": "held out: Megatron-LM runs never used to set a constant",
         "check-ds": "held out: Megatron-DeepSpeed runs, another framework than the model's",
         "check-h100": "held out: NeMo / Megatron-Bridge FP8 runs on H100 (Transformer Engine)"}


def read_table(path):
    rows, header = [], None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            cells = line.split("\t")
            if header is None:
                header = cells
                continue
            if len(cells) != len(header):
                sys.exit(f"{path}: a row of {len(cells)} cells, expected {len(header)}: {line[:80]}")
            rows.append(dict(zip(header, cells)))
    return rows


def model_args(model):
    if "=" not in model:
        return ["--preset", model], None
    shape = dict(kv.split("=") for kv in model.split(","))
    args = []
    for k, v in shape.items():
        args += [SHAPE_FLAGS[k], v]
    return args, {k: float(v) for k, v in shape.items()}


def published_seconds(row, shape, gpus):
    value, metric = float(row["value"]), row["metric"]
    if metric == "step_s":
        return value
    if metric == "tok_s_gpu":   # tokens per second per GPU: B·s tokens a step over all GPUs
        flags = row["flags"].split()
        s = shape["s"] if shape and "s" in shape else float(flags[flags.index("--seq") + 1])
        return float(row["batch"]) * s / (value * gpus)
    if metric == "tflops96":   # Narayanan et al. 2021, Eq. 3: full recompute's FLOPs per iteration
        L, h, v, s = shape["L"], shape["h"], shape["v"], shape["s"]
        B = float(row["batch"])
        flops = 96 * B * s * L * h * h * (1 + s / (6 * h) + v / (16 * L * h))
        return flops / (value * 1e12 * gpus)
    sys.exit(f"row {row['id']}: unknown metric '{metric}'")


def predict(ctron, row, extra):
    margs, shape = model_args(row["model"])
    cmd = [ctron, "plan", "--cluster", "--gpu", row["gpu"], "--gpus-per-node", "8", "--nodes", row["nodes"],
           *margs, "--global-batch", row["batch"], "--layout", row["layout"], "--json"]
    if row["flags"] != "-":
        cmd += row["flags"].split()
    cmd += extra
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"row {row['id']}: {' '.join(cmd)} exited {out.returncode}: {out.stderr.strip()}")
    x = json.loads(out.stdout)["layouts"][0]
    if shape is None:   # a preset: the shape for the FLOPs formula is not needed for step_s rows
        shape = {}
    return x, shape


def summary(rows, role):
    errs = [abs(r["err"]) for r in rows if r["role"] == role]
    return (sum(errs) / len(errs), max(errs), len(errs)) if errs else (0.0, 0.0, 0)


def svg(rows, path):
    lo = min(min(r["pub"], r["pred"]) for r in rows) * 0.8
    hi = max(max(r["pub"], r["pred"]) for r in rows) * 1.25
    W, H, M = 560, 520, 70
    def xy(a, b):
        fx = (math.log(a) - math.log(lo)) / (math.log(hi) - math.log(lo))
        fy = (math.log(b) - math.log(lo)) / (math.log(hi) - math.log(lo))
        return M + fx * (W - 2 * M), H - M - fy * (H - 2 * M)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="Helvetica, Arial, sans-serif" '
           f'font-size="11">', '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{W / 2}" y="22" font-size="14" font-weight="bold" text-anchor="middle">ctron plan --cluster: '
           'predicted vs published step time</text>',
           f'<text x="{W / 2}" y="40" text-anchor="middle" fill="#555">log-log; the band is ±10 %; '
           'bench/planner_validate.py</text>']
    for f, dash in ((1.0, ""), (1.1, ' stroke-dasharray="4 3"'), (1 / 1.1, ' stroke-dasharray="4 3"')):
        x0, y0 = xy(lo, lo * f)
        x1, y1 = xy(hi, hi * f)
        out.append(f'<line x1="{x0:.1f}" y1="{y0:.1f}" x2="{x1:.1f}" y2="{y1:.1f}" stroke="#999"{dash}/>')
    t = 10 ** math.floor(math.log10(lo))
    while t <= hi:
        for k in (1, 2, 5):
            v = t * k
            if lo <= v <= hi:
                x, _ = xy(v, lo)
                _, y = xy(lo, v)
                out.append(f'<text x="{x:.1f}" y="{H - M + 16}" text-anchor="middle">{v:g}</text>')
                out.append(f'<text x="{M - 6}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
        t *= 10
    out.append(f'<rect x="{M}" y="{M}" width="{W - 2 * M}" height="{H - 2 * M}" fill="none" stroke="#333"/>')
    out.append(f'<text x="{W / 2}" y="{H - 22}" text-anchor="middle">published s per step</text>')
    out.append(f'<text x="18" y="{H / 2}" text-anchor="middle" transform="rotate(-90 18 {H / 2})">predicted s per '
               'step</text>')
    for r in rows:
        x, y = xy(r["pub"], r["pred"])
        colour = {"calib": "#1f77b4", "check": "#d62728", "check-h100": "#2ca02c"}.get(r["role"], "#ff7f0e")
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}"><title>{r["id"]}: predicted '
                   f'{r["pred"]:.3g} s, published {r["pub"]:.3g} s ({100 * r["err"]:+.1f} %)</title></circle>')
    for i, (label, colour) in enumerate((("calibration rows (Megatron-LM 2022)", "#1f77b4"),
                                          ("check rows, Megatron-LM (held out)", "#d62728"),
                                          ("check rows, Megatron-DeepSpeed (held out)", "#ff7f0e"),
                                          ("check rows, NeMo FP8 on H100 (held out)", "#2ca02c"))):
        out.append(f'<circle cx="{M + 14}" cy="{M + 16 + 16 * i}" r="4" fill="{colour}"/>')
        out.append(f'<text x="{M + 24}" y="{M + 20 + 16 * i}">{label}</text>')
    out.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ctron", required=True)
    ap.add_argument("--table", default=TABLE)
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown (docs/PLANNER.md)")
    ap.add_argument("--svg", help="write predicted vs published as SVG")
    ap.add_argument("--extra", default="", help="more flags for every row (e.g. to compare a model variant)")
    for role in ROLES:
        flag = role.replace("-", "_")
        ap.add_argument(f"--max-{role}-mean", dest=f"max_{flag}_mean", type=float,
                        help=f"fail when the {role} rows' mean |error| (%%) exceeds it")
        ap.add_argument(f"--max-{role}-row", dest=f"max_{flag}_row", type=float,
                        help=f"fail when a {role} row's |error| (%%) exceeds it")
    a = ap.parse_args()
    results = []
    for row in read_table(a.table):
        gpus = 8 * int(row["nodes"])
        x, shape = predict(a.ctron, row, a.extra.split())
        pub = published_seconds(row, shape, gpus)
        results.append({"id": row["id"], "role": row["role"], "pub": pub, "pred": x["step_s"],
                        "err": x["step_s"] / pub - 1, "row": row})
    if a.markdown:
        print("| row | role | GPUs | layout | published s | predicted s | error | source |")
        print("|---|---|---:|---|---:|---:|---:|---|")
        for r in results:
            row = r["row"]
            print(f"| {r['id']} | {r['role']} | {8 * int(row['nodes'])} | {row['layout']} | {r['pub']:.3f} | "
                  f"{r['pred']:.3f} | {100 * r['err']:+.1f} % | {row['source']} |")
    else:
        print(f"{'row':<10} {'role':<6} {'GPUs':>5} {'published s':>12} {'predicted s':>12} {'error':>8}")
        for r in results:
            print(f"{r['id']:<10} {r['role']:<6} {8 * int(r['row']['nodes']):>5} {r['pub']:>12.3f} {r['pred']:>12.3f} "
                  f"{100 * r['err']:>+7.1f}%")
    ok = True
    for role in ROLES:
        mean, worst, n = summary(results, role)
        print(f"{role}: {n} rows, mean |error| {100 * mean:.1f} %, worst {100 * worst:.1f} %  ({ROLES[role]})")
        flag = role.replace("-", "_")
        bm, br = getattr(a, f"max_{flag}_mean"), getattr(a, f"max_{flag}_row")
        if bm is not None and 100 * mean > bm:
            print(f"FAIL: {role} mean |error| {100 * mean:.2f} % > {bm} %")
            ok = False
        if br is not None and 100 * worst > br:
            print(f"FAIL: {role} worst |error| {100 * worst:.2f} % > {br} %")
            ok = False
    if a.svg:
        svg(results, a.svg)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
