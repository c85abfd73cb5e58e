#!/usr/bin/python3
"""Beyond the paper (issue 7): what each memory option keeps and costs, and how long a sequence
fits a fixed activation budget with the planner versus the paper's policies.

1. Measured, config L (12 layers, hidden 768, 12 heads, seq 2048, micro-batch 1, vocab 8192,
   dropout 0.1, fp32 storage unless the row says otherwise), ctron alone: for each option, the
   activation bytes of layer 0 and of the step's peak (from ctron's log: the ledger, which tests
   hold equal to the analytic model), and the median ms/step (the first step of each run dropped),
   with the overhead over `none` from the same invocation. Runs alternate over --rounds rounds.
   Offload rows add the pool's bytes; static-plan rows the plan against its lower bound, the naive
   sum and the default layout.
2. Analytic (ctron memory / ctron plan, the same model the ledger matches), the longest sequence
   (a multiple of 64) whose activation peak per rank plus the attention scratch of its threads fits
   --budget (default 4 GiB), for none, selective, full and the planner (alone, and with an offload
   pool of 4x the budget).

Writes bench/results/<date>-options.json and .md (also printed).
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPE = ["--layers", "12", "--hidden", "768", "--heads", "12", "--batch", "1", "--vocab", "8192"]
OPTIONS = [
    ("none", []),
    ("selective", ["--recompute", "selective"]),
    ("full", ["--recompute", "full"]),
    ("tempo all", ["--tempo", "all"]),
    ("few-bit GeLU k=2", ["--gelu-bits", "2"]),
    ("mini-seq 8", ["--mini-seq", "8"]),
    ("flash attention", ["--attention", "flash"]),
    ("selective + bf16 + regen", ["--recompute", "selective", "--act-dtype", "bf16", "--dropout-masks", "regen"]),
    ("flash + mini-seq 8 + tempo ln + bits", ["--attention", "flash", "--mini-seq", "8", "--tempo", "layernorm",
                                              "--dropout-masks", "bits"]),
    # activation offload: every tensor a layer keeps, to host memory or to a file ({work}: the run's
    # temporary directory); the device keeps two layers' worth as stage slots
    ("offload all (host)", ["--offload", "all"]),
    ("offload all (file)", ["--offload", "all", "--offload-dir", "{work}"]),
    ("offload MLP (file)", ["--offload", "fc1_in,gelu_in,fc2_in", "--offload-dir", "{work}"]),
    # static memory planning: saved tensors and temporaries at planned offsets in one block
    ("static plan", ["--static-plan"]),
    ("static plan + selective", ["--static-plan", "--recompute", "selective"]),
]


def run_ctron(ctron, args, seq, opts, workdir, tag):
    log = os.path.join(workdir, tag.replace(" ", "_").replace("(", "").replace(")", "") + ".jsonl")
    opts = [o.replace("{work}", workdir) for o in opts]
    cmd = [ctron, "train"] + SHAPE + ["--seq", str(seq), "--steps", str(args.steps), "--eval-every", "0",
                                      "--eval-batches", "1", "--threads", str(args.threads), "--no-ledger",
                                      "--data", args.data, "--log", log, "--peak-gflops", "100"] + opts
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=args.timeout).stdout
    rows = [json.loads(line) for line in open(log)]
    return rows, out


UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def header_figures(out):
    """The offload pool and the static plan as the run's header reports them (bytes)."""
    import re
    fig = {}
    m = re.search(r"offload \S+ to .*?: ([0-9.]+) (B|KiB|MiB|GiB) per micro-batch in the pool, ([0-9.]+) (B|KiB|MiB|GiB) "
                  r"of stage", out)
    if m:
        fig["pool"] = float(m[1]) * UNITS[m[2]]
        fig["stage"] = float(m[3]) * UNITS[m[4]]
    m = re.search(r"static memory plan .*?one block of ([0-9.]+) (B|KiB|MiB|GiB);\s+training step ([0-9.]+) (B|KiB|MiB|GiB) "
                  r"vs ([0-9.]+) (B|KiB|MiB|GiB) live at most.*? and ([0-9.]+) (B|KiB|MiB|GiB) with no reuse.*?"
                  r"default layout held ([0-9.]+) (B|KiB|MiB|GiB)", out, re.S)
    if m:
        v = [float(m[i]) * UNITS[m[i + 1]] for i in range(1, 11, 2)]
        fig.update(plan_block=v[0], plan_peak=v[1], lower_bound=v[2], naive_sum=v[3], default_layout=v[4])
    return fig


