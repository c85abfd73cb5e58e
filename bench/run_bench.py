#!/usr/bin/python3
"""Benchmark ctron against the PyTorch peer (bench/peers/torch_gpt.py).

Implementations (--impls, IMPLS): ctron fp32 and `--precision bf16` (left out with a note
when `ctron train --help` has no --precision), Debian's PyTorch 1.13 fp32 (`torch`, --python)
and PyPI's newest PyTorch 2.x (--peer-python, installed by bench/setup_peer.sh) in fp32 and
under CPU autocast bf16, each with explicit attention and with SDPA (`pt2-*`; left out with a
note when that Python cannot import torch). "PyTorch best" per precision and policy is the
fastest peer of that precision; ctron of the same precision is compared with it, with the
issue's targets, and its MFU is taken against `ctron peak [--precision bf16]` of the same run.

For each selected config and each activation-memory policy, runs ctron and the
peer on the same model shape with the same thread count. One round visits every
policy once, ctron and peer back to back for the policies both implement
(none, selective, full), ctron alone for ctron-only variants (bf16 activations,
packed or regenerated dropout masks). Successive rounds rotate the policy order
by one and swap which implementation goes first, so slow drift of a shared
machine does not always hit the same run. Per (implementation, policy):

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
                 forward + backward; ctron prints the same figure). Model
                 FLOPs: recomputation is not counted.
    overhead     ms/step of the policy / ms/step of the same implementation's
                 `none`, minus 1 (medians)
    peak RSS     ru_maxrss of the child from os.wait4 (KiB, shown in MiB)
    saved bytes  ctron: act_bytes / act_layer_bytes from its step log (activation-
                 ledger peak of the step, recomputation included, and what layer 0
                 keeps between forward and backward, LN statistics included);
                 peer: bytes of the tensors autograd saves in one forward (total
                 and per block; transient recomputation not included)
    x smaller    ctron none's per-layer bytes / this row's per-layer bytes
    ratio        peer ms / ctron ms for the same policy (> 1: ctron is faster);
                 also the median of the per-round paired ratios in the JSON

Each run's step is also split by phase (fwd_ms / bwd_ms / opt_ms from ctron's
log and from the peer's output; communication 0 for one process; other = the
rest), medians per (implementation, policy), in a table and a stacked plot.

Then the thread-scaling benchmark (--scaling, default 1,2): ctron and the peer
at one config (default S) and policy (default none) with each thread count,
alternating like the policy rounds; per (implementation, threads) ms/step,
tokens/s, fwd/bwd/opt, the speed-up over the first thread count (and per
phase), and whether ctron's reaches --scaling-target (default 1.8).

Then the parallel-layout benchmark (--parallel, default
single,tp2,tp2+sp,tp2+sp+selective) runs ctron alone at one config (default S)
in each layout: one process with all T threads, or mpirun -np t ranks with
--tp t [--sp] and T/t threads each (the same cores in total). Rounds rotate the
layout order by one. Per layout: median ms/step (the first --parallel-warmup
steps of every run dropped), tokens/s, speed-up over `single` (single ms /
layout ms), fwd/bwd/opt ms, the bytes rank 0 moves per step by collective
(comm_bytes: ring convention, all-reduce 2(t-1)/t, the others (t-1)/t of the
tensor) and the TP part of it by purpose (tp_bytes: block, regather, vocab),
and rank 0's activation peak and layer-0 bytes. Skipped, with a note, when
mpirun is not found.

Absolute times on a shared machine are noise; ratios within one invocation
are the result. Every run records how many cores other processes kept busy
meanwhile (other_cores); --wait-quiet waits for a quiet machine before each
run and --rerun-disturbed repeats disturbed runs at the end. Writes bench/results/<date>.json (all raw numbers and the
environment), bench/results/<date>.md (the tables, also printed) and three plots,
bench/results/<date>-throughput.svg, <date>-activations.svg and <date>-breakdown.svg (--suffix X:
<date>-X.json and so on). `--replot FILE.json` rebuilds the tables and plots
from a saved JSON.
"""

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEER = os.path.join(HERE, "peers", "torch_gpt.py")
HF_PEER = os.path.join(HERE, "peers", "hf_llama.py")
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True     # no bench/__pycache__ from importing svgplot
import svgplot  # noqa: E402  (bench/svgplot.py, no third-party dependency)

CONFIGS = {
    "T": dict(layers=4, hidden=256, heads=4, seq=128, batch=8, vocab=8192, dropout=0.1),
    "S": dict(layers=12, hidden=768, heads=12, seq=256, batch=4, vocab=8192, dropout=0.1),
    "L": dict(layers=12, hidden=768, heads=12, seq=2048, batch=1, vocab=8192, dropout=0.1),
    # S's FLOP class in the Llama block (issue 25): RMSNorm, RoPE, SwiGLU FFN 2048, GQA 12/4,
    # untied head, no dropout; the peer is transformers' LlamaForCausalLM (bench/peers/hf_llama.py)
    "S-llama": dict(arch="llama", layers=12, hidden=768, heads=12, kv_heads=4, ffn=2048, seq=256,
                    batch=4, vocab=8192, dropout=0.0),
    # S-llama with Qwen3's per-head q/k norms (heads of h/a = 64, so the FLOPs are S-llama's); the peer is
    # transformers' Qwen3ForCausalLM. Not in make bench's default set (--configs S-qwen3).
    "S-qwen3": dict(arch="llama", layers=12, hidden=768, heads=12, kv_heads=4, ffn=2048, seq=256,
                    batch=4, vocab=8192, dropout=0.0, qk_norm=True),
    # A long sequence under a sliding window (Mistral's kind; bench/window_bench.py, make bench-window):
    # 2 layers so that a step at s 4096 stays a few CPU seconds; the peer is MistralForCausalLM.
    "M-window": dict(arch="llama", layers=2, hidden=512, heads=8, kv_heads=2, ffn=1408, seq=4096,
                     batch=1, vocab=8192, dropout=0.0, sliding_window=512),
}
DEFAULT_CONFIGS = "T,S,S-llama"
# A config's own policies when --policies / --ctron-variants are not given (shared, ctron-only):
# the llama config runs `none` only, to keep make bench's time (its targets are at none).
CONFIG_POLICIES = {"S-llama": ("none", "")}


def arch_of(c):
    """The model family of a config (results saved before the llama config have no "arch")."""
    return c.get("arch", "gpt2")

FLOP_FORMULA = ("FLOPs/step = 6*N*s*b + 12*L*b*s^2*h "
                "(N = parameters incl. token and position embeddings, tied output counted once; "
                "attention term = QK^T and P.V over the full s x s matrix, x3 for fwd+bwd)")
EQ7_FORMULA = "model FLOPs/step (paper Eq. 7) = 72*b*L*s*h^2*(1 + s/(6h) + v/(12hL))"


# The parallel-layout benchmark: the Open MPI launch and the log fields it reports.
MPIRUN_ARGS = ["--oversubscribe", "--bind-to", "none"]
# Root in a container; ranks with one thread sleep instead of spinning when they wait.
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMP_WAIT_POLICY": "PASSIVE"}
DEFAULT_PARALLEL = "single,tp2,tp2+sp,tp2+sp+selective"
DEFAULT_SCALING = "1,2"
# Every kind a log's comm_bytes may hold (comm_kind_name): the per-step total sums them all; the
# layout table has columns for the collectives only (no layout here runs a pipeline's send/recv).
COMM_KINDS = ("all-reduce", "all-gather", "reduce-scatter", "broadcast", "send", "recv")
COMM_TABLE_KINDS = COMM_KINDS[:4]
TP_PURPOSES = ("block", "regather", "vocab")

# The implementations a config runs, in the order a round runs them (reversed in even rounds).
# kind: ctron or peer; precision: fp32 or bf16 (ctron: --precision; peer: bf16 = CPU autocast);
# python: the peer's interpreter, "debian" (--python, Debian's PyTorch 1.13) or "venv"
# (--peer-python, the PyTorch 2.x that bench/setup_peer.sh installs); attention: the peer's
# --attention. "ctron" and "torch" keep the names of results saved before the 2.x peer.
# family: the configs (arch_of) a peer runs: torch_gpt.py's GPT-2 for gpt2, transformers'
# LlamaForCausalLM (python "hf": the venv of scripts/peer_env.sh) for llama; ctron runs every one.
IMPLS = {
    "ctron": {"kind": "ctron", "precision": "fp32", "short": "ctron"},
    "torch": {"kind": "peer", "precision": "fp32", "python": "debian", "attention": "explicit",
              "family": "gpt2", "short": "torch"},
    "pt2-fp32": {"kind": "peer", "precision": "fp32", "python": "venv",
                 "attention": "explicit", "family": "gpt2", "short": "pt2+fp32"},
    "pt2-fp32-sdpa": {"kind": "peer", "precision": "fp32", "python": "venv",
                      "attention": "sdpa", "family": "gpt2", "short": "pt2+fp32+sdpa"},
    "hf-fp32": {"kind": "peer", "precision": "fp32", "python": "hf", "attention": "sdpa",
                "family": "llama", "short": "hf+fp32+sdpa"},
    "hf-fp32-eager": {"kind": "peer", "precision": "fp32", "python": "hf", "attention": "eager",
                      "family": "llama", "short": "hf+fp32+eager"},
    "ctron-bf16": {"kind": "ctron", "precision": "bf16", "short": "ctron+bf16"},
    "pt2-bf16": {"kind": "peer", "precision": "bf16", "python": "venv",
                 "attention": "explicit", "family": "gpt2", "short": "pt2+bf16"},
    "pt2-bf16-sdpa": {"kind": "peer", "precision": "bf16", "python": "venv",
                      "attention": "sdpa", "family": "gpt2", "short": "pt2+bf16+sdpa"},
    "hf-bf16": {"kind": "peer", "precision": "bf16", "python": "hf", "attention": "sdpa",
                "family": "llama", "short": "hf+bf16+sdpa"},
    "hf-bf16-eager": {"kind": "peer", "precision": "bf16", "python": "hf", "attention": "eager",
                      "family": "llama", "short": "hf+bf16+eager"},
}
DEFAULT_IMPLS = ",".join(IMPLS)
PRECISIONS = ("fp32", "bf16")
# The issue's targets: ctron tokens/s over PyTorch best of the same precision, per
# (config, precision, policy); ctron's MFU against the GEMM peak of its precision; bf16
# recompute overhead over none.
SPEEDUP_TARGETS = {("S", "bf16", "none"): 1.3, ("L", "bf16", "selective"): 1.5,
                   ("S-llama", "bf16", "none"): 1.3}
MFU_TARGETS = {("S", "bf16", "none"): 0.70, ("S-llama", "bf16", "none"): 0.75}
OVERHEAD_TARGETS = {("S", "bf16", "selective"): 3.0, ("S", "bf16", "full"): 30.0}


def impl_spec(impl):
    """IMPLS[impl]; an unknown name (a future result) counts as a fp32 peer."""
    return IMPLS.get(impl, {"kind": "peer", "precision": "fp32", "short": impl})


def is_ctron(impl):
    return impl_spec(impl)["kind"] == "ctron"


def impl_precision(impl):
    return impl_spec(impl)["precision"]


def impls_for(c, impls):
    """The implementations of impls that run config c: ctron, and the peers of its family."""
    return [i for i in impls if impl_spec(i).get("family", arch_of(c)) == arch_of(c)]


def ctron_of(precision):
    """The ctron implementation of a precision."""
    return "ctron" if precision == "fp32" else "ctron-bf16"


class BenchError(Exception):
    pass


# --------------------------------------------------------------------------
# Policies
# --------------------------------------------------------------------------
#
# A policy name is a recompute mode, optionally followed by '+'-separated
# modifiers: none | selective | full, then any of fp32 | bf16 (stored activation
# precision) and bytes | bits | regen (dropout masks). Defaults (fp32, bytes) are
# dropped from the canonical name, so "none+fp32+bytes" is "none". A name with
# no modifier is a *shared* policy that both implementations run; a name with a
# modifier is a ctron-only variant (the peer has no equivalent) and the peer is
# skipped for it.

RECOMPUTE_MODES = ("none", "selective", "full")
DTYPES = ("fp32", "bf16")
MASKS = ("bytes", "bits", "regen")
DEFAULT_POLICIES = "none,selective,full"
DEFAULT_VARIANTS = "selective+bf16+regen,none+bf16"


def parse_policy(name):
    parts = [p.strip() for p in name.split("+")]
    if not parts or parts[0] not in RECOMPUTE_MODES:
        raise ValueError(f"policy {name!r}: must start with one of {'|'.join(RECOMPUTE_MODES)}")
    pol = {"recompute": parts[0], "act_dtype": "fp32", "masks": "bytes"}
    seen = set()
    for m in parts[1:]:
        if m in DTYPES:
            key = "act_dtype"
        elif m in MASKS:
            key = "masks"
        else:
            raise ValueError(f"policy {name!r}: unknown modifier {m!r}; expected "
                             f"{'|'.join(DTYPES)} or {'|'.join(MASKS)}")
        if key in seen:
            raise ValueError(f"policy {name!r}: {key} given twice")
        seen.add(key)
        pol[key] = m
    canon = [pol["recompute"]]
    if pol["act_dtype"] != "fp32":
        canon.append(pol["act_dtype"])
    if pol["masks"] != "bytes":
        canon.append(pol["masks"])
    pol["name"] = "+".join(canon)
    pol["shared"] = len(canon) == 1
    return pol


def ctron_policy_args(pol):
    """The ctron flags of a policy. full = every layer checkpointed (uniform, 1 layer)."""
    a = ["--recompute", pol["recompute"]]
    if pol["recompute"] == "full":
        a += ["--recompute-method", "uniform", "--recompute-num-layers", "1"]
    if pol["act_dtype"] != "fp32":
        a += ["--act-dtype", pol["act_dtype"]]
    if pol["masks"] != "bytes":
        a += ["--dropout-masks", pol["masks"]]
    return a


def peer_policy_args(pol):
    return ["--recompute", pol["recompute"]]


