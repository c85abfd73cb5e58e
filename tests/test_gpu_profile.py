#!/usr/bin/env python3
"""scripts/gpu_profile.py on an ncu CSV in Nsight Compute's column layout: names cut at their arguments
and template arguments, units scaled, thousands separators read, launches summed per kernel, and a file
without ncu's header refused (exit 2)."""
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
script = os.path.join(here, "..", "scripts", "gpu_profile.py")
sys.path.insert(0, os.path.dirname(script))
import gpu_profile  # noqa: E402

HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
        '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def row(i, name, unit, value, metric="gpu__time_duration.sum"):
    return (f'"{i}","77","ctron","127.0.0.1","{name}","1","13","(256, 1, 1)","(96, 1, 1)","0","9.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}"')


CSV = "\n".join(["==PROF== Connected to process 77 (ctron)", HEAD,
                 row(0, "void layernorm_forward_kernel<float, 4>(float *, const float *, int)", "nsecond", "1,500"),
                 row(1, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "usecond", "2.5"),
                 row(2, "void layernorm_forward_kernel<float, 4>(float *, const float *, int)", "nsecond", "500"),
                 row(3, "adamw_kernel(float *, float *, float *, int)", "msecond", "0.25"),
                 row(3, "adamw_kernel(float *, float *, float *, int)", "msecond", "9", metric="sm__cycles_elapsed.avg"),
                 "==PROF== Disconnected from process 77"])
fails = 0


def check(cond, what):
    global fails
    if not cond:
        fails += 1
        print("FAIL:", what)


rows = gpu_profile.read_kernels(CSV)
check(len(rows) == 4, f"4 duration rows (the other metric left out), got {len(rows)}")
total, table = gpu_profile.summarize(rows)
check(abs(total - 0.2545) < 1e-12, f"total 0.2545 ms (1500 + 2500 + 500 + 250000 ns), got {total}")
by = {r["kernel"]: r for r in table}
check(set(by) == {"layernorm_forward_kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
                  "adamw_kernel"}, f"names cut at arguments and templates: {sorted(by)}")
ln = by.get("layernorm_forward_kernel", {})
check(ln.get("launches") == 2 and abs(ln.get("ms", 0) - 0.002) < 1e-12, f"layernorm: 2 launches, 0.002 ms: {ln}")
check(table[0]["kernel"] == "adamw_kernel", "sorted by time, the largest first")
with tempfile.TemporaryDirectory() as d:
    p = os.path.join(d, "k.csv")
    open(p, "w").write(CSV)
    out = subprocess.run([sys.executable, script, p, "--steps", "2", "--step-ms", "1.0"], capture_output=True, text=True)
    check(out.returncode == 0, f"exit 0: {out.stderr}")
    check("0.13 ms a step" in out.stdout and "0.87 ms outside kernels" in out.stdout,
          f"per-step figures: {out.stdout.splitlines()[:1]}")
    check("| `adamw_kernel` | 1 | 0.125 | 98.2 % |" in out.stdout, f"the table's first row: {out.stdout}")
    open(p, "w").write("not a profile\n")
    bad = subprocess.run([sys.executable, script, p], capture_output=True, text=True)
    check(bad.returncode == 2 and "no ncu CSV header" in bad.stderr, f"refused: {bad.returncode} {bad.stderr}")
print(f"{'FAIL' if fails else 'ok'}: test_gpu_profile, {fails} failed")
sys.exit(1 if fails else 0)
