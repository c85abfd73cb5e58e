#!/usr/bin/python3
"""Benchmark ctron against the PyTorch peer (bench/peers/torch_gpt.py).

For each selected config, runs ctron and the peer alternately on the same
model shape (ctron, peer, ctron, peer, ... for --rounds rounds), with the same
thread count, and reports per implementation:

    ms/step      median over all rounds of the per-step times, the first step of
                 every run dropped as warm-up
    tokens/s     s*b / (ms/1000)
    GFLOP/s      FLOPs per step / (ms/1000) / 1e9, with
                 FLOPs per step = 6*N*s*b + 12*L*b*s^2*h
                 (N = parameter count incl. both embeddings, tied output layer
                 counted once; 6*N*tokens = forward 2*N + backward 4*N per token;
                 12*L*b*s^2*h = QK^T and (probs . V), 2*s^2*h each per sequence
                 per layer in the forward over the full s x s matrix (as
                 computed, and as the paper's Eq. 7 counts it), times 3 for
                 forward + backward; ctron prints the same figure)
    peak RSS     ru_maxrss of the child from os.wait4 (KiB, shown in MiB)
    saved bytes  ctron: act_bytes / act_layer_bytes from its step log (activation-ledger
                 peak in total and for one block, LN statistics included);
                 peer: bytes of the tensors autograd saves in one forward
                 (total and per block)
    ratio        peer ms / ctron ms (> 1: ctron is faster); also the median of
                 the per-round paired ratios in the JSON

Absolute times on a shared machine are noise; ratios within one invocation
are the result. Writes bench/results/<date>.json (all raw numbers and the
environment) and bench/results/<date>.md (the table), and prints the table.
"""

import argparse
import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEER = os.path.join(HERE, "peers", "torch_gpt.py")

CONFIGS = {
    "T": dict(layers=4, hidden=256, heads=4, seq=128, batch=8, vocab=8192, dropout=0.1),
    "S": dict(layers=12, hidden=768, heads=12, seq=256, batch=4, vocab=8192, dropout=0.1),
    "L": dict(layers=12, hidden=768, heads=12, seq=2048, batch=1, vocab=8192, dropout=0.1),
}

FLOP_FORMULA = ("FLOPs/step = 6*N*s*b + 12*L*b*s^2*h "
                "(N = parameters incl. token and position embeddings, tied output counted once; "
                "attention term = QK^T and P.V over the full s x s matrix, x3 for fwd+bwd)")
EQ7_FORMULA = "model FLOPs/step (paper Eq. 7) = 72*b*L*s*h^2*(1 + s/(6h) + v/(12hL))"


class BenchError(Exception):
    pass


# --------------------------------------------------------------------------
# Work accounting
# --------------------------------------------------------------------------

def n_params(c):
    L, h, s, v = c["layers"], c["hidden"], c["seq"], c["vocab"]
    # per block: LN1 2h, QKV 3h^2+3h, Proj h^2+h, LN2 2h, FC1 4h^2+4h, FC2 4h^2+h
    block = 12 * h * h + 13 * h
    return v * h + s * h + L * block + 2 * h


def flops_per_step(c):
    L, h, s, b = c["layers"], c["hidden"], c["seq"], c["batch"]
    return 6 * n_params(c) * s * b + 12 * L * b * s * s * h


def eq7_flops_per_step(c):
    L, h, s, b, v = c["layers"], c["hidden"], c["seq"], c["batch"], c["vocab"]
    return 72 * b * L * s * h * h * (1 + s / (6 * h) + v / (12 * h * L))


# --------------------------------------------------------------------------
# Running a child with its own peak RSS
# --------------------------------------------------------------------------

def run_child(cmd, env, timeout_s, cwd):
    """Runs cmd; returns dict(rc, wall_s, peak_rss_kib, stdout, stderr, timed_out).

    stdout/stderr go to temporary files (not pipes) so that the child can never
    block on a full pipe while we sit in os.wait4, which reaps the child and
    returns its own rusage (ru_maxrss, KiB on Linux).
    """
    import subprocess
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        try:
            p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd)
        except OSError as e:
            raise BenchError(f"cannot start {cmd[0]!r}: {e}") from e
        timed_out = False
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid == p.pid:
                break
            if timeout_s and time.monotonic() - t0 > timeout_s:
                timed_out = True
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.05)
        wall = time.monotonic() - t0
        rc = os.waitstatus_to_exitcode(status)
        p.returncode = rc          # reaped by us; keep Popen from waiting again
        out.seek(0)
        err.seek(0)
        return dict(rc=rc, wall_s=round(wall, 3), peak_rss_kib=ru.ru_maxrss,
                    stdout=out.read().decode("utf-8", "replace"),
                    stderr=err.read().decode("utf-8", "replace"),
                    timed_out=timed_out)


