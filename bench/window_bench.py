#!/usr/bin/python3
"""Sliding-window attention on a long sequence: ctron against itself without the window and against
transformers' MistralForCausalLM (`make bench-window`).

Config run_bench.py's M-window: llama L2 h512 a8 kv2 ffn1408 s4096 b1 v8192, fp32, recompute none,
sliding window 512 (each query attends to its last 512 positions). Implementations, in interleaved
rounds (the order reversed in even rounds):

    ctron-flash-window   ctron train --attention flash --sliding-window 512   (key tiles left of each
                         query tile's window skipped: attention work ~ s*W instead of s^2/2)
    ctron-flash          the same without the window (the whole causal prefix)
    ctron-window         the standard attention with the window (s x s probabilities kept; the key
                         blocks left of a block's window skipped in the forward only)
    hf-window            transformers 5's MistralForCausalLM, fp32 SDPA (a dense sliding-window mask)
    hf                   transformers' LlamaForCausalLM, fp32 SDPA (is_causal)

Each implementation runs with one thread at --steps A and B (default 2, 4) and CPU s per step =
(CPU(B) - CPU(A)) / (B - A) (bench/cpu_bench.py's method: a busy machine cannot change CPU seconds the
way it changes wall-clock times), beside the wall ms per step inside the B-step run (the median of its
timed steps, the first dropped). Reported with the activation bytes (ctron's ledger peak; the peer's
saved-tensor bytes) and the first loss. Writes bench/results/<date>-window.{json,md}.
"""
import argparse
import datetime
import os
import statistics
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench as rb  # noqa: E402  (the configs, run_ctron, run_peer)

CONFIG = "M-window"
# name: (kind, run_bench implementation, window on, ctron flags)
IMPLS = {
    "ctron-flash-window": ("ctron", "ctron", True, ["--attention", "flash"]),
    "ctron-flash": ("ctron", "ctron", False, ["--attention", "flash"]),
    "ctron-window": ("ctron", "ctron", True, []),
    "hf-window": ("peer", "hf-fp32", True, []),
    "hf": ("peer", "hf-fp32", False, []),
}
LABELS = {
    "ctron-flash-window": "ctron, flash, window 512", "ctron-flash": "ctron, flash, no window",
    "ctron-window": "ctron, standard attention, window 512",
    "hf-window": "transformers MistralForCausalLM (SDPA, window 512)",
    "hf": "transformers LlamaForCausalLM (SDPA, no window)",
}


def config_of(name, args):
    c = dict(rb.CONFIGS[CONFIG])
    if args.seq:
        c["seq"] = args.seq
    if not IMPLS[name][2]:
        c.pop("sliding_window")
    return c


def one_run(args, name, steps, env, workdir, rnd):
    kind, base, _, flags = IMPLS[name]
    pol = rb.parse_policy("none")
    run = argparse.Namespace(**vars(args))
    run.steps, run.threads, run.ctron_arg = steps, 1, flags
    tag = f"{name}-r{rnd}-s{steps}"
    res = (rb.run_ctron(run, config_of(name, args), pol, env, workdir, tag, impl=base) if kind == "ctron"
           else rb.run_peer(run, config_of(name, args), pol, env, tag, impl=base))
    if kind == "peer":
        res["act_bytes"] = (res.get("summary") or {}).get("saved_bytes_total")
    rb.report_run(f"round {rnd} {name} (1 thread, {steps} steps)", res)
    return res


