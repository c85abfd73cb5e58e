#!/usr/bin/env python3
"""Kernel times side by side, by category: where one GPU step's device time goes in ctron (CTRON_KERNEL_TIMES's
JSON) and in a peer (bench/gpu_bench.py --peer ... --kernel-times: torch.profiler in the same schema).

Each row of a run is put in the first category whose pattern its name matches (case-insensitive), in the order
of CATEGORIES; the table gives each category's ms per step and share of the run's device time, and what the
run's rows of that category were (the largest few), so a gap between the columns names the kernels behind it.

usage: kernel_categories.py LABEL=FILE.json [LABEL=FILE.json ...] [--top N]
"""
import argparse
import json
import re
import sys

# (category, pattern). ctron's rows are "function (file.cu)" or "gemm ..." / "attention gemm ..."; torch's
# are kernel names (cuBLAS/CUTLASS/nvjet GEMMs, flash/cuDNN attention, Triton's fused kernels, ATen's).
CATEGORIES = [
    ("idle (host waits)", r"^\(device idle"),
    ("attention", r"flash|fmha|attention|sdpa|scaled_dot|softmax_rows|core_group|backward_group"),
    ("bf16 conversions", r"bf16_pack|bf16_unpack|bf16_round|colpass|_to_copy|convert"),   # before GEMM: gemm.cu's packs
    ("copies and fills", r"^memcpy |^memset"),   # before GEMM: ctron's copies are named by their file (gemm.cu's staging)
    ("GEMM", r"^gemm |gemm|sm\d+_xmma|cutlass|nvjet|cublas|aten::(mm|addmm|bmm|matmul)"),
    ("cross-entropy", r"crossentropy|cross_entropy|nll_loss|log_softmax|logsumexp"),
    ("optimizer", r"adam|step_guard|optim\.cu|multi_tensor|foreach|sumsq|nonfinite"),
    ("norms", r"layernorm|layer_norm|rmsnorm|rms_norm|ln_backward|native_layer_norm"),
    ("copies and fills", r"memcpy|memset|fill|copy_|zero"),
]
OTHER = "element-wise and other"


def category(name):
    for cat, pat in CATEGORIES:
        if re.search(pat, name, re.IGNORECASE):
            return cat
    return OTHER


def refuse(msg):
    print(f"kernel_categories: {msg}", file=sys.stderr)
    sys.exit(2)


def load(spec):
    if "=" not in spec:
        refuse(f"'{spec}': expected LABEL=FILE.json")
    label, path = spec.split("=", 1)
    try:
        with open(path) as f:
            d = json.load(f)
        rows = d["rows"]
        for r in rows:
            float(r["device_ms"])
            str(r["what"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        refuse(f"{path}: not a kernel-times JSON ({e})")
    return label, d


def summarise(d):
    cats = {}
    for r in d["rows"]:
        c = cats.setdefault(category(r["what"]), {"ms": 0.0, "rows": []})
        c["ms"] += r["device_ms"]
        c["rows"].append(r)
    return cats


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="LABEL=FILE.json")
    ap.add_argument("--top", type=int, default=2, help="the largest rows named per category and run")
    a = ap.parse_args()
    runs = [load(x) for x in a.runs]
    sums = [(label, d, summarise(d)) for label, d in runs]
    order = list(dict.fromkeys([c for c, _ in CATEGORIES] + [OTHER]))   # a category may have two patterns
    print("| category | " + " | ".join(f"{label} ms/step | share" for label, _, _ in sums) + " | largest rows |")
    print("|---|" + "---:|---:|" * len(sums) + "---|")
    for cat in order:
        if not any(cat in s for _, _, s in sums):
            continue
        cells, names = [], []
        for label, d, s in sums:
            total = sum(r["device_ms"] for r in d["rows"]) or 1.0
            ms = s.get(cat, {"ms": 0.0})["ms"]
            cells.append(f"{ms:.3f} | {100 * ms / total:.1f} %")
            top = sorted(s.get(cat, {"rows": []})["rows"], key=lambda r: -r["device_ms"])[:a.top]
            if top:
                names.append(f"{label}: " + ", ".join(f"{r['what'][:48]} {r['device_ms']:.2f}" for r in top))
        print(f"| {cat} | " + " | ".join(cells) + " | " + "; ".join(names) + " |")
    print("| **total** | " + " | ".join(f"{sum(r['device_ms'] for r in d['rows']):.3f} | 100 %" for _, d, _ in sums)
          + " | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