def tail(text, n=15):
    lines = text.rstrip().splitlines()
    return "\n".join(lines[-n:])


def parse_json_lines(text):
    recs, bad = [], 0
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(obj, dict):
            recs.append(obj)
        else:
            bad += 1
    return recs, bad


def timed_steps(step_recs):
    """Sorts step records by step, returns (all ms, ms without the first step)."""
    step_recs = sorted(step_recs, key=lambda r: r["step"])
    ms = [float(r["ms"]) for r in step_recs]
    return ms, ms[1:]


# --------------------------------------------------------------------------
# One run of each implementation
# --------------------------------------------------------------------------

def run_ctron(args, c, env, workdir, tag):
    log = os.path.join(workdir, f"{tag}.jsonl")
    cmd = [args.ctron, "train",
           "--layers", str(c["layers"]), "--hidden", str(c["hidden"]),
           "--heads", str(c["heads"]), "--seq", str(c["seq"]),
           "--batch", str(c["batch"]), "--vocab", str(c["vocab"]),
           "--dropout", str(c["dropout"]), "--steps", str(args.steps),
           "--threads", str(args.threads), "--lr", "3e-4",
           "--data", args.data, "--log", log] + list(args.ctron_arg)
    r = run_child(cmd, env, args.timeout, ROOT)
    res = dict(impl="ctron", cmd=cmd, rc=r["rc"], wall_s=r["wall_s"],
               peak_rss_kib=r["peak_rss_kib"], timed_out=r["timed_out"])
    log_text = ""
    if os.path.exists(log):
        with open(log, encoding="utf-8", errors="replace") as f:
            log_text = f.read()
    recs, bad = parse_json_lines(log_text)
    res["log_bad_lines"] = bad
    res["log"] = recs
    steps = [x for x in recs if "step" in x and "ms" in x]
    # Several lines for one step (e.g. a val_loss line) would double count:
    # keep the first line with "ms" per step.
    seen, uniq = set(), []
    for x in steps:
        if x["step"] not in seen:
            seen.add(x["step"])
            uniq.append(x)
    all_ms, timed = timed_steps(uniq)
    res["ms_steps"] = all_ms
    res["ms_timed"] = timed
    res["ms_median"] = statistics.median(timed) if timed else None
    losses = [x["loss"] for x in sorted(uniq, key=lambda x: x["step"]) if "loss" in x]
    res["loss_first"] = losses[0] if losses else None
    res["loss_last"] = losses[-1] if losses else None
    acts = [x["act_bytes"] for x in recs if isinstance(x.get("act_bytes"), (int, float))]
    res["act_bytes"] = max(acts) if acts else None
    layer = [x["act_layer_bytes"] for x in recs if isinstance(x.get("act_layer_bytes"), (int, float))]
    res["act_layer_bytes"] = max(layer) if layer else None
    res["ok"] = r["rc"] == 0 and bool(timed)
    if not res["ok"]:
        why = (f"timed out after {args.timeout} s" if r["timed_out"]
               else f"exit status {r['rc']}" if r["rc"] != 0
               else f"log {log} has {len(uniq)} step lines with 'ms' (need >= 2)")
        res["error"] = why
        res["stderr_tail"] = tail(r["stderr"]) or tail(r["stdout"])
    elif len(uniq) != args.steps:
        res["warning"] = f"log has {len(uniq)} step lines, expected {args.steps}"
    return res


