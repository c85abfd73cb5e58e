"""The training loop and the summary line the PyTorch peers share (torch_gpt.py, hf_llama.py).

Each peer builds its model, optimizer and SavedTensorMeter, and gives `train` a function
forward(idx, tgt, metered) -> loss that runs the forward and the loss (under the meter's hooks
when metered, which is step 1's forward only). `train` times each step (random batch, forward,
backward, AdamW, zero_grad), prints one JSON record per step, and `summary` the last line:

    {"step", "ms", "loss", "fwd_ms", "bwd_ms", "opt_ms"}      per step
    {"peer": "torch", ..., "saved_bytes_*", "ms_median", ...}  once

CPU eager execution is synchronous: each phase has finished when its call returns, so the
phase split needs no profiler. Runs under Debian's PyTorch 1.13 as under 2.x.
"""

import json
import os
import resource
import statistics
import sys
import time

import torch


def check_threads(prog, threads, names=("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")):
    """Warns when the thread variables differ from --threads (they must be set before Python
    starts), then sets torch's intra-op threads."""
    for var in names:
        val = os.environ.get(var)
        if val != str(threads):
            print(f"{prog}: warning: {var}={val!r}, expected {threads} "
                  f"(set it before starting Python)", file=sys.stderr)
    torch.set_num_threads(threads)


def phase_median(recs, key):
    """Median of one phase over steps 2..N (step 1 when only one step ran)."""
    vals = [r[key] for r in (recs[1:] if len(recs) > 1 else recs)]
    return statistics.median(vals) if vals else None


def train(args, forward, opt):
    """args.steps steps on random (idx, tgt) batches of args.batch x args.seq tokens < args.vocab
    (generator seeded args.seed + 1). Returns the per-step records."""
    gen = torch.Generator().manual_seed(args.seed + 1)
    recs = []
    for step in range(1, args.steps + 1):
        t0 = time.perf_counter()
        idx = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen)
        tgt = torch.randint(0, args.vocab, (args.batch, args.seq), generator=gen)
        t_fwd = time.perf_counter()
        loss = forward(idx, tgt, step == 1)        # the warm-up step's forward is metered
        t_bwd = time.perf_counter()
        loss.backward()
        t_opt = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t1 = time.perf_counter()
        rec = {"step": step, "ms": round((t1 - t0) * 1e3, 3), "loss": loss.item(),
               "fwd_ms": round((t_bwd - t_fwd) * 1e3, 3),
               "bwd_ms": round((t_opt - t_bwd) * 1e3, 3),
               "opt_ms": round((t1 - t_opt) * 1e3, 3)}
        recs.append(rec)
        print(json.dumps(rec), flush=True)
    return recs


def summary(args, model, meter, recs, extra):
    """The summary line: extra (the peer's own fields) plus the saved-activation bytes by region
    ("block<i>", "embed", "head"), the step-time medians (step 1 dropped) and the peak RSS."""
    regions = meter.by_region()
    block_bytes = [regions.get(f"block{i}", 0) for i in range(args.layers)]
    step_ms = [r["ms"] for r in recs]
    timed = step_ms[1:] if len(step_ms) > 1 else step_ms
    out = {"peer": "torch"}
    out.update(extra)
    out.update({
        "threads": torch.get_num_threads(),
        "n_params": sum(p.numel() for p in model.parameters()),
        "n_trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "saved_bytes_total": sum(regions.values()),
        "saved_bytes_per_layer": (sum(block_bytes) / args.layers) if args.layers else 0,
        "saved_bytes_blocks": block_bytes,
        "saved_bytes_embed": regions.get("embed", 0),
        "saved_bytes_head": regions.get("head", 0),
        "ms_median": statistics.median(timed) if timed else None,
        "ms_steps": step_ms,
        # medians over the same steps as ms_median: forward (incl. the loss), backward
        # (incl. checkpoint recomputation), AdamW + zero_grad; the rest of ms is the batch
        "fwd_ms_median": phase_median(recs, "fwd_ms"),
        "bwd_ms_median": phase_median(recs, "bwd_ms"),
        "opt_ms_median": phase_median(recs, "opt_ms"),
        "loss_first": recs[0]["loss"] if recs else None,
        "loss_last": recs[-1]["loss"] if recs else None,
        "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    })
    print(json.dumps(out), flush=True)
    return out
