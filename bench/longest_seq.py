#!/usr/bin/env python3
"""The longest sequence GPT-2 1.5B trains on one GPU: ctron's budget planner against PyTorch (issue 30).

ctron: the device's memory less a reserve (--reserve, default 8 %: CUDA context, cuBLAS workspace,
fragmentation) and the model states `ctron memory` counts (fp32 weights, gradients, AdamW m and v, the bf16
weight copy) is the activation budget; the longest s (a multiple of --granule) for which `ctron plan
--budget` finds a plan is predicted, then `ctron train --device cuda --mem-budget` runs it for --steps
steps (and, if it fails, the largest granule below that runs). PyTorch: bench/peers/torch_gpt.py's GPT
(SDPA, bf16 autocast, fused AdamW) with full activation checkpointing of every block (and, for
reference, none), one process per policy, the longest s whose training step does not raise
torch.cuda.OutOfMemoryError, by doubling then bisection to the same granule. Batch 1, dropout 0.

    python3 bench/longest_seq.py --ctron build-gpu/ctron --out longest.json     # on the GPU
    python3 bench/longest_seq.py --ctron build/ctron --device-bytes 80e9 --peers ""    # the prediction alone
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SHAPE = dict(layers=48, hidden=1600, heads=25, vocab=50304)


def shape_args(s):
    return ["--layers", str(SHAPE["layers"]), "--hidden", str(SHAPE["hidden"]), "--heads", str(SHAPE["heads"]),
            "--vocab", str(SHAPE["vocab"]), "--batch", "1", "--dropout", "0", "--seq", str(s)]


def search(fits, granule, hi):
    """The largest multiple of granule ≤ hi for which fits(s) holds (0 if none): doubling, then bisection."""
    lo = granule
    if not fits(lo):
        return 0
    while lo * 2 <= hi and fits(lo * 2):
        lo *= 2
    step = lo // 2
    while step >= granule:
        if lo + step <= hi and fits(lo + step):
            lo += step
        step //= 2
    return lo


def ctron_budget(args, s):
    d = json.loads(subprocess.run([args.ctron, "memory"] + shape_args(s) + ["--precision", "bf16", "--json"],
                                  check=True, capture_output=True, text=True).stdout)["first_stage"]
    states = d["param_bytes"] + d["grad_bytes"] + d["adam_bytes"] + 2 * d["parameters"]   # + the bf16 copy
    return int(args.device_bytes * (1 - args.reserve) - states)


def ctron_plan(args, s):
    r = subprocess.run([args.ctron, "plan", "--budget", str(ctron_budget(args, s)), "--precision", "bf16",
                        "--threads", "1"] + shape_args(s), capture_output=True, text=True)
    return r.returncode == 0, r.stdout


def ctron_train(args, s):
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "log.jsonl")
        cmd = [args.ctron, "train", "--device", "cuda", "--precision", "bf16", "--mem-budget",
               str(ctron_budget(args, s)), "--steps", str(args.steps), "--eval-every", "0", "--eval-batches", "1",
               "--data", args.data, "--log", log, "--no-ledger"] + shape_args(s)
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        if p.returncode != 0:
            return {"seq": s, "error": f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}"}
        recs = [json.loads(x) for x in open(log) if x.strip()]
        return {"seq": s, "ms_step": recs[-1]["ms"], "act_bytes": recs[-1].get("act_bytes"), "wall_s": time.time() - t0}


def peer_search(args):
    """One PyTorch policy's longest sequence, in this process (prints one JSON line)."""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
    from torch_gpt import GPT
    dev = args.device
    tried = {}

    def fits(s):
        model = opt = None
        try:
            torch.manual_seed(1)
            model = GPT(SHAPE["layers"], SHAPE["hidden"], SHAPE["heads"], s, SHAPE["vocab"], 0.0, args.peer,
                        "sdpa").to(dev)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev == "cuda")
            idx = torch.randint(0, SHAPE["vocab"], (1, s), device=dev)
            t0 = time.perf_counter()
            with torch.autocast(dev, dtype=torch.bfloat16):
                loss = model(idx, idx)
            loss.backward()
            opt.step()
            if dev == "cuda":
                torch.cuda.synchronize()
            tried[s] = {"ms_step": (time.perf_counter() - t0) * 1e3,
                        "peak_bytes": torch.cuda.max_memory_allocated() if dev == "cuda" else None}
            return True
        except torch.cuda.OutOfMemoryError:
            tried[s] = {"oom": True}
            return False
        finally:
            del model, opt
            if dev == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()

    s = search(fits, args.granule, args.max_seq)
    print(json.dumps({"policy": args.peer, "seq": s, "at_longest": tried.get(s), "tried": tried}))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ctron", default="build-gpu/ctron")
    ap.add_argument("--data", default="data/kjv.txt")
    ap.add_argument("--device-bytes", type=float, default=0, help="default: the GPU's (nvidia-smi)")
    ap.add_argument("--reserve", type=float, default=0.08)
    ap.add_argument("--granule", type=int, default=1024)
    ap.add_argument("--max-seq", type=int, default=1 << 16,
                    help="the search's cap (default 65536: a step there takes tens of seconds on an H100)")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--peers", default="full,none")
    ap.add_argument("--peer", choices=["full", "none", "selective"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.peer:
        return peer_search(args)
    if not args.device_bytes:
        mib = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True).stdout.split()
        if not mib:
            print("longest_seq: no GPU visible (give --device-bytes to plan for one)", file=sys.stderr)
            return 2
        args.device_bytes = float(mib[0]) * 2**20
    out = {"shape": SHAPE, "device_bytes": args.device_bytes, "reserve": args.reserve}
    s = search(lambda q: ctron_plan(args, q)[0], args.granule, args.max_seq)
    out["ctron_predicted"] = {"seq": s, "budget": ctron_budget(args, s), "plan": ctron_plan(args, s)[1].strip()[-600:]}
    print(json.dumps({"ctron predicted": s}), flush=True)
    run = ctron_train(args, s) if s else {"error": "no plan"}
    for _ in range(3):   # a plan that does not run: the largest that does, a granule at a time (3 tries)
        if "error" not in run or run.get("seq", 0) <= args.granule:
            break
        print(json.dumps(run), flush=True)
        run = ctron_train(args, run["seq"] - args.granule)
    out["ctron_run"] = run
    print(json.dumps(run), flush=True)
    for pol in [x for x in args.peers.split(",") if x]:
        p = subprocess.run([args.python, os.path.abspath(__file__), "--peer", pol, "--granule", str(args.granule),
                            "--max-seq", str(args.max_seq), "--device", args.device], capture_output=True, text=True,
                           timeout=args.timeout * 3)
        out[f"torch_{pol}"] = (json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else
                               {"error": f"exit {p.returncode}: {p.stderr.strip()[-300:]}"})
        print(json.dumps({f"torch {pol}": out[f"torch_{pol}"].get("seq", out[f"torch_{pol}"].get("error"))}), flush=True)
    print("\n| implementation | longest s (1.5B, b 1, bf16) | s/step at it | memory |")
    print("|---|---:|---:|---|")
    r = out["ctron_run"]
    cap = lambda n: f"≥ {n} (the cap)" if n == args.max_seq else str(n)   # noqa: E731
    print(f"| ctron, budget planner (predicted {cap(s)}) | {r.get('seq', '-') if 'error' not in r else 'failed'} | "
          f"{r.get('ms_step', 0) / 1e3:.2f} | activations {r.get('act_bytes') or 0:.3g} B |")
    for pol in [x for x in args.peers.split(",") if x]:
        t = out[f"torch_{pol}"]
        at = t.get("at_longest") or {}
        print(f"| PyTorch SDPA, checkpointing {pol} | {cap(t['seq']) if 'seq' in t else 'failed'} | {at.get('ms_step', 0) / 1e3:.2f} | "
              f"peak alloc {at.get('peak_bytes') or 0:.3g} B |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