def run_peer(args, c, env, tag):
    cmd = [args.python, PEER,
           "--layers", str(c["layers"]), "--hidden", str(c["hidden"]),
           "--heads", str(c["heads"]), "--seq", str(c["seq"]),
           "--batch", str(c["batch"]), "--vocab", str(c["vocab"]),
           "--dropout", str(c["dropout"]), "--steps", str(args.steps),
           "--threads", str(args.threads), "--recompute", args.peer_recompute]
    r = run_child(cmd, env, args.timeout, ROOT)
    res = dict(impl="torch", cmd=cmd, rc=r["rc"], wall_s=r["wall_s"],
               peak_rss_kib=r["peak_rss_kib"], timed_out=r["timed_out"])
    recs, _ = parse_json_lines(r["stdout"])
    steps = [x for x in recs if "step" in x and "ms" in x and "peer" not in x]
    summary = next((x for x in recs if x.get("peer") == "torch"), None)
    all_ms, timed = timed_steps(steps)
    res["ms_steps"] = all_ms
    res["ms_timed"] = timed
    res["ms_median"] = statistics.median(timed) if timed else None
    res["loss_first"] = steps[0]["loss"] if steps else None
    res["loss_last"] = steps[-1]["loss"] if steps else None
    res["summary"] = summary
    res["ok"] = r["rc"] == 0 and summary is not None and bool(timed)
    if not res["ok"]:
        res["error"] = (f"timed out after {args.timeout} s" if r["timed_out"]
                        else f"exit status {r['rc']}" if r["rc"] != 0
                        else "no summary line or fewer than 2 steps in the peer's output")
        res["stderr_tail"] = tail(r["stderr"]) or tail(r["stdout"])
    return res


# --------------------------------------------------------------------------
# Environment
# --------------------------------------------------------------------------

def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem_total_kib():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def source_revision():
    """The checked-out commit, read from .git without running git."""
    try:
        gitdir = os.path.join(ROOT, ".git")
        if os.path.isfile(gitdir):               # worktree: "gitdir: <path>"
            with open(gitdir) as f:
                gitdir = f.read().split(":", 1)[1].strip()
        with open(os.path.join(gitdir, "HEAD")) as f:
            head = f.read().strip()
        if not head.startswith("ref:"):
            return head
        ref = head.split(":", 1)[1].strip()
        path = os.path.join(gitdir, ref)
        if os.path.exists(path):
            with open(path) as f:
                return f.read().strip()
        return ref
    except (OSError, IndexError):
        return None


def file_sha256(path):
    try:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


def environment(args, torch_version):
    return {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_allowed": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "mem_total_kib": mem_total_kib(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "peer_python": args.python,
        "torch_version": torch_version,
        "threads": args.threads,
        "thread_env": {k: str(args.threads) for k in
                       ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
        "ctron": None if args.peer_only else {
            "path": args.ctron, "sha256": file_sha256(args.ctron),
            "mtime": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(os.path.getmtime(args.ctron))),
        },
        "source_revision": source_revision(),
    }


# --------------------------------------------------------------------------
# Aggregation and the table
# --------------------------------------------------------------------------

def aggregate(c, runs):
    ok = [r for r in runs if r["ok"]]
    if not ok:
        return None
    timed = [m for r in ok for m in r["ms_timed"]]
    med = statistics.median(timed)
    tokens = c["seq"] * c["batch"]
    agg = {
        "runs_ok": len(ok), "runs": len(runs),
        "ms_median": med,
        "ms_round_medians": [r["ms_median"] for r in ok],
        "ms_min": min(timed), "ms_max": max(timed),
        "tokens_per_s": tokens / (med / 1e3),
        "gflops": flops_per_step(c) / (med / 1e3) / 1e9,
        "gflops_eq7": eq7_flops_per_step(c) / (med / 1e3) / 1e9,
        "peak_rss_kib": max(r["peak_rss_kib"] for r in ok),
        "loss_first": ok[0]["loss_first"],
    }
    if ok[0]["impl"] == "ctron":
        acts = [r["act_bytes"] for r in ok if r["act_bytes"] is not None]
        agg["act_bytes_total"] = max(acts) if acts else None
        layer = [r.get("act_layer_bytes") for r in ok if r.get("act_layer_bytes") is not None]
        agg["act_bytes_per_layer"] = max(layer) if layer else None
    else:
        s = ok[0]["summary"]
        agg["act_bytes_total"] = s["saved_bytes_total"]
        agg["act_bytes_per_layer"] = s["saved_bytes_per_layer"]
        agg["act_bytes_embed"] = s.get("saved_bytes_embed")
        agg["act_bytes_head"] = s.get("saved_bytes_head")
        agg["n_params_peer"] = s.get("n_params")
        agg["torch_threads"] = s.get("threads")
    return agg


def mib(x):
    return "–" if x is None else f"{x / 2**20:.2f}"


def fmt(x, nd=1):
    return "–" if x is None else f"{x:.{nd}f}"


