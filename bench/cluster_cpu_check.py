#!/usr/bin/env python3
"""The cluster planner's CPU check (issue 16): predict ctron's own step time on this machine's
CPU with the same time model as the GPUs, from measured constants — the GEMM peak of one thread
(`ctron peak --threads 1`), the memory bandwidth of one thread (a NumPy copy) and the ranks' link
(MPI_Allreduce bus bandwidth) — and compare with measured step times of `ctron train`, single
process and under `mpirun --oversubscribe -np 2` (--tp 2, --sp, data parallel). Each rank is one
"GPU" of one thread; efficiencies are 1 (the constants are measured, not spec), no wave
quantisation, and overlap_cost 1 (ctron's collectives block).

    /usr/bin/python3 bench/cluster_cpu_check.py [--ctron build/ctron] [--steps 8] [--out bench/results/DATE-cluster-cpu.md]
"""
import argparse, datetime, json, os, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = dict(layers=4, hidden=256, heads=4, seq=256, batch=4, vocab=2048)
LAYOUTS = [  # name, ranks, ctron train flags, planner --layout
    ("single", 1, [], "t=1,p=1,d=1,mb=4,sp=off,recompute=none"),
    ("single, selective", 1, ["--recompute", "selective"], "t=1,p=1,d=1,mb=4,sp=off,recompute=selective"),
    ("single, full", 1, ["--recompute", "full"], "t=1,p=1,d=1,mb=4,sp=off,recompute=full"),
    ("tp2", 2, ["--tp", "2"], "t=2,p=1,d=1,mb=4,sp=off,recompute=none"),
    ("tp2+sp", 2, ["--tp", "2", "--sp"], "t=2,p=1,d=1,mb=4,sp=on,recompute=none"),
    ("tp2+sp+selective", 2, ["--tp", "2", "--sp", "--recompute", "selective"], "t=2,p=1,d=1,mb=4,sp=on,recompute=selective"),
]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_WAIT_POLICY="PASSIVE",
           OMP_NUM_THREADS="1")


def peak_gflops(ctron, tmp):
    out = subprocess.run([ctron, "peak", "--threads", "1", "--sizes", "512,1024", "--repeats", "5", "--json", "--cache",
                          os.path.join(tmp, "peak.json")], env=ENV, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["gflops"]


def mem_bandwidth():
    import numpy as np
    a = np.ones(1 << 25, dtype=np.float32)
    b = np.empty_like(a)
    best = 1e30
    for _ in range(7):
        t = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t)
    return 2 * a.nbytes / best   # read + write


def link_bandwidth(tmp):
    exe = os.path.join(tmp, "mpi_bw")
    subprocess.run(["mpicc", "-O2", os.path.join(ROOT, "bench", "mpi_allreduce_bw.c"), "-o", exe], check=True)
    out = subprocess.run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", "2", exe, str(1 << 21), "10"],
                         env=ENV, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[0])


def measure(ctron, ranks, flags, steps, tmp, data):
    log = os.path.join(tmp, "log.jsonl")
    if os.path.exists(log):
        os.remove(log)
    m = MODEL
    cmd = [ctron, "train", "--data", data, "--threads", "1", "--steps", str(steps), "--print-every", str(steps),
           "--log", log, "--layers", str(m["layers"]), "--hidden", str(m["hidden"]), "--heads", str(m["heads"]),
           "--seq", str(m["seq"]), "--batch", str(m["batch"]), "--vocab", str(m["vocab"])] + flags
    if ranks > 1:
        cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks)] + cmd
    subprocess.run(cmd, env=ENV, capture_output=True, text=True, check=True)
    ms = [json.loads(l)["ms"] for l in open(log) if l.startswith("{\"step\"")]
    return statistics.median(ms[2:]) / 1e3   # the first steps warm up


