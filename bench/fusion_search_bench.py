#!/usr/bin/python3
"""The fusion-aware recompute search (issue 29 part 3) against the hand-made policies at the same bytes.

For the S config and the llama bench config (bench/run_bench.py's CONFIGS "S" and "S-llama"), fp32
storage and compute, one process:

1. the rates that price a recompute: --search-rates, else what `ctron train --recompute search`
   measures here (the cached `ctron peak` GEMM figure and a memory bandwidth), read once from a tiny
   run and then given to every run, so every pick below is made at the same rates;
2. at each per-layer budget, the search's pick (`ctron memory --recompute search`: the analytic model)
   and the hand-made Megatron policy at the same bytes: the per-layer list of the fewest full layers,
   then the most none layers, the rest selective, whose predicted activation peak is no larger than the
   pick's (`ctron memory --recompute-layers`);
3. both trained for --steps steps, interleaved over --rounds rounds (the order alternates): each run's
   CPU seconds (user + sys of the whole run: start-up, the steps and one evaluation batch, the same
   for both but for what they recompute) and the ratio hand-made / search within each round (> 1: the
   search is cheaper), beside the wall-clock median ms/step (first step dropped), which on a loaded
   machine moves by tens of per cent between identical runs; the measured bytes from each run's log
   (act_layer_bytes: layer 0 as the ledger counts it; act_bytes: the ledger's step peak) against the
   prediction (== required).

Writes bench/results/<date>-fusion-search.json and .md (also printed). The machine is a noisy shared
2-core VM: keep the runs short and compare the per-round ratios, not absolute times.

    /usr/bin/python3 bench/fusion_search_bench.py                       # S and S-llama, 3 budgets each
    /usr/bin/python3 bench/fusion_search_bench.py --configs S --rounds 1 --steps 2
    /usr/bin/python3 bench/fusion_search_bench.py --budgets S=15e6,S-llama=20e6 --full   # + full recompute

--diff-steps N also runs every policy for N steps, after the --steps runs of the round in the same order:
(CPU of N steps − CPU of --steps steps) / (N − --steps) is the CPU seconds of one step, start-up, the
evaluation batch and the first step's warm-up differenced away.

--attention flash runs every policy with flash attention (the search's graph is flash's block).

--full also runs full recompute (every layer its own group: the least a layer keeps, so never more bytes
than the pick) in each round, the three runs of a case in rotating order.
"""
import argparse
import datetime
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from run_bench import CONFIGS  # noqa: E402  (the configs' one definition)

# Per-layer budgets (bytes) per config: three points of the search's range at fp32, between none
# and full recompute (docs/PERFORMANCE.md has what each picks at the measured rates).
BUDGETS = {"S": [50e6, 34e6, 30e6], "S-llama": [45e6, 32e6, 29e6]}


ATTENTION = []   # ["--attention", "flash"] under --attention flash: every run, search and hand-made alike


def shape_flags(c):
    f = ATTENTION + ["--layers", str(c["layers"]), "--hidden", str(c["hidden"]), "--heads", str(c["heads"]), "--seq", str(c["seq"]),
         "--batch", str(c["batch"]), "--vocab", str(c["vocab"]), "--dropout", str(c["dropout"])]
    if c.get("arch") == "llama":
        f += ["--arch", "llama", "--kv-heads", str(c["kv_heads"]), "--ffn-hidden", str(c["ffn"])]
    return f