def parse_layout(name, total_threads):
    """A parallel layout: `single` or `tp<t>`, then optional '+'-separated `sp` and a recompute
    mode (default none, dropped from the canonical name), e.g. tp2+sp+selective.

    single = one process with all total_threads threads; tp<t> = mpirun -np t, --tp t, each rank
    total_threads // t threads (at least 1), so that every layout uses the same cores.
    """
    parts = [p.strip() for p in name.split("+")]
    head = parts[0] if parts else ""
    if head == "single":
        tp = 1
    elif head.startswith("tp") and head[2:].isdigit() and int(head[2:]) >= 2:
        tp = int(head[2:])
    else:
        raise ValueError(f"layout {name!r}: must start with single or tp<N> (N >= 2)")
    sp, recompute = False, "none"
    seen = set()
    for m in parts[1:]:
        if m == "sp" and tp > 1:
            key, sp = "sp", True
        elif m in RECOMPUTE_MODES:
            key, recompute = "recompute", m
        else:
            raise ValueError(f"layout {name!r}: unknown modifier {m!r}; expected "
                             f"{'sp|' if tp > 1 else ''}{'|'.join(RECOMPUTE_MODES)}")
        if key in seen:
            raise ValueError(f"layout {name!r}: {key} given twice")
        seen.add(key)
    canon = [head] + (["sp"] if sp else []) + ([recompute] if recompute != "none" else [])
    pol = parse_policy(recompute)
    args = ctron_policy_args(pol)
    if tp > 1:
        args = ["--tp", str(tp)] + (["--sp"] if sp else []) + args
    return {"name": "+".join(canon), "ranks": tp, "tp": tp, "sp": sp, "recompute": recompute,
            "threads_per_rank": max(1, total_threads // tp), "ctron_args": args}


# --------------------------------------------------------------------------
# Memory pre-check
# --------------------------------------------------------------------------

def estimate_peak_bytes(c, impl):
    """Rough peak RSS of one run under recompute none (the largest policy).

    Saved activations (the formulas in bench/README.md and docs/MEMORY.md), the
    logits (peer: logits, log-softmax and their gradient), parameters +
    gradients + two AdamW moments (16 bytes per parameter), a few s x s
    gradient buffers of the attention backward, and the runtime (Python +
    torch ~ 400 MiB). Within ~20 % of measured peak RSS at T and S. Only used
    to warn before a run that would not fit. A llama config gets the same GPT-2
    per-layer formulas, an upper bound there (no dropout masks; at S-llama ctron
    keeps 42 MiB per layer against GPT-2 S's 76.5).
    """
    L, h, a, s, b, v = (c[k] for k in ("layers", "hidden", "heads", "seq", "batch", "vocab"))
    sbh, as2b, sb = s * b * h, a * s * s * b, s * b
    if not is_ctron(impl):
        per_layer = 72 * sbh + 12 * as2b + 16 * sb
        head = 3 * 4 * sb * v
        runtime = 400 << 20
    else:
        per_layer = 66 * sbh + 9 * as2b + 16 * sb
        head = 4 * sb * v
        runtime = 64 << 20
    return L * per_layer + head + 4 * 4 * sbh + 16 * n_params(c) + 3 * 4 * as2b + runtime


# --------------------------------------------------------------------------
# Work accounting
# --------------------------------------------------------------------------

def gpt2_params(c):
    L, h, s, v = c["layers"], c["hidden"], c["seq"], c["vocab"]
    # per block: LN1 2h, QKV 3h^2+3h, Proj h^2+h, LN2 2h, FC1 4h^2+4h, FC2 4h^2+h
    block = 12 * h * h + 13 * h
    return v * h + s * h + L * block + 2 * h


def gpt2_flops(c):
    L, h, s, b = c["layers"], c["hidden"], c["seq"], c["batch"]
    return 6 * gpt2_params(c) * s * b + 12 * L * b * s * s * h


def gpt2_eq7_flops(c):
    L, h, s, b, v = c["layers"], c["hidden"], c["seq"], c["batch"], c["vocab"]
    return 72 * b * L * s * h * h * (1 + s / (6 * h) + v / (12 * h * L))


def llama_kv_width(c):
    return c["kv_heads"] * (c["hidden"] // c["heads"])


def llama_params(c):
    L, h, f, v = c["layers"], c["hidden"], c["ffn"], c["vocab"]
    # per block: 2 RMSNorm gains 2h, q and o 2h^2, k and v 2h*kv_width, gate, up, down 3h*ffn;
    # token embedding and untied lm_head v*h each, final RMSNorm h
    block = 2 * h * h + 2 * h * llama_kv_width(c) + 3 * h * f + 2 * h
    return 2 * v * h + L * block + h


def llama_flops(c):
    """ctron's model FLOPs of the llama block (flops_model_block, src/memory/flops.h): per
    sequence and layer the forward is 2sh(h + 2 kv_width) (q, k, v) + 2sh^2 (o) + 4s^2h (QK^T,
    P.V over the full s x s) + 6sh ffn (gate, up, down); training 3x; the output layer 6shv (the
    embedding lookup is no matmul). Equal to 6 * (matmul parameters) * tokens + 12 L b s^2 h."""
    L, h, s, b, v, f = (c[k] for k in ("layers", "hidden", "seq", "batch", "vocab", "ffn"))
    layer = 2 * s * h * (h + 2 * llama_kv_width(c)) + 2 * s * h * h + 4 * s * s * h + 6 * s * h * f
    return b * (3 * L * layer + 6 * s * h * v)


# Per family: parameters, model FLOPs per step (the tables' GFLOP/s and MFU), and the paper's Eq. 7
# where it applies (GPT-2; for llama ctron's generalisation above, which is Eq. 7 on GPT-2's shape).
FAMILY_WORK = {
    "gpt2": (gpt2_params, gpt2_flops, gpt2_eq7_flops),
    "llama": (llama_params, llama_flops, llama_flops),
}


def n_params(c):
    return FAMILY_WORK[arch_of(c)][0](c)


def flops_per_step(c):
    return FAMILY_WORK[arch_of(c)][1](c)


def eq7_flops_per_step(c):
    return FAMILY_WORK[arch_of(c)][2](c)


# --------------------------------------------------------------------------
# Running a child with its own peak RSS
# --------------------------------------------------------------------------

def cpu_ticks():
    """(busy, steal) seconds of all CPUs since boot from /proc/stat, or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal (guest time is inside user)
    busy = v[0] + v[1] + v[2] + v[5] + v[6]
    return busy / hz, (v[7] if len(v) > 7 else 0) / hz


# A run during which other processes kept more than this many cores busy on average is flagged
# as disturbed (the machine is shared: builds and tests of other people land on the same cores).
OTHER_LOAD_FLAG = 0.25


def wait_quiet(max_wait_s, label):
    """Before a run: while other processes keep more than OTHER_LOAD_FLAG cores busy (sampled
    over 2 s; nothing of ours runs now), wait, at most max_wait_s seconds. Returns the seconds
    waited (0 when max_wait_s is 0, i.e. --wait-quiet off)."""
    if max_wait_s <= 0:
        return 0.0
    t0 = time.monotonic()
    said = False
    while True:
        a = cpu_ticks()
        time.sleep(2.0)
        b = cpu_ticks()
        if a is None or b is None or (b[0] - a[0]) / 2.0 <= OTHER_LOAD_FLAG:
            break
        waited = time.monotonic() - t0
        if waited >= max_wait_s:
            print(f"{label}: machine still busy ({(b[0] - a[0]) / 2.0:.2f} cores) after "
                  f"{waited:.0f} s; running anyway", file=sys.stderr, flush=True)
            break
        if not said:
            print(f"{label}: waiting for the machine to be quiet ({(b[0] - a[0]) / 2.0:.2f} "
                  f"cores busy) ...", file=sys.stderr, flush=True)
            said = True
    return round(time.monotonic() - t0, 1)


def run_child(cmd, env, timeout_s, cwd, own_group=False):
    """Runs cmd; returns dict(rc, wall_s, peak_rss_kib, stdout, stderr, timed_out).

    stdout/stderr go to temporary files (not pipes) so that the child can never
    block on a full pipe while we sit in os.wait4, which reaps the child and
    returns its own rusage (ru_maxrss, KiB on Linux: the largest of the child
    and the descendants it reaped, e.g. mpirun's ranks). other_cores: the CPU
    time of the whole machine during the run (/proc/stat) minus the child's own
    (rusage), per second of wall time -- how many cores something else kept
    busy, a measure of disturbance; steal_cores: the hypervisor's steal time,
    likewise. own_group: the child
    leads a new process group, and a timeout kills the whole group (mpirun and
    its ranks; Open MPI 4.1's mpirun can hang at shutdown after an error).
    """
    import subprocess
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        ticks0 = cpu_ticks()
        try:
            p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd,
                                 start_new_session=own_group)
        except OSError as e:
            raise BenchError(f"cannot start {cmd[0]!r}: {e}") from e
        timed_out = False
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid == p.pid:
                break
            if timeout_s and time.monotonic() - t0 > timeout_s:
                timed_out = True
                if own_group:
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                else:
                    p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.05)
        wall = time.monotonic() - t0
        ticks1 = cpu_ticks()
        other = steal = None
        own = ru.ru_utime + ru.ru_stime
        if ticks0 and ticks1 and wall > 0:
            other = round(max(0.0, (ticks1[0] - ticks0[0]) - own) / wall, 3)
            steal = round((ticks1[1] - ticks0[1]) / wall, 3)
        rc = os.waitstatus_to_exitcode(status)
        p.returncode = rc          # reaped by us; keep Popen from waiting again
        out.seek(0)
        err.seek(0)
        return dict(rc=rc, wall_s=round(wall, 3), cpu_s=round(own, 3), peak_rss_kib=ru.ru_maxrss,
                    other_cores=other, steal_cores=steal,
                    stdout=out.read().decode("utf-8", "replace"),
                    stderr=err.read().decode("utf-8", "replace"),
                    timed_out=timed_out)


def load_note(r):
    """' (other load: X cores busy)' for a run that shared the machine, else ''."""
    o = r.get("other_cores")
    return f" (other load: {o:.2f} cores busy)" if o is not None and o > OTHER_LOAD_FLAG else ""



def report_run(label, r, detail=""):
    """One run's line on stderr: its median step time (with detail), or why it failed."""
    if r["ok"]:
        print(f"{label}: median {r['ms_median']:.1f} ms/step over {len(r['ms_timed'])} steps{detail}"
              + (f" ({r['warning']})" if r.get("warning") else "") + load_note(r), file=sys.stderr, flush=True)
    else:
        print(f"{label}: FAILED: {r['error']}\n{r.get('stderr_tail', '')}", file=sys.stderr, flush=True)

def disturbed_lines(runs, describe):
    """A markdown note listing the runs during which other processes kept more than
    OTHER_LOAD_FLAG cores busy on average (none: an empty list)."""
    bad = [r for r in runs if (r.get("other_cores") or 0) > OTHER_LOAD_FLAG]
    if not bad:
        return []
    items = ", ".join(f"{describe(r)} round {r['round']} ({r['other_cores']:.2f})" for r in bad)
    return [f"Disturbed runs (other processes kept more than {OTHER_LOAD_FLAG} cores busy on "
            f"average, from /proc/stat minus the run's own CPU time): {items}. Their steps are in "
            "the medians; compare their per-round figures in the JSON.", ""]


def rerun_disturbed(args, runs, n_planned, redo):
    """--rerun-disturbed N: after the planned runs, runs again (same round, implementation and
    policy or thread count) every run that was disturbed (other_cores > OTHER_LOAD_FLAG) or
    failed, at most N times each; a re-run replaces the run in `runs` when it failed less or was
    less disturbed. Returns the replaced runs (kept in the JSON as discarded_runs). redo(run,
    seq) -> a new run."""
    discarded, seq = [], n_planned
    for _ in range(args.rerun_disturbed):
        todo = [i for i, r in enumerate(runs)
                if not r["ok"] or (r.get("other_cores") or 0) > OTHER_LOAD_FLAG]
        if not todo:
            break
        for i in todo:
            seq += 1
            new = redo(runs[i], seq)
            new["rerun_of_seq"] = runs[i]["seq"]
            old = runs[i]
            better = (new["ok"] and not old["ok"]) or (
                new["ok"] == old["ok"] and (new.get("other_cores") or 0) < (old.get("other_cores") or 0))
            if better:
                runs[i] = new
                discarded.append(old)
            else:
                discarded.append(new)
    return discarded


def rerun_lines(discarded):
    """A markdown note on --rerun-disturbed: how many runs were run again."""
    if not discarded:
        return []
    return [f"{len(discarded)} run(s) discarded after a re-run (`--rerun-disturbed`: a failed or "
            "disturbed run is run again at the end, same round; the less disturbed one counts; "
            "the other is in the JSON's `discarded_runs`).", ""]


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

def unique_steps(recs):
    """One record per step, sorted by step: the first record with "ms" for each step."""
    seen, uniq = set(), []
    for x in recs:
        if "step" in x and "ms" in x and x["step"] not in seen:
            seen.add(x["step"])
            uniq.append(x)
    return sorted(uniq, key=lambda r: r["step"])


def read_step_log(log):
    """ctron's --log file: (all records, bad lines, one record per step sorted by step).

    Several lines for one step (e.g. a val_loss line) would double count: keeps
    the first line with "ms" per step.
    """
    log_text = ""
    if os.path.exists(log):
        with open(log, encoding="utf-8", errors="replace") as f:
            log_text = f.read()
    recs, bad = parse_json_lines(log_text)
    return recs, bad, unique_steps(recs)


# The parts of a step's time in the breakdown table and plot.
PHASES = ("fwd", "bwd", "opt", "comm", "other")
PHASE_NAMES = {"fwd": "forward", "bwd": "backward", "opt": "optimizer",
               "comm": "communication", "other": "other"}


def step_phases(step_recs):
    """{phase: [ms per timed step]} from step records sorted by step (the first dropped), or
    None when a timed step lacks fwd_ms/bwd_ms/opt_ms.

    fwd/bwd/opt: the log's fwd_ms, bwd_ms (recomputation included), opt_ms (ctron: clipping +
    AdamW; peer: AdamW + zero_grad). comm: 0 -- every run here is one process, with no
    collectives (ctron's fwd_ms/bwd_ms would include them otherwise). other: ms minus the three,
    i.e. what the step spends outside them (ctron: zeroing the gradients and fetching the batch;
    peer: drawing the random batch).
    """
    timed = step_recs[1:]
    keys = ("fwd_ms", "bwd_ms", "opt_ms")
    if not timed or not all(isinstance(r.get(k), (int, float)) for r in timed for k in keys):
        return None
    out = {k: [] for k in PHASES}
    for r in timed:
        fwd, bwd, opt = (float(r[k]) for k in keys)
        out["fwd"].append(fwd)
        out["bwd"].append(bwd)
        out["opt"].append(opt)
        out["comm"].append(0.0)
        out["other"].append(float(r["ms"]) - fwd - bwd - opt)
    return out


def phase_medians(runs):
    """{phase: median ms} over every timed step of runs, or None if a run has no split."""
    ph = [r.get("phases_timed") for r in runs]
    if not ph or not all(ph):
        return None
    return {k: statistics.median(v for p in ph for v in p[k]) for k in PHASES}


def family_args(c):
    """The flags of a config's family, the same for ctron and its peer (none for GPT-2)."""
    if arch_of(c) == "gpt2":
        return []
    return ["--kv-heads", str(c["kv_heads"]), "--ffn-hidden", str(c["ffn"])] + (["--qk-norm"] if c.get("qk_norm") else []) \
        + (["--sliding-window", str(c["sliding_window"])] if c.get("sliding_window") else [])


def run_ctron(args, c, pol, env, workdir, tag, impl="ctron"):
    log = os.path.join(workdir, f"{tag}.jsonl")
    precision = ["--precision", "bf16"] if impl_precision(impl) == "bf16" else []
    arch = [] if arch_of(c) == "gpt2" else ["--arch", arch_of(c)] + family_args(c)
    cmd = [args.ctron, "train"] + arch + [
           "--layers", str(c["layers"]), "--hidden", str(c["hidden"]),
           "--heads", str(c["heads"]), "--seq", str(c["seq"]),
           "--batch", str(c["batch"]), "--vocab", str(c["vocab"]),
           "--dropout", str(c["dropout"]), "--steps", str(args.steps),
           "--threads", str(args.threads), "--lr", "3e-4",
           # validation runs once, after the last step, outside `ms`: keep it short
           "--eval-batches", "1",
           "--data", args.data, "--log", log] + precision + ctron_policy_args(pol) \
        + list(args.ctron_arg)
    r = run_child(cmd, env, args.timeout, ROOT)
    res = dict(impl=impl, policy=pol["name"], cmd=cmd, rc=r["rc"], wall_s=r["wall_s"],
               cpu_s=r["cpu_s"], peak_rss_kib=r["peak_rss_kib"], timed_out=r["timed_out"],
               other_cores=r["other_cores"], steal_cores=r["steal_cores"])
    recs, bad, uniq = read_step_log(log)
    res["log_bad_lines"] = bad
    res["log"] = recs
    all_ms, timed = timed_steps(uniq)
    res["ms_steps"] = all_ms
    res["ms_timed"] = timed
    res["ms_median"] = statistics.median(timed) if timed else None
    res["phases_timed"] = step_phases(uniq)
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
    else:
        warn = []
        if len(uniq) != args.steps:
            warn.append(f"log has {len(uniq)} step lines, expected {args.steps}")
        if res["act_bytes"] is None or res["act_layer_bytes"] is None:
            warn.append("log lacks act_bytes/act_layer_bytes")
        if warn:
            res["warning"] = "; ".join(warn)
    return res


def peer_args(impl):
    """The peer's --precision/--attention for an implementation (none for Debian's 1.13: its
    command stays what it was)."""
    spec = impl_spec(impl)
    if spec.get("python") not in ("venv", "hf"):
        return []
    return ["--precision", spec["precision"], "--attention", spec["attention"]]


def peer_python(args, impl):
    """The interpreter of a peer: Debian's, bench/.venv's (PyTorch 2.x) or scripts/peer_env.sh's
    (transformers)."""
    return {"debian": args.python, "venv": args.peer_python,
            "hf": args.hf_python}[impl_spec(impl).get("python", "debian")]


def run_peer(args, c, pol, env, tag, impl="torch", extra=()):
    """One peer run; extra: flags appended to its command (bench/lora_bench.py's --lora-*)."""
    script = HF_PEER if impl_spec(impl).get("python") == "hf" else PEER
    cmd = [peer_python(args, impl), script,
           "--layers", str(c["layers"]), "--hidden", str(c["hidden"]),
           "--heads", str(c["heads"])] + family_args(c) + [
           "--seq", str(c["seq"]),
           "--batch", str(c["batch"]), "--vocab", str(c["vocab"]),
           "--dropout", str(c["dropout"]), "--steps", str(args.steps),
           "--threads", str(args.threads)] + peer_policy_args(pol) + peer_args(impl) + list(extra)
    r = run_child(cmd, env, args.timeout, ROOT)
    res = dict(impl=impl, policy=pol["name"], cmd=cmd, rc=r["rc"], wall_s=r["wall_s"],
               cpu_s=r["cpu_s"], peak_rss_kib=r["peak_rss_kib"], timed_out=r["timed_out"],
               other_cores=r["other_cores"], steal_cores=r["steal_cores"])
    recs, _ = parse_json_lines(r["stdout"])
    steps = [x for x in recs if "step" in x and "ms" in x and "peer" not in x]
    summary = next((x for x in recs if x.get("peer") == "torch"), None)
    all_ms, timed = timed_steps(steps)
    res["ms_steps"] = all_ms
    res["ms_timed"] = timed
    res["ms_median"] = statistics.median(timed) if timed else None
    # fwd_ms/bwd_ms/opt_ms per step (torch_gpt.py times its phases; an older peer did not)
    res["phases_timed"] = step_phases(sorted(steps, key=lambda x: x["step"]))
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
# Thread scaling (one config, one policy, ctron and the peer at each thread count)
# --------------------------------------------------------------------------

def summarise_scaling(c, threads, runs, impls, rounds):
    """summary[impl][str(t)] = aggregate + speed-up over the fewest threads (None if no run)."""
    summary = {}
    t0 = threads[0]
    for impl in impls:
        per = {}
        for t in threads:
            sel = [r for r in runs if r["impl"] == impl and r["threads"] == t]
            per[str(t)] = aggregate(c, sel) if sel else None
        base = per.get(str(t0))
        for t in threads:
            agg = per[str(t)]
            if agg is None:
                continue
            agg["threads"] = t
            agg["speedup"] = base["ms_median"] / agg["ms_median"] if base else None
            agg["efficiency"] = (agg["speedup"] * t0 / t) if agg["speedup"] else None
            bp, ap = (base or {}).get("phase_ms"), agg.get("phase_ms")
            agg["phase_speedup"] = ({k: (bp[k] / ap[k] if ap[k] > 0 else None)
                                     for k in ("fwd", "bwd", "opt")} if bp and ap else None)
            paired = []
            for rnd in range(1, rounds + 1):
                a = next((r for r in runs if r["impl"] == impl and r["threads"] == t0
                          and r["round"] == rnd and r["ok"]), None)
                b = next((r for r in runs if r["impl"] == impl and r["threads"] == t
                          and r["round"] == rnd and r["ok"]), None)
                if a and b:
                    paired.append(a["ms_median"] / b["ms_median"])
            agg["speedup_paired_per_round"] = paired
            agg["speedup_paired_median"] = statistics.median(paired) if paired else None
        summary[impl] = per
    return summary


def run_scaling_bench(args, impls, workdir):
    """The thread-scaling section of the result (None when --scaling is ''), and whether a run
    failed. Config --scaling-config, policy --scaling-policy, each thread count of --scaling;
    a round visits the thread counts in turn (rotated by one per round), ctron and the peer back
    to back at each (the peer first in even rounds), like the policy rounds."""
    if not args.scaling_threads:
        return None, False
    name = args.scaling_config
    c = CONFIGS[name]
    pol = args.scaling_pol
    threads = args.scaling_threads
    sec = {"config_name": name, "config": dict(c), "policy": pol["name"],
           "threads": threads, "steps": args.scaling_steps, "rounds": args.scaling_rounds,
           "target_speedup": args.scaling_target, "impls": impls,
           "flops_per_step": flops_per_step(c), "tokens_per_step": c["seq"] * c["batch"]}
    # schedule() alternates "policies": here one pseudo-policy per thread count
    slots = [{"name": f"{t} thread{'s' if t != 1 else ''}", "shared": True, "threads": t}
             for t in threads]
    plan = schedule(slots, args.scaling_rounds, impls)

    def one(rnd, seq, t, impl, label):
        print(f"{label}: running ...", file=sys.stderr, flush=True)
        sub = argparse.Namespace(**vars(args))
        sub.threads, sub.steps = t, args.scaling_steps
        env = dict(os.environ)
        for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env[k] = str(t)
        tag = f"scal-{name}-{pol['name']}-{impl}-t{t}-r{rnd}"
        waited = wait_quiet(args.wait_quiet, label)
        r = run_ctron(sub, c, pol, env, workdir, tag, impl) if is_ctron(impl) else \
            run_peer(sub, c, pol, env, tag, impl)
        r["threads"] = t
        r["waited_s"] = waited
        r["round"] = rnd
        r["seq"] = seq
        report_run(label, r)
        return r

    runs = []
    for seq, (rnd, slot, impl) in enumerate(plan, 1):
        runs.append(one(rnd, seq, slot["threads"], impl,
                        f"[scaling {name} {pol['name']} round {rnd}/{args.scaling_rounds} run "
                        f"{seq}/{len(plan)}] {impl} {slot['name']}"))
    sec["discarded_runs"] = rerun_disturbed(
        args, runs, len(plan),
        lambda r, seq: one(r["round"], seq, r["threads"], r["impl"],
                           f"[scaling {name} {pol['name']} re-run {seq}, round {r['round']}] "
                           f"{r['impl']} {r['threads']} thread(s)"))
    sec["summary"] = summarise_scaling(c, threads, runs, impls, args.scaling_rounds)
    sec["runs"] = runs
    return sec, any(not r["ok"] for r in runs)


# --------------------------------------------------------------------------
# Parallel layouts (ctron alone, one config, under mpirun)
# --------------------------------------------------------------------------

def run_layout(args, c, lay, base_env, workdir, tag):
    """One ctron run in one parallel layout; the step log is rank 0's."""
    log = os.path.join(workdir, f"{tag}.jsonl")
    t = lay["threads_per_rank"]
    train = [args.ctron, "train",
             "--layers", str(c["layers"]), "--hidden", str(c["hidden"]),
             "--heads", str(c["heads"]), "--seq", str(c["seq"]),
             "--batch", str(c["batch"]), "--vocab", str(c["vocab"]),
             "--dropout", str(c["dropout"]), "--steps", str(args.parallel_steps),
             "--threads", str(t), "--lr", "3e-4",
             "--eval-every", "0", "--eval-batches", "1", "--no-ledger",
             "--data", args.data, "--log", log] + lay["ctron_args"] + list(args.ctron_arg)
    env = dict(base_env)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(t)
    if lay["ranks"] > 1:
        cmd = [args.mpirun_path] + MPIRUN_ARGS + ["-np", str(lay["ranks"])] + train
        env.update(MPI_ENV)
    else:
        cmd = train
    r = run_child(cmd, env, args.parallel_timeout, ROOT, own_group=True)
    res = dict(impl="ctron", layout=lay["name"], cmd=cmd,
               env={k: env[k] for k in sorted(MPI_ENV) + ["OMP_NUM_THREADS"] if k in env},
               rc=r["rc"], wall_s=r["wall_s"], peak_rss_kib=r["peak_rss_kib"],
               timed_out=r["timed_out"], other_cores=r["other_cores"],
               steal_cores=r["steal_cores"])
    recs, bad, uniq = read_step_log(log)
    res["log_bad_lines"] = bad
    res["log"] = recs
    w = args.parallel_warmup
    res["ms_steps"] = [float(x["ms"]) for x in uniq]
    timed = uniq[w:]
    res["timed_steps"] = [x["step"] for x in timed]
    res["ms_timed"] = [float(x["ms"]) for x in timed]
    res["ms_median"] = statistics.median(res["ms_timed"]) if timed else None
    res["loss_first"] = uniq[0].get("loss") if uniq else None
    res["loss_last"] = uniq[-1].get("loss") if uniq else None
    res["ok"] = r["rc"] == 0 and not r["timed_out"] and bool(timed)
    if not res["ok"]:
        res["error"] = (f"timed out after {args.parallel_timeout:g} s" if r["timed_out"]
                        else f"exit status {r['rc']}" if r["rc"] != 0
                        else f"log {log} has {len(uniq)} step lines with 'ms' (need > {w})")
        res["stderr_tail"] = tail(r["stderr"]) or tail(r["stdout"])
    elif len(uniq) != args.parallel_steps:
        res["warning"] = f"log has {len(uniq)} step lines, expected {args.parallel_steps}"
    return res


def layout_schedule(layouts, rounds):
    """[(round, layout)]: round r visits the layouts rotated left by r-1."""
    n = len(layouts)
    return [(rnd, lay) for rnd in range(1, rounds + 1)
            for lay in layouts[(rnd - 1) % n:] + layouts[:(rnd - 1) % n]]


def _median_of(recs, key):
    vals = [float(x[key]) for x in recs if isinstance(x.get(key), (int, float))]
    return statistics.median(vals) if vals else None


def _per_step_bytes(recs, field, keys):
    """{key: bytes} of a per-step byte dict (comm_bytes, tp_bytes) over the timed steps: the
    median per key (a key a step does not report counts 0), and whether the steps disagree."""
    out, varies = {}, False
    for k in keys:
        vals = [float((x.get(field) or {}).get(k, 0)) for x in recs]
        out[k] = statistics.median(vals) if vals else None
        varies = varies or (len(set(vals)) > 1)
    return out, varies


def summarise_layouts(c, layouts, runs, rounds):
    """summary[layout] = medians over every timed step of its successful runs (None if none)."""
    tokens = c["seq"] * c["batch"]
    summary = {}
    for lay in layouts:
        ok = [r for r in runs if r["layout"] == lay["name"] and r["ok"]]
        if not ok:
            summary[lay["name"]] = None
            continue
        timed = []
        for r in ok:
            by_step = {x["step"]: x for x in r["log"] if "step" in x and "ms" in x}
            timed += [by_step[st] for st in r["timed_steps"] if st in by_step]
        med = statistics.median(float(x["ms"]) for x in timed)
        comm, comm_varies = _per_step_bytes(timed, "comm_bytes", COMM_KINDS)
        tp, tp_varies = _per_step_bytes(timed, "tp_bytes", TP_PURPOSES)
        acts = [x["act_bytes"] for x in timed if isinstance(x.get("act_bytes"), (int, float))]
        layer = [x["act_layer_bytes"] for x in timed
                 if isinstance(x.get("act_layer_bytes"), (int, float))]
        summary[lay["name"]] = {
            "runs_ok": len(ok), "runs": sum(r["layout"] == lay["name"] for r in runs),
            "timed_steps": len(timed),
            "ms_median": med, "ms_round_medians": [r["ms_median"] for r in ok],
            "ms_min": min(float(x["ms"]) for x in timed),
            "ms_max": max(float(x["ms"]) for x in timed),
            "tokens_per_s": tokens / (med / 1e3),
            "gflops": flops_per_step(c) / (med / 1e3) / 1e9,
            "fwd_ms": _median_of(timed, "fwd_ms"), "bwd_ms": _median_of(timed, "bwd_ms"),
            "opt_ms": _median_of(timed, "opt_ms"),
            "comm_bytes": comm, "comm_bytes_total": sum(v for v in comm.values() if v),
            "tp_bytes": tp, "bytes_vary_between_steps": comm_varies or tp_varies,
            "act_bytes": max(acts) if acts else None,
            "act_layer_bytes": max(layer) if layer else None,
            "peak_rss_kib": max(r["peak_rss_kib"] for r in ok),
            "loss_step1": ok[0]["loss_first"],
        }
    base = summary.get("single")
    for name, agg in summary.items():
        if agg is None:
            continue
        agg["speedup_vs_single"] = base["ms_median"] / agg["ms_median"] if base else None
        paired = []
        for rnd in range(1, rounds + 1):
            a = next((r for r in runs if r["layout"] == "single" and r["round"] == rnd
                      and r["ok"]), None)
            b = next((r for r in runs if r["layout"] == name and r["round"] == rnd and r["ok"]),
                     None)
            if a and b:
                paired.append(a["ms_median"] / b["ms_median"])
        agg["speedup_paired_per_round"] = paired
        agg["speedup_paired_median"] = statistics.median(paired) if paired else None
    return summary


def run_parallel_bench(args, workdir):
    """The parallel section of the result, or None when no layout was asked for."""
    if not args.layout_list:
        return None, False
    name = args.parallel_config
    c = CONFIGS[name]
    sec = {"config_name": name, "config": dict(c), "n_params": n_params(c),
           "flops_per_step": flops_per_step(c), "tokens_per_step": c["seq"] * c["batch"],
           "layouts": args.layout_list, "steps": args.parallel_steps,
           "warmup": args.parallel_warmup, "rounds": args.parallel_rounds,
           "threads_total": args.threads, "mpirun_args": MPIRUN_ARGS, "mpi_env": MPI_ENV}
    if args.peer_only:
        sec["skipped"] = "--peer-only: no ctron binary"
        return sec, False
    needs_mpi = any(lay["ranks"] > 1 for lay in args.layout_list)
    if needs_mpi and not args.mpirun_path:
        sec["skipped"] = (f"mpirun not found ({args.mpirun!r} is not on PATH or not executable); "
                          f"install Open MPI or pass --mpirun PATH")
        print(f"note: parallel benchmark skipped: {sec['skipped']}", file=sys.stderr, flush=True)
        return sec, False
    if needs_mpi:
        v = run_child([args.mpirun_path, "--version"], dict(os.environ), 30, ROOT)
        sec["mpirun"] = {"path": args.mpirun_path,
                         "version": (v["stdout"].strip().splitlines() or [None])[0]}
    base_env = dict(os.environ)
    runs, failed = [], False
    plan = layout_schedule(args.layout_list, args.parallel_rounds)
    for seq, (rnd, lay) in enumerate(plan, 1):
        label = (f"[parallel {name} round {rnd}/{args.parallel_rounds} run {seq}/{len(plan)}] "
                 f"{lay['name']} ({lay['ranks']} x {lay['threads_per_rank']} threads)")
        print(f"{label}: running ...", file=sys.stderr, flush=True)
        waited = wait_quiet(args.wait_quiet, label)
        r = run_layout(args, c, lay, base_env, workdir, f"par-{lay['name']}-r{rnd}")
        r["waited_s"] = waited
        r["round"] = rnd
        r["seq"] = seq
        runs.append(r)
        if r["ok"]:
            print(f"{label}: median {r['ms_median']:.1f} ms/step over {len(r['ms_timed'])} steps, "
                  f"loss {r['loss_first']:.3f} -> {r['loss_last']:.3f}"
                  + (f" ({r['warning']})" if r.get("warning") else "") + load_note(r),
                  file=sys.stderr, flush=True)
        else:
            failed = True
            print(f"{label}: FAILED: {r['error']}\n{r.get('stderr_tail', '')}",
                  file=sys.stderr, flush=True)
    sec["summary"] = summarise_layouts(c, args.layout_list, runs, args.parallel_rounds)
    sec["runs"] = runs
    return sec, failed


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


def meminfo_kib(field):
    """A /proc/meminfo field (MemTotal, MemAvailable) in KiB, or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(field + ":"):
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


def scaling_impls(impls, c):
    """The thread-scaling part runs ctron fp32 and one fp32 peer of config c's family: PyTorch
    2.x (explicit attention) when it runs, else Debian's; transformers SDPA for llama."""
    peer = next((i for i in impls_for(c, ("pt2-fp32", "torch", "hf-fp32")) if i in impls), None)
    return [i for i in ("ctron", peer) if i in impls]


def environment(args, torch_version, torch2_version=None, hf_versions=None, bf16_probes=None):
    return {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_allowed": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "mem_total_kib": meminfo_kib("MemTotal"),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "peer_python": args.python,
        "torch_version": torch_version,            # Debian's, the "torch" peer
        "peer2_python": args.peer_python,
        "torch2_version": torch2_version,          # PyPI's, the "pt2-*" peers
        "hf_python": args.hf_python,
        # the hf-* peers' torch and transformers ("2.15.0+cu132 5.24.0"), scripts/peer_env.sh's pins
        "hf_versions": hf_versions,
        "peer_bf16_probes": bf16_probes,      # BF16_PROBE's figures per peer Python
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
# Aggregation
# --------------------------------------------------------------------------

def aggregate(c, runs):
    """Summary of the runs of one (implementation, policy); None if none succeeded."""
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
        "phase_ms": phase_medians(ok),
    }
    if is_ctron(ok[0]["impl"]):
        acts = [r["act_bytes"] for r in ok if r["act_bytes"] is not None]
        agg["act_bytes_total"] = max(acts) if acts else None
        layer = [r.get("act_layer_bytes") for r in ok if r.get("act_layer_bytes") is not None]
        agg["act_bytes_per_layer"] = max(layer) if layer else None
    else:
        s = ok[0]["summary"]
        agg["act_bytes_total"] = s["saved_bytes_total"]
        agg["act_bytes_per_layer"] = s["saved_bytes_per_layer"]
        agg["act_bytes_blocks"] = s.get("saved_bytes_blocks")
        agg["act_bytes_embed"] = s.get("saved_bytes_embed")
        agg["act_bytes_head"] = s.get("saved_bytes_head")
        agg["n_params_peer"] = s.get("n_params")
        agg["torch_threads"] = s.get("threads")
    return agg


def round_median(runs, impl, pname, rnd):
    """The median ms/step of impl's successful run of policy pname in round rnd, or None."""
    return next((r["ms_median"] for r in runs if r["impl"] == impl and r["policy"] == pname
                 and r["round"] == rnd and r["ok"]), None)


def best_of_precision(summary, runs, pname, prec, rounds, peer_prec=None):
    """The fastest PyTorch variant of one precision (peer_prec, default prec) at one policy,
    against ctron of precision prec, or None when no such peer ran. speedup = the variant's ms /
    ctron's ms (ctron's tokens/s over PyTorch best's: > 1 means ctron is faster); per round: the
    fastest variant's run median in that round / ctron's."""
    peer_prec = peer_prec or prec
    peers = [impl for impl in summary if not is_ctron(impl) and impl_precision(impl) == peer_prec
             and summary[impl].get(pname)]
    if not peers:
        return None
    impl = min(peers, key=lambda i: summary[i][pname]["ms_median"])
    agg = summary[impl][pname]
    mine = summary.get(ctron_of(prec), {}).get(pname)
    paired = []
    for rnd in range(1, rounds + 1):
        theirs = [m for m in (round_median(runs, i, pname, rnd) for i in peers) if m]
        own = round_median(runs, ctron_of(prec), pname, rnd)
        if theirs and own:
            paired.append(min(theirs) / own)
    return {"impl": impl, "candidates": peers, "ms_median": agg["ms_median"],
            "tokens_per_s": agg["tokens_per_s"], "gflops": agg["gflops"],
            "ctron_impl": ctron_of(prec),
            "ctron_ms_median": mine["ms_median"] if mine else None,
            "ctron_mfu": mine.get("mfu") if mine else None,
            "ctron_overhead_pct_vs_none": mine.get("overhead_pct_vs_none") if mine else None,
            "speedup": agg["ms_median"] / mine["ms_median"] if mine else None,
            "paired_per_round": paired,
            "paired_median": statistics.median(paired) if paired else None,
            "peer_precision": peer_prec}


def pytorch_best(summary, runs, policies, rounds):
    """best[precision][policy] = best_of_precision(...) for every shared policy. When ctron bf16
    ran but no bf16 peer did (left out: no native bf16 GEMM in PyTorch on this CPU), ctron bf16
    is set against the fp32 peers instead, marked by peer_precision "fp32"."""
    best = {}
    for prec in PRECISIONS:
        bf16_alone = prec == "bf16" and not any(
            not is_ctron(i) and impl_precision(i) == "bf16" for i in summary)
        per = {p["name"]: best_of_precision(summary, runs, p["name"], prec, rounds,
                                            "fp32" if bf16_alone else None)
               for p in policies if p["shared"]}
        per = {k: v for k, v in per.items() if v}
        if per:
            best[prec] = per
    return best


def add_mfu(summary, peaks):
    """agg["mfu"]: model FLOPs per second over the GEMM peak of the row's precision (None
    without a measured peak)."""
    for impl, per in summary.items():
        peak = ((peaks or {}).get(impl_precision(impl)) or {}).get("gflops")
        for agg in per.values():
            if agg is not None:
                agg["mfu"] = agg["gflops"] / peak if peak else None


def summarise_config(c, policies, runs, impls, rounds, peaks=None):
    """summary[impl][policy] = aggregate (+ overhead, x-smaller and MFU), ratios[policy] (ctron
    fp32 against Debian's PyTorch, as before the 2.x peer), best[precision][policy]."""
    summary = {}
    for impl in impls:
        summary[impl] = {}
        for pol in policies:
            if impl != "ctron" and not pol["shared"]:     # ctron-only variants: fp32 ctron
                continue
            sel = [r for r in runs if r["impl"] == impl and r["policy"] == pol["name"]]
            if sel:
                summary[impl][pol["name"]] = aggregate(c, sel)
    ref_layer = (summary.get("ctron", {}).get("none") or {}).get("act_bytes_per_layer")
    for impl, per in summary.items():
        base = per.get("none")
        for name, agg in per.items():
            if agg is None:
                continue
            agg["overhead_pct_vs_none"] = (
                (agg["ms_median"] / base["ms_median"] - 1) * 100 if base else None)
            lay = agg.get("act_bytes_per_layer")
            agg["layer_x_smaller_vs_ctron_none"] = (ref_layer / lay if ref_layer and lay else None)
            agg["layer_pct_of_ctron_none"] = (100.0 * lay / ref_layer if ref_layer and lay else None)
    add_mfu(summary, peaks)
    ratios = {}
    for pol in policies:
        if not pol["shared"]:
            continue
        a = summary.get("ctron", {}).get(pol["name"])
        b = summary.get("torch", {}).get(pol["name"])
        if not (a and b):
            continue
        paired = []
        for rnd in range(1, rounds + 1):
            ra = next((r for r in runs if r["impl"] == "ctron" and r["policy"] == pol["name"]
                       and r["round"] == rnd and r["ok"]), None)
            rb = next((r for r in runs if r["impl"] == "torch" and r["policy"] == pol["name"]
                       and r["round"] == rnd and r["ok"]), None)
            if ra and rb:
                paired.append(rb["ms_median"] / ra["ms_median"])
        ratios[pol["name"]] = {
            "torch_over_ctron": b["ms_median"] / a["ms_median"],
            "paired_per_round": paired,
            "paired_median": statistics.median(paired) if paired else None,
        }
    return summary, ratios, pytorch_best(summary, runs, policies, rounds)


# --------------------------------------------------------------------------
# The tables
# --------------------------------------------------------------------------

def mib(x):
    return "–" if x is None else f"{x / 2**20:.2f}"


def mib0(x):
    return "0" if x == 0 else mib(x)


def fmt(x, nd=1):
    return "–" if x is None else f"{x:.{nd}f}"


def shape_str(name, c):
    llama = (f" kv{c['kv_heads']} ffn{c['ffn']}" if arch_of(c) == "llama" else "")
    return (f"{name} (L{c['layers']} h{c['hidden']} a{c['heads']}{llama} s{c['seq']} "
            f"b{c['batch']} v{c['vocab']} p{c['dropout']})")


def impl_label(impl, env):
    """ctron, ctron bf16, PyTorch 1.13.0a0 (Debian), PyTorch 2.15.0 bf16 SDPA, ..."""
    spec = impl_spec(impl)
    if is_ctron(impl):
        return "ctron" if spec["precision"] == "fp32" else f"ctron {spec['precision']}"
    if spec.get("python") == "venv":
        v = (env.get("torch2_version") or "2.x").split("+")[0]
        return (f"PyTorch {v} {spec['precision']}"
                + (" SDPA" if spec.get("attention") == "sdpa" else ""))
    if spec.get("python") == "hf":
        v = (env.get("hf_versions") or "").split()
        return (f"transformers {v[1] if len(v) > 1 else ''} {spec['precision']} "
                f"{'SDPA' if spec['attention'] == 'sdpa' else 'eager'}").replace("  ", " ")
    return f"PyTorch {env.get('torch_version') or ''}".strip()


def impls_of(summary):
    """The implementations of a summary dict, in the registry's order."""
    return [i for i in IMPLS if i in summary] + [i for i in summary if i not in IMPLS]


def peer_over_ctron(cres, impl, pname):
    """A peer row's ms/step over ctron's of the same precision and policy (> 1: ctron faster),
    or None."""
    agg = cres["summary"].get(impl, {}).get(pname)
    mine = cres["summary"].get(ctron_of(impl_precision(impl)), {}).get(pname)
    if is_ctron(impl) or not agg or not mine:
        return None
    return agg["ms_median"] / mine["ms_median"]


def plot_paths(result, md_dir):
    """{kind: (path relative to md_dir)} of the plots that were written."""
    return {k: os.path.relpath(p, md_dir) for k, p in result.get("plots", {}).items()}


def parallel_markdown(sec, env):
    """The parallel section's lines (a heading, a note and the table)."""
    c = sec["config"]
    lines = [f"## Parallel layouts: {shape_str(sec['config_name'], c)}", ""]
    if sec.get("skipped"):
        return lines + [f"Skipped: {sec['skipped']}.", ""]
    mpi = sec.get("mpirun") or {}
    lines += [
        f"ctron alone, {sec['rounds']} round(s) × {sec['steps']} steps per run (first "
        f"{sec['warmup']} dropped); each round visits the layouts in turn, rotated by one per "
        f"round. {sec['threads_total']} threads in all: `single` = one process, `tpN` = "
        f"`{os.path.basename(mpi.get('path') or 'mpirun')} {' '.join(sec['mpirun_args'])} -np N` "
        f"({(mpi.get('version') or 'Open MPI').replace('mpirun (Open MPI)', 'Open MPI')}) "
        f"with `--tp N [--sp]` and "
        f"{sec['threads_total']}/N threads per rank, env "
        + ", ".join(f"{k}={v}" for k, v in sec["mpi_env"].items()) + ". "
        "× single = single ms / layout ms (> 1: faster). Bytes are per step, rank 0's "
        "(`comm_bytes`: ring convention, all-reduce 2(t−1)/t × tensor, all-gather, "
        "reduce-scatter and broadcast (t−1)/t × tensor; `tp_bytes`: the TP group's part by "
        "purpose, block = the f/f̄ (TP) or g/ḡ (SP) collectives in the blocks, regather = SP's "
        "backward re-gather of the kept LN outputs, vocab = embedding/output layer and "
        "cross-entropy). Act. peak / layer 0: rank 0's `act_bytes` / `act_layer_bytes`. "
        "Peak RSS: the largest process.",
        "",
        "| layout | ranks × threads | ms/step | tokens/s | × single | fwd ms | bwd ms | opt ms "
        "| all-reduce MiB | all-gather MiB | reduce-scatter MiB | broadcast MiB "
        "| TP block MiB | TP regather MiB | TP vocab MiB | act. peak MiB | layer 0 MiB "
        "| peak RSS MiB | loss step 1 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:"
        "|---:|---:|",
    ]
    for lay in sec["layouts"]:
        agg = sec["summary"].get(lay["name"])
        rt = f"{lay['ranks']} × {lay['threads_per_rank']}"
        if agg is None:
            err = next((r["error"] for r in sec["runs"] if r["layout"] == lay["name"]
                        and r.get("error")), "no successful run")
            lines.append(f"| {lay['name']} | {rt} | failed: {err} |" + " |" * 16)
            continue
        sp = agg.get("speedup_vs_single")
        sp = "ref" if lay["name"] == "single" else ("–" if sp is None else f"{sp:.2f}")
        cb, tb = agg["comm_bytes"], agg["tp_bytes"]
        lines.append(
            f"| {lay['name']} | {rt} | {fmt(agg['ms_median'])} | {fmt(agg['tokens_per_s'], 0)} "
            f"| {sp} | {fmt(agg['fwd_ms'])} | {fmt(agg['bwd_ms'])} | {fmt(agg['opt_ms'])} | "
            + " | ".join(mib0(cb.get(k)) for k in COMM_TABLE_KINDS) + " | "
            + " | ".join(mib0(tb.get(k)) for k in TP_PURPOSES)
            + f" | {mib(agg['act_bytes'])} | {mib(agg['act_layer_bytes'])} "
            f"| {mib(agg['peak_rss_kib'] * 1024)} | {fmt(agg['loss_step1'], 4)} |")
    lines.append("")
    lines += disturbed_lines(sec["runs"], lambda r: r["layout"])
    flags = "; ".join(f"{lay['name']} = `{' '.join(lay['ctron_args'])}`" for lay in sec["layouts"])
    lines += [f"ctron flags per layout: {flags}.", ""]
    if any((a or {}).get("bytes_vary_between_steps") for a in sec["summary"].values()):
        lines += ["Note: some byte counts differ between steps; the table shows medians.", ""]
    return lines


def phase_cells(ph):
    """fwd | bwd | opt | comm | other cells of a breakdown row."""
    if not ph:
        return ["–"] * len(PHASES)
    return [fmt(ph[k]) for k in PHASES]


def _target_cell(got, target, higher_is_better=True):
    if target is None:
        return ""
    if got is None:
        return f"{'≥' if higher_is_better else '≤'} {target:g}: –"
    met = got >= target if higher_is_better else got <= target
    return f"{'≥' if higher_is_better else '≤'} {target:g}: **{'met' if met else 'not met'}**"


def best_markdown(name, cres, env):
    """A config's "PyTorch best" table: per precision and policy, the fastest PyTorch variant
    of that precision and ctron of the same precision against it, with the issue's targets."""
    best = cres.get("best") or {}
    if not best:
        return []
    peers = ("(fp32: Debian's 1.13 and 2.x explicit/SDPA; bf16: 2.x under autocast, "
             "explicit/SDPA)" if arch_of(cres["config"]) == "gpt2" else
             "(transformers' LlamaForCausalLM with SDPA and with eager attention; bf16: under "
             "autocast)")
    lines = ["PyTorch best: per precision and policy, the fastest PyTorch variant of that "
             f"precision {peers}. ctron / best = PyTorch best ms / ctron ms = ctron's tokens/s over "
             "PyTorch best's (> 1: ctron faster); per round: the fastest variant's run median in "
             "that round / ctron's. MFU: model FLOPs per second / the GEMM peak of the "
             "precision (`ctron peak`, same run). Overhead: ctron's ms over its own `none`.", "",
             "| precision | policy | PyTorch best | its ms/step | ctron ms/step | ctron / best "
             "| per round | target | ctron MFU | target | ctron overhead vs none | target |",
             "|---|---|---|---:|---:|---:|---|---|---:|---|---:|---|"]
    for prec in PRECISIONS:
        for pname, b in (best.get(prec) or {}).items():
            sp, mfu, ov = b.get("speedup"), b.get("ctron_mfu"), b.get("ctron_overhead_pct_vs_none")
            key = (name, prec, pname)
            shown = prec if b.get("peer_precision", prec) == prec else \
                f"{prec} (no {prec} peer ran: vs {b['peer_precision']})"
            lines.append(
                f"| {shown} | {pname} | {impl_label(b['impl'], env)} | {fmt(b['ms_median'])} "
                f"| {fmt(b.get('ctron_ms_median'))} "
                f"| {'–' if sp is None else f'**{sp:.2f}×**'} "
                f"| {', '.join(f'{x:.2f}' for x in b.get('paired_per_round') or [])} "
                f"| {_target_cell(sp, SPEEDUP_TARGETS.get(key))} "
                f"| {'–' if mfu is None else f'{mfu:.0%}'} "
                f"| {_target_cell(mfu, MFU_TARGETS.get(key))} "
                f"| {'ref' if pname == 'none' else '–' if ov is None else f'{ov:+.1f} %'} "
                f"| {_target_cell(None if pname == 'none' else ov, OVERHEAD_TARGETS.get(key), False)} |")
    lines.append("")
    return lines


def peaks_line(result):
    """The GEMM peaks the MFU column uses, or why there is none."""
    peaks = result.get("peaks") or {}
    if not peaks:
        return []
    parts = [f"{prec}: " + (f"{p['gflops']:.1f} GFLOP/s" if "gflops" in p else p["skipped"])
             + (f" (the best cached; {p['measured_gflops']:.1f} measured in this run)"
                if "measured_gflops" in p else "") for prec, p in peaks.items()]
    return ["GEMM peaks (`ctron peak`, measured at the start of this run): "
            + "; ".join(parts) + ".", ""]


def breakdown_markdown(cres, env):
    """A config's step-time table: the phase medians of every (implementation, policy)."""
    lines = ["Step time by phase (median ms over the same timed steps as ms/step; fwd = forward "
             "with the loss, bwd = backward with its recomputation, opt = ctron: clipping + AdamW, "
             "peer: AdamW + zero_grad; comm = 0, one process has no collectives; other = ms − "
             "fwd − bwd − opt, per step: gradient zeroing and the batch; the medians need not "
             "add up to ms/step exactly):", "",
             "| impl | policy | fwd ms | bwd ms | opt ms | comm ms | other ms | ms/step "
             "| bwd / fwd |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for pname in cres["policies"]:
        for impl in impls_of(cres["summary"]):
            agg = cres["summary"].get(impl, {}).get(pname)
            if agg is None:
                continue
            ph = agg.get("phase_ms")
            ratio = fmt(ph["bwd"] / ph["fwd"], 2) if ph and ph["fwd"] > 0 else "–"
            lines.append(f"| {impl_label(impl, env)} | {pname} | "
                         + " | ".join(phase_cells(ph))
                         + f" | {fmt(agg['ms_median'])} | {ratio} |")
    lines.append("")
    return lines


def scaling_verdict(sec, impl):
    """(speed-up of the most threads over the fewest, met?) for impl, or (None, None)."""
    per = sec["summary"].get(impl) or {}
    agg = per.get(str(sec["threads"][-1]))
    if not agg or agg.get("speedup") is None or len(sec["threads"]) < 2:
        return None, None
    return agg["speedup"], agg["speedup"] >= sec["target_speedup"]


def scaling_markdown(sec, env):
    """The thread-scaling section's lines."""
    c = sec["config"]
    t0, tn = sec["threads"][0], sec["threads"][-1]
    lines = [f"## Thread scaling: {shape_str(sec['config_name'], c)}, recompute "
             f"{sec['policy']}", "",
             f"{sec['rounds']} round(s) × {sec['steps']} steps per run (first dropped); each round "
             f"visits the thread counts {', '.join(map(str, sec['threads']))} in turn (rotated by "
             "one per round), ctron and the peer back to back at each, the peer first in even "
             "rounds. Threads = `--threads T` and OMP/OPENBLAS/MKL_NUM_THREADS = T. "
             f"× {t0} = ms/step at {t0} thread(s) / ms/step here (tokens/s ratio), from the "
             "medians; per round: the same ratio of each round's run medians; efficiency = "
             f"× {t0} / (T / {t0}). Phase columns: median fwd/bwd/opt ms, and their own "
             f"× {t0} in brackets.", "",
             f"| impl | threads | ms/step | tokens/s | GFLOP/s | fwd ms | bwd ms | opt ms "
             f"| other ms | × {t0} thread(s) | per round | efficiency |",
             "|---|---:|---:|---:|---:|---|---|---|---:|---:|---|---:|"]
    for impl in sec["impls"]:
        per = sec["summary"].get(impl) or {}
        for t in sec["threads"]:
            agg = per.get(str(t))
            label = impl_label(impl, env)
            if agg is None:
                err = next((r["error"] for r in sec["runs"] if r["impl"] == impl
                            and r["threads"] == t and r.get("error")), "no successful run")
                lines.append(f"| {label} | {t} | failed: {err} |" + " |" * 9)
                continue
            ph, ps = agg.get("phase_ms"), agg.get("phase_speedup")
            cells = []
            for k in ("fwd", "bwd", "opt"):
                if not ph:
                    cells.append("–")
                elif t == t0 or not ps or ps.get(k) is None:
                    cells.append(fmt(ph[k]))
                else:
                    cells.append(f"{fmt(ph[k])} ({ps[k]:.2f}×)")
            sp = "ref" if t == t0 else ("–" if agg.get("speedup") is None
                                        else f"**{agg['speedup']:.2f}×**")
            pr = "" if t == t0 else ", ".join(f"{x:.2f}" for x in agg["speedup_paired_per_round"])
            eff = "" if t == t0 or agg.get("efficiency") is None else f"{agg['efficiency']:.0%}"
            lines.append(f"| {label} | {t} | {fmt(agg['ms_median'])} "
                         f"| {fmt(agg['tokens_per_s'], 0)} | {fmt(agg['gflops'], 1)} | "
                         + " | ".join(cells)
                         + f" | {fmt(ph['other']) if ph else '–'} | {sp} | {pr} | {eff} |")
    lines.append("")
    lines += disturbed_lines(sec["runs"], lambda r: f"{r['impl']} {r['threads']} thread(s)")
    lines += rerun_lines(sec.get("discarded_runs"))
    for impl in sec["impls"]:
        sp, met = scaling_verdict(sec, impl)
        if sp is None:
            continue
        line = (f"{impl_label(impl, env)}: {tn} threads / {t0} = **{sp:.2f}×** tokens/s")
        if impl == "ctron":
            line += (f" — target ≥ {sec['target_speedup']:g}×: "
                     + ("**met**" if met else "**not met**"))
        lines.append(line + ".")
        lines.append("")
    return lines


def markdown(result, md_dir):
    env = result["environment"]
    if not result["configs"]:            # the scaling and/or parallel benchmark alone
        lines = [f"# ctron {'thread scaling' if result.get('scaling') else 'parallel layouts'}"
                 f" — {result['date']}", "",
                 f"CPU: {env['cpu_model']} ({env['cpus_allowed']} CPUs allowed)"
                 + (f", torch {env['torch_version']}" if env.get("torch_version") else "")
                 + (f", torch {env['torch2_version']} (bench/.venv)"
                    if env.get("torch2_version") else "")
                 + ". Absolute times on a shared machine are noise; compare ratios within this "
                 "run.", ""]
        if result.get("scaling"):
            lines += scaling_markdown(result["scaling"], env)
        if result.get("parallel"):
            lines += parallel_markdown(result["parallel"], env)
        lines += plots_markdown(result, md_dir)
        return "\n".join(lines)
    specs = result["policy_specs"]
    lines = [
        f"# ctron vs PyTorch peer — {result['date']}",
        "",
        f"CPU: {env['cpu_model']} ({env['cpus_allowed']} CPUs allowed), threads {env['threads']}"
        + (f", torch {env['torch_version']} (Debian)" if env.get("torch_version") else "")
        + (f", torch {env['torch2_version']} (PyPI, bench/.venv)"
           if env.get("torch2_version") else "")
        + (", torch {} with transformers {} (scripts/peer_env.sh's venv)".format(
            *env["hf_versions"].split()[:2]) if len((env.get("hf_versions") or "").split()) > 1
           else "")
        + f", steps/run {result['steps']} (first dropped), "
        f"rounds {result['rounds']}. Policies (both): `{','.join(result['policies']) or '–'}`; "
        f"ctron-only variants: `{','.join(result['ctron_variants']) or '–'}`.",
        "",
        "ctron flags per policy: " + "; ".join(
            f"{n} = `{' '.join(ctron_policy_args(specs[n]))}`" for n in result["policy_order"])
        + ". Peer: `--recompute none|selective|full` (torch.utils.checkpoint; selective = "
        "the attention core QKᵀ…·V, full = every block; transformers: its gradient "
        "checkpointing of every decoder layer)"
        + (". Implementations: " + ", ".join(
            f"{impl_label(i, env)} (`{i}`)" for i in result["impls"]) if result.get("impls")
           else "")
        + ". ctron bf16 = `--precision bf16`; PyTorch 2.x bf16 = forward and loss under "
        "`torch.autocast(\"cpu\", dtype=torch.bfloat16)`; SDPA = "
        "`F.scaled_dot_product_attention`.",
        "",
        ] + [f"Note: {n}" for n in result.get("impl_notes") or []] + (
            [""] if result.get("impl_notes") else []) + peaks_line(result) + [
        f"{FLOP_FORMULA}; recomputation not counted. Overhead = ms/step over the same "
        "implementation's `none` − 1 (medians). Peak act.: ctron = activation-ledger peak of the "
        "step (`act_bytes`, recomputation included); torch = unique storages autograd saves in "
        "one forward (parameters excluded; checkpoint recomputation is transient and not "
        "included). Per layer: ctron = `act_layer_bytes` (layer 0, LN statistics included); "
        "torch = saved bytes per block. × smaller = ctron none per-layer bytes / this row's. "
        "MFU = GFLOP/s / the GEMM peak of the row's precision. "
        "peer/ctron = the peer's ms / ctron's ms of the same precision and policy (> 1: ctron "
        "faster). "
        "Absolute times on a shared machine are noise; compare ratios within this run.",
        "",
    ]
    for name, cres in result["configs"].items():
        c = cres["config"]
        lines.append(f"## {shape_str(name, c)}")
        lines.append("")
        if arch_of(c) != "gpt2":
            lines += [f"`--arch {arch_of(c)}` (ctron) against transformers' LlamaForCausalLM "
                      "(bench/peers/hf_llama.py: random init, untied head, AdamW as the GPT-2 "
                      "peer's); policies `" + ",".join(cres["policies"]) + "`. GFLOP/s and MFU "
                      "count ctron's model FLOPs of the block (src/memory/flops.h, "
                      "flops_model_block: 6 × matmul parameters × tokens + 12·L·b·s²·h).", ""]
        lines.append(f"{cres['n_params']:,} parameters, {cres['flops_per_step'] / 1e9:.1f} GFLOP "
                     f"per step, {cres['tokens_per_step']} tokens per step.")
        lines.append("")
        lines.append("| impl | policy | ms/step | tokens/s | GFLOP/s | MFU | overhead vs none "
                     "| peak RSS MiB | peak act. MiB | per layer MiB | per layer × smaller "
                     "| peer/ctron |")
        lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for pname in cres["policies"]:
            for impl in impls_of(cres["summary"]):
                per = cres["summary"].get(impl, {})
                if pname not in per:
                    continue
                agg = per[pname]
                label = impl_label(impl, env)
                if agg is None:
                    err = next((r["error"] for r in cres["runs"] if r["impl"] == impl
                                and r["policy"] == pname and r.get("error")), "no successful run")
                    lines.append(f"| {label} | {pname} | failed: {err} | | | | | | | | | |")
                    continue
                ov = agg.get("overhead_pct_vs_none")
                ov = "ref" if pname == "none" and ov is not None else (
                    "–" if ov is None else f"{ov:+.1f} %")
                xs = agg.get("layer_x_smaller_vs_ctron_none")
                xs = "–" if xs is None else f"{xs:.2f}×"
                ratio = peer_over_ctron(cres, impl, pname)
                ratio = "" if ratio is None else f"{ratio:.2f}"
                mfu = agg.get("mfu")
                mfu = "–" if mfu is None else f"{mfu:.0%}"
                lines.append(
                    f"| {label} | {pname} | {fmt(agg['ms_median'])} | {fmt(agg['tokens_per_s'], 0)} "
                    f"| {fmt(agg['gflops'], 1)} | {mfu} | {ov} | {mib(agg['peak_rss_kib'] * 1024)} "
                    f"| {mib(agg['act_bytes_total'])} | {mib(agg['act_bytes_per_layer'])} "
                    f"| {xs} | {ratio} |")
        lines.append("")
        lines += disturbed_lines(cres["runs"], lambda r: f"{r['impl']} {r['policy']}")
        lines += rerun_lines(cres.get("discarded_runs"))
        lines += best_markdown(name, cres, env)
        lines += breakdown_markdown(cres, env)
    if result.get("scaling"):
        lines += scaling_markdown(result["scaling"], env)
    if result.get("parallel"):
        lines += parallel_markdown(result["parallel"], env)
    lines += plots_markdown(result, md_dir)
    return "\n".join(lines)


def plots_markdown(result, md_dir):
    paths = plot_paths(result, md_dir)
    alt = {"throughput": "tokens/s by policy, ctron vs PyTorch",
           "activations": "activation bytes per layer by policy, % of ctron none",
           "breakdown": "step time by phase (forward, backward, optimizer, communication)",
           "precision": "step time by precision and policy, ctron beside PyTorch best"}
    shown = [k for k in ("throughput", "activations", "breakdown", "precision") if k in paths]
    if not shown:
        return []
    lines = ["## Plots", ""]
    for k in shown:
        lines += [f"![{alt[k]}]({paths[k]})", ""]
    return lines


# --------------------------------------------------------------------------
# The plots
# --------------------------------------------------------------------------

def _series(result):
    """[(impl, legend text)] of every implementation in the result's configs."""
    env = result["environment"]
    seen = {}
    for cres in result["configs"].values():
        seen.update(dict.fromkeys(cres["summary"]))
    return [(i, impl_label(i, env) + ("" if is_ctron(i) else " peer")) for i in impls_of(seen)]


def throughput_svg(result):
    panels = []
    for name, cres in result["configs"].items():
        groups = []
        for pname in cres["policies"]:
            bars = {}
            for impl in impls_of(cres["summary"]):
                per = cres["summary"].get(impl, {})
                if pname in per:
                    agg = per[pname]
                    bars[impl] = agg["tokens_per_s"] if agg else None
            if bars:
                groups.append({"label": pname, "bars": bars})
        if groups:
            panels.append({"title": shape_str(name, cres["config"]), "groups": groups})
    if not panels:
        return None
    env = result["environment"]
    return svgplot.bar_chart(
        "Training throughput by activation-memory policy",
        f"{result['date']} · {env['cpu_model']}, {env['threads']} threads · median of "
        f"{result['rounds']} round(s) × {result['steps'] - 1} timed steps · higher is better",
        panels, _series(result), "tokens/s",
        lambda v: f"{v:.0f}" if v >= 10 else f"{v:.1f}",
        note="full = every layer recomputed (ctron: --recompute-method uniform "
             "--recompute-num-layers 1; PyTorch: checkpoint per block). Each panel has its own scale.")


def activations_svg(result):
    panels, ref_name = [], None
    for name, cres in result["configs"].items():
        ref = (cres["summary"].get("ctron", {}).get("none") or {}).get("act_bytes_per_layer")
        rname = "ctron none"
        if not ref:
            ref = (cres["summary"].get("torch", {}).get("none") or {}).get("act_bytes_per_layer")
            rname = "PyTorch none"
        if not ref:
            continue
        ref_name = ref_name or rname
        groups = []
        for pname in cres["policies"]:
            bars = {}
            for impl in impls_of(cres["summary"]):
                per = cres["summary"].get(impl, {})
                if pname in per:
                    lay = (per[pname] or {}).get("act_bytes_per_layer")
                    bars[impl] = 100.0 * lay / ref if lay else None
            if bars:
                groups.append({"label": pname, "bars": bars})
        panels.append({"title": f"{name}: 100 % = {ref / 2**20:.2f} MiB per layer",
                       "groups": groups})
    if not panels:
        return None
    return svgplot.bar_chart(
        "Activation memory per transformer layer, by policy",
        f"{result['date']} · percent of {ref_name}"
        + (" (fp32, 1-byte dropout masks)" if ref_name == "ctron none" else "")
        + " · lower is better",
        panels, _series(result), f"% of {ref_name}",
        lambda v: f"{v:.0f}%" if v >= 9.95 else f"{v:.1f}%",
        ref_value=100.0, ref_label=f"{ref_name} = 100 %",
        note="ctron: act_layer_bytes (what layer 0 keeps between forward and backward, LN "
             "statistics included); PyTorch: bytes autograd saves per block.")


BREAKDOWN_SEGMENTS = [("fwd", "forward", "#4c78a8"), ("bwd", "backward", "#f58518"),
                      ("opt", "optimizer", "#54a24b"),
                      ("comm", "communication (0: one process)", "#e45756"),
                      ("other", "other (batch, zeroing)", "#bab0ac")]


def _breakdown_bar(impl, agg):
    short = impl_spec(impl)["short"]
    if agg is None:
        return {"key": short, "label": short, "parts": {}, "total": None}
    ph = agg.get("phase_ms")
    if ph:
        parts = {k: max(0.0, ph[k]) for k in PHASES}
    else:                                 # an older peer or log: the total only
        parts = {"total": agg["ms_median"]}
    return {"key": short, "label": short, "parts": parts, "total": agg["ms_median"]}


def breakdown_svg(result):
    """Stacked ms/step by phase: one panel per config (a group per policy, a bar per
    implementation), and one for the thread-scaling runs (a group per thread count)."""
    panels, no_split = [], False
    for name, cres in result["configs"].items():
        groups = []
        for pname in cres["policies"]:
            bars = [_breakdown_bar(impl, cres["summary"][impl][pname])
                    for impl in impls_of(cres["summary"]) if pname in cres["summary"][impl]]
            if bars:
                groups.append({"label": pname, "bars": bars})
        if groups:
            panels.append({"title": shape_str(name, cres["config"]), "groups": groups})
    sec = result.get("scaling")
    if sec and sec.get("summary"):
        groups = []
        for t in sec["threads"]:
            bars = [_breakdown_bar(impl, (sec["summary"].get(impl) or {}).get(str(t)))
                    for impl in sec["impls"]]
            groups.append({"label": f"{t} thread{'s' if t != 1 else ''}", "bars": bars})
        panels.append({"title": f"{sec['config_name']} {sec['policy']}: threads", "groups": groups})
    if not panels:
        return None
    for p in panels:
        for g in p["groups"]:
            no_split = no_split or any("total" in b["parts"] for b in g["bars"])
    segs = BREAKDOWN_SEGMENTS + ([("total", "step (no split logged)", "#999999")]
                                 if no_split else [])
    env = result["environment"]
    sub = (f"{result['date']} · {env['cpu_model']} · median ms per step over all timed steps "
           f"· lower is better")
    return svgplot.stacked_bar_chart(
        "Step time by phase: forward, backward, optimizer, communication",
        sub, panels, segs, "ms per step",
        lambda v: f"{v:.0f}",
        note=f"ctron: fwd_ms / bwd_ms / opt_ms of its log (backward includes recomputation, "
             f"optimizer = clipping + AdamW); {impl_label('torch', env)} peer: the same phases "
             f"timed around model(), loss.backward() and AdamW + zero_grad. Communication is 0: "
             f"every run is one process. Segments are per-phase medians; the number on a bar is "
             f"the median ms/step. Main panels: {env['threads']} threads; each panel has its "
             f"own scale.")


def precision_svg(result):
    """ms/step by precision and policy, ctron beside PyTorch best (the fastest PyTorch variant
    of that precision and policy), a panel per config; None for a result without "best"."""
    panels = []
    for name, cres in result["configs"].items():
        groups = []
        for prec in PRECISIONS:
            for pname, b in ((cres.get("best") or {}).get(prec) or {}).items():
                groups.append({"label": f"{prec}+{pname}",
                               "bars": {"ctron": b.get("ctron_ms_median"),
                                        "pytorch-best": b["ms_median"]}})
        if groups:
            panels.append({"title": shape_str(name, cres["config"]), "groups": groups})
    if not panels:
        return None
    env = result["environment"]
    return svgplot.bar_chart(
        "Step time by precision and policy: ctron beside PyTorch best",
        f"{result['date']} · {env['cpu_model']}, {env['threads']} threads · median ms per step "
        f"· lower is better",
        panels, [("ctron", "ctron (fp32, or --precision bf16)"),
                 ("pytorch-best", "PyTorch best (fastest variant of the precision)")],
        "ms per step", lambda v: f"{v:.0f}",
        note="PyTorch best: the fastest of Debian's 1.13 and 2.x explicit/SDPA for fp32, of 2.x "
             "autocast bf16 explicit/SDPA for bf16, per policy (which one: the PyTorch best "
             "table). n/a: ctron of that precision did not run. Each panel has its own scale.")


def write_plots(result, plot_dir):
    os.makedirs(plot_dir, exist_ok=True)
    result["plots"] = {}
    for kind, fn in (("throughput", throughput_svg), ("activations", activations_svg),
                     ("breakdown", breakdown_svg), ("precision", precision_svg)):
        svg = fn(result)
        if svg is None:
            continue
        path = os.path.join(plot_dir, f"{result.get('stem') or result['date']}-{kind}.svg")
        with open(path, "w", encoding="utf-8") as f:
            f.write(svg)
        result["plots"][kind] = path


def shown_path(p):
    """p relative to the repository when inside it, else absolute."""
    p = os.path.abspath(p)
    return os.path.relpath(p, ROOT) if p.startswith(ROOT + os.sep) else p


def write_report(result, out_dir, plot_dir, stem):
    """Writes <stem>.json, <stem>.md and the plots; prints the tables."""
    os.makedirs(out_dir, exist_ok=True)
    write_plots(result, plot_dir)
    jpath = os.path.join(out_dir, f"{stem}.json")
    mpath = os.path.join(out_dir, f"{stem}.md")
    table = markdown(result, out_dir)
    saved = dict(result, plots={k: shown_path(p) for k, p in result["plots"].items()})
    with open(jpath, "w") as f:
        json.dump(saved, f, indent=1)
        f.write("\n")
    with open(mpath, "w") as f:
        f.write(table)
    print(table)
    written = [jpath, mpath] + list(result["plots"].values())
    print("wrote " + ", ".join(shown_path(p) for p in written), file=sys.stderr)


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

def parse_policy_list(ap, flag, text, shared_only):
    out = []
    for name in [x.strip() for x in text.split(",") if x.strip()]:
        try:
            pol = parse_policy(name)
        except ValueError as e:
            ap.error(f"{flag}: {e}")
        if shared_only and not pol["shared"]:
            ap.error(f"{flag}: {name!r} has modifiers; the peer runs only "
                     f"{'|'.join(RECOMPUTE_MODES)} (put ctron-only variants in --ctron-variants)")
        out.append(pol)
    return out


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Benchmark ctron against the PyTorch peer, alternating runs, "
                    "for each activation-memory policy.")
    ap.add_argument("--configs", default=DEFAULT_CONFIGS,
                    help="comma-separated subset of " + ",".join(CONFIGS) +
                         f" (default {DEFAULT_CONFIGS}); "
                         "'' runs only the thread-scaling and parallel benchmarks")
    own = "; ".join(f"{n}: {p[0] or repr('')}" for n, p in CONFIG_POLICIES.items())
    ap.add_argument("--policies", default=None,
                    help="policies run by both ctron and the peer, comma-separated subset of "
                         f"{','.join(RECOMPUTE_MODES)}, for every config (default "
                         f"{DEFAULT_POLICIES}; {own})")
    own = "; ".join(f"{n}: {p[1] or repr('')}" for n, p in CONFIG_POLICIES.items())
    ap.add_argument("--ctron-variants", default=None,
                    help="ctron-only policies, comma-separated: a recompute mode plus '+'-joined "
                         f"modifiers from {'|'.join(DTYPES)} and {'|'.join(MASKS)}, e.g. "
                         f"full+bf16+bits; '' for none; for every config (default "
                         f"{DEFAULT_VARIANTS}; {own})")
    ap.add_argument("--steps", type=int, default=6, help="steps per run, first dropped (default 6)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="rounds; each runs every policy once per implementation (default 2)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="threads for both implementations (default: all CPUs)")
    ap.add_argument("--ctron", default=os.path.join(ROOT, "build", "ctron"),
                    help="ctron binary (default build/ctron)")
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "kjv.txt"),
                    help="training text for ctron (default data/kjv.txt)")
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="Python with PyTorch for the peer (default /usr/bin/python3)")
    ap.add_argument("--peer-python", default=os.path.join(HERE, ".venv", "bin", "peer-python"),
                    help="Python with PyTorch 2.x for the pt2-* peers (default "
                         "bench/.venv/bin/peer-python, made by bench/setup_peer.sh); if it "
                         "cannot import torch, those peers are left out with a note")
    ap.add_argument("--hf-python", default=None,
                    help="Python with torch and transformers for the hf-* peers of the llama "
                         "configs (default: the venv of scripts/peer_env.sh, `scripts/peer_env.sh "
                         "--path`); if it cannot import both, those peers are left out with a note")
    ap.add_argument("--impls", default=DEFAULT_IMPLS,
                    help="implementations, comma-separated subset of " + ",".join(IMPLS)
                         + " (default all; one that cannot run here is left out with a note)")
    ap.add_argument("--bf16-peers", choices=("auto", "always"), default="auto",
                    help="auto (the default): leave the bf16 peers out, with a note and the "
                         "figures, when their PyTorch's CPU bf16 matmul runs below "
                         f"{BF16_SLOW:g}x its fp32 rate here (no native bf16 GEMM: hours per "
                         "step); always: run them regardless")
    ap.add_argument("--no-peak", action="store_true",
                    help="do not measure the GEMM peaks (`ctron peak`) for the MFU column")
    ap.add_argument("--ctron-arg", action="append", default=[],
                    help="extra argument appended to every ctron command (repeatable)")
    ap.add_argument("--peer-only", action="store_true",
                    help="run only the PyTorch peer (no ctron binary needed; variants skipped)")
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="SECONDS",
                    help="before each run, wait up to SECONDS while other processes keep more "
                         f"than {OTHER_LOAD_FLAG} cores busy (0 = off, the default)")
    ap.add_argument("--rerun-disturbed", type=int, default=0, metavar="N",
                    help="after the planned rounds, run again each run of the configs and the "
                         "thread-scaling part that failed or during which other processes kept "
                         f"more than {OTHER_LOAD_FLAG} cores busy, up to N times; the less "
                         "disturbed run counts (default 0)")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="seconds before a run is killed (0 = never; default 1800)")
    ap.add_argument("--out-dir", default=os.path.join(HERE, "results"),
                    help="where <date>.json and <date>.md go (default bench/results)")
    ap.add_argument("--plot-dir", default=None,
                    help="where <date>-throughput.svg and <date>-activations.svg go "
                         "(default: --out-dir; the .md links to them relatively)")
    ap.add_argument("--scaling", default=DEFAULT_SCALING,
                    help="thread counts of the thread-scaling benchmark (ctron and the peer at "
                         "--scaling-config, --scaling-policy), comma-separated, ascending; the "
                         f"first is the reference; '' for none (default {DEFAULT_SCALING})")
    ap.add_argument("--scaling-config", default="S",
                    help="config of the thread-scaling benchmark, one of " + ",".join(CONFIGS)
                         + " (default S)")
    ap.add_argument("--scaling-policy", default="none",
                    help="policy of the thread-scaling benchmark, one of "
                         f"{'|'.join(RECOMPUTE_MODES)} (default none)")
    ap.add_argument("--scaling-steps", type=int, default=4,
                    help="steps per thread-scaling run, first dropped (default 4)")
    ap.add_argument("--scaling-rounds", type=int, default=2,
                    help="rounds of the thread-scaling benchmark (default 2)")
    ap.add_argument("--scaling-target", type=float, default=1.8,
                    help="ctron speed-up (most threads over fewest) the report checks against "
                         "(default 1.8)")
    ap.add_argument("--parallel", default=DEFAULT_PARALLEL,
                    help="parallel layouts run by ctron alone at --parallel-config, comma-separated: "
                         "single or tp<N>, then '+'-joined sp and a recompute mode, e.g. "
                         f"tp2+sp+selective; '' for none (default {DEFAULT_PARALLEL})")
    ap.add_argument("--parallel-config", default="S",
                    help="config of the parallel benchmark, one of " + ",".join(CONFIGS)
                         + " (default S)")
    ap.add_argument("--parallel-steps", type=int, default=6,
                    help="steps per parallel run (default 6)")
    ap.add_argument("--parallel-warmup", type=int, default=1,
                    help="first steps of every parallel run dropped (default 1)")
    ap.add_argument("--parallel-rounds", type=int, default=2,
                    help="rounds of the parallel benchmark, each runs every layout once (default 2)")
    ap.add_argument("--parallel-timeout", type=float, default=600,
                    help="seconds before a parallel run (mpirun and its ranks) is killed "
                         "(0 = never; default 600)")
    ap.add_argument("--mpirun", default="mpirun",
                    help="Open MPI launcher, a name on PATH or a path (default mpirun); "
                         "if not found the parallel benchmark is skipped")
    ap.add_argument("--suffix", default="",
                    help="output names <date>-SUFFIX.json/.md/-throughput.svg... instead of <date>.*")
    ap.add_argument("--replot", metavar="FILE.json", default=None,
                    help="run nothing: rebuild FILE.md and the plots from a saved result")
    args = ap.parse_args(argv)

    names = [x.strip() for x in args.configs.split(",") if x.strip()]
    unknown = [x for x in names if x not in CONFIGS]
    if unknown:
        ap.error(f"--configs {args.configs!r}: unknown {unknown}; "
                 f"expected a comma-separated subset of {','.join(CONFIGS)}")
    args.config_names = list(dict.fromkeys(names))
    impls = [x.strip() for x in args.impls.split(",") if x.strip()]
    bad = [x for x in impls if x not in IMPLS]
    if bad or not impls:
        ap.error(f"--impls {args.impls!r}: unknown {bad}; expected a comma-separated subset of "
                 f"{','.join(IMPLS)}")
    args.impl_list = [i for i in IMPLS if i in impls]    # the registry's order
    if args.parallel_config not in CONFIGS:
        ap.error(f"--parallel-config {args.parallel_config!r}: expected one of {','.join(CONFIGS)}")
    layouts, seen = [], set()
    for lname in [x.strip() for x in args.parallel.split(",") if x.strip()]:
        try:
            lay = parse_layout(lname, args.threads if args.threads >= 1 else 1)
        except ValueError as e:
            ap.error(f"--parallel: {e}")
        if lay["name"] not in seen:
            seen.add(lay["name"])
            layouts.append(lay)
    if layouts and "single" not in seen:    # the reference of every ratio
        layouts.insert(0, parse_layout("single", args.threads if args.threads >= 1 else 1))
    args.layout_list = layouts
    try:
        scal = [int(x) for x in args.scaling.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--scaling {args.scaling!r}: expected comma-separated thread counts")
    if any(t < 1 for t in scal) or scal != sorted(set(scal)):
        ap.error(f"--scaling {args.scaling!r}: expected distinct ascending thread counts >= 1")
    if len(scal) == 1:
        ap.error(f"--scaling {args.scaling!r}: need at least two thread counts (or '' for none)")
    args.scaling_threads = scal
    if args.scaling_config not in CONFIGS:
        ap.error(f"--scaling-config {args.scaling_config!r}: expected one of {','.join(CONFIGS)}")
    if args.scaling_policy not in RECOMPUTE_MODES:
        ap.error(f"--scaling-policy {args.scaling_policy!r}: expected one of "
                 f"{'|'.join(RECOMPUTE_MODES)}")
    args.scaling_pol = parse_policy(args.scaling_policy)
    if scal and (args.scaling_steps < 2 or args.scaling_rounds < 1):
        ap.error("--scaling-steps >= 2 and --scaling-rounds >= 1 expected")
    if not args.config_names and not layouts and not scal:
        ap.error("nothing to run: --configs, --scaling and --parallel are all empty")
    if layouts and args.parallel_steps <= args.parallel_warmup:
        ap.error(f"--parallel-steps {args.parallel_steps} must exceed --parallel-warmup "
                 f"{args.parallel_warmup}")
    if args.parallel_warmup < 0 or args.parallel_rounds < 1 or args.parallel_timeout < 0:
        ap.error("--parallel-warmup >= 0, --parallel-rounds >= 1, --parallel-timeout >= 0 expected")
    if args.suffix and (os.sep in args.suffix or args.suffix.startswith(".")):
        ap.error(f"--suffix {args.suffix!r}: a plain name expected")
    args.mpirun_path = shutil.which(args.mpirun)
    def policy_order(policies, variants):
        shared = parse_policy_list(ap, "--policies", policies, shared_only=True)
        variants = [] if args.peer_only else \
            parse_policy_list(ap, "--ctron-variants", variants, shared_only=False)
        order, seen = [], set()
        for pol in shared + variants:          # a variant equal to a shared policy runs once
            if pol["name"] not in seen:
                seen.add(pol["name"])
                order.append(pol)
        return order

    # each config's policies: --policies/--ctron-variants when given, else its own default
    # (CONFIG_POLICIES) or the general one
    args.config_policies = {}
    for name in args.config_names:
        own = CONFIG_POLICIES.get(name, (DEFAULT_POLICIES, DEFAULT_VARIANTS))
        args.config_policies[name] = policy_order(
            own[0] if args.policies is None else args.policies,
            own[1] if args.ctron_variants is None else args.ctron_variants)
        if not args.config_policies[name]:
            ap.error(f"no policy to run for {name}: --policies and --ctron-variants are both empty")
    args.policy_list = policy_order(
        DEFAULT_POLICIES if args.policies is None else args.policies,
        DEFAULT_VARIANTS if args.ctron_variants is None else args.ctron_variants)
    if not args.policy_list and not args.config_names:
        ap.error("no policy to run: --policies and --ctron-variants are both empty")
    args.policy_by_name = {p["name"]: p for order in args.config_policies.values() for p in order}
    if args.steps < 2:
        ap.error(f"--steps {args.steps}: expected >= 2 (the first step is dropped as warm-up)")
    if args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: expected >= 1")
    if args.threads < 1:
        ap.error(f"--threads {args.threads}: expected >= 1")
    if args.timeout < 0:
        ap.error(f"--timeout {args.timeout}: expected >= 0")
    if args.rerun_disturbed < 0:
        ap.error(f"--rerun-disturbed {args.rerun_disturbed}: expected >= 0")
    if args.wait_quiet < 0:
        ap.error(f"--wait-quiet {args.wait_quiet}: expected >= 0")
    if args.plot_dir is None:
        args.plot_dir = args.out_dir
    if args.hf_python is None:
        args.hf_python = peer_env_python()
    return args


def write_result(out_dir, stem_name, result, md):
    """A benchmark's result as out_dir/stem_name.json and its markdown as .md (which is also printed)."""
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, stem_name)
    with open(stem + ".json", "w") as f:
        json.dump(result, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write(md)
    print(md)


def peer_env_python():
    """The python of scripts/peer_env.sh's venv (its --path: the cache path, whether or not it is
    installed yet; make bench installs it first)."""
    import subprocess
    script = os.path.join(ROOT, "scripts", "peer_env.sh")
    try:
        r = subprocess.run(["bash", script, "--path"], capture_output=True, text=True, timeout=60)
        lines = r.stdout.strip().splitlines() if r.returncode == 0 else []
    except (OSError, subprocess.SubprocessError):
        lines = []
    return lines[-1] if lines else os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
        "ctron", "peer-venv", "bin", "python")


