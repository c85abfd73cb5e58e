#!/usr/bin/env python3
"""MEMO against full recompute, --offload and selective + mini-seq at a fixed activation budget (issue 29 part 1).

For each technique: the longest sequence (a multiple of 64) of config S (L12 h768 a12 v8192, dropout 0.1, fp32
storage; batch 1) whose predicted activation peak (the analytic model the ledger matches: `ctron memory`) plus
the attention scratch of the run's threads fits the budget, and the measured seconds per step there; then
every technique at one common sequence (the shortest of the longest), where they hold the same budget, so
their times compare at equal memory. MEMO's α is the planner's (`ctron plan --memo`) for the budget at that
sequence, with the host link and GEMM rate measured once here (or given). Last, the planner's prediction
for an H100 with PCIe 5 host links (--gpu-gflops, --gpu-gbps) at the same shape and budget.

usage: bench/memo_bench.py [--budget 64MiB] [--threads 2] [--steps 3] [--rounds 1] [--out bench/results/NAME]

On a GPU (--device cuda, e.g. scripts/gpu_check.sh's stage m): the issue's own experiment, not scaled — bf16
storage, the budget 4 GiB of activations (the attention scratch, a few bytes a position with flash, is
left out: the issue budgets activations), each technique's longest sequence timed on the device, MEMO's α
from the planner with this GPU's host link and GEMM rate measured by torch (pinned copies, a bf16 matmul),
and the H100 prediction beside what was measured. Wall seconds only: CPU seconds say nothing there.

usage: bench/memo_bench.py --device cuda --ctron build-gpu/ctron [--budget 4GiB] [--out DIR/NAME]
"""
import argparse, json, os, re, resource, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CTRON = os.path.join(ROOT, "build", "ctron")
DATA = os.path.join(ROOT, "data", "kjv.txt")
SHAPE = ["--layers", "12", "--hidden", "768", "--heads", "12", "--vocab", "8192", "--dropout", "0.1"]
TILE = 64
DEVICE = "cpu"      # --device
STORAGE = "fp32"    # the stored activations: fp32 on the CPU (as before), bf16 on a GPU

TECHS = {   # name: (train flags, memory flags); memo's α is filled in per sequence
    "full recompute": (["--recompute", "full", "--attention", "flash"], ["--recompute", "full", "--attention", "flash"]),
    "--offload all": (["--offload", "all", "--attention", "flash"], ["--offload", "all", "--attention", "flash"]),
    "selective + mini-seq 4": (["--recompute", "selective", "--mini-seq", "4"],
                               ["--recompute", "selective", "--mini-seq", "4"]),
    "memo": (["--attention", "flash"], ["--attention", "flash"]),
}


def gpu_speeds(device):
    """This GPU's host link (GB/s one way: pinned host to device, 256 MiB) and bf16 GEMM rate (GFLOP/s of an
    8192-square matmul), by torch: the planner's two inputs for --memo."""
    import torch
    dev = torch.device("cuda" if device == "cuda" else device)
    host = torch.empty(256 << 20, dtype=torch.uint8, pin_memory=True)
    buf = torch.empty_like(host, device=dev)
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    for _ in range(2):
        buf.copy_(host, non_blocking=True)
        a @ a
    torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    for _ in range(5):
        buf.copy_(host, non_blocking=True)
    torch.cuda.synchronize(dev)
    gbps = 5 * host.numel() / (time.perf_counter() - t0) / 1e9
    t0 = time.perf_counter()
    for _ in range(10):
        a @ a
    torch.cuda.synchronize(dev)
    gflops = 10 * 2 * 8192 ** 3 / (time.perf_counter() - t0) / 1e9
    return gbps, gflops


def parse_bytes(text):
    m = re.fullmatch(r"([0-9.]+)\s*([KMG]i?B?|B)?", text)
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "B": 1}
    return int(float(m.group(1)) * (mult[m.group(2)[0]] if m.group(2) else 1))


