#!/usr/bin/env python3
"""The paper's Table 4 on one device: one transformer layer of the 22B model as one TP rank runs it.

Korthikanti et al. time one layer of the 22B model (h 6144, a 64, s 2048, b 4) at t = 8: forward and
backward under no recompute, selective and full recompute (their Table 4: 7.7/11.9, 7.7/13.2 and
7.7/19.5 ms; selective +7 %, full +39 %). One TP rank's work runs here alone with `ctron train --tp 8
--tp-solo` (the other ranks' data stood in locally: the same shards, kernels and memory as rank 0, no
communication time). A layer's time is the difference of two models, L_BIG and L_SMALL layers, per step
phase (the log's fwd_ms and bwd_ms, medians over the steps after the first; with --rounds R the least of R
runs, interleaved, which a busy machine disturbs least), so the embedding, the output layer and the
optimizer cancel. Overheads are against `none` with the same attention kernel.

    python3 bench/table4.py --ctron build-gpu/ctron --device cuda --precision bf16 --out t4.json
    python3 bench/table4.py --ctron build/ctron --device cpu --scale 8          # shapes / 8, a CPU check

--scale K divides h, a and s by K (the model stays one rank of t = 8) for machines too small for 22B.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PAPER = {"none": (7.7, 11.9), "selective": (7.7, 13.2), "full": (7.7, 19.5)}   # ms, fwd / bwd, t = 8


def run(args, layers, recompute, attention):
    h, a, s = 6144 // args.scale, 64 // args.scale, 2048 // args.scale
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "log.jsonl")
        cmd = [args.ctron, "train", "--device", args.device, "--precision", args.precision, "--tp", "8", "--tp-solo",
               "--layers", str(layers), "--hidden", str(h), "--heads", str(a), "--seq", str(s), "--batch", "4",
               "--vocab", str(args.vocab), "--dropout", "0.1", "--recompute", recompute, "--attention", attention,
               "--steps", str(args.steps), "--eval-every", "0", "--eval-batches", "1", "--data", args.data,
               "--log", log, "--no-ledger"] + (["--threads", str(args.threads)] if args.threads else [])
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}")
        recs = [json.loads(x) for x in open(log) if x.strip()][1:]   # the first step warms up
        return statistics.median(r["fwd_ms"] for r in recs), statistics.median(r["bwd_ms"] for r in recs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ctron", default="build/ctron")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--data", default="data/kjv.txt")
    ap.add_argument("--scale", type=int, default=1, help="divide h, a and s by this (default 1: the 22B layer)")
    ap.add_argument("--vocab", type=int, default=51200)
    ap.add_argument("--layers", default="2,4", help="L_SMALL,L_BIG (default 2,4)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--attention", default="standard,flash")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.scale not in (1, 2, 4, 8):
        print(f"table4: --scale {args.scale}: expected 1, 2, 4 or 8 (the 64 heads stay divisible by t = 8)",
              file=sys.stderr)
        return 2
    small, big = (int(x) for x in args.layers.split(","))
    cases = [(att, rc) for att in args.attention.split(",") if att for rc in ("none", "selective", "full")]
    best = {}
    for _ in range(args.rounds):
        for case in cases:
            for layers in (small, big):
                t0 = time.time()
                f, b = run(args, layers, case[1], case[0])
                print(f"table4: {case[0]} {case[1]} {layers} layers: forward {f:.2f} ms, backward {b:.2f} ms "
                      f"(the run took {time.time() - t0:.1f} s)", flush=True)
                old = best.get((case, layers), (f, b))
                best[(case, layers)] = (min(f, old[0]), min(b, old[1]))
    rows = []
    for att, rc in cases:
        (f0, b0), (f1, b1) = best[((att, rc), small)], best[((att, rc), big)]
        rows.append({"attention": att, "recompute": rc, "fwd_ms": (f1 - f0) / (big - small),
                     "bwd_ms": (b1 - b0) / (big - small)})
        print(json.dumps(rows[-1]), flush=True)
    print(f"\none layer of the 22B model{f' / {args.scale}' if args.scale > 1 else ''} as TP rank 0 of 8 "
          f"(h {6144 // args.scale}, a {64 // args.scale}, s {2048 // args.scale}, b 4), {args.device}, "
          f"{args.precision}; ms (layers {big} − {small})\n")
    print("| attention | recompute | forward | backward | combined | overhead vs none | paper (A100, t 8) |")
    print("|---|---|---:|---:|---:|---:|---|")
    for r in rows:
        base = next(x for x in rows if x["attention"] == r["attention"] and x["recompute"] == "none")
        c, c0 = r["fwd_ms"] + r["bwd_ms"], base["fwd_ms"] + base["bwd_ms"]
        r["overhead"] = c / c0 - 1
        pf, pb = PAPER[r["recompute"]]
        print(f"| {r['attention']} | {r['recompute']} | {r['fwd_ms']:.2f} | {r['bwd_ms']:.2f} | {c:.2f} | "
              f"{100 * r['overhead']:+.1f} % | {pf}/{pb} ms, {100 * ((pf + pb) / 19.6 - 1):+.0f} % |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)
    # A layer's backward does twice its forward's GEMMs: shorter than the forward means the phases were
    # not timed on the device (the first H100 run read the host's queueing time).
    implausible = [r for r in rows if r["recompute"] == "none" and r["bwd_ms"] < r["fwd_ms"]]
    if implausible:
        print(f"table4: the backward ({implausible[0]['bwd_ms']:.2f} ms) is shorter than the forward "
              f"({implausible[0]['fwd_ms']:.2f} ms) with no recompute: these are not the device's times",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