def check_inputs(args):
    if (args.config_names or args.scaling_threads) and not (
            os.path.isfile(args.python) and os.access(args.python, os.X_OK)):
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


PROBES = {"torch": "import torch; print(torch.__version__)",
          "torch, transformers": "import torch, transformers; "
                                 "print(torch.__version__, transformers.__version__)"}


# F.linear (what autocast's linears run), [256, 768] x [768, 768]^T, in fp32 and bf16 on one thread,
# GFLOP per CPU second (process time: a busy shared machine slows both alike), and whether oneDNN's
# bf16 path is available. Without AVX512-BF16/AMX (an AVX2 CPU) PyTorch's CPU bf16 GEMM falls back to
# a scalar reference kernel (at::native::cpublas gemm): several times slower than fp32 per core, and
# slower still in the backward's transposed GEMMs, so that a bf16 peer step at S takes minutes.
BF16_PROBE = """
import json, time, torch, torch.nn.functional as F
torch.set_num_threads(1)
def rate(dt):
    x, w = torch.randn(256, 768).to(dt), torch.randn(768, 768).to(dt)
    F.linear(x, w)
    n, t = 0, time.process_time()
    while n < 3 or time.process_time() - t < 0.3:
        F.linear(x, w)
        n += 1
    return 2 * 256 * 768 * 768 * n / (time.process_time() - t) / 1e9
onednn = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: None)()
print(json.dumps({"fp32_gflops": rate(torch.float32), "bf16_gflops": rate(torch.bfloat16),
                  "onednn_bf16": onednn}))
"""
BF16_SLOW = 0.5      # bf16 peers are left out below this fraction of their fp32 GEMM rate