def markdown(result):
    c, a, b = result["config"], result["steps"][0], result["steps"][1]
    lines = [f"# Sliding-window attention at s {c['seq']} ({result['date']})", "",
             f"Config {CONFIG}: llama L{c['layers']} h{c['hidden']} a{c['heads']} kv{c['kv_heads']} ffn{c['ffn']} "
             f"s{c['seq']} b{c['batch']} v{c['vocab']}, fp32, recompute none; window {c['sliding_window']}. "
             f"CPU seconds per step at one thread (runs of {a} and {b} steps differenced), median of "
             f"{result['rounds']} interleaved rounds.", "",
             "| implementation | CPU s/step | per round | / ctron flash window | wall ms/step | activation MiB | first loss |",
             "|---|---:|---|---:|---:|---:|---:|"]
    s = result["summary"]
    ref = s.get("ctron-flash-window", {}).get("cpu_s_per_step")
    for name, agg in s.items():
        x = agg["cpu_s_per_step"]
        rel = f"{x / ref:.2f}×" if x and ref else "–"
        act = f"{agg['act_bytes'] / 2**20:.1f}" if agg.get("act_bytes") else "–"
        loss = f"{agg['loss_first']:.4f}" if agg.get("loss_first") is not None else "–"
        ms = f"{agg['ms_median']:.0f}" if agg.get("ms_median") else "–"
        lines.append(f"| {LABELS[name]} | {x:.2f} | {', '.join(f'{y:.2f}' for y in agg['per_round'])} | {rel} | {ms} | "
                     f"{act} | {loss} |" if x else f"| {LABELS[name]} | failed | | | | | |")
    if result.get("dropped_rounds"):
        lines += ["", "Rounds left out, their runs' CPU seconds not growing with the steps (start-up varied more than "
                  "the extra steps cost; run more steps, --cpu-steps): " + "; ".join(result["dropped_rounds"]) + "."]
    lines += ["", "ctron's activation bytes: the ledger's step peak (measured == predicted; the window changes no "
              "saved tensor). The peers': the storages autograd saves in step 1's forward, parameters excluded.",
              "", "Command: `" + result["command"] + "`"]
    return "\n".join(lines) + "\n"


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds (default 1)")
    ap.add_argument("--cpu-steps", default="2,4", help="A,B: the two runs' steps (default 2,4)")
    ap.add_argument("--seq", type=int, default=0, help="another sequence length than the config's 4096")
    ap.add_argument("--impls", default=",".join(IMPLS), help="subset of " + ",".join(IMPLS))
    ap.add_argument("--ctron", default=os.path.join(rb.ROOT, "build", "ctron"))
    ap.add_argument("--data", default=os.path.join(rb.ROOT, "data", "kjv.txt"))
    ap.add_argument("--hf-python", default=None, help="the peer venv's python (scripts/peer_env.sh --path)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out-dir", default=os.path.join(rb.ROOT, "bench", "results"))
    ap.add_argument("--suffix", default="window")
    args = ap.parse_args(argv)
    names = [n for n in args.impls.split(",") if n]
    if not names or any(n not in IMPLS for n in names):
        ap.error(f"--impls {args.impls}: expected a subset of {','.join(IMPLS)}")
    try:
        steps = [int(x) for x in args.cpu_steps.split(",")]
    except ValueError:
        steps = []
    if len(steps) != 2 or not 2 <= steps[0] < steps[1]:
        ap.error(f"--cpu-steps {args.cpu_steps!r}: expected A,B with 2 <= A < B")
    if args.rounds < 1 or args.seq < 0 or (args.seq and args.seq <= rb.CONFIGS[CONFIG]["sliding_window"]):
        ap.error(f"--rounds {args.rounds} --seq {args.seq}: expected rounds >= 1 and a sequence longer than the "
                 f"window {rb.CONFIGS[CONFIG]['sliding_window']}")
    args.impls, args.steps_ab = names, steps
    if args.hf_python is None:
        args.hf_python = rb.peer_env_python()
    args.python, args.peer_python = None, None   # run_bench's run_peer reads these
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not os.access(args.ctron, os.X_OK):
        print(f"window_bench.py: no ctron binary at {args.ctron} (build first)", file=sys.stderr)
        return 2
    env = dict(os.environ, **{k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    per = {n: [] for n in args.impls}
    wall = {n: [] for n in args.impls}
    first, dropped = {}, []
    with tempfile.TemporaryDirectory(prefix="ctron-window-bench-") as workdir:
        for rnd in range(1, args.rounds + 1):
            for name in (args.impls if rnd % 2 else args.impls[::-1]):
                runs = [one_run(args, name, st, env, workdir, rnd) for st in args.steps_ab]
                if all(r["ok"] for r in runs):
                    cpu = (runs[1]["cpu_s"] - runs[0]["cpu_s"]) / (args.steps_ab[1] - args.steps_ab[0])
                    if cpu > 0:   # else the runs' start-up (a Python peer's imports) varied more than the steps cost
                        per[name].append(cpu)
                    else:
                        dropped.append(f"{name} round {rnd}: {cpu:.2f} CPU s/step")
                    wall[name] += runs[1]["ms_timed"]
                    first.setdefault(name, runs[0])
    summary = {n: {"cpu_s_per_step": statistics.median(v) if v else None, "per_round": v,
                   "ms_median": statistics.median(wall[n]) if wall[n] else None,
                   "act_bytes": first.get(n, {}).get("act_bytes"), "loss_first": first.get(n, {}).get("loss_first")}
               for n, v in per.items()}
    date = datetime.date.today().isoformat()
    cfg = dict(rb.CONFIGS[CONFIG], **({"seq": args.seq} if args.seq else {}))
    result = {"date": date, "config": cfg, "rounds": args.rounds, "steps": args.steps_ab, "summary": summary,
              "dropped_rounds": dropped,
              "command": " ".join(["/usr/bin/python3", "bench/window_bench.py"] + (sys.argv[1:] if argv is None
                                                                                    else list(argv))),
              "environment": {"cpu_model": rb.cpu_model(), "load_average": os.getloadavg(),
                              "source_revision": rb.source_revision(), "ctron_sha256": rb.file_sha256(args.ctron)}}
    rb.write_result(args.out_dir, f"{date}-{args.suffix}", result, markdown(result))
    return 0 if all(s["cpu_s_per_step"] for s in summary.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