def predict(ctron, gpus, layout, peak, membw, link):
    m = MODEL
    cmd = [ctron, "plan", "--cluster", "--peak-tflops", str(peak / 1e3), "--mem", "64GiB", "--hbm-gbs", str(membw / 1e9),
           "--nvlink-gbs", str(link / 1e9), "--internode-gbs", str(link / 1e9), "--sms", "1", "--gemm-eff", "1",
           "--hbm-eff", "1", "--link-eff", "1", "--overlap-cost", "1", "--gpus-per-node", str(gpus), "--nodes", "1",
           "--precision", "fp32", "--reserve", "1GiB", "--layers", str(m["layers"]), "--hidden", str(m["hidden"]),
           "--heads", str(m["heads"]), "--vocab", str(m["vocab"]), "--seq", str(m["seq"]), "--global-batch",
           str(m["batch"]), "--layout", layout, "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["layouts"][0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ctron", default=os.path.join(ROOT, "build", "ctron"))
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "kjv.txt"))
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results",
                                                  datetime.date.today().isoformat() + "-cluster-cpu.md"))
    a = ap.parse_args()
    for path in (a.ctron, a.data):
        if not os.path.exists(path):
            sys.exit(f"cluster_cpu_check: {path} is missing (build ctron; make data)")
    with tempfile.TemporaryDirectory() as tmp:
        peak = peak_gflops(a.ctron, tmp)
        membw = mem_bandwidth()
        link = link_bandwidth(tmp)
        rows = []
        for name, ranks, flags, layout in LAYOUTS:
            meas = measure(a.ctron, ranks, flags, a.steps, tmp, a.data)
            pred = predict(a.ctron, ranks, layout, peak, membw, link)
            rows.append((name, ranks, flags, layout, meas, pred))
            print(f"{name:20s} measured {meas:.3f} s  predicted {pred['step_s']:.3f} s  "
                  f"{100 * (pred['step_s'] / meas - 1):+.1f}%", flush=True)
    m = MODEL
    lines = [f"# Cluster planner on this CPU — {datetime.date.today().isoformat()}", "",
             "`bench/cluster_cpu_check.py`: ctron's own step time predicted by `ctron plan --cluster` with this "
             "machine's measured constants (one thread per rank is one \"GPU\"; efficiencies 1, no wave quantisation, "
             "overlap cost 1), against `ctron train` (median step after two warm-up steps). The machine is shared "
             "(2 cores, other jobs running): measured times carry that noise.", "",
             f"Constants: GEMM peak {peak:.1f} GFLOP/s (`ctron peak --threads 1`, fp32); memory bandwidth "
             f"{membw / 1e9:.2f} GB/s (one thread, NumPy copy, read + write); link {link / 1e9:.2f} GB/s "
             f"(MPI_Allreduce bus bandwidth, 2 ranks, 8 MiB).", "",
             f"Model: L={m['layers']} h={m['hidden']} a={m['heads']} s={m['seq']} b={m['batch']} v={m['vocab']}, fp32, "
             f"dropout 0.1; `mpirun --oversubscribe --bind-to none -np 2` for two ranks, `--threads 1` each.", "",
             "| layout | ranks | ctron train flags | planner --layout | measured s | predicted s | error | "
             "predicted gemm / attention / elementwise / head / recompute / tp_comm / optimizer s |",
             "|---|---:|---|---|---:|---:|---:|---|"]
    for name, ranks, flags, layout, meas, pred in rows:
        p = pred["parts"]
        parts = " / ".join(f"{p[k]:.3f}" for k in ("gemm", "attention", "elementwise", "head", "recompute", "tp_comm",
                                                   "optimizer"))
        lines.append(f"| {name} | {ranks} | `{' '.join(flags) or '(none)'}` | `{layout}` | {meas:.3f} | "
                     f"{pred['step_s']:.3f} | {100 * (pred['step_s'] / meas - 1):+.1f}% | {parts} |")
    errs = [abs(pred["step_s"] / meas - 1) for *_, meas, pred in rows]
    lines += ["", f"Mean |error| {100 * statistics.mean(errs):.1f}%, largest {100 * max(errs):.1f}%.", ""]
    with open(a.out, "w") as f:
        f.write("\n".join(lines))
    print("wrote", a.out)


if __name__ == "__main__":
    main()