def probe_bf16(python, env):
    """The BF16_PROBE figures of a peer's Python, or {"error": why}."""
    r = run_child([python, "-c", BF16_PROBE], env, 300, ROOT)
    recs, _ = parse_json_lines(r["stdout"])
    if r["rc"] != 0 or not recs:
        return {"error": tail(r["stderr"], 1) or f"exit status {r['rc']}"}
    return recs[-1]


def probe_torch(python, what="torch"):
    """(the version(s) python imports -- "torch" or "torch transformers" --, None), or (None,
    why not)."""
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        return None, f"{python} not found or not executable"
    r = run_child([python, "-c", PROBES[what]], dict(os.environ), 300, ROOT)
    lines = r["stdout"].strip().splitlines()
    if r["rc"] != 0 or not lines:
        return None, f"{python} cannot import {what}: {tail(r['stderr'], 1) or r['rc']}"
    return lines[-1].strip(), None


def ctron_help_has(args, command, flag):
    """Whether `ctron COMMAND --help` mentions flag (a feature another branch may not have
    merged yet)."""
    r = run_child([args.ctron, command, "--help"], dict(os.environ), 60, ROOT)
    return flag in r["stdout"] + r["stderr"]


def resolve_impls(args):
    """The implementations this run can have, out of --impls: the peers whose Python imports
    torch, ctron bf16 when `ctron train` has --precision. Returns (impls, {"debian"|"venv":
    torch version}, notes on what was left out and why; each note is also printed)."""
    families = {arch_of(CONFIGS[n]) for n in args.config_names}
    if args.scaling_threads:
        families.add(arch_of(CONFIGS[args.scaling_config]))
    # ctron, and the peers of the families that run (the hf-* peers only with a llama config)
    wanted = [i for i in args.impl_list if (not is_ctron(i) or not args.peer_only)
              and (is_ctron(i) or impl_spec(i)["family"] in families)]
    notes, versions, probes = [], {}, {}
    installer = {"venv": " (bench/setup_peer.sh installs it; see bench/README.md).",
                 "hf": " (scripts/peer_env.sh installs it; make bench runs it)."}
    for which, python, what in (("debian", args.python, "torch"),
                                ("venv", args.peer_python, "torch"),
                                ("hf", args.hf_python, "torch, transformers")):
        mine = [i for i in wanted if impl_spec(i).get("python") == which]
        if not mine:
            continue
        versions[which], why = probe_torch(python, what)
        if why:
            alone = (" Debian's PyTorch 1.13 runs alone as the peer."
                     if which == "venv" and "torch" in wanted else "")
            notes.append(f"{', '.join(mine)} left out: {why}"
                         + installer.get(which, ".") + alone)
            wanted = [i for i in wanted if i not in mine]
            continue
        slow = [i for i in mine if impl_precision(i) == "bf16"]
        if slow and args.bf16_peers == "auto":
            env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
                       MKL_NUM_THREADS=str(args.threads))
            probe = probes[which] = probe_bf16(python, env)
            f32, b16 = probe.get("fp32_gflops"), probe.get("bf16_gflops")
            if f32 and b16 is not None and b16 < BF16_SLOW * f32:
                notes.append(
                    f"{', '.join(slow)} left out: PyTorch {versions[which].split()[0]}'s CPU bf16 "
                    f"matmul runs at {b16:.1f} GFLOP per CPU second here against {f32:.1f} in "
                    f"fp32 (F.linear 256x768x768, one thread; oneDNN bf16 "
                    f"{'available' if probe.get('onednn_bf16') else 'unavailable'}: without "
                    f"AVX512-BF16/AMX it falls back to a reference GEMM), so the fp32 peer is "
                    f"the stronger one and a bf16 run would take many minutes. ctron bf16 is set "
                    f"against the fastest fp32 peer instead (--bf16-peers always runs them).")
                wanted = [i for i in wanted if i not in slow]
    if "ctron-bf16" in wanted and not ctron_help_has(args, "train", "--precision"):
        notes.append("ctron-bf16 left out: `ctron train --help` has no --precision (this "
                     "build of ctron has no bf16 training yet).")
        wanted.remove("ctron-bf16")
    for n in notes:
        print(f"note: {n}", file=sys.stderr, flush=True)
    versions["bf16_probes"] = probes
    return wanted, versions, notes


