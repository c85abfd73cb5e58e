#!/usr/bin/python3
"""LoRA and LoRA-FA against peft (issue 27, item 6): part of `make bench`.

On the llama bench config (run_bench.py's S-llama: L12 h768 a12 kv4 ffn2048 s256 b4 v8192, fp32,
recompute none), in interleaved rounds (the order reversed in even rounds), each run --steps steps
of which the first is dropped:

    ctron-full      ctron train --arch llama ...                       full fine-tuning
    ctron-lora      ... --lora-rank R --lora-alpha A                   all seven llama targets
    ctron-lora-fa   ... --lora-fa
    ctron-lora-fa-before  the same with the --ctron-before binary (a change's before, interleaved with
                    its after; ctron-lora-fa-bf16-before at bf16; only when --impls names them, as
                    ctron-lora-fa-flash: --attention flash)
    hf-full         transformers' LlamaForCausalLM, fp32 SDPA            full fine-tuning
    peft-lora       peft 0.21 LoRA on it, fp32 SDPA                     (bench/peers/hf_llama.py)
    peft-lora-fa    the same with every lora_A frozen (requires_grad=False)
    peft-lora-bf16  peft LoRA under torch.autocast(bf16): kept only when PyTorch's CPU bf16 matmul
                    runs at least at half its fp32 rate (run_bench.py's probe), unless --bf16-peer
                    always
    peft-lora-fa-bf16, ctron-lora-fa-bf16 (--precision bf16): LoRA-FA at bf16 on both sides, kept
                    by the same probe (a machine with native bf16 GEMMs: AVX512-BF16, AMX), so that
                    ctron at bf16 meets the peers at bf16 (ctron-lora-bf16 only when --impls names it)

Reported per implementation: the median ms/step over every timed step of every round, and the
activation bytes: ctron's ledger peak of the step (`act_bytes`, measured == predicted) and the
peer's bytes of the distinct storages autograd saves during one forward (saved_tensors_hooks;
parameters, frozen or not, excluded: run_bench.py's SavedTensorMeter). Then ctron LoRA-FA / the
fastest peft peer, against the issue's target (>= 1.3x, at lower measured memory).

With --cpu-steps A,B (default 2,4; '' to skip) each implementation also runs with --threads 1 at
--steps A and B, and CPU s per step = (CPU(B) - CPU(A)) / (B - A) (the child's rusage: bench/
cpu_bench.py's method), which a machine shared with other work cannot change the way it changes
wall-clock times; the same rounds, interleaved.

Writes bench/results/<date>-lora.{json,md} (the markdown also printed).
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench as rb  # noqa: E402  (the configs, run_child, run_ctron, run_peer, the bf16 probe)

CONFIG = "S-llama"
TARGET = 1.3
# name: (kind, base implementation in run_bench.IMPLS, LoRA flags: "lora", "fa" or None)
IMPLS = {
    "ctron-full": ("ctron", "ctron", None),
    "ctron-lora": ("ctron", "ctron", "lora"),
    "ctron-lora-fa": ("ctron", "ctron", "fa"),
    "ctron-lora-fa-flash": ("ctron", "ctron", "fa-flash"),
    "ctron-lora-fa-before": ("ctron", "ctron", "fa"),   # --ctron-before's binary: a change's before and after
    "hf-full": ("peer", "hf-fp32", None),
    "peft-lora": ("peer", "hf-fp32", "lora"),
    "peft-lora-fa": ("peer", "hf-fp32", "fa"),
    "peft-lora-bf16": ("peer", "hf-bf16", "lora"),
    "peft-lora-fa-bf16": ("peer", "hf-bf16", "fa"),
    "ctron-lora-bf16": ("ctron", "ctron-bf16", "lora"),
    "ctron-lora-fa-bf16": ("ctron", "ctron-bf16", "fa"),
    "ctron-lora-fa-bf16-before": ("ctron", "ctron-bf16", "fa"),   # --ctron-before's binary at bf16
}
OPTIONAL = ("ctron-lora-fa-flash", "ctron-lora-fa-before", "ctron-lora-bf16", "ctron-lora-fa-bf16-before")   # only when --impls names them
BF16 = ("peft-lora-bf16", "peft-lora-fa-bf16", "ctron-lora-bf16", "ctron-lora-fa-bf16", "ctron-lora-fa-bf16-before")   # kept by the bf16 probe
LABELS = {
    "ctron-full": "ctron full fine-tuning", "ctron-lora": "ctron LoRA", "ctron-lora-fa": "ctron LoRA-FA",
    "ctron-lora-fa-flash": "ctron LoRA-FA, --attention flash",
    "ctron-lora-fa-before": "ctron LoRA-FA, the --ctron-before binary",
    "hf-full": "transformers full fine-tuning (fp32, SDPA)", "peft-lora": "peft LoRA (fp32, SDPA)",
    "peft-lora-fa": "peft LoRA-FA (fp32, SDPA, lora_A frozen)",
    "peft-lora-bf16": "peft LoRA (bf16 autocast, SDPA)",
    "peft-lora-fa-bf16": "peft LoRA-FA (bf16 autocast, SDPA, lora_A frozen)",
    "ctron-lora-bf16": "ctron LoRA, --precision bf16", "ctron-lora-fa-bf16": "ctron LoRA-FA, --precision bf16",
    "ctron-lora-fa-bf16-before": "ctron LoRA-FA, --precision bf16, the --ctron-before binary",
}


def lora_flags(args, mode):
    if mode is None:
        return []
    flags = ["--lora-rank", str(args.rank), "--lora-alpha", str(args.alpha)]
    return flags + (["--lora-fa"] if mode.startswith("fa") else []) + (
        ["--attention", "flash"] if mode.endswith("flash") else [])


def one_run(args, name, env, workdir, rnd):
    kind, base, mode = IMPLS[name]
    pol = rb.parse_policy("none")
    c = dict(rb.CONFIGS[CONFIG], **({"layers": args.layers} if args.layers else {}))
    tag = f"{name}-r{rnd}"
    if kind == "ctron":
        run_args = argparse.Namespace(**vars(args))
        run_args.ctron_arg = lora_flags(args, mode)
        if name.endswith("-before"):
            run_args.ctron = args.ctron_before
        res = rb.run_ctron(run_args, c, pol, env, workdir, tag, impl=base)
        res["act_peak_bytes"] = res.get("act_bytes")
        res["act_per_layer"] = res.get("act_layer_bytes")
    else:
        res = rb.run_peer(args, c, pol, env, tag, impl=base, extra=lora_flags(args, mode))
        s = res.get("summary") or {}
        res["act_peak_bytes"] = s.get("saved_bytes_total")
        res["act_per_layer"] = s.get("saved_bytes_per_layer")
        res["n_trainable"] = s.get("n_trainable")
    res["impl"] = name
    res["round"] = rnd
    rb.report_run(f"round {rnd} {name} ({args.threads} threads, {args.steps} steps)", res)
    return res


def cpu_pair(args, name, env, workdir, rnd):
    """CPU seconds per step of one implementation at one thread: runs of A and B steps, differenced."""
    one = argparse.Namespace(**vars(args))
    one.threads = 1
    env1 = dict(env, **{k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    cpu = []
    for steps in args.cpu_steps:
        one.steps = steps
        r = one_run(one, name, env1, workdir, f"{rnd}-cpu{steps}")
        if not r["ok"]:
            return {"impl": name, "round": rnd, "cpu_s_per_step": None, "error": r.get("error")}
        cpu.append(r["cpu_s"])
    a, b = args.cpu_steps
    return {"impl": name, "round": rnd, "cpu_s": cpu, "cpu_s_per_step": (cpu[1] - cpu[0]) / (b - a)}


def summarise(runs, names):
    out = {}
    for name in names:
        ok = [r for r in runs if r["impl"] == name and r["ok"]]
        steps = [m for r in ok for m in r["ms_timed"]]
        acts = [r["act_peak_bytes"] for r in ok if r.get("act_peak_bytes") is not None]
        out[name] = {
            "runs_ok": len(ok), "runs": sum(r["impl"] == name for r in runs),
            "ms_median": statistics.median(steps) if steps else None,
            "ms_per_round": [r["ms_median"] for r in ok],
            "act_peak_bytes": max(acts) if acts else None,
            "act_per_layer": next((r["act_per_layer"] for r in ok if r.get("act_per_layer") is not None), None),
            "loss_first": ok[0]["loss_first"] if ok else None,
            "loss_last": ok[0]["loss_last"] if ok else None,
            "phases_ms": rb.phase_medians(ok) if ok else None,
            "n_trainable": next((r.get("n_trainable") for r in ok if r.get("n_trainable")), None),
        }
    return out


def summarise_cpu(pairs, names):
    out = {}
    for name in names:
        v = [p["cpu_s_per_step"] for p in pairs if p["impl"] == name and p["cpu_s_per_step"] is not None]
        out[name] = {"cpu_s_per_step": statistics.median(v) if v else None, "per_round": v}
    return out


FA_VARIANTS = ("ctron-lora-fa", "ctron-lora-fa-flash", "ctron-lora-fa-before", "ctron-lora-fa-bf16",
               "ctron-lora-fa-bf16-before")


def verdicts(summary):
    """verdict() of each ctron LoRA-FA variant that ran."""
    return [v for v in (verdict(summary, n) for n in FA_VARIANTS if n in summary) if v]


def verdict(summary, name="ctron-lora-fa"):
    """ctron LoRA-FA (name) against the fastest peft peer: speed ratio, memory ratio, target met."""
    fa = summary.get(name, {})
    peers = [(n, s) for n, s in summary.items() if n.startswith("peft-") and s["ms_median"]]
    if not fa.get("ms_median") or not peers:
        return None
    best, bs = min(peers, key=lambda p: p[1]["ms_median"])
    speed = bs["ms_median"] / fa["ms_median"]
    mem = (bs["act_peak_bytes"] / fa["act_peak_bytes"]
           if bs.get("act_peak_bytes") and fa.get("act_peak_bytes") else None)
    return {"ctron": name, "strongest_peer": best, "speedup": round(speed, 3),
            "peer_act_over_ctron": round(mem, 3) if mem else None,
            "target": TARGET, "met": bool(speed >= TARGET and mem is not None and mem > 1.0)}


def mib(x):
    return "–" if x is None else f"{x / 2**20:.1f}"


def markdown(result):
    s = result["summary"]
    full = s.get("ctron-full", {}).get("ms_median")
    hf_full = s.get("hf-full", {}).get("ms_median")
    c = result["config"]
    lines = [f"# LoRA and LoRA-FA: ctron vs peft ({result['date']})", "",
             f"Config {CONFIG}: L{c['layers']} h{c['hidden']} a{c['heads']} kv{c['kv_heads']} "
             f"ffn{c['ffn']} s{c['seq']} b{c['batch']} v{c['vocab']}, fp32 (bf16 where a row says so), recompute none, "
             f"{result['threads']} threads; LoRA r {result['rank']}, alpha {result['alpha']}, "
             f"targets q,k,v,o,gate,up,down; {result['steps']} steps per run (first dropped), "
             f"{result['rounds']} interleaved rounds.", "",
             "| implementation | ms/step | vs own full | trainable | activation MiB | per layer MiB | fwd / bwd / opt ms |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for name, agg in s.items():
        own_full = full if name.startswith("ctron") else hf_full
        rel = (f"{own_full / agg['ms_median']:.2f}×" if own_full and agg["ms_median"] else "–")
        ph = agg.get("phases_ms")
        split = " / ".join(f"{ph[k]:.0f}" for k in ("fwd", "bwd", "opt")) if ph else "–"
        ms = f"{agg['ms_median']:.0f}" if agg["ms_median"] else f"failed ({agg['runs_ok']}/{agg['runs']})"
        tr = agg.get("n_trainable")
        lines.append(f"| {LABELS[name]} | {ms} | {rel} | {tr if tr else '–'} | "
                     f"{mib(agg['act_peak_bytes'])} | {mib(agg.get('act_per_layer'))} | {split} |")
    cpu = result.get("cpu")
    if cpu:
        a, b = result["cpu_steps"]
        cfa = cpu.get("ctron-lora-fa", {}).get("cpu_s_per_step")
        lines += ["", f"CPU seconds per step, one thread (runs of {a} and {b} steps differenced; median of the "
                  "rounds; a busy machine cannot change these the way it changes wall-clock times):", "",
                  "| implementation | CPU s/step | per round | / ctron LoRA-FA |", "|---|---:|---|---:|"]
        for name, c in cpu.items():
            x = c["cpu_s_per_step"]
            rel = f"{x / cfa:.2f}×" if x and cfa else "–"
            lines.append(f"| {LABELS[name]} | {x:.2f} | {', '.join(f'{y:.2f}' for y in c['per_round'])} | {rel} |"
                         if x else f"| {LABELS[name]} | failed | | |")
        for vc in result.get("cpu_verdict") or []:
            lines += ["", f"Per core: {LABELS[vc['ctron']]} / {LABELS[vc['strongest_peer']]}: "
                      f"**{vc['speedup']:.2f}×** (target ≥ {TARGET}×), the peer keeping "
                      f"{vc['peer_act_over_ctron']:.2f}× its activation bytes: target {'met' if vc['met'] else 'NOT met'}."]
    for v in result.get("verdict") or []:
        lines += ["", f"Wall clock: {LABELS[v['ctron']]} / {LABELS[v['strongest_peer']]}: **{v['speedup']:.2f}×** "
                  f"the speed (target ≥ {TARGET}×), the peer keeping {v['peer_act_over_ctron']:.2f}× its "
                  f"activation bytes: target {'met' if v['met'] else 'NOT met'}."]
    lines.append("")
    for n in result.get("notes", []):
        lines.append("")
        lines.append(n)
    lines += ["", "ctron's activation bytes: the ledger's peak over the step (`act_bytes`; per layer: what layer 0 "
              "keeps, `act_layer_bytes`; since session 27 without its `ln1_in` and `ln1_stats`, which nothing reads "
              "under LoRA: the other layers keep e·s·b·h + 4·s·b more). The peers': bytes of the distinct storages autograd saves during step 1's "
              "forward (saved_tensors_hooks; per layer: the mean over decoder layers), parameters (the frozen base "
              "too) excluded. trainable: the peer's "
              "parameters with requires_grad (ctron's are the same tensors: the A and B stacks).",
              "", "Per round ms/step: " + "; ".join(
                  f"{n} {', '.join(f'{m:.0f}' for m in a['ms_per_round'])}" for n, a in s.items()),
              "", "Command: `" + result["command"] + "`"]
    return "\n".join(lines) + "\n"


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=4, help="steps per run, first dropped (default 4)")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds (default 2)")
    ap.add_argument("--threads", type=int, default=2, help="threads (default 2)")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32.0)
    ap.add_argument("--layers", type=int, default=0, help="layers instead of the config's 12 (a smoke test)")
    ap.add_argument("--impls", default=",".join(n for n in IMPLS if n not in OPTIONAL),
                    help="subset of " + ",".join(IMPLS) + " (default all but " + ",".join(OPTIONAL) + ")")
    ap.add_argument("--bf16-peer", choices=["auto", "always", "never"], default="auto")
    ap.add_argument("--ctron", default=os.path.join(rb.ROOT, "build", "ctron"))
    ap.add_argument("--ctron-before", default=None,
                    help="another ctron binary (e.g. main's) run as ctron-lora-fa-before, interleaved with this one")
    ap.add_argument("--data", default=os.path.join(rb.ROOT, "data", "kjv.txt"))
    ap.add_argument("--hf-python", default=None, help="the peer venv's python (scripts/peer_env.sh --path)")
    ap.add_argument("--cpu-steps", default="2,4", help="A,B for the one-thread CPU-time runs ('' to skip)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out-dir", default=os.path.join(rb.ROOT, "bench", "results"))
    ap.add_argument("--suffix", default="lora")
    ap.add_argument("--replot", default=None, help="a saved JSON: its markdown again (verdicts recomputed)")
    args = ap.parse_args(argv)
    names = [n for n in args.impls.split(",") if n]
    bad = [n for n in names if n not in IMPLS]
    if bad or not names:
        ap.error(f"--impls {args.impls}: expected a subset of {','.join(IMPLS)}")
    if args.steps < 2 or args.rounds < 1 or args.threads < 1 or args.rank < 1:
        ap.error(f"--steps {args.steps} --rounds {args.rounds} --threads {args.threads} --rank {args.rank}: "
                 f"expected steps >= 2, rounds, threads and rank >= 1")
    for before in ("ctron-lora-fa-before", "ctron-lora-fa-bf16-before"):
        if before in names and not (args.ctron_before and os.access(args.ctron_before, os.X_OK)):
            ap.error(f"--impls {before} needs --ctron-before BINARY (got {args.ctron_before!r})")
    args.impls = names
    try:
        args.cpu_steps = [int(x) for x in args.cpu_steps.split(",")] if args.cpu_steps else []
    except ValueError:
        args.cpu_steps = None
    if args.cpu_steps is None or (args.cpu_steps and (len(args.cpu_steps) != 2 or not 2 <= args.cpu_steps[0] < args.cpu_steps[1])):
        ap.error(f"--cpu-steps {args.cpu_steps!r}: expected A,B with 2 <= A < B, or ''")
    if args.hf_python is None:
        args.hf_python = rb.peer_env_python()
    # run_bench's run_ctron / run_peer read these
    args.ctron_arg, args.python, args.peer_python = [], None, None
    return args


def replot(path):
    with open(path) as f:
        result = json.load(f)
    result["verdict"] = verdicts(result["summary"])
    if result.get("cpu"):
        result["cpu_verdict"] = verdicts({n: {"ms_median": c["cpu_s_per_step"],
                                              "act_peak_bytes": result["summary"][n]["act_peak_bytes"]}
                                          for n, c in result["cpu"].items()})
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    md = markdown(result)
    with open(os.path.splitext(path)[0] + ".md", "w") as f:
        f.write(md)
    print(md)
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.replot:
        return replot(args.replot)
    if any(IMPLS[n][0] == "ctron" for n in args.impls) and not os.access(args.ctron, os.X_OK):
        print(f"lora_bench.py: no ctron binary at {args.ctron} (build first)", file=sys.stderr)
        return 2
    env = dict(os.environ, **{k: str(args.threads) for k in
                              ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    notes = []
    names = list(args.impls)
    bf16 = [n for n in names if n in BF16]
    if bf16 and args.bf16_peer != "always":
        probe = rb.probe_bf16(args.hf_python, env) if args.bf16_peer == "auto" else {}
        f32, b16 = probe.get("fp32_gflops"), probe.get("bf16_gflops")
        if args.bf16_peer == "never" or (f32 and b16 is not None and b16 < rb.BF16_SLOW * f32):
            names = [n for n in names if n not in BF16]
            if f32:
                notes.append(f"The bf16 rows ({', '.join(bf16)}) left out: this PyTorch's CPU bf16 matmul runs "
                             f"at {b16:.1f} GFLOP per CPU second against {f32:.1f} in fp32 (run_bench.py's "
                             f"probe; no AVX512-BF16/AMX here), so fp32 is the strongest peer "
                             f"(`--bf16-peer always` runs them).")
        elif f32:
            notes.append(f"bf16 rows kept: this PyTorch's CPU bf16 matmul runs at {b16:.1f} GFLOP per CPU second "
                         f"against {f32:.1f} in fp32 (run_bench.py's probe).")
    runs, pairs = [], []
    with tempfile.TemporaryDirectory(prefix="ctron-lora-bench-") as workdir:
        for rnd in range(1, args.rounds + 1):
            order = names if rnd % 2 else names[::-1]
            for name in order:
                runs.append(one_run(args, name, env, workdir, rnd))
            for name in (order if args.cpu_steps else []):
                pairs.append(cpu_pair(args, name, env, workdir, rnd))
    summary = summarise(runs, names)
    cpu = summarise_cpu(pairs, names) if pairs else None
    cpu_verdict = None
    if cpu:
        as_ms = {n: {"ms_median": c["cpu_s_per_step"], "act_peak_bytes": summary[n]["act_peak_bytes"]}
                 for n, c in cpu.items()}
        cpu_verdict = verdicts(as_ms)
    date = datetime.date.today().isoformat()
    result = {"date": date, "config": dict(rb.CONFIGS[CONFIG], **({"layers": args.layers} if args.layers else {})), "threads": args.threads, "rank": args.rank,
              "alpha": args.alpha, "steps": args.steps, "rounds": args.rounds, "impls": names,
              "command": "/usr/bin/python3 bench/lora_bench.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "summary": summary, "verdict": verdicts(summary), "notes": notes,
              "cpu_steps": args.cpu_steps, "cpu": cpu, "cpu_verdict": cpu_verdict, "cpu_pairs": pairs,
              "environment": {"cpu_model": rb.cpu_model(), "load_average": os.getloadavg(),
                              "source_revision": rb.source_revision(),
                              "ctron_sha256": rb.file_sha256(args.ctron)},
              "runs": [{k: v for k, v in r.items() if k not in ("log",)} for r in runs]}
    rb.write_result(args.out_dir, f"{date}-{args.suffix}", result, markdown(result))
    return 0 if all(r["ok"] for r in runs) and all(p["cpu_s_per_step"] is not None for p in pairs) else 1


if __name__ == "__main__":
    sys.exit(main())
