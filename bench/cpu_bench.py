#!/usr/bin/python3
"""CPU seconds per training step on one thread: ctron beside its peer where the machine is too busy
for wall-clock times (bench/README.md, "CPU time per step").

On a shared machine whose cores run other people's work, a process's wall time depends on what the
scheduler gives it, and a 2-thread OpenMP run also waits at its barriers for a descheduled thread.
A one-thread process's CPU time does not: it is the work it does (plus the cache misses that the
neighbours cause, alike for both). So each implementation runs one config twice with --threads 1,
--steps A and --steps B, and

    CPU s per step = (CPU(B) - CPU(A)) / (B - A)       CPU = the child's rusage, user + system

which cancels start-up, initialisation and ctron's closing validation (the same in both runs)
and keeps only warm steps (A >= 2: step 1 is in both). Rounds alternate the implementations (the
order reversed in even rounds) like run_bench.py's. Per implementation: the median over rounds,
model GFLOP per CPU second (run_bench.py's FLOPs of the config), that over the one-thread GEMM
peak measured the same way (GFLOP per CPU second of `ctron peak --threads 1`: MFU per core), and
peer / ctron per round.

    /usr/bin/python3 bench/cpu_bench.py --configs S-llama --impls ctron,ctron-bf16,hf-fp32,hf-fp32-eager

Writes bench/results/<date>-cpu[-SUFFIX].json and .md.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench as rb  # noqa: E402


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="S-llama", help="configs of run_bench.py (default S-llama)")
    ap.add_argument("--impls", default="ctron,ctron-bf16,hf-fp32,hf-fp32-eager",
                    help="implementations of run_bench.py (default ctron,ctron-bf16,hf-fp32,"
                         "hf-fp32-eager); the peers of another family are skipped")
    ap.add_argument("--steps", default="2,4", help="A,B: the two runs' steps, 2 <= A < B (default 2,4)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--policy", default="none", help="recompute mode of both (default none)")
    ap.add_argument("--ctron", default=os.path.join(rb.ROOT, "build", "ctron"))
    ap.add_argument("--data", default=os.path.join(rb.ROOT, "data", "kjv.txt"))
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--peer-python", default=os.path.join(rb.HERE, ".venv", "bin", "peer-python"))
    ap.add_argument("--hf-python", default=None, help="default: scripts/peer_env.sh --path")
    ap.add_argument("--timeout", type=float, default=7200, help="seconds per run (default 7200)")
    ap.add_argument("--out-dir", default=os.path.join(rb.HERE, "results"))
    ap.add_argument("--suffix", default="")
    args = ap.parse_args(argv)
    try:
        args.a, args.b = (int(x) for x in args.steps.split(","))
    except ValueError:
        ap.error(f"--steps {args.steps!r}: expected A,B")
    if not 2 <= args.a < args.b:
        ap.error(f"--steps {args.steps!r}: expected 2 <= A < B")
    args.config_names = [x for x in args.configs.split(",") if x]
    bad = [x for x in args.config_names if x not in rb.CONFIGS]
    args.impl_list = [x for x in args.impls.split(",") if x]
    bad += [x for x in args.impl_list if x not in rb.IMPLS]
    if bad or not args.config_names or not args.impl_list:
        ap.error(f"unknown or empty: {bad}; configs {','.join(rb.CONFIGS)}, impls {','.join(rb.IMPLS)}")
    if args.rounds < 1:
        ap.error("--rounds >= 1 expected")
    if args.policy not in rb.RECOMPUTE_MODES:
        ap.error(f"--policy {args.policy!r}: expected one of {'|'.join(rb.RECOMPUTE_MODES)}")
    if args.hf_python is None:
        args.hf_python = rb.peer_env_python()
    # what run_bench.run_ctron / run_peer read
    args.threads, args.ctron_arg = 1, []
    return args


PEAK_SIZE, PEAK_REPEATS = 2048, (2, 12)


def one_thread_peak(args, env, workdir, prec):
    """The one-thread GEMM peak in GFLOP per CPU second, measured like the steps: `ctron peak
    --threads 1 --sizes 2048 [--precision bf16]` with 2 and with 12 repeats (a scratch cache, so
    the real one is left alone), 10 GEMMs of 2*2048^3 over the difference of their CPU times;
    None when it fails."""
    cpu = []
    for rep in PEAK_REPEATS:
        cmd = [args.ctron, "peak", "--threads", "1", "--sizes", str(PEAK_SIZE), "--repeats", str(rep),
               "--cache", os.path.join(workdir, "peak.json"), "--json"] + (
                   ["--precision", prec] if prec != "fp32" else [])
        r = rb.run_child(cmd, env, 900, rb.ROOT)
        if r["rc"] != 0:
            return None
        cpu.append(r["cpu_s"])
    gemms = PEAK_REPEATS[1] - PEAK_REPEATS[0]
    return {"peak": gemms * 2 * PEAK_SIZE ** 3 / (cpu[1] - cpu[0]) / 1e9, "cpu_s": cpu,
            "size": PEAK_SIZE, "repeats": list(PEAK_REPEATS)}


def run_pair(args, c, pol, env, workdir, impl, rnd):
    """The A- and B-step runs of impl; their CPU seconds and the per-step difference."""
    out = {"impl": impl, "round": rnd, "runs": []}
    for steps in (args.a, args.b):
        args.steps = steps
        tag = f"cpu-{impl}-r{rnd}-s{steps}"
        r = (rb.run_ctron(args, c, pol, env, workdir, tag, impl) if rb.is_ctron(impl)
             else rb.run_peer(args, c, pol, env, tag, impl))
        out["runs"].append({k: r.get(k) for k in ("cmd", "rc", "ok", "error", "stderr_tail", "wall_s",
                                                  "cpu_s", "ms_steps", "other_cores", "peak_rss_kib")})
        print(f"[round {rnd}] {impl} --steps {steps}: "
              + (f"CPU {r['cpu_s']:.1f} s, wall {r['wall_s']:.1f} s (other load {r['other_cores']} cores)"
                 if r["ok"] else f"failed: {r.get('error')}"), file=sys.stderr, flush=True)
    ok = all(x["ok"] for x in out["runs"])
    out["cpu_s_per_step"] = ((out["runs"][1]["cpu_s"] - out["runs"][0]["cpu_s"]) / (args.b - args.a)
                             if ok else None)
    return out


def summarise(c, impls, pairs, peaks):
    flops = rb.flops_per_step(c)
    summ = {}
    for impl in impls:
        vals = [p["cpu_s_per_step"] for p in pairs if p["impl"] == impl and p["cpu_s_per_step"]]
        if not vals:
            summ[impl] = None
            continue
        med = statistics.median(vals)
        peak = (peaks.get(rb.impl_precision(impl)) or {}).get("peak")
        gf = flops / med / 1e9
        summ[impl] = {"cpu_s_per_step": med, "per_round": vals, "gflops_per_cpu_s": gf,
                      "mfu_per_core": gf / peak if peak else None}
    for impl in impls:
        if rb.is_ctron(impl) or not summ.get(impl):
            continue
        for own in ("ctron", "ctron-bf16"):          # the peer over each ctron, per round too
            o = summ.get(own)
            if not o:
                continue
            summ[impl][f"over_{own}"] = summ[impl]["cpu_s_per_step"] / o["cpu_s_per_step"]
            summ[impl][f"over_{own}_per_round"] = [
                a / b for a, b in zip(summ[impl]["per_round"], o["per_round"])]
    return summ


def markdown(res):
    env = res["environment"]
    lines = [f"# CPU seconds per step, one thread — {res['date']}", "",
             f"CPU: {env['cpu_model']}; other processes kept {res['other_cores_min']:.2f}–"
             f"{res['other_cores_max']:.2f} cores busy during the runs. Each implementation ran "
             f"`--threads 1` with `--steps {res['steps'][0]}` and `--steps {res['steps'][1]}`; CPU s "
             f"per step = the difference of the two runs' user + system time / {res['steps'][1] - res['steps'][0]} "
             f"(start-up, initialisation and validation cancel). {res['rounds']} round(s), "
             f"alternating. GFLOP per CPU s: run_bench.py's model FLOPs of the config; MFU per core: "
             f"that over the one-thread GEMM peak of the row's precision, in GFLOP per CPU s the same way "
             f"(`ctron peak --threads 1 --sizes 2048`, 2 and 12 repeats: "
             + "; ".join(f"{p}: {v['peak']:.1f}" for p, v in res["peaks"].items() if v)
             + "). peer / ctron: the peer's CPU s per step over ctron's (> 1: ctron does the step "
             "with less CPU), from the medians and per round.", ""]
    for name, cres in res["configs"].items():
        lines += [f"## {rb.shape_str(name, cres['config'])}, recompute {res['policy']}", "",
                  "| impl | CPU s/step | per round | GFLOP per CPU s | MFU per core | peer / ctron fp32 "
                  "| per round | peer / ctron bf16 | per round |",
                  "|---|---:|---|---:|---:|---:|---|---:|---|"]
        for impl, s in cres["summary"].items():
            label = rb.impl_label(impl, env)
            if not s:
                lines.append(f"| {label} | failed | | | | | | | |")
                continue
            cells = [f"{s['cpu_s_per_step']:.2f}", ", ".join(f"{x:.2f}" for x in s["per_round"]),
                     f"{s['gflops_per_cpu_s']:.1f}",
                     "–" if s["mfu_per_core"] is None else f"{s['mfu_per_core']:.0%}"]
            for own in ("ctron", "ctron-bf16"):
                r = s.get(f"over_{own}")
                cells += (["", ""] if r is None else
                          [f"**{r:.2f}×**", ", ".join(f"{x:.2f}" for x in s[f"over_{own}_per_round"])])
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    pol = rb.parse_policy(args.policy)
    versions = {}
    for which, python, what in (("venv", args.peer_python, "torch"),
                                ("hf", args.hf_python, "torch, transformers")):
        if any(rb.impl_spec(i).get("python") == which for i in args.impl_list):
            versions[which], why = rb.probe_torch(python, what)
            if why:
                print(f"cpu_bench.py: error: {why}", file=sys.stderr)
                return 2
    res = {"date": time.strftime("%Y-%m-%d"), "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "steps": [args.a, args.b], "rounds": args.rounds, "policy": args.policy,
           "configs": {}}
    failed = False
    with tempfile.TemporaryDirectory(prefix="ctron-cpu-bench-") as workdir:
        peaks = res["peaks"] = {p: one_thread_peak(args, env, workdir, p) for p in rb.PRECISIONS
                                if any(rb.impl_precision(i) == p for i in args.impl_list)}
        for name in args.config_names:
            c = rb.CONFIGS[name]
            impls = rb.impls_for(c, args.impl_list)
            pairs = []
            for rnd in range(1, args.rounds + 1):
                for impl in (impls if rnd % 2 else impls[::-1]):
                    pairs.append(run_pair(args, c, pol, env, workdir, impl, rnd))
            failed = failed or any(p["cpu_s_per_step"] is None for p in pairs)
            res["configs"][name] = {"config": dict(c), "flops_per_step": rb.flops_per_step(c),
                                    "pairs": pairs, "summary": summarise(c, impls, pairs, peaks)}
    args.steps = args.a
    args.peer_only = False
    res["environment"] = rb.environment(args, None, versions.get("venv"), versions.get("hf"))
    other = [r["other_cores"] for cres in res["configs"].values() for p in cres["pairs"]
             for r in p["runs"] if r.get("other_cores") is not None]
    res["other_cores_min"], res["other_cores_max"] = (min(other), max(other)) if other else (0, 0)
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    stem = f"{res['date']}-cpu" + (f"-{args.suffix}" if args.suffix else "")
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, stem + ".json"), "w") as f:
        json.dump(res, f, indent=1)
    md = markdown(res)
    with open(os.path.join(args.out_dir, stem + ".md"), "w") as f:
        f.write(md + "\n")
    print(md)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