def measure_peaks(args, impls, env):
    """{precision: the JSON of `ctron peak --json [--precision bf16]` (gflops, ...) or
    {"skipped": why}} for the precisions this run has; {} with --peer-only or --no-peak."""
    out = {}
    if args.peer_only or args.no_peak:
        return out
    for prec in [p for p in PRECISIONS if any(impl_precision(i) == p for i in impls)]:
        cmd = [args.ctron, "peak", "--threads", str(args.threads), "--json"]
        if prec == "bf16":
            if not ctron_help_has(args, "peak", "--precision"):
                out[prec] = {"skipped": "`ctron peak --help` has no --precision: no bf16 peak, "
                                        "no bf16 MFU"}
                print(f"note: {out[prec]['skipped']}", file=sys.stderr, flush=True)
                continue
            cmd += ["--precision", "bf16"]
        print(f"[peak] {' '.join(cmd[1:])} ...", file=sys.stderr, flush=True)
        r = run_child(cmd, env, 600, ROOT)
        recs, _ = parse_json_lines(r["stdout"])
        got = next((x for x in recs if isinstance(x.get("gflops"), (int, float))), None)
        out[prec] = dict(got, cmd=cmd) if r["rc"] == 0 and got else {
            "skipped": f"`{' '.join(cmd[1:])}` failed (exit status {r['rc']}): "
                       f"{tail(r['stderr'], 1)}", "cmd": cmd}
        if "skipped" not in out[prec] and (got.get("kept_gflops") or 0) > got["gflops"]:
            # the cache's higher figure, as `ctron train` takes it: a busy machine measures low
            out[prec].update(measured_gflops=got["gflops"], gflops=got["kept_gflops"])
        p = out[prec]
        print(f"[peak] {prec}: " + (p["skipped"] if "skipped" in p else f"{p['gflops']:.1f} GFLOP/s"
                                    + (f" (the cached best; measured {p['measured_gflops']:.1f} now)"
                                       if "measured_gflops" in p else "")),
              file=sys.stderr, flush=True)
    return out