def scratch(seq, threads, selective):
    # the attention backward's per-thread scratch, as ctron allocates it (src/model/gpt.c): s² floats,
    # or with selective recompute 3s² floats + s² mask bytes
    per = (3 * seq * seq + (seq * seq + 3) // 4) if selective else seq * seq
    return 4 * per * threads


def fits(ctron, seq, budget, policy_args, threads):
    out = subprocess.run([ctron, "memory"] + SHAPE + ["--seq", str(seq), "--act-dtype", "fp32", "--json"] + policy_args,
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    sel = "selective" in policy_args
    return d["first_stage"]["activation_peak_bytes"] + scratch(seq, threads, sel) <= budget, d


def plan_fits(ctron, seq, budget, threads, pool=0.0):
    extra = ["--offload-budget", str(int(pool))] if pool > 0 else []
    r = subprocess.run([ctron, "plan", "--budget", str(int(budget)), "--threads", str(threads)] + SHAPE +
                       ["--seq", str(seq)] + extra, capture_output=True, text=True)
    return r.returncode == 0, r.stdout.strip()


def longest(pred, hi=1 << 20):
    lo = 64
    if not pred(lo):
        return 0
    while lo * 2 <= hi and pred(lo * 2):
        lo *= 2
    step = lo // 2
    while step >= 64:
        if pred(lo + step):
            lo += step
        step //= 2
    return lo


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctron", default=os.path.join(ROOT, "build", "ctron"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "kjv.txt"))
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--budget", type=float, default=4 * 2**30, help="activation budget in bytes (default 4 GiB)")
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--suffix", default="options")
    ap.add_argument("--skip-measure", action="store_true", help="only the analytic longest-sequence table")
    args = ap.parse_args()

    results = {"date": datetime.date.today().isoformat(), "seq": args.seq, "threads": args.threads,
               "budget": args.budget, "measured": {}, "longest": {}}
    if not args.skip_measure:
        times = {name: [] for name, _ in OPTIONS}
        with tempfile.TemporaryDirectory() as work:
            for rnd in range(args.rounds):
                order = OPTIONS[rnd % len(OPTIONS):] + OPTIONS[:rnd % len(OPTIONS)]
                for name, opts in order:
                    rows, out = run_ctron(args.ctron, args, args.seq, opts, work, f"{name}-{rnd}")
                    times[name] += [r["ms"] for r in rows[1:]]
                    results["measured"][name] = {"args": opts, "act_bytes": rows[-1]["act_bytes"],
                                                 "act_layer_bytes": rows[-1]["act_layer_bytes"],
                                                 "loss_last": rows[-1]["loss"], **header_figures(out)}
                    print(f"  {name}: {rows[-1]['act_layer_bytes'] / 2**20:.1f} MiB/layer, "
                          f"{statistics.median(r['ms'] for r in rows[1:]):.0f} ms", flush=True)
        base = statistics.median(times["none"])
        for name, _ in OPTIONS:
            ms = statistics.median(times[name])
            results["measured"][name].update(ms=ms, overhead=ms / base - 1.0, samples=times[name])

    # longest sequence within the budget, analytic
    for name, pol in [("none", []), ("selective", ["--recompute", "selective"]), ("full", ["--recompute", "full"]),
                      ("selective + bf16 + regen", ["--recompute", "selective", "--act-dtype", "bf16",
                                                    "--dropout-masks", "regen"])]:
        s = longest(lambda q: fits(args.ctron, q, args.budget, pol, args.threads)[0])
        results["longest"][name] = {"seq": s}
    s = longest(lambda q: plan_fits(args.ctron, q, args.budget, args.threads)[0])
    ok, text = plan_fits(args.ctron, s, args.budget, args.threads)
    results["longest"]["planner"] = {"seq": s, "plan": text}
    pool = 4 * args.budget
    s = longest(lambda q: plan_fits(args.ctron, q, args.budget, args.threads, pool)[0])
    ok, text = plan_fits(args.ctron, s, args.budget, args.threads, pool)
    results["longest"][f"planner + {pool / 2**30:.0f} GiB offload pool"] = {"seq": s, "plan": text}

    os.makedirs(args.out_dir, exist_ok=True)
    stem = os.path.join(args.out_dir, f"{results['date']}-{args.suffix}")
    with open(stem + ".json", "w") as f:
        json.dump(results, f, indent=1)
    lines = [f"# ctron memory options — {results['date']}", ""]
    if results["measured"]:
        lines += [f"Config L (L12 h768 a12 s{args.seq} b1 v8192, dropout 0.1), {args.threads} threads, "
                  f"{args.rounds} round(s) x {args.steps} steps (first dropped), fp32 storage unless stated.", "",
                  "| option | layer 0 MiB | step peak MiB | offload pool MiB | ms/step | overhead vs none |",
                  "|---|---:|---:|---:|---:|---:|"]
        for name, _ in OPTIONS:
            r = results["measured"][name]
            pool = f"{r['pool'] / 2**20:.0f}" if "pool" in r else ""
            lines.append(f"| {name} | {r['act_layer_bytes'] / 2**20:.1f} | {r['act_bytes'] / 2**20:.1f} | {pool} | "
                         f"{r['ms']:.0f} | {100 * r['overhead']:+.1f} % |")
        lines.append("")
        planned = [(n, r) for n, r in results["measured"].items() if "plan_block" in r]
        if planned:
            lines += ["Static memory plans (one block for a step's saved tensors and temporaries, MiB):", "",
                      "| option | plan peak | lower bound | naive sum | default layout (arena + workspace) | plan / default |",
                      "|---|---:|---:|---:|---:|---:|"]
            for n, r in planned:
                lines.append(f"| {n} | {r['plan_peak'] / 2**20:.1f} | {r['lower_bound'] / 2**20:.1f} | "
                             f"{r['naive_sum'] / 2**20:.1f} | {r['default_layout'] / 2**20:.1f} | "
                             f"{r['plan_block'] / r['default_layout']:.2f} |")
            lines.append("")
    lines += [f"Longest sequence (multiple of 64) whose activation peak plus the attention backward's scratch of "
              f"{args.threads} threads fits {args.budget / 2**30:.2f} GiB per rank (L12 h768 a12 b1 v8192, fp32 unless "
              f"stated; the analytic model the ledger matches):", "",
              "| policy | longest seq | vs none |", "|---|---:|---:|"]
    none_s = results["longest"]["none"]["seq"]
    for name, r in results["longest"].items():
        lines.append(f"| {name} | {r['seq']} | {r['seq'] / none_s:.1f}x |")
    for name, r in results["longest"].items():
        if "plan" in r:
            lines += ["", f"{name} at its longest sequence:", "", "```", r["plan"], "```"]
    text = "\n".join(lines) + "\n"
    with open(stem + ".md", "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    sys.exit(main())
