#!/usr/bin/env python3
"""Random compositions of ctron train's options, each run for one step and checked.

Every technique has its own tests; this one draws combinations of them (architecture, adapters,
recompute policy, masks, precision, Tempo, Few-Bit, flash, mini-seq, offload, MEMO, the static plan,
the budget planner, reversible blocks, and TP/SP/PP/DP layouts under mpirun) and checks what must hold
for every one of them:

  * the run exits 0, or exits 2 with a one-line reason on stderr (a refused combination); any other
    exit (a crash, an internal ctron_fatal after the options were accepted) is a failure;
  * a run that trains prints its ledger, and every measured-vs-predicted line of it (per name, per
    layer, end of forward, peak, the weights, a host pool's) says "ok": no MISMATCH;
  * the loss of step 1 is finite; a case drawn onto --device cpu-guarded (device memory unreadable to host
    code) or the emulated GPU (--emu ctron-emu: the CUDA backend's kernels run on the host) has the CPU's
    loss at step 1 (1e-5 relative; 1e-3 with bf16 storage; 2e-2 under bf16 GEMMs);
  * one process: `ctron memory` with the same model and policy predicts the peak the run predicted;
  * a refused run leaves no checkpoint directory behind.

    tests/compose_sweep.py --ctron build/ctron --emu build/ctron-emu --count 40 --seed 1 --no-mpi   # make test
    tests/compose_sweep.py --ctron build/ctron --count 24 --seed 2 --layouts-only           # make test (mpi)
    tests/compose_sweep.py --ctron build/ctron --count 500 --seed 7 -v   # a longer sweep by hand

Exit 0 when every case passes and enough of them trained for the sweep to mean something; 1 with
each failing case's command line otherwise.
"""
import argparse
import json
import math
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile


def divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


class Case:
    def __init__(self, rng):
        self.rng = rng
        self.flags = []
        self.ranks = 1
        self.note = []
        self.memory = None

    def add(self, *xs):
        self.flags += [str(x) for x in xs]