def scratch(tech, s, threads):
    """The attention backward's scratch of all threads (as gpt_init sizes it on the CPU; docs/MEMORY.md)."""
    d = 768 // 12
    if tech == "selective + mini-seq 4":
        per = 3 * s * s + (s * s + 3) // 4   # ATTENTION_RECOMPUTE_SCRATCH
    else:   # flash tiles: FLASH_SCRATCH(s, d)
        per = 2 * TILE * TILE + TILE * TILE // 4 + TILE * d + 3 * TILE + s
    return 4 * per * threads


def memory_peak(flags, s):
    out = subprocess.run([CTRON, "memory", *SHAPE, "--seq", str(s), "--batch", "1", "--act-dtype", STORAGE, *flags,
                          "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["first_stage"]["activation_peak_bytes"]


def memo_plan(s, budget, threads, gbps, gflops):
    """The planner's α at s (None when nothing fits) and its printout. On a GPU the budget is the activations'
    alone, as for the other techniques there: the planner's scratch (the CPU backend's attention and bf16
    GEMM operands, which it counts in its budget) is added to the budget it is given."""
    if DEVICE != "cpu":
        _, text = plan_run(s, budget, threads, gbps, gflops)
        m = re.search(r"\+ attention and GEMM scratch ([0-9.]+ [KMG]?i?B)", text)
        if m:
            budget += parse_bytes(m.group(1))
    return plan_run(s, budget, threads, gbps, gflops)


class MemoPlan:
    """The planner's MEMO choice: its train flags (one α for every layer, `--memo α`, or one per layer,
    `--recompute-layers 0:memo@α0,...`) and how to print it."""
    def __init__(self, text):
        m = re.search(r"ctron train flags: (.*)", text)
        flags = m.group(1).split() if m else []
        if "--memo" in flags:
            self.alphas = [float(flags[flags.index("--memo") + 1])]
            self.flags = ["--memo", flags[flags.index("--memo") + 1]]
        elif "--recompute-layers" in flags:
            spec = flags[flags.index("--recompute-layers") + 1]
            self.alphas = [float(x) for x in re.findall(r"memo@([0-9.e-]+)", spec)]
            self.flags = ["--recompute-layers", spec]
        else:
            raise SystemExit(f"memo_bench: the planner's flags hold no MEMO choice:\n{text}")

    def zero(self):   # α 0 everywhere: full recompute, byte for byte and FLOP for FLOP
        return all(x == 0.0 for x in self.alphas)

    def label(self):
        if len(set(self.alphas)) == 1:
            return f"{self.alphas[0]:.4g}"
        return "per layer " + "/".join(f"{x:.4g}" for x in sorted(set(self.alphas), reverse=True))


def plan_run(s, budget, threads, gbps, gflops):
    r = subprocess.run([CTRON, "plan", "--memo", "--budget", str(budget), *SHAPE, "--seq", str(s), "--batch", "1",
                        "--threads", str(threads), "--host-gbps", str(gbps), "--gemm-gflops", str(gflops),
                        *(["--precision", "bf16"] if DEVICE != "cpu" else [])],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stdout
    return MemoPlan(r.stdout), r.stdout


def fits(tech, s, budget, threads, speeds):
    if tech == "memo":
        return memo_plan(s, budget, threads, *speeds)[0] is not None
    return memory_peak(TECHS[tech][1], s) + (scratch(tech, s, threads) if DEVICE == "cpu" else 0) <= budget


def longest(tech, budget, threads, speeds, hi=65536, full=None):
    """The longest multiple of 64 below hi that fits. MEMO's is at most full recompute's (`full`, when known):
    at α 0 it is full recompute, and any α > 0 adds its stage. So it is that one when α 0 fits there, and
    the search (each probe a planner run of seconds at long sequences) runs only below it otherwise."""
    if tech == "memo" and full is not None:
        if full == 0 or fits(tech, full, budget, threads, speeds):
            return full
        hi = full
    lo = 0   # fits at lo (0: nothing), not at hi
    while hi - lo > TILE:
        mid = (lo + hi) // 2 // TILE * TILE
        if fits(tech, mid, budget, threads, speeds): lo = mid
        else: hi = mid
    return lo


def num(x):
    return "–" if x != x else f"{x:.2f}"   # NaN: not measured (a GPU's CPU seconds)


def run_cpu(cmd, env):
    """Runs cmd; its output and the CPU seconds (user + system, every thread) it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    return out.stdout, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def train_time(flags, s, threads, steps):
    """Wall seconds per step (the first step dropped; the machine is shared, so noisy), CPU seconds per step
    (the run of `steps` less a run of one step, over steps − 1: the work, the I/O thread's copies included,
    whatever else the cores run), the measured peak and the ledger's verdict."""
    cmd = [CTRON, "train", "--data", DATA, *SHAPE, "--seq", str(s), "--batch", "1", "--threads", str(threads),
           "--eval-every", "0", "--eval-batches", "1", "--print-every", "1", "--ledger", *flags]
    if DEVICE != "cpu":
        cmd += ["--device", DEVICE, "--precision", "bf16", "--peak-gflops", "100"]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    out, cpu_n = run_cpu(cmd + ["--steps", str(steps)], env)
    # a GPU's CPU seconds say nothing of its work: one run there (device time is scarce)
    _, cpu_1 = run_cpu(cmd + ["--steps", "1"], env) if DEVICE == "cpu" else (None, float("nan"))
    tok = [float(x) for x in re.findall(r"\| ([0-9.]+) tok/s", out)]
    peak = int(re.search(r"peak of the step \(recomputation included\): measured (\d+)", out).group(1))
    ok = "MISMATCH" not in out
    per_step = [s / t for t in tok[1:]] if len(tok) > 1 else [s / tok[0]]
    return sum(per_step) / len(per_step), (cpu_n - cpu_1) / (steps - 1), peak, ok, out


def main():
    global CTRON, DEVICE, STORAGE, SHAPE
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", default="64MiB", help="the issue's 4 GiB scaled by 1/64 for this 2-core machine")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--host-gbps", type=float, default=0.0, help="this machine's host link (0: measure)")
    ap.add_argument("--gemm-gflops", type=float, default=0.0, help="this machine's GEMM rate (0: measure)")
    ap.add_argument("--gpu-gflops", type=float, default=989e3 * 0.80 * 0.801 / 0.859,
                    help="H100 SXM bf16 dense 989 TFLOP/s × the cluster planner's Hopper GEMM efficiency")
    ap.add_argument("--gpu-gbps", type=float, default=55.0, help="PCIe 5 x16: 64 GB/s a direction, ~55 achieved")
    ap.add_argument("--gpu-budget", default="4GiB", help="the H100 prediction's activation budget (the issue's)")
    ap.add_argument("--gpu-seqs", default="4096,16384,32768,65536")
    ap.add_argument("--predict-only", action="store_true", help="the analytic parts only (no training runs)")
    ap.add_argument("--out", default="")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: the issue's experiment on a GPU (bf16, 4 GiB)")
    ap.add_argument("--ctron", default=CTRON, help="the ctron binary (on a GPU: build-gpu/ctron)")
    ap.add_argument("--model", default="", metavar="L,h,a,v",
                    help="another model than S's (layers, hidden, heads, vocab): a quick rehearsal")
    a = ap.parse_args()
    CTRON, DEVICE = a.ctron, a.device
    if DEVICE not in ("cpu", "cuda") and not DEVICE.startswith("cuda:"):
        ap.error(f"--device '{DEVICE}': expected cpu, cuda or cuda:N")
    if a.model:
        try:
            L, h, heads, v = (int(x) for x in a.model.split(","))
        except ValueError:
            ap.error(f"--model '{a.model}': expected four integers L,h,a,v")
        SHAPE = ["--layers", str(L), "--hidden", str(h), "--heads", str(heads), "--vocab", str(v), "--dropout", "0.1"]
    if DEVICE != "cpu":
        STORAGE = "bf16"
        if a.budget == ap.get_default("budget"):
            a.budget = "4GiB"
    budget = parse_bytes(a.budget)
    lines = []
    say = lambda x="": (print(x, flush=True), lines.append(x))

    # this machine's speeds, measured once (the planner's own measurement: ctron plan --memo without them;
    # on a GPU torch's pinned copies and bf16 matmul)
    if DEVICE != "cpu" and (a.host_gbps <= 0 or a.gemm_gflops <= 0):
        gbps, gflops = gpu_speeds(DEVICE)
        a.host_gbps = a.host_gbps or gbps
        a.gemm_gflops = a.gemm_gflops or gflops
    if a.host_gbps <= 0 or a.gemm_gflops <= 0:
        r = subprocess.run([CTRON, "plan", "--memo", "--budget", "1GiB", *SHAPE, "--seq", "1024", "--batch", "1",
                            "--threads", str(a.threads)], capture_output=True, text=True).stdout
        m = re.search(r"host link ([0-9.]+) GB/s \(measured\), ([0-9.]+) GFLOP/s", r)
        a.host_gbps = a.host_gbps or float(m.group(1))
        a.gemm_gflops = a.gemm_gflops or float(m.group(2))
    speeds = (a.host_gbps, a.gemm_gflops)
    say(f"memo_bench: {' '.join(SHAPE)}, {STORAGE} storage, batch 1, device {DEVICE}, {a.threads} threads, "
        f"budget {a.budget} ({budget} bytes: activation peak{' + attention scratch' if DEVICE == 'cpu' else ''}); "
        f"host link {a.host_gbps:.4g} GB/s, GEMM {a.gemm_gflops:.6g} GFLOP/s (this machine, measured); "
        f"{time.strftime('%Y-%m-%d %H:%M')}")

    best = {}
    for t in TECHS:   # memo last: it starts from full recompute's
        best[t] = longest(t, budget, a.threads, speeds, hi=65536 if DEVICE == "cpu" else 1 << 18,
                          full=best.get("full recompute"))
    common = min(best.values())
    if not a.predict_only:
        measured_tables(a, budget, speeds, best, common, say)
    predictions(a, budget, speeds, common, say)
    if a.out:
        with open(a.out + ".md", "w") as f:
            f.write("\n".join(lines) + "\n")


def measured_tables(a, budget, speeds, best, common, say):
    say()
    say("| technique | longest s | device peak at it (MiB) | α | s/step there (wall) | CPU s/step |")
    say("|---|---:|---:|---:|---:|---:|")
    for t in TECHS:
        s = best[t]
        flags = list(TECHS[t][0])
        alpha = ""
        if t == "memo":
            al, _ = memo_plan(s, budget, a.threads, *speeds)
            if al.zero() and best["full recompute"] == s:   # α 0 is full recompute, byte for byte and FLOP for FLOP
                say(f"| {t} | {s} | = full recompute | 0 | = full recompute | |")
                continue
            flags += al.flags
            alpha = al.label()
        sec, cpu, peak, ok, _ = train_time(flags, s, a.threads, a.steps)
        say(f"| {t} | {s} | {peak / 2**20:.1f}{'' if ok else ' (ledger MISMATCH)'} | {alpha} | {sec:.2f} | {num(cpu)} |")

    # at equal memory: every technique that fits the budget at each of two sequences (all four fit the first)
    plan_text = ""
    for s_eq in sorted({common, best["--offload all"]}):
        al, text = memo_plan(s_eq, budget, a.threads, *speeds)
        plan_text = plan_text or text
        here = [t for t in TECHS if best[t] >= s_eq]
        say()
        say(f"At s = {s_eq}, the same budget ({a.rounds} interleaved round(s) of {a.steps} steps, the best round; "
            f"{'every technique fits' if len(here) == len(TECHS) else 'only those that fit'}):")
        say()
        say(f"| technique | α | device peak (MiB) | host pool (MiB) | s/step (wall) | CPU s/step | "
            f"{'CPU' if DEVICE == 'cpu' else 'wall'} vs full recompute |")
        say("|---|---:|---:|---:|---:|---:|---:|")
        times = {t: [] for t in here}
        cpus = {t: [] for t in here}
        peaks = {}
        for _ in range(a.rounds):
            for t in here:
                flags = list(TECHS[t][0]) + (al.flags if t == "memo" else [])
                sec, cpu, peak, ok, out = train_time(flags, s_eq, a.threads, a.steps)
                pool = re.search(r"in the pool at the end of forward: measured (\d+)", out)
                times[t].append(sec)
                cpus[t].append(cpu)
                peaks[t] = (peak, int(pool.group(1)) if pool else 0, ok)
        vs = cpus if DEVICE == "cpu" else times   # a GPU's work is its wall time
        base = min(vs["full recompute"])
        for t in here:
            sec, cpu = min(times[t]), min(cpus[t])   # the least disturbed round
            peak, pool, ok = peaks[t]
            say(f"| {t} | {al.label() if t == 'memo' else ''} | {peak / 2**20:.1f}{'' if ok else ' MISMATCH'} | "
                f"{pool / 2**20:.1f} | {sec:.2f} | {num(cpu)} | {100 * (min(vs[t]) / base - 1):+.1f} % |")
    say()
    say(f"The planner's prediction at s = {common} (`ctron plan --memo`):")
    for line in plan_text.strip().splitlines():
        say("    " + line)


def predictions(a, budget, speeds, common, say):
    if DEVICE == "cpu":   # on a GPU the measured tables are already at the budget
        say()
        say("The issue's 4 GiB on this machine, analytic only (the same model; not timed here):")
        say()
        say("| technique | longest s |")
        say("|---|---:|")
        four = {}
        for t in TECHS:
            four[t] = longest(t, 4 << 30, a.threads, speeds, hi=1 << 17, full=four.get("full recompute"))
            say(f"| {t} | {four[t]} |")
    gbudget = parse_bytes(a.gpu_budget)
    say()
    say(f"H100 with PCIe 5 host links: the planner's time model at {a.gpu_gflops / 1e3:.0f} TFLOP/s and "
        f"{a.gpu_gbps} GB/s, bf16 storage, {a.gpu_budget} of activations, batch 1:")
    say()
    say("| s | α | swapped positions | per layer: forward, transfer one way | predicted step, memo | "
        "full recompute | memo vs full |")
    say("|---:|---:|---:|---:|---:|---:|---:|")
    for s in [int(x) for x in a.gpu_seqs.split(",")]:
        r = subprocess.run([CTRON, "plan", "--memo", "--budget", str(gbudget), *SHAPE, "--seq", str(s), "--batch",
                            "1", "--precision", "bf16", "--threads", "1", "--host-gbps", str(a.gpu_gbps),
                            "--gemm-gflops", str(a.gpu_gflops)], capture_output=True, text=True).stdout
        m = re.search(r"α ([0-9.e-]+)(?::| \() ?(\d+) of", r)   # "α 0.5: 256 of" or "α 0 (0 of"
        lay = re.search(r"forward ([0-9.e+-]+) ms, .* transfer ([0-9.e+-]+) ms each way", r)
        st = re.search(r"predicted step ([0-9.e-]+) s per micro-batch; full recompute \(every position recomputed\) "
                       r"([0-9.e-]+) s", r)
        if "nothing fits" in r or not (m and st):
            say(f"| {s} | nothing fits | | | | | |")
            continue
        ms, fs = float(st.group(1)), float(st.group(2))
        say(f"| {s} | {m.group(1)} | {m.group(2)} | {lay.group(1)} ms, {lay.group(2)} ms | {ms * 1e3:.3f} ms | "
            f"{fs * 1e3:.3f} ms | {100 * (ms / fs - 1):+.1f} % |")


if __name__ == "__main__":
    main()