def schedule(policies, rounds, impls):
    """[(round, policy, impl)] in run order.

    Round r visits the policies rotated left by r-1; within a shared policy the
    two implementations run back to back, ctron first in odd rounds and the
    peer first in even rounds; ctron-only variants run ctron alone.
    """
    out = []
    n = len(policies)
    for rnd in range(1, rounds + 1):
        k = (rnd - 1) % n
        for pol in policies[k:] + policies[:k]:
            these = [i for i in impls if i == "ctron" or pol["shared"]]   # variants: ctron fp32
            if rnd % 2 == 0:
                these = these[::-1]
            out += [(rnd, pol, impl) for impl in these]
    return out


def add_missing_phases(result):
    """A result saved before the phase split: derive it from the ctron runs' step logs (the
    peer's old output has no split; its bar then shows the total only)."""
    for cres in result.get("configs", {}).values():
        for r in cres.get("runs", []):
            if "phases_timed" not in r and r.get("impl") == "ctron" and r.get("log"):
                r["phases_timed"] = step_phases(unique_steps(r["log"]))
        for impl, per in cres.get("summary", {}).items():
            for pname, agg in per.items():
                if agg is not None and "phase_ms" not in agg:
                    agg["phase_ms"] = phase_medians(
                        [r for r in cres["runs"] if r["impl"] == impl and r["policy"] == pname
                         and r["ok"]])