def markdown(result):
    env = result["environment"]
    lines = [
        f"# ctron vs PyTorch peer — {result['date']}",
        "",
        f"CPU: {env['cpu_model']} ({env['cpus_allowed']} CPUs allowed), threads {env['threads']}, "
        f"torch {env['torch_version']}, steps/run {result['steps']} (first dropped), "
        f"rounds {result['rounds']}, peer recompute `{result['peer_recompute']}`.",
        "",
        f"{FLOP_FORMULA}. Saved activations: ctron = activation-ledger peak (`act_bytes`), "
        "torch = unique storages saved by autograd in one forward (parameters excluded). "
        "Ratio = torch ms / ctron ms (> 1 means ctron is faster). "
        "Absolute times on a shared machine are noise; compare ratios within this run.",
        "",
        "| config | impl | ms/step (median) | tokens/s | GFLOP/s | peak RSS MiB "
        "| saved act. total MiB | saved act. per layer MiB | torch/ctron ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, cres in result["configs"].items():
        c = cres["config"]
        shape = (f"{name} (L{c['layers']} h{c['hidden']} a{c['heads']} s{c['seq']} "
                 f"b{c['batch']} v{c['vocab']} p{c['dropout']})")
        for impl in ("ctron", "torch"):
            agg = cres["summary"].get(impl)
            if impl not in cres["summary"]:
                continue
            if agg is None:
                err = next((r.get("error") for r in cres["runs"] if r["impl"] == impl), "failed")
                lines.append(f"| {shape} | {impl} | failed: {err} | | | | | | |")
                continue
            ratio = ""
            if impl == "torch" and cres.get("ratio_torch_over_ctron") is not None:
                ratio = f"{cres['ratio_torch_over_ctron']:.2f}"
            lines.append(
                f"| {shape} | {impl} | {fmt(agg['ms_median'])} | {fmt(agg['tokens_per_s'], 0)} "
                f"| {fmt(agg['gflops'], 2)} | {mib(agg['peak_rss_kib'] * 1024)} "
                f"| {mib(agg['act_bytes_total'])} | {mib(agg['act_bytes_per_layer'])} | {ratio} |")
    lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Benchmark ctron against the PyTorch peer, alternating runs.")
    ap.add_argument("--configs", default="T,S",
                    help="comma-separated subset of " + ",".join(CONFIGS) + " (default T,S)")
    ap.add_argument("--steps", type=int, default=6, help="steps per run, first dropped (default 6)")
    ap.add_argument("--rounds", type=int, default=2, help="ctron/peer alternations (default 2)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="threads for both implementations (default: all CPUs)")
    ap.add_argument("--ctron", default=os.path.join(ROOT, "build", "ctron"),
                    help="ctron binary (default build/ctron)")
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "kjv.txt"),
                    help="training text for ctron (default data/kjv.txt)")
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="Python with PyTorch for the peer (default /usr/bin/python3)")
    ap.add_argument("--peer-recompute", choices=["none", "selective", "full"], default="none",
                    help="recompute policy of the peer (default none)")
    ap.add_argument("--ctron-arg", action="append", default=[],
                    help="extra argument appended to the ctron command (repeatable)")
    ap.add_argument("--peer-only", action="store_true",
                    help="run only the PyTorch peer (no ctron binary needed)")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="seconds before a run is killed (0 = never; default 1800)")
    ap.add_argument("--out-dir", default=os.path.join(HERE, "results"),
                    help="where <date>.json and <date>.md go (default bench/results)")
    args = ap.parse_args(argv)

    names = [x.strip() for x in args.configs.split(",") if x.strip()]
    unknown = [x for x in names if x not in CONFIGS]
    if not names or unknown:
        ap.error(f"--configs {args.configs!r}: unknown {unknown or 'empty list'}; "
                 f"expected a comma-separated subset of {','.join(CONFIGS)}")
    args.config_names = list(dict.fromkeys(names))
    if args.steps < 2:
        ap.error(f"--steps {args.steps}: expected >= 2 (the first step is dropped as warm-up)")
    if args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: expected >= 1")
    if args.threads < 1:
        ap.error(f"--threads {args.threads}: expected >= 1")
    if args.timeout < 0:
        ap.error(f"--timeout {args.timeout}: expected >= 0")
    return args