def draw_shape(c, r):
    c.arch = r.choice(["gpt2", "llama"])
    c.heads = r.choice([2, 4])
    c.hidden = c.heads * r.choice([8, 16])
    c.layers = r.randint(1, 4)
    c.seq = r.choice([16, 24, 32])
    c.batch = r.choice([1, 2, 3])
    c.add("--arch", c.arch, "--layers", c.layers, "--hidden", c.hidden, "--heads", c.heads,
          "--seq", c.seq, "--batch", c.batch)
    c.kv = c.heads
    c.ffn = 4 * c.hidden
    if c.arch == "llama":
        c.kv = r.choice(divisors(c.heads))
        c.add("--kv-heads", c.kv)
        if r.random() < 0.5:
            c.ffn = r.choice([2, 3, 4]) * c.hidden
            c.add("--ffn-hidden", c.ffn)
        else:
            c.ffn = -(-(8 * c.hidden // 3) // 64) * 64
        if r.random() < 0.2:
            c.add("--qkv-bias")
        if r.random() < 0.2:
            c.add("--tie-embeddings")
    c.dropout = r.choice([0.0, 0.0, 0.1]) if c.arch == "llama" else r.choice([0.0, 0.1, 0.1])
    c.add("--dropout", c.dropout)


def draw_layout(c, r, mode):
    """TP, SP, PP or DP over two ranks: on a quarter of the cases (mode "mixed"), on none ("one": no mpirun)
    or on every one ("multi")."""
    c.tp = c.pp = c.dp = 1
    c.sp = False
    if mode == "one" or (mode == "mixed" and r.random() >= 0.25):
        return
    kind = r.choice(["tp", "pp", "dp"])
    if kind == "tp" and c.heads % 2 == 0 and c.kv % 2 == 0 and c.ffn % 2 == 0:
        c.tp = 2
        c.add("--tp", 2)
        if r.random() < 0.5 and c.seq % 2 == 0:
            c.sp = True
            c.add("--sp")
    elif kind == "pp" and c.layers % 2 == 0:
        c.pp = 2
        sched = r.choice(["1f1b", "gpipe", "layered", "interleaved"] if c.layers % 4 == 0 else ["1f1b", "gpipe", "layered"])
        c.add("--pp", 2, "--pp-schedule", sched)
        if sched == "interleaved":
            c.add("--virtual-stages", 2)
        if r.random() < 0.3:   # Megatron's micro-batches that keep everything
            c.add("--recompute-microbatches", 1)
    else:
        c.dp = 2
        if r.random() < 0.5:
            c.add("--zero", 1)
    c.ranks = c.tp * c.pp * c.dp


def draw_policy(c, r):
    """Mostly combinations ctron documents as composing; one case in six ignores those rules, so that
    the refusals (exit 2 with a reason, nothing written) are exercised too."""
    wild = r.random() < 1 / 6
    c.wild = wild
    rec = r.choice(["none", "selective", "full", "full-block", "layers", "search", "budget", "memo"])
    c.rec = rec
    if rec in ("none", "selective", "full"):
        c.add("--recompute", rec)
    elif rec == "full-block":
        c.add("--recompute", "full", "--recompute-method", "block",
              "--recompute-num-layers", r.randint(1, max(1, c.layers // c.pp)))
    elif rec == "layers":
        kinds = [r.choice(["none", "selective", "full"]) for _ in range(c.layers)]
        c.add("--recompute-layers", ",".join(f"{i}-{i}:{k}" for i, k in enumerate(kinds)))
    elif rec == "search":
        c.add("--recompute", "search", "--search-rates", "100,10,5" if c.tp > 1 else "100,10",
              "--act-budget-layer", r.choice(["4KB", "16KB", "40KB", "1MB"]))
    elif rec == "memo" and r.random() < 0.5:
        c.add("--memo", r.choice(["0", "0.25", "0.5", "1"]))
    elif rec == "memo":   # each layer its own α, or a layer of another policy among them
        kinds = [r.choice(["memo@0", "memo@0.25", "memo@0.5", "memo@1", "none", "selective"]) for _ in range(c.layers)]
        c.add("--recompute-layers", ",".join(f"{i}-{i}:{k}" for i, k in enumerate(kinds)))
    else:
        c.add("--mem-budget", r.choice(["64KiB", "128KiB", "256KiB", "1MiB"]))
    search, budget, memo = rec == "search", rec == "budget", rec == "memo"
    plain = not (search or memo) or wild   # the techniques the search and MEMO do not take
    if not budget or wild:
        c.add("--dropout-masks", r.choice(["bytes", "bits", "regen"]))
    if r.random() < 0.35:
        c.add("--precision", "bf16")
    elif r.random() < 0.2:
        c.add("--act-dtype", "bf16")
    flash = r.random() < 0.35   # the search takes flash's block too
    if flash or (memo and not wild):
        c.add("--attention", "flash")
    c.minseq = r.random() < 0.2 and plain
    if c.minseq:
        c.add("--mini-seq", 2)
    if r.random() < 0.2 and plain:
        parts = ["layernorm"] + ([] if flash else ["softmax"]) + (["gelu"] if c.arch == "gpt2" and not c.minseq else [])
        c.add("--tempo", r.choice(parts if not wild else parts + ["all"]))
    if r.random() < 0.15 and c.arch == "gpt2" and plain and (not c.minseq or wild):
        c.add("--gelu-bits", r.randint(1, 4))
    if r.random() < 0.1 and plain and c.pp == 1:
        c.add("--offload", r.choice(["all", "fc1_in", "qkv_in,ln2_in"]))
        if r.random() < 0.3:
            c.add("--offload-dir", ".")   # a file in the case's own directory (the run's cwd)
    if r.random() < 0.15:
        c.add("--static-plan")
    c.reversible = r.random() < 0.08 and (rec == "none" or wild) and c.pp == 1
    if c.reversible:
        c.add("--reversible")


def draw_adapters(c, r):
    if r.random() >= 0.3:   # the search and MEMO take adapters too
        return
    c.add("--lora-rank", r.choice([2, 4]))
    if r.random() < 0.5:
        c.add("--lora-fa")
    if r.random() < 0.3:
        c.add("--lora-targets", r.choice(["q,v", "o,down", "gate,up"] if c.arch == "llama" else ["qkv", "proj,fc2", "fc"]))
    if r.random() < 0.2:
        c.add("--lora-dropout", 0.1)
    if r.random() < 0.3:
        c.add("--base-dtype", "bf16")


def draw(seed, index, mode="mixed"):
    r = random.Random(seed * 1_000_003 + index)
    c = Case(r)
    draw_shape(c, r)
    draw_layout(c, r, mode)
    draw_policy(c, r)
    draw_adapters(c, r)
    if r.random() < 0.2:
        c.add("--grad-accum", 2 if c.pp == 1 else r.choice([2, 4]))
    elif c.pp > 1:
        c.add("--grad-accum", 2)
    # Where it runs: the CPU; the CPU with device memory unreadable to host code; the emulated GPU (the CUDA
    # backend's kernels run on the host, tests/cuda_emu) — the last two against the CPU's loss.
    c.device = r.choice(["cpu"] * 6 + ["cpu-guarded", "cuda", "cuda"])
    return c


RESULT = re.compile(r"\b(ok|MISMATCH)\s*$")
LOSS = re.compile(r"^step 1/\d+ \| loss (\S+)")


PEAK = re.compile(r"peak of the step .*predicted (\d+)")
TRAIN_ONLY = {"--static-plan": 0, "--base-dtype": 1, "--lora-dropout": 1, "--grad-accum": 1, "--zero": 1,
              "--search-rates": 1}


def memory_check(args, c, out, env, work):
    """One process: `ctron memory` with the same model and policy predicts the peak the run printed."""
    if c.ranks > 1:
        return None
    m = PEAK.search(out)
    if not m:
        return None   # offload and MEMO print their pools' lines instead
    flags, i = [], 0
    while i < len(c.flags):
        f = c.flags[i]
        if f in TRAIN_ONLY:
            i += 1 + TRAIN_ONLY[f]
            continue
        flags.append(f)
        i += 1
    if "--search-rates" in c.flags:
        flags += ["--search-rates", c.flags[c.flags.index("--search-rates") + 1]]
    if "--precision" not in flags and "--act-dtype" not in flags:
        flags += ["--act-dtype", "fp32"]   # memory's default is the paper's bf16, train's fp32
    cmd = [args.ctron, "memory", *flags, "--vocab", "256", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env, cwd=work)
    c.memory = "refused" if p.returncode == 2 else "ran"
    if p.returncode == 2:
        c.memory_reason = (p.stderr.strip().splitlines() or ["?"])[0]
        return None
    if p.returncode != 0:
        return "ctron memory exit %d: %s" % (p.returncode, p.stderr.strip()[-200:])
    pred = json.loads(p.stdout)["first_stage"]["activation_peak_bytes"]
    if int(pred) != int(m.group(1)):
        return "ctron memory predicts a peak of %d B, the run predicted %s B: ctron memory %s" % (
            pred, m.group(1), " ".join(shlex.quote(x) for x in cmd[2:]))
    c.memory = "agrees"
    return None


def first_loss(path):
    try:
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                if rec.get("step") == 1 and "loss" in rec:
                    return float(rec["loss"])
    except (OSError, ValueError):
        return None
    return None


def device_check(args, c, work, env, loss_dev):
    """The same case on the CPU: step 1's loss agrees (fp32: 1e-5 relative; bf16 storage 1e-3; bf16 GEMMs 2e-2)."""
    log = os.path.join(work, "cpu.jsonl")
    cmd = [args.ctron, "train", *c.flags, "--steps", "1", "--eval-every", "0", "--eval-batches", "1",
           "--threads", "1", "--data", args.data, "--log", log]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env, cwd=work)
    loss_cpu = first_loss(log)
    if p.returncode != 0 or loss_cpu is None:
        return "the device run trained, the CPU run did not (exit %d): %s" % (p.returncode, p.stderr.strip()[-200:])
    # bf16 GEMMs: 2e-2; bf16 storage (activations or the frozen base) rounds each backend's fp32 sums, so an
    # ordering difference can flip a rounding: 1e-3; fp32 throughout: 1e-5
    flag = lambda name: name in c.flags and c.flags[c.flags.index(name) + 1] == "bf16"
    tol = 2e-2 if flag("--precision") else 1e-3 if flag("--act-dtype") or flag("--base-dtype") else 1e-5
    if loss_dev is None or abs(loss_dev - loss_cpu) > tol * abs(loss_cpu):
        return "step 1's loss on --device %s is %r, on the CPU %r (tolerance %g relative)" % (c.device, loss_dev,
                                                                                              loss_cpu, tol)
    return None


def run(args, c, work):
    ckpt = os.path.join(work, "ckpt")
    log = os.path.join(work, "run.jsonl")
    binary = args.ctron
    if c.device == "cuda" and args.emu and c.ranks == 1:
        binary = args.emu
    elif c.device == "cuda" or c.ranks > 1:
        c.device = "cpu"   # no emulator given; under mpirun each rank's device is left to the layout tests
    cmd = [binary, "train", *c.flags, "--steps", "1", "--eval-every", "0", "--eval-batches", "1",
           "--threads", "1", "--data", args.data, "--ckpt-dir", ckpt, "--log", log]
    if c.device != "cpu":
        cmd += ["--device", c.device]
    if c.ranks > 1:
        cmd = [args.mpirun, "--oversubscribe", "--bind-to", "none", "-np", str(c.ranks), *cmd]
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env, cwd=work)
    except subprocess.TimeoutExpired:
        return "hang", "timed out after %d s" % args.timeout, cmd, 0
    out, err = p.stdout, p.stderr
    shown = " ".join(shlex.quote(x) for x in cmd)
    if p.returncode == 2:
        if os.path.exists(ckpt):
            return "fail", "refused (exit 2) but left %s behind" % ckpt, cmd, 0
        reason = [l.strip() for l in err.splitlines() if re.search(r"[a-z]", l) and not l.startswith("(see ctron")]
        if not reason:
            return "fail", "exit 2 with no reason on stderr", cmd, 0
        return "refused", reason[0], cmd, 0
    if p.returncode != 0:
        return "fail", "exit %d: %s" % (p.returncode, (err.strip().splitlines() or ["(no stderr)"])[-1]), cmd, 0
    checks = 0
    for line in out.splitlines():
        m = RESULT.search(line)
        if not m:
            continue
        checks += 1
        if m.group(1) == "MISMATCH":
            return "fail", "ledger: " + line.strip(), cmd, checks
    if checks == 0:
        return "fail", "trained but printed no ledger checks", cmd, checks
    mem = memory_check(args, c, out, env, work)
    if mem:
        return "fail", mem, cmd, checks
    if c.device != "cpu":
        dev = device_check(args, c, work, env, first_loss(log))
        if dev:
            return "fail", dev, cmd, checks
    loss = [LOSS.match(l) for l in out.splitlines()]
    loss = [float(m.group(1)) for m in loss if m]
    if not loss or not math.isfinite(loss[0]):
        return "fail", "step 1's loss missing or not finite", cmd, checks
    return "ok", "%d checks, loss %.4f" % (checks, loss[0]), cmd, checks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctron", required=True)
    ap.add_argument("--data", default=None, help="corpus (default data/kjv.txt beside the tests)")
    ap.add_argument("--mpirun", default=shutil.which("mpirun"))
    ap.add_argument("--no-mpi", action="store_true", help="skip the cases that need mpirun")
    ap.add_argument("--layouts-only", action="store_true", help="draw a multi-rank layout for every case")
    ap.add_argument("--emu", default=None, help="ctron-emu: run the --device cuda cases on the emulated GPU "
                                                "(without it they run on the CPU)")
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-trained", type=float, default=0.5,
                    help="fail unless at least this fraction of the cases trained (not refused)")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    args.ctron = os.path.abspath(args.ctron)
    args.emu = os.path.abspath(args.emu) if args.emu else None
    if args.no_mpi:
        args.mpirun = None
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    args.data = os.path.abspath(args.data or os.path.join(root, "data", "kjv.txt"))
    if not os.path.exists(args.data):
        print("compose_sweep: SKIP: no corpus at %s (make data)" % args.data)
        return 77
    tally = {"ok": 0, "refused": 0, "fail": 0, "hang": 0, "skipped": 0}
    failures, checks, agreed = [], 0, 0
    for i in range(args.count):
        c = draw(args.seed, i, "multi" if args.layouts_only else "one" if not args.mpirun else "mixed")
        if c.ranks > 1 and not args.mpirun:
            tally["skipped"] += 1
            continue
        with tempfile.TemporaryDirectory(prefix="ctron-sweep-") as work:
            status, what, cmd, n = run(args, c, work)
        checks += n
        agreed += c.memory == "agrees"
        tally[status] += 1
        shown = " ".join(shlex.quote(x) for x in cmd[cmd.index("train") + 1:])
        prog = os.path.basename(cmd[cmd.index("train") - 1])
        if status in ("fail", "hang"):
            failures.append("case %d (%d rank%s): %s\n    %s train %s" % (i, c.ranks, "s" if c.ranks > 1 else "", what,
                                                                        prog, shown))
        if args.verbose or status in ("fail", "hang"):
            print("[%3d] %-7s %s | %s" % (i, status, what, shown), flush=True)
    ran = tally["ok"] + tally["refused"] + tally["fail"] + tally["hang"]
    print("compose_sweep seed %d: %d cases: %d trained (%d measured-vs-predicted checks; ctron memory's peak "
          "checked on %d), %d refused with a reason, %d failed, %d hung, %d skipped (no mpirun)" % (
              args.seed, args.count, tally["ok"], checks, agreed, tally["refused"], tally["fail"], tally["hang"],
              tally["skipped"]))
    for f in failures:
        print("FAIL " + f)
    if failures:
        return 1
    if ran == 0 or tally["ok"] < args.min_trained * ran:
        print("FAIL: only %d of %d cases trained (want at least %.0f%%): the sweep checks too little" %
              (tally["ok"], ran, 100 * args.min_trained))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