def replot(args):
    path = args.replot
    try:
        with open(path) as f:
            result = json.load(f)
    except (OSError, ValueError) as e:
        print(f"run_bench.py: error: cannot read {path}: {e}", file=sys.stderr)
        return 2
    if "policy_specs" not in result:
        print(f"run_bench.py: error: {path} predates --policies (no policy_specs); "
              f"nothing to replot", file=sys.stderr)
        return 2
    add_missing_phases(result)
    out_dir = os.path.dirname(os.path.abspath(path))
    plot_dir = args.plot_dir if args.plot_dir != args.out_dir else out_dir
    write_plots(result, plot_dir)
    md = os.path.splitext(path)[0] + ".md"
    table = markdown(result, out_dir)
    with open(md, "w") as f:
        f.write(table)
    print(table)
    print("wrote " + ", ".join([md] + list(result["plots"].values())), file=sys.stderr)
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.replot:
        return replot(args)
    try:
        check_inputs(args)
    except BenchError as e:
        print(f"run_bench.py: error: {e}", file=sys.stderr)
        return 2

    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(args.threads)

    impls, versions, impl_notes = resolve_impls(args)
    if not impls:
        print("run_bench.py: error: no implementation left to run", file=sys.stderr)
        return 2
    peaks = measure_peaks(args, impls, env)
    # every policy some config runs, in order (each config's own list is in its section)
    orders = list(args.config_policies.values()) or [args.policy_list]
    policies = list({p["name"]: p for order in orders for p in order}.values())
    date = time.strftime("%Y-%m-%d")
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    load_start = os.getloadavg()
    result = {"date": date, "started": started, "steps": args.steps, "rounds": args.rounds,
              "policies": [p["name"] for p in policies if p["shared"]],
              "ctron_variants": [p["name"] for p in policies if not p["shared"]],
              "policy_order": [p["name"] for p in policies],
              "policy_specs": {p["name"]: p for p in policies},
              "ctron_policy_args": {p["name"]: ctron_policy_args(p) for p in policies},
              "peer_policy_args": {p["name"]: peer_policy_args(p) for p in policies if p["shared"]},
              "flop_formula": FLOP_FORMULA, "eq7_formula": EQ7_FORMULA,
              "wait_quiet_s": args.wait_quiet, "other_load_flag_cores": OTHER_LOAD_FLAG,
              "impls": impls, "impl_specs": {i: impl_spec(i) for i in impls},
              "impl_notes": impl_notes, "peaks": peaks,
              "configs": {}}
    torch_version = versions.get("debian")
    failed = False
    # someone may rebuild build/ctron while this runs: compare its hash before and after
    ctron_sha_start = None if args.peer_only else file_sha256(args.ctron)

    with tempfile.TemporaryDirectory(prefix="ctron-bench-") as workdir:
        for name in args.config_names:
            c = CONFIGS[name]
            policies = args.config_policies[name]
            cimpls = impls_for(c, impls)
            avail = meminfo_kib("MemAvailable")
            est = {impl: estimate_peak_bytes(c, impl) for impl in cimpls}
            for impl, b in est.items():
                if avail and b > avail * 1024 * 0.9:
                    print(f"warning: [{name}] {impl} with recompute none may need about "
                          f"{b / 2**30:.1f} GiB; {avail / 2**20:.1f} GiB available",
                          file=sys.stderr, flush=True)
            plan = schedule(policies, args.rounds, cimpls)

            def one(rnd, seq, pol, impl, label):
                print(f"{label}: running ...", file=sys.stderr, flush=True)
                tag = f"{name}-{pol['name']}-{impl}-r{rnd}"
                waited = wait_quiet(args.wait_quiet, label)
                if is_ctron(impl):
                    r = run_ctron(args, c, pol, env, workdir, tag, impl)
                else:
                    r = run_peer(args, c, pol, env, tag, impl)
                r["round"] = rnd
                r["seq"] = seq
                r["waited_s"] = waited
                detail = ""
                if r["ok"]:
                    act = r["act_layer_bytes"] if is_ctron(impl) else \
                        r["summary"]["saved_bytes_per_layer"]
                    detail = (f", loss {r['loss_first']:.3f} -> {r['loss_last']:.3f}, peak RSS "
                              f"{r['peak_rss_kib'] / 1024:.0f} MiB, per layer {mib(act)} MiB")
                report_run(label, r, detail)
                return r

            runs = []
            for seq, (rnd, pol, impl) in enumerate(plan, 1):
                runs.append(one(rnd, seq, pol, impl, f"[{name} round {rnd}/{args.rounds} run "
                                                     f"{seq}/{len(plan)}] {impl} {pol['name']}"))
            discarded = rerun_disturbed(
                args, runs, len(plan),
                lambda r, seq: one(r["round"], seq, args.policy_by_name[r["policy"]], r["impl"],
                                   f"[{name} re-run {seq}, round {r['round']}] {r['impl']} "
                                   f"{r['policy']}"))
            failed = failed or any(not r["ok"] for r in runs)
            summ, ratios, best = summarise_config(c, policies, runs, cimpls, args.rounds, peaks)
            cres = {"config": dict(c), "n_params": n_params(c),
                    "flops_per_step": flops_per_step(c),
                    "eq7_flops_per_step": eq7_flops_per_step(c),
                    "tokens_per_step": c["seq"] * c["batch"],
                    "memory_estimate_bytes": est, "mem_available_kib": avail,
                    "policies": [p["name"] for p in policies],
                    "summary": summ, "ratios": ratios, "best": best, "runs": runs,
                    "discarded_runs": discarded}
            for impl in impls:
                tnone = summ.get(impl, {}).get("none") if not is_ctron(impl) else None
                if tnone and tnone.get("n_params_peer") not in (None, cres["n_params"]):
                    print(f"warning: peer {impl} has {tnone['n_params_peer']} parameters, "
                          f"formula says {cres['n_params']}", file=sys.stderr)
            result["configs"][name] = cres
        scal, scal_failed = run_scaling_bench(
            args, scaling_impls(impls, CONFIGS[args.scaling_config]), workdir)
        if scal is not None:
            result["scaling"] = scal
        failed = failed or scal_failed
        par, par_failed = run_parallel_bench(args, workdir)
        if par is not None:
            result["parallel"] = par
        failed = failed or par_failed

    result["environment"] = environment(args, torch_version, versions.get("venv"),
                                        versions.get("hf"), versions.get("bf16_probes"))
    if not args.peer_only:
        result["environment"]["ctron"]["sha256_start"] = ctron_sha_start
        if ctron_sha_start != result["environment"]["ctron"]["sha256"]:
            print(f"warning: {args.ctron} changed during the benchmark (rebuilt?); runs may mix "
                  f"two binaries", file=sys.stderr)
    result["environment"]["loadavg_start"] = load_start   # 1/5/15-min load: a noise hint
    result["environment"]["loadavg_end"] = os.getloadavg()
    result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    result["stem"] = f"{date}-{args.suffix}" if args.suffix else date
    write_report(result, args.out_dir, args.plot_dir, result["stem"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