def check_inputs(args):
    if not (os.path.isfile(args.python) and os.access(args.python, os.X_OK)):
        raise BenchError(f"Python for the peer not found or not executable: {args.python} "
                         f"(pass --python PATH)")
    if args.peer_only:
        return
    if not os.path.exists(args.ctron):
        raise BenchError(
            f"ctron binary not found at {args.ctron}. Build it first "
            f"(cmake -S . -B build && cmake --build build), pass --ctron PATH, "
            f"or run with --peer-only to benchmark only the PyTorch peer.")
    if not (os.path.isfile(args.ctron) and os.access(args.ctron, os.X_OK)):
        raise BenchError(f"ctron binary at {args.ctron} is not an executable file")
    if not os.path.isfile(args.data):
        raise BenchError(f"training data for ctron not found at {args.data} "
                         f"(pass --data PATH)")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        check_inputs(args)
    except BenchError as e:
        print(f"run_bench.py: error: {e}", file=sys.stderr)
        return 2

    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(args.threads)

    date = time.strftime("%Y-%m-%d")
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    load_start = os.getloadavg()
    result = {"date": date, "started": started, "steps": args.steps, "rounds": args.rounds,
              "peer_recompute": args.peer_recompute, "flop_formula": FLOP_FORMULA,
              "eq7_formula": EQ7_FORMULA, "configs": {}}
    torch_version = None
    failed = False

    with tempfile.TemporaryDirectory(prefix="ctron-bench-") as workdir:
        for name in args.config_names:
            c = CONFIGS[name]
            runs = []
            for rnd in range(1, args.rounds + 1):
                impls = ["torch"] if args.peer_only else ["ctron", "torch"]
                for impl in impls:
                    label = f"[{name} round {rnd}/{args.rounds}] {impl}"
                    print(f"{label}: running ...", file=sys.stderr, flush=True)
                    if impl == "ctron":
                        r = run_ctron(args, c, env, workdir, f"{name}-r{rnd}")
                    else:
                        r = run_peer(args, c, env, f"{name}-r{rnd}")
                        if r.get("summary"):
                            torch_version = r["summary"].get("torch_version")
                    r["round"] = rnd
                    runs.append(r)
                    if r["ok"]:
                        print(f"{label}: median {r['ms_median']:.1f} ms/step over "
                              f"{len(r['ms_timed'])} steps, loss {r['loss_first']:.3f} -> "
                              f"{r['loss_last']:.3f}, peak RSS {r['peak_rss_kib'] / 1024:.0f} MiB"
                              + (f" ({r['warning']})" if r.get("warning") else ""),
                              file=sys.stderr, flush=True)
                    else:
                        failed = True
                        print(f"{label}: FAILED: {r['error']}\n{r.get('stderr_tail', '')}",
                              file=sys.stderr, flush=True)
            summ = {}
            for impl in (["torch"] if args.peer_only else ["ctron", "torch"]):
                summ[impl] = aggregate(c, [r for r in runs if r["impl"] == impl])
            cres = {"config": dict(c), "n_params": n_params(c),
                    "flops_per_step": flops_per_step(c),
                    "eq7_flops_per_step": eq7_flops_per_step(c),
                    "tokens_per_step": c["seq"] * c["batch"],
                    "summary": summ, "runs": runs}
            tsum = summ.get("torch")
            if tsum and tsum.get("n_params_peer") not in (None, cres["n_params"]):
                print(f"warning: peer has {tsum['n_params_peer']} parameters, formula says "
                      f"{cres['n_params']}", file=sys.stderr)
            if summ.get("ctron") and summ.get("torch"):
                cres["ratio_torch_over_ctron"] = summ["torch"]["ms_median"] / summ["ctron"]["ms_median"]
                paired = []
                for rnd in range(1, args.rounds + 1):
                    a = next((r for r in runs if r["impl"] == "ctron" and r["round"] == rnd and r["ok"]), None)
                    b = next((r for r in runs if r["impl"] == "torch" and r["round"] == rnd and r["ok"]), None)
                    if a and b:
                        paired.append(b["ms_median"] / a["ms_median"])
                cres["ratio_paired_per_round"] = paired
                cres["ratio_paired_median"] = statistics.median(paired) if paired else None
            else:
                cres["ratio_torch_over_ctron"] = None
            result["configs"][name] = cres

    result["environment"] = environment(args, torch_version)
    result["environment"]["loadavg_start"] = load_start   # 1/5/15-min load: a noise hint
    result["environment"]["loadavg_end"] = os.getloadavg()
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")

    os.makedirs(args.out_dir, exist_ok=True)
    jpath = os.path.join(args.out_dir, f"{date}.json")
    mpath = os.path.join(args.out_dir, f"{date}.md")
    table = markdown(result)
    with open(jpath, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    with open(mpath, "w") as f:
        f.write(table)
    print(table)
    print(f"wrote {os.path.relpath(jpath, ROOT)} and {os.path.relpath(mpath, ROOT)}",
          file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
