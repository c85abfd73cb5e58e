#!/usr/bin/env python3
"""Where a GPU step's time goes, kernel by kernel: Nsight Compute's per-kernel durations, summed by name.

The GPU machine has `ncu` but no Nsight Systems (device/KINDS.md), so scripts/gpu_check.sh's stage 8 runs

    ncu --clock-control none --metrics gpu__time_duration.sum --print-units base --csv ctron train ... > k.csv

(each kernel serialised and timed alone: launch gaps and host synchronisations are not in these sums;
the step's wall time beside their total shows them) and this script turns the CSV into a table:

    python3 scripts/gpu_profile.py k.csv [--step-ms 83.5] [--top 25] [--json out.json]

A kernel's name is cut at its argument list and template arguments (cuBLASLt's sm90 GEMMs keep their
tile names), so the launches of one kernel add up.
"""
import argparse
import csv
import io
import json
import re
import sys

UNIT_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}


def short_name(name):
    """void foo<float, 4>(float*, int) -> foo; cuBLASLt's kernels keep their own (long) names."""
    n = name.strip()
    n = re.sub(r"^void\s+", "", n)
    n = n.split("(")[0]
    depth, out = 0, []
    for ch in n:   # drop template arguments, nested ones included
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip() or name.strip()


def read_kernels(text):
    """[(name, ns)] from ncu's CSV (lines before the header, e.g. ==PROF== notes, are skipped)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise ValueError("no ncu CSV header (a line starting with \"ID\") in the input")
    rows = []
    for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = r.get("Metric Unit", "nsecond")
        if unit not in UNIT_NS:
            raise ValueError(f"unknown unit '{unit}' for kernel {r.get('Kernel Name')}")
        value = float(r["Metric Value"].replace(",", ""))
        rows.append((short_name(r["Kernel Name"]), value * UNIT_NS[unit]))
    return rows


def summarize(rows):
    total = sum(ns for _, ns in rows)
    by = {}
    for name, ns in rows:
        n, t = by.get(name, (0, 0.0))
        by[name] = (n + 1, t + ns)
    table = [{"kernel": k, "launches": n, "ms": t / 1e6, "share": t / total if total else 0.0}
             for k, (n, t) in sorted(by.items(), key=lambda kv: -kv[1][1])]
    return total / 1e6, table


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--steps", type=int, default=1, help="steps the profiled run took (per-step figures)")
    ap.add_argument("--step-ms", type=float, help="the unprofiled run's ms/step, beside the kernels' sum")
    ap.add_argument("--json")
    args = ap.parse_args()
    try:
        rows = read_kernels(open(args.csv, errors="replace").read())
    except (OSError, ValueError) as e:
        print(f"gpu_profile: {args.csv}: {e}", file=sys.stderr)
        return 2
    if not rows:
        print(f"gpu_profile: {args.csv}: no gpu__time_duration.sum rows", file=sys.stderr)
        return 2
    total_ms, table = summarize(rows)
    per = total_ms / args.steps
    print(f"{len(rows)} kernel launches, {total_ms:.2f} ms of kernels in all, {per:.2f} ms a step"
          + (f" (the step's wall time {args.step_ms:.2f} ms: {args.step_ms - per:.2f} ms outside kernels)"
             if args.step_ms else ""))
    print("\n| kernel | launches (all steps) | ms a step | share |\n|---|---:|---:|---:|")
    for r in table[:args.top]:
        print(f"| `{r['kernel'][:90]}` | {r['launches']} | {r['ms'] / args.steps:.3f} | "
              f"{100 * r['share']:.1f} % |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"total_ms": total_ms, "steps": args.steps, "kernels": table}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