def memory(ctron, c, extra):
    out = subprocess.run([ctron, "memory"] + shape_flags(c) + ["--act-dtype", "fp32", "--json"] + extra,
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    return d["first_stage"]["activation_peak_bytes"], d["layer_classes"], d["policy"]


def measured_rates(ctron, data):
    """The rates `ctron train --recompute search` measures here (a tiny run's header)."""
    out = subprocess.run([ctron, "train", "--layers", "1", "--hidden", "64", "--heads", "4", "--seq", "32", "--batch",
                          "2", "--steps", "1", "--eval-every", "0", "--eval-batches", "1", "--threads", "2", "--data", data,
                          "--recompute", "search", "--act-budget-layer", "1GB", "--no-ledger"],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"at ([0-9.]+) GFLOP/s, ([0-9.]+) GB/s", out)
    return float(m[1]), float(m[2])


def hand_made(ctron, c, peak):
    """The Megatron list of the fewest full layers, then the most none layers, fitting the peak."""
    L = c["layers"]
    for F in range(L + 1):
        for N in range(L - F, -1, -1):
            S = L - F - N
            parts = []
            if F: parts.append(f"0-{F - 1}:full")
            if S: parts.append(f"{F}-{F + S - 1}:selective")
            if N: parts.append(f"{F + S}-{L - 1}:none")
            lst = ",".join(parts)
            p, _, _ = memory(ctron, c, ["--recompute-layers", lst])
            if p <= peak:
                return lst, p
    return None, None


def train(ctron, c, args, extra, log, steps=None):
    cmd = [ctron, "train"] + shape_flags(c) + ["--steps", str(steps or args.steps), "--eval-every", "0", "--eval-batches", "1",
                                               "--threads", str(args.threads), "--data", args.data, "--log", log,
                                               "--peak-gflops", "100", "--ledger"] + extra
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=args.timeout).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    rows = [json.loads(line) for line in open(log)]
    ok = "MISMATCH" not in out and re.search(r"peak of the step.*ok", out) is not None
    return rows, ok, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctron", default=os.path.join(ROOT, "build", "ctron"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "kjv.txt"))
    ap.add_argument("--configs", default="S,S-llama")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--search-rates", default=None, help="GFLOPS,GBPS (default: measured here, once)")
    ap.add_argument("--budgets", default=None, help="CONFIG=BYTES,... per-layer budgets (default: BUDGETS, 3 each)")
    ap.add_argument("--full", action="store_true", help="also run full recompute at each case")
    ap.add_argument("--diff-steps", type=int, default=0, help="also run N steps: CPU s/step by differencing")
    ap.add_argument("--attention", choices=["standard", "flash"], default="standard",
                    help="flash: every run with --attention flash (the search over flash's block; selective is none there)")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    args = ap.parse_args()
    if args.attention == "flash":
        ATTENTION.extend(["--attention", "flash"])
    for path, what in ((args.ctron, "--ctron"), (args.data, "--data")):
        if not os.path.exists(path):
            print(f"fusion_search_bench: {what} {path} does not exist", file=sys.stderr)
            return 2
    gflops, gbps = (map(float, args.search_rates.split(","))) if args.search_rates else measured_rates(args.ctron, args.data)
    rates = f"{gflops:.6g},{gbps:.6g}"
    print(f"rates: {gflops:.1f} GFLOP/s, {gbps:.2f} GB/s (--search-rates {rates})", flush=True)
    cases = []
    budgets = BUDGETS
    if args.budgets:
        budgets = {}
        for item in args.budgets.split(","):
            name, b = item.split("=")
            budgets.setdefault(name, []).append(float(b))
    policies = ["search", "hand"] + (["full"] if args.full else [])
    configs = list(budgets) if args.budgets else args.configs.split(",")
    for name in configs:
        c = CONFIGS[name]
        for budget in budgets[name]:
            search = ["--recompute", "search", "--act-budget-layer", f"{budget:.0f}", "--search-rates", rates]
            peak, classes, pol = memory(args.ctron, c, search)
            lst, hpeak = hand_made(args.ctron, c, peak)
            pick = pol["recompute"] + ("" if pol["tempo"] == "none" else f" (tempo {pol['tempo']})")
            cases.append(dict(config=name, budget=budget, pick=pick, layer_bytes=classes[0]["total"], peak=peak,
                              hand=lst, hand_peak=hpeak, search_flags=search, times={w: [] for w in policies},
                              cpu={w: [] for w in policies}, cpu_step={w: [] for w in policies}, ratios=[],
                              full_ratios=[], step_ratios=[], measured={}))
            print(f"{name} budget {budget / 1e6:.0f} MB/layer: search picks {pick}, {classes[0]['total']} bytes/layer, "
                  f"peak {peak}; hand-made {lst}, peak {hpeak}", flush=True)
    work = tempfile.mkdtemp(prefix="fusion-bench-")
    for rnd in range(args.rounds):
        for k in cases:
            order = policies[rnd % len(policies):] + policies[:rnd % len(policies)]
            if rnd % 2: order.reverse()
            med, cpu = {}, {}
            flags = {"search": k["search_flags"], "hand": ["--recompute-layers", k["hand"]],
                     "full": ["--recompute", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]}
            for which in order:
                extra = flags[which]
                log = os.path.join(work, f"{k['config']}-{k['budget']:.0f}-{which}-{rnd}.jsonl")
                rows, ok, cpu[which] = train(args.ctron, CONFIGS[k["config"]], args, extra, log)
                ms = [r["ms"] for r in rows[1:]] or [rows[0]["ms"]]
                k["times"][which] += ms
                k["cpu"][which].append(cpu[which])
                med[which] = statistics.median(ms)
                k["measured"][which] = dict(layer_bytes=rows[0]["act_layer_bytes"], peak=rows[0]["act_bytes"],
                                            ledger_ok=ok)
            if args.diff_steps > args.steps:   # the same order again, longer: CPU s per step by difference
                step = {}
                for which in order:
                    log = os.path.join(work, f"{k['config']}-{k['budget']:.0f}-{which}-{rnd}-long.jsonl")
                    _, ok, long_cpu = train(args.ctron, CONFIGS[k["config"]], args, flags[which], log, args.diff_steps)
                    step[which] = (long_cpu - cpu[which]) / (args.diff_steps - args.steps)
                    k["cpu_step"][which].append(step[which])
                k["step_ratios"].append({w: step[w] / step["search"] for w in policies if w != "search"})
                print(f"round {rnd + 1} {k['config']} {k['budget'] / 1e6:.0f} MB: CPU s/step " +
                      ", ".join(f"{w} {step[w]:.2f}" for w in policies), flush=True)
            k["ratios"].append(cpu["hand"] / cpu["search"])
            if "full" in cpu: k["full_ratios"].append(cpu["full"] / cpu["search"])
            print(f"round {rnd + 1} {k['config']} {k['budget'] / 1e6:.0f} MB: search {cpu['search']:.1f} CPU s "
                  f"({med['search']:.0f} ms/step wall), hand-made {cpu['hand']:.1f} CPU s ({med['hand']:.0f} ms/step "
                  f"wall), CPU ratio {k['ratios'][-1]:.3f}" +
                  (f"; full {cpu['full']:.1f} CPU s ({med['full']:.0f} ms/step wall), full / search "
                   f"{k['full_ratios'][-1]:.3f}" if "full" in cpu else ""), flush=True)
    lines = [f"# Fusion-aware recompute search vs hand-made policies at the same bytes ({datetime.date.today()})", "",
             f"fp32, {args.threads} threads, {args.steps} steps x {args.rounds} rounds (first step of each run dropped); "
             f"rates {gflops:.1f} GFLOP/s, {gbps:.2f} GB/s", "",
             "| config | budget/layer | search picks | bytes/layer measured (= predicted) | peak measured (= predicted) "
             "| CPU s/run | wall ms/step | hand-made at <= the same peak | its peak | CPU s/run | wall ms/step "
             "| hand / search, CPU, per round |" + (" full: peak | CPU s/run | full / search, CPU, per round |"
                                                    if args.full else ""),
             "|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if args.full else "")]
    for k in cases:
        ms_s, ms_h = statistics.median(k["times"]["search"]), statistics.median(k["times"]["hand"])
        m = k["measured"]["search"]
        eq = "=" if m["layer_bytes"] == k["layer_bytes"] and m["peak"] == k["peak"] and m["ledger_ok"] else "!="
        lines.append(f"| {k['config']} | {k['budget'] / 1e6:.0f} MB | {k['pick']} | {m['layer_bytes']:,} ({eq}) | "
                     f"{m['peak']:,} ({eq}) | {statistics.median(k['cpu']['search']):.1f} | {ms_s:.0f} | {k['hand']} | "
                     f"{k['measured']['hand']['peak']:,} | {statistics.median(k['cpu']['hand']):.1f} | {ms_h:.0f} | "
                     f"{' '.join(f'{r:.3f}' for r in k['ratios'])} |" +
                     (f" {k['measured']['full']['peak']:,} | {statistics.median(k['cpu']['full']):.1f} | "
                      f"{' '.join(f'{r:.3f}' for r in k['full_ratios'])} |" if args.full else ""))
    if args.diff_steps > args.steps:
        lines += ["", f"CPU seconds per step ({args.diff_steps}-step run − {args.steps}-step run) / "
                  f"{args.diff_steps - args.steps}, per round:", "",
                  "| config | budget/layer | " + " | ".join(f"{w} CPU s/step" for w in policies) + " | " +
                  " | ".join(f"{w} / search" for w in policies if w != "search") + " |",
                  "|---|---|" + "---|" * (2 * len(policies) - 1)]
        for k in cases:
            lines.append(f"| {k['config']} | {k['budget'] / 1e6:.0f} MB | " +
                         " | ".join(" ".join(f"{x:.2f}" for x in k["cpu_step"][w]) for w in policies) + " | " +
                         " | ".join(" ".join(f"{r[w]:.3f}" for r in k["step_ratios"]) for w in policies if w != "search")
                         + " |")
    md = "\n".join(lines) + "\n"
    print(md)
    os.makedirs(args.out_dir, exist_ok=True)
    stem = os.path.join(args.out_dir, f"{datetime.date.today()}-fusion-search" + ("-flash" if ATTENTION else ""))
    with open(stem + ".json", "w") as f:
        json.dump(dict(rates=[gflops, gbps], steps=args.steps, rounds=args.rounds, threads=args.threads, cases=cases), f,
                  indent=1)
    with open(stem + ".md", "w") as f:
        f.write(md)
    bad = [k for k in cases if not k["measured"]["search"]["ledger_ok"] or k["measured"]["search"]["layer_bytes"] !=
           k["layer_bytes"] or k["measured"]["search"]["peak"] != k["peak"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
