#!/usr/bin/python3
"""Pipeline parallelism on this machine (issue 15, docs/PARALLEL.md): the bubble, the stages'
activation bytes and the point-to-point bytes, each against its theory.

1. Bubble. `ctron train --pp P --pp-schedule S --grad-accum M` under mpirun for P in --stages, M in
   --microbatches and S in --schedules (interleaved with --virtual-stages --virtual; layered has
   V = L/P chunks of one layer); a combination ctron's rules refuse (interleaved needs M a multiple
   of P; L must divide into P·V chunks) is listed as skipped. Each runs in every --modes: Open MPI's
   waiting ranks busy-polling (OMPI_MCA_mpi_yield_when_idle=0), yielding the core (=1; Open MPI's own
   default when the ranks outnumber the cores), and yielding with the boundary tensor sent eagerly
   (btl_vader_eager_limit above s·b·h·4 B). Per stage: the median over the timed steps (step 1
   dropped, all rounds pooled) of the log's idle_fraction (seconds blocked on receives / seconds
   computing), against pipe_bubble_theory: (P−1)/M for 1f1b and gpipe, (P−1)/(V·M) for interleaved
   and layered, and that plus the stages' imbalance (the slowest stage sets the pace).
2. Activations. At M = --memory-m: every rank's measured peak and its prediction from the table
   ctron prints after step 1 (rank 0's stdout); the first stage's against one process with the same
   micro-batch (--grad-accum M, no pipeline), the ratio next to the paper's Eq. 5 factor (1F1B: 1,
   interleaved: 1 + (P−1)/(P·V); gpipe and layered hold all M micro-batches: M/P, not Eq. 5).
3. Point-to-point bytes. Rank 0's send and recv per step (the log's comm_bytes) against the formula:
   a boundary tensor is s·b·h fp32 values; the stage sends one forward activation per (micro-batch,
   chunk) unless the chunk is the model's last, and one gradient unless it is the model's first (and
   receives as many).

Every run records other_cores (how many cores other processes kept busy meanwhile); --wait-quiet
waits for a quiet machine before each run, --retry-disturbed reruns a disturbed one. Writes
bench/results/<date>-pipeline.json and .md (also printed) and the per-stage memory plot
(--figure, default docs/figures/pipeline_stage_memory.svg). --replot FILE.json rebuilds both.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True
import run_bench as rb  # noqa: E402  (run_child, wait_quiet, read_step_log, environment helpers)
import svgplot  # noqa: E402

SCHEDULES = ("1f1b", "interleaved", "layered", "gpipe")
# How a rank waits on a receive: Open MPI's ranks busy-poll (mpi_yield_when_idle 0), or yield the core
# (1; Open MPI's own default when the ranks outnumber the cores); "eager" yields and raises the
# shared-memory transport's eager limit above the boundary tensor, so that a send completes without the
# sender calling into MPI again (above 4 KiB Open MPI's vader transport uses a rendezvous: the data
# moves only once the receiver has posted its receive and the sender then enters MPI).
MODES = ("poll", "yield", "eager")
MODE_TEXT = {"poll": "busy-poll", "yield": "yield the core",
             "eager": "yield the core, boundary tensors sent eagerly (vader eager limit above the tensor)"}
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
MPIRUN_ARGS = ["--oversubscribe", "--bind-to", "none"]
STAGE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


# --------------------------------------------------------------------------------------------------
# Theory
# --------------------------------------------------------------------------------------------------

def mode_env(mode, tensor_bytes):
    env = {"OMPI_MCA_mpi_yield_when_idle": "0" if mode == "poll" else "1"}
    if mode == "eager":
        limit = str(1 << (tensor_bytes + 1024 - 1).bit_length())
        env.update(OMPI_MCA_btl_vader_eager_limit=limit, OMPI_MCA_btl_vader_max_send_size=limit)
    return env


def chunks(sched, p, L, virtual):
    """Model chunks per stage V."""
    return virtual if sched == "interleaved" else L // p if sched == "layered" else 1


def skip_reason(sched, p, m, L, virtual):
    """Why ctron refuses this combination (src/train/pipe_schedule.h), or None."""
    V = chunks(sched, p, L, virtual)
    if L % (p * V):
        return f"L = {L} is not a multiple of P·V = {p * V}"
    if sched == "interleaved" and m % p:
        return f"interleaved needs M a multiple of P (M = {m}, P = {p})"
    return None


def bubble_theory(sched, p, V, m):
    return (p - 1) / m if sched in ("1f1b", "gpipe") else (p - 1) / (V * m)


def p2p_bytes(p, V, m, s, b, h):
    """Rank 0's point-to-point bytes per step, each direction (tp = 1, no SP): its chunks are
    g = v·p, v = 0..V−1, of G = p·V; per micro-batch one activation unless g is the last, one
    gradient unless g is the first, each s·b·h fp32 values."""
    G = p * V
    return sum(m * ((v * p != G - 1) + (v * p != 0)) for v in range(V)) * s * b * h * 4


def eq5_factor(sched, p, V, m):
    """Micro-batches' worth of the stage's L/P layers the first stage holds, over P (i.e. in units
    of the whole model's layers for one micro-batch). Eq. 5 for 1f1b and interleaved."""
    if sched == "1f1b":
        return min(p, m) / p, "Eq. 5: 1"
    if sched == "interleaved":
        return 1 + (p - 1) / (p * V), "Eq. 5: 1 + (P−1)/(P·V)"
    return m / p, "M/P, all M in flight; not Eq. 5"


# --------------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------------

def train_cmd(args, extra, log):
    return [args.ctron, "train", "--layers", str(args.layers), "--hidden", str(args.hidden), "--heads",
            str(args.heads), "--seq", str(args.seq), "--batch", str(args.batch), "--vocab", str(args.vocab),
            "--steps", str(args.steps), "--threads", "1", "--eval-every", "0", "--eval-batches", "1",
            "--print-every", str(args.steps), "--data", args.data, "--log", log] + extra


def sched_args(sched, virtual):
    return ["--pp-schedule", sched] + (["--virtual-stages", str(virtual)] if sched == "interleaved" else [])


LEDGER_ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+ \S+\s+(ok|MISMATCH)\s*$")


def parse_ledger(stdout):
    """The per-rank table ctron prints after step 1: rank, stage, contexts, measured peak, predicted."""
    rows, inside = [], False
    for line in stdout.splitlines():
        if line.startswith("activation bytes per rank at peak"):
            inside = True
            continue
        if inside:
            mt = LEDGER_ROW.match(line)
            if mt:
                rows.append(dict(rank=int(mt[1]), stage=int(mt[2]), contexts=int(mt[3]), peak=int(mt[4]),
                                 predicted=int(mt[5]), ok=mt[6] == "ok"))
            elif rows:
                break
    return rows


def sig4(x):
    return None if x is None else float(f"{x:.4g}")


STAGE_FIELDS = ("wait_ms", "busy_ms", "idle_fraction")


def step_record(log_steps):
    """What a run keeps of its log, by column, steps 1.. in order (4 significant digits): ms per step
    and per step the per-stage wait, busy and idle fraction; rank 0's forward and backward ms (medians
    of the timed steps); the distinct point-to-point byte counts of its steps."""
    timed = log_steps[1:]
    return dict(step_ms=[sig4(x["ms"]) for x in log_steps],
                **{k: [[sig4(v) for v in x.get("pipeline", {}).get(k, [])] for x in log_steps] for k in STAGE_FIELDS},
                **{k: sig4(med(x.get(k) for x in timed)) for k in ("fwd_ms", "bwd_ms")},
                **{k: sorted({x.get("comm_bytes", {}).get(k) for x in log_steps} - {None}) for k in ("send", "recv")})


def timed_steps(run):
    """A run's steps after the first, as dicts of ms and the per-stage lists."""
    return [dict(ms=run["step_ms"][i], **{k: run[k][i] for k in STAGE_FIELDS}) for i in range(1, len(run["step_ms"]))]


def run_once(args, cmd, env, work, tag):
    if args.wait_quiet:
        rb.wait_quiet(args.wait_quiet, tag)
    r = rb.run_child(cmd, env, args.timeout, ROOT, own_group=True)
    return r


def run_pipeline(args, p, m, sched, mode, work, tag):
    V = chunks(sched, p, args.layers, args.virtual)
    log = os.path.join(work, tag + ".jsonl")
    cmd = [args.mpirun] + MPIRUN_ARGS + ["-np", str(p)] + train_cmd(
        args, ["--pp", str(p), "--grad-accum", str(m)] + sched_args(sched, args.virtual), log)
    extra = mode_env(mode, args.seq * args.batch * args.hidden * 4)
    env = dict(os.environ, **MPI_ENV, **extra)
    best, discarded = None, []
    for attempt in range(1 + args.retry_disturbed):
        if os.path.exists(log):
            os.remove(log)
        r = run_once(args, cmd, env, work, tag)
        _, _, steps = rb.read_step_log(log)
        res = dict(p=p, m=m, schedule=sched, V=V, mode=mode, cmd=cmd,
                   env={k: env[k] for k in sorted(MPI_ENV) + sorted(extra)},
                   rc=r["rc"], wall_s=r["wall_s"], other_cores=r["other_cores"], timed_out=r["timed_out"],
                   **step_record(steps), ledger=parse_ledger(r["stdout"]))
        res["ok"] = r["rc"] == 0 and len(steps) == args.steps and len(res["ledger"]) == p and \
            all(len(w) == p for w in res["wait_ms"])
        if not res["ok"]:
            res["error"] = rb.tail(r["stderr"]) or rb.tail(r["stdout"])
        if best is None or (res["ok"] and (not best["ok"] or (res["other_cores"] or 0) < (best["other_cores"] or 0))):
            if best is not None:
                discarded.append(best["other_cores"])
            best = res
        else:
            discarded.append(res["other_cores"])
        if best["ok"] and (best["other_cores"] or 0) <= rb.OTHER_LOAD_FLAG:
            break
    best["discarded_other_cores"] = discarded
    load = f", other load {best['other_cores']:.2f} cores" if (best["other_cores"] or 0) > rb.OTHER_LOAD_FLAG else ""
    if best["ok"]:
        timed = timed_steps(best)
        idle = med(s["idle_fraction"][0] for s in timed)
        print(f"{tag}: stage 0 idle {idle:.3f} (theory {bubble_theory(sched, p, V, m):.3f}), "
              f"{med(s['ms'] for s in timed):.1f} ms/step{load}", file=sys.stderr, flush=True)
    else:
        print(f"{tag}: FAILED (rc {best['rc']}): {best.get('error', '')}", file=sys.stderr, flush=True)
    return best


def run_single(args, m, work):
    """One process, the same micro-batch, --grad-accum m: the activation peak to compare with."""
    log = os.path.join(work, f"single-m{m}.jsonl")
    cmd = train_cmd(args, ["--grad-accum", str(m)], log)
    r = run_once(args, cmd, dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1"), work, "single")
    _, _, steps = rb.read_step_log(log)
    if r["rc"] != 0 or not steps:
        raise SystemExit(f"one-process run failed: {rb.tail(r['stderr'])}")
    return dict(m=m, cmd=cmd, act_bytes=steps[-1]["act_bytes"], act_layer_bytes=steps[-1]["act_layer_bytes"])


def configs(args):
    out, skipped = [], []
    for p in args.stages:
        for sched in args.schedules:
            for m in args.microbatches:
                why = skip_reason(sched, p, m, args.layers, args.virtual)
                (skipped.append(dict(p=p, m=m, schedule=sched, why=why)) if why else out.append((p, sched, m)))
    return out, skipped


def measure(args):
    cfgs, skipped = configs(args)
    runs = []
    with tempfile.TemporaryDirectory() as work:
        single = {m: run_single(args, m, work) for m in sorted({args.memory_m})}
        for rnd in range(args.rounds):
            k = rnd * max(1, len(cfgs) // args.rounds)
            order = cfgs[k:] + cfgs[:k]
            for i, (p, sched, m) in enumerate(order):
                modes = list(args.modes) if (rnd + i) % 2 == 0 else list(reversed(args.modes))
                for mode in modes:
                    tag = f"p{p}-{sched}-m{m}-{mode}-r{rnd + 1}"
                    res = run_pipeline(args, p, m, sched, mode, work, tag)
                    res["round"] = rnd + 1
                    runs.append(res)
    return dict(runs=runs, skipped=skipped, single={str(k): v for k, v in single.items()})


# --------------------------------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------------------------------

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarise(result):
    cfg = result["config"]
    groups = {}
    for r in result["runs"]:
        groups.setdefault((r["p"], r["schedule"], r["m"], r["mode"]), []).append(r)
    rows = []
    for (p, sched, m, mode), rs in groups.items():
        ok = [r for r in rs if r["ok"]]
        timed = [s for r in ok for s in timed_steps(r)]
        V = rs[0]["V"]
        row = dict(p=p, schedule=sched, m=m, mode=mode, V=V, runs=len(rs), failed=len(rs) - len(ok),
                   theory=bubble_theory(sched, p, V, m), steps=len(timed),
                   other_cores_max=max((r["other_cores"] or 0) for r in rs))
        if timed:
            row["idle"] = [med(s["idle_fraction"][i] for s in timed) for i in range(p)]
            row["wait_ms"] = [med(s["wait_ms"][i] for s in timed) for i in range(p)]
            row["busy_ms"] = [med(s["busy_ms"][i] for s in timed) for i in range(p)]
            row["ms"] = med(s["ms"] for s in timed)
            # the slowest stage sets the pace: stage 0 also waits its extra compute, micro-batch by micro-batch
            row["theory_imbalance"] = row["theory"] + (max(row["busy_ms"]) - row["busy_ms"][0]) / row["busy_ms"][0]
            row["stage0_idle_per_round"] = [med(s["idle_fraction"][0] for s in timed_steps(r)) for r in ok]
            tf, tb = med(r["fwd_ms"] for r in ok), med(r["bwd_ms"] for r in ok)
            if sched in ("1f1b", "gpipe") and tf and tb:
                # stage r idles r·t_b after its last backward, in the step's closing collectives: not a receive
                beta = tb / (tf + tb)
                row["theory_receives"] = [(p - 1) / m - r * beta / m for r in range(p)]
            expect = p2p_bytes(p, V, m, cfg["seq"], cfg["batch"], cfg["hidden"])
            sends = sorted({b for r in ok for b in r["send"]})
            recvs = sorted({b for r in ok for b in r["recv"]})
            row["p2p"] = dict(formula=expect, send=sends, recv=recvs, equal=sends == [expect] and recvs == [expect])
        ledgers = [r["ledger"] for r in ok if r["ledger"]]
        if ledgers:
            row["ledger"] = ledgers[0]
            row["ledger_same_every_run"] = all(lg == ledgers[0] for lg in ledgers)
        rows.append(row)
    order = {s: i for i, s in enumerate(SCHEDULES)}
    rows.sort(key=lambda r: (r["mode"], r["p"], order.get(r["schedule"], 9), r["m"]))
    return rows


def memory_rows(result, rows):
    cfg = result["config"]
    m = cfg["memory_m"]
    single = result["single"][str(m)]
    out = []
    for r in rows:
        if r["m"] != m or r["mode"] != cfg["modes"][0] or "ledger" not in r:
            continue
        s0 = r["ledger"][0]
        f, what = eq5_factor(r["schedule"], r["p"], r["V"], m)
        eq5 = f * cfg["layers"] * single["act_layer_bytes"]
        out.append(dict(p=r["p"], schedule=r["schedule"], V=r["V"], contexts=s0["contexts"], peak=s0["peak"],
                        predicted=s0["predicted"], single=single["act_bytes"], ratio=s0["peak"] / single["act_bytes"],
                        factor=f, factor_what=what, eq5_bytes=eq5, over_eq5=s0["peak"] / eq5,
                        all_ok=all(x["ok"] and x["peak"] == x["predicted"] for x in r["ledger"]),
                        same_every_run=r.get("ledger_same_every_run")))
    return out


# --------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------

def sched_label(sched, V):
    return f"interleaved V={V}" if sched == "interleaved" else f"layered (V={V})" if sched == "layered" else sched


def show_cmd(cmd):
    """A command as the markdown shows it: paths relative to the repository, the log file as LOG."""
    out = []
    for i, x in enumerate(cmd):
        if i and cmd[i - 1] == "--log":
            x = "LOG.jsonl"
        elif x.startswith(ROOT + "/"):
            x = os.path.relpath(x, ROOT)
        out.append(x)
    return " ".join(out)


def git_head():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return rb.source_revision()


def f3(x):
    return "–" if x is None else f"{x:.3f}"


def mib(x):
    return f"{x / 2**20:.2f} MiB"


def cores():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def markdown(result, rows, mem, fig_rel):
    cfg, env = result["config"], result["environment"]
    c = env.get("cpus_allowed") or env.get("cpu_count")
    L = [f"# Pipeline parallelism on one machine ({result['date']})", "",
         f"Model: L {cfg['layers']}, h {cfg['hidden']}, a {cfg['heads']}, s {cfg['seq']}, micro-batch b "
         f"{cfg['batch']}, v {cfg['vocab']}, dropout 0.1, fp32, recompute none; 1 thread per rank; "
         f"{cfg['steps']} steps per run, step 1 dropped, {cfg['rounds']} round(s) pooled. Machine: {env['cpu_model']}, "
         f"{c} cores; ctron binary sha256 {env['ctron']['sha256'][:12]}… "
         f"(source {str(env['source_revision'])[:12]}); "
         f"load average {env['loadavg_start'][0]:.2f} at the start, {env['loadavg_end'][0]:.2f} at the end.", "",
         "Commands (a run, and the one-process reference; `bench/pipeline_bench.py` runs them all):", "", "```",
         f"{result['command']}", ""]
    for mode in cfg["modes"]:
        ex = next((r for r in result["runs"] if r["ok"] and r["mode"] == mode), None)
        if ex:
            L += [f"# {mode}", " ".join(f"{k}={v}" for k, v in ex["env"].items()) + " \\", "  " + show_cmd(ex["cmd"])]
    single = result["single"][str(cfg["memory_m"])]
    L += ["# one process", show_cmd(single["cmd"])]
    L += ["```", ""]
    L += ["## The bubble: idle fraction per stage", "",
          "idle = seconds blocked on receives / seconds computing, per stage (the log's `pipeline.idle_fraction`), "
          "median over the timed steps. Theory: (P−1)/M for 1f1b and gpipe, (P−1)/(V·M) for interleaved and "
          "layered. "
          "Stage 0 starts first and ends last, so its receives hold its whole bubble; stage r > 0 also idles "
          "r·t_b after its last backward, in the step's closing collectives, which is not a receive: for 1f1b and "
          "gpipe its receive share is (P−1)/M − r·t_b/((t_f+t_b)·M) (t_f, t_b: rank 0's forward and backward "
          "medians), the last column. The stages are not equal (stage 0 has the embedding, the last the output "
          "layer and loss), and the slowest sets the pace: stage 0 also waits its excess, \"+ imbalance\" = theory + "
          "(max busy − stage 0's busy) / stage 0's busy. "
          f"With P ranks on {c} cores, P > {c} oversubscribes: the stages time-share the cores, a step lasts at "
          f"least P/{c} times a stage's CPU time, and the excess is counted as wait when a rank is descheduled while "
          f"blocked and as busy when it is preempted while computing; were compute never preempted, idle would be ≥ "
          f"P/{c} − 1 = {max(cfg['stages']) / c - 1:g} at P = {max(cfg['stages'])} whatever the schedule. So at "
          f"P > {c} the figure measures the sharing of the cores, not the bubble.", ""]
    for mode in cfg["modes"]:
        ex = next((r for r in result["runs"] if r["mode"] == mode), None)
        setting = ", ".join(f"{k.replace('OMPI_MCA_', '')}={v}" for k, v in ex["env"].items() if k not in MPI_ENV)
        L += [f"### {mode}: waiting ranks {MODE_TEXT[mode]} ({setting})", ""]
        if mode == "poll":
            L += [f"Open MPI's own default: poll while the ranks fit the cores (P ≤ {c}), yield when they "
                  "outnumber them.", ""]
        L += ["| P | schedule | M | theory | + imbalance | stage 0 | per stage 0..P−1 | ms/step "
              "| 1f1b/gpipe: receive share per stage |",
              "|---:|---|---:|---:|---:|---:|---|---:|---|"]
        for r in rows:
            if r["mode"] != mode or "idle" not in r:
                continue
            dist = " ⚠" if r["other_cores_max"] > rb.OTHER_LOAD_FLAG else ""
            L.append(f"| {r['p']} | {sched_label(r['schedule'], r['V'])} | {r['m']} | {f3(r['theory'])} | "
                     f"{f3(r['theory_imbalance'])} | **{f3(r['idle'][0])}**{dist} | "
                     f"{' / '.join(f3(x) for x in r['idle'])} | {r['ms']:.1f} | "
                     f"{' / '.join(f3(x) for x in r['theory_receives']) if 'theory_receives' in r else '–'} |")
        L.append("")
    L.append("⚠: other processes kept more than "
             f"{rb.OTHER_LOAD_FLAG} cores busy during a run of the row (`other_cores` in the JSON).")
    for s in result["skipped"]:
        L.append(f"Skipped P={s['p']} {s['schedule']} M={s['m']}: {s['why']}.")
    L += ["", f"## Activation bytes of the first stage (M = {cfg['memory_m']}, measured peaks from the ledger table)",
          "",
          f"One process, the same micro-batch, --grad-accum {cfg['memory_m']}: **{single['act_bytes']}** B "
          f"({mib(single['act_bytes'])}); one layer keeps {single['act_layer_bytes']} B. "
          "Eq. 5 bytes = factor × L × one layer's bytes (the paper counts layers only: the one process adds the "
          "final LN, output-layer input and logits, a stage its embedding masks).", "",
          "| P | schedule | contexts | stage 0 measured | = predicted | ÷ one process | factor | Eq. 5 bytes "
          "| measured ÷ Eq. 5 |",
          "|---:|---|---:|---:|---|---:|---|---:|---:|"]
    for x in mem:
        same = "" if x["same_every_run"] else " (runs differ!)"
        L.append(f"| {x['p']} | {sched_label(x['schedule'], x['V'])} | {x['contexts']} | {x['peak']} "
                 f"({mib(x['peak'])}) | {'yes, every rank' if x['all_ok'] else 'NO'}{same} | "
                 f"**{x['ratio']:.3f}** | {x['factor']:.3f} "
                 f"({x['factor_what']}) | {x['eq5_bytes']:.0f} | {x['over_eq5']:.4f} |")
    L += ["", f"![per-stage activation peak]({fig_rel})", "",
          "## Point-to-point bytes of rank 0 per step", "",
          "Formula: Σ over rank 0's chunks g = v·P of M·([g ≠ P·V−1] + [g ≠ 0]) · s·b·h·4 B, sent and received "
          "alike.", "",
          "| P | schedule | M | formula | send | recv | equal |", "|---:|---|---:|---:|---:|---:|---|"]
    seen = set()
    for r in rows:
        key = (r["p"], r["schedule"], r["m"])
        if "p2p" not in r or key in seen:
            continue
        seen.add(key)
        same = all(x["p2p"]["equal"] for x in rows if (x["p"], x["schedule"], x["m"]) == key and "p2p" in x)
        L.append(f"| {r['p']} | {sched_label(r['schedule'], r['V'])} | {r['m']} | {r['p2p']['formula']} | "
                 f"{', '.join(map(str, r['p2p']['send']))} | {', '.join(map(str, r['p2p']['recv']))} | "
                 f"{'yes' if same else '**NO**'} |")
    n_eq = sum(1 for r in rows if "p2p" in r and r["p2p"]["equal"])
    n = sum(1 for r in rows if "p2p" in r)
    L += ["", f"Every step of every run (every wait mode): {n_eq} of {n} (layout, mode) rows equal the formula "
          "exactly.", ""]
    return "\n".join(L)


def stage_memory_svg(result, rows):
    """Bars: each stage's measured peak per schedule at the largest P; marker: the predicted peak;
    dashed: one process."""
    cfg = result["config"]
    p, m = max(cfg["stages"]), cfg["memory_m"]
    single = result["single"][str(m)]["act_bytes"] / 2**20
    groups = [dict(label=sched_label(r["schedule"], r["V"]), bars=r["ledger"]) for r in rows
              if r["p"] == p and r["m"] == m and r["mode"] == cfg["modes"][0] and "ledger" in r]
    bar_w, gap_in, gap_group, pad_l, top, plot_h = 26, 3, 30, 64, 100, 250
    pw = max(160, sum(p * (bar_w + gap_in) - gap_in + gap_group for _ in groups) + gap_group)
    width = int(max(pad_l + pw + 24, 600))
    pw = width - pad_l - 24
    height = top + plot_h + 60
    title = f"Activation peak per pipeline stage, P = {p}, M = {m} micro-batches"
    sub = (f"L {cfg['layers']} h {cfg['hidden']} s {cfg['seq']} b {cfg['batch']}, fp32, recompute none; "
           "bars measured (ledger), ticks predicted by the schedule")
    out = svgplot._svg_head(width, height, title, sub)
    lx = 12
    for i in range(p):
        out.append(f"<rect x='{lx}' y='50' width='12' height='12' fill='{STAGE_COLOURS[i % len(STAGE_COLOURS)]}'/>")
        out.append(svgplot._text(lx + 17, 60, f"stage {i}", size=11, anchor="start"))
        lx += 72
    out.append(f"<line x1='{lx}' y1='56' x2='{lx + 20}' y2='56' stroke='#000' stroke-width='2'/>")
    out.append(svgplot._text(lx + 25, 60, "predicted", size=11, anchor="start"))
    lx += 90
    out.append(f"<line x1='{lx}' y1='56' x2='{lx + 22}' y2='56' stroke='#444' stroke-dasharray='4 3'/>")
    out.append(svgplot._text(lx + 27, 60, f"one process, M = {m} ({single:.2f} MiB)", size=11, anchor="start"))
    vmax = max([x["peak"] / 2**20 for g in groups for x in g["bars"]] + [single])
    panel = dict(title="", groups=groups)
    y_of, gx = svgplot._panel_frame(out, panel, pad_l, pw, top, plot_h, vmax, "activation peak (MiB)",
                                    bar_w, gap_in, gap_group)
    for g in groups:
        gw = len(g["bars"]) * (bar_w + gap_in) - gap_in
        for i, x in enumerate(g["bars"]):
            bx, v, pred = gx + i * (bar_w + gap_in), x["peak"] / 2**20, x["predicted"] / 2**20
            y = y_of(v)
            out.append(f"<rect x='{svgplot._num(bx)}' y='{svgplot._num(y)}' width='{bar_w}' "
                       f"height='{svgplot._num(top + plot_h - y)}' fill='{STAGE_COLOURS[x['stage'] % 8]}'>"
                       f"<title>{g['label']} stage {x['stage']}: {x['peak']} B measured, {x['predicted']} B "
                       f"predicted, {x['contexts']} contexts</title></rect>")
            out.append(f"<line x1='{svgplot._num(bx - 3)}' y1='{svgplot._num(y_of(pred))}' "
                       f"x2='{svgplot._num(bx + bar_w + 3)}' y2='{svgplot._num(y_of(pred))}' stroke='#000' "
                       "stroke-width='2'/>")
            out.append(svgplot._text(bx + bar_w / 2, min(y, y_of(pred)) - 5, f"{v:.1f}", size=9))
            out.append(svgplot._text(bx + bar_w / 2, top + plot_h + 12, str(x["stage"]), size=9, fill="#444"))
        out.append(svgplot._text(gx + gw / 2, top + plot_h + 28, g["label"], size=11))
        gx += gw + gap_group
    y = y_of(single)
    out.append(f"<line x1='{pad_l}' y1='{svgplot._num(y)}' x2='{pad_l + pw}' y2='{svgplot._num(y)}' "
               f"stroke='#444' stroke-dasharray='4 3'/>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def dump_json(result, f):
    """Top-level keys one per line; a list (runs, summary, memory) one element per line."""
    items = list(result.items())
    f.write("{\n")
    for i, (k, v) in enumerate(items):
        body = ("[\n" + ",\n".join("  " + json.dumps(x, ensure_ascii=False) for x in v) + "\n ]"
                if isinstance(v, list) and v else json.dumps(v, ensure_ascii=False))
        f.write(f" {json.dumps(k)}: {body}{',' if i < len(items) - 1 else ''}\n")
    f.write("}\n")


def write_outputs(result, args):
    rows = summarise(result)
    mem = memory_rows(result, rows)
    result["summary"], result["memory"] = rows, mem
    os.makedirs(args.out_dir, exist_ok=True)
    stem = os.path.join(args.out_dir, f"{result['date']}-{args.suffix}")
    os.makedirs(os.path.dirname(os.path.abspath(args.figure)), exist_ok=True)
    with open(args.figure, "w") as f:
        f.write(stage_memory_svg(result, rows))
    md = markdown(result, rows, mem, os.path.relpath(os.path.abspath(args.figure), os.path.abspath(args.out_dir)))
    with open(stem + ".md", "w") as f:
        f.write(md)
    with open(stem + ".json", "w") as f:
        dump_json(result, f)
    print(md)
    print(f"wrote {stem}.md, {stem}.json, {args.figure}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    ap.add_argument("--ctron", default=os.path.join(ROOT, "build", "ctron"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "kjv.txt"))
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=259)
    ap.add_argument("--stages", type=ints, default=[2, 4])
    ap.add_argument("--microbatches", type=ints, default=[4, 8, 16])
    ap.add_argument("--schedules", type=lambda s: [x for x in s.split(",") if x], default=list(SCHEDULES))
    ap.add_argument("--virtual", type=int, default=2, help="interleaved: --virtual-stages (default 2)")
    ap.add_argument("--modes", type=lambda s: [x for x in s.split(",") if x], default=list(MODES),
                    help="poll,yield,eager: Open MPI's waiting ranks spin or yield (mpi_yield_when_idle 0/1); "
                    "eager: yield, with the boundary tensor under the vader transport's eager limit")
    ap.add_argument("--memory-m", type=int, default=8, help="micro-batches of the memory table and plot")
    ap.add_argument("--steps", type=int, default=21, help="steps per run, the first dropped (default 21)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--wait-quiet", type=float, default=0, help="before each run wait up to this many seconds "
                    "for other processes to leave the cores (default 0: off)")
    ap.add_argument("--retry-disturbed", type=int, default=0, help="rerun a disturbed run up to N times")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--figure", default=os.path.join(ROOT, "docs", "figures", "pipeline_stage_memory.svg"))
    ap.add_argument("--suffix", default="pipeline")
    ap.add_argument("--replot", metavar="JSON", help="rebuild the markdown and the plot from a saved result")
    args = ap.parse_args()
    if args.replot:
        with open(args.replot) as f:
            result = json.load(f)
        write_outputs(result, args)
        return 0
    for what, path in (("ctron", args.ctron), ("data", args.data)):
        if not os.path.exists(path):
            print(f"pipeline_bench: {what} {path} not found (make build data)", file=sys.stderr)
            return 2
    if not shutil.which(args.mpirun):
        print(f"pipeline_bench: {args.mpirun} not found (Open MPI: make setup)", file=sys.stderr)
        return 2
    bad = [x for x in args.schedules if x not in SCHEDULES] + [x for x in args.modes if x not in MODES]
    if bad or args.memory_m not in args.microbatches:
        print(f"pipeline_bench: unknown {bad} or --memory-m not in --microbatches", file=sys.stderr)
        return 2
    load_start = os.getloadavg()
    sha_start = rb.file_sha256(args.ctron)
    result = dict(date=time.strftime("%Y-%m-%d"),
                  command=" ".join(["python3", "bench/pipeline_bench.py"] + sys.argv[1:]),
                  config=dict(layers=args.layers, hidden=args.hidden, heads=args.heads, seq=args.seq, batch=args.batch,
                              vocab=args.vocab, stages=args.stages, microbatches=args.microbatches,
                              schedules=args.schedules, virtual=args.virtual, modes=args.modes,
                              memory_m=args.memory_m, steps=args.steps, rounds=args.rounds))
    result.update(measure(args))
    result["environment"] = dict(cpu_model=rb.cpu_model(), cpu_count=os.cpu_count(), cpus_allowed=cores(),
                                 ctron=dict(path=args.ctron, sha256=rb.file_sha256(args.ctron), sha256_start=sha_start),
                                 source_revision=git_head(), loadavg_start=load_start,
                                 loadavg_end=os.getloadavg(), other_load_flag=rb.OTHER_LOAD_FLAG)
    write_outputs(result, args)
    return 0 if all(r["ok"] for r in result["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
