#!/usr/bin/env python3
"""The cuda-static check: no hot CUDA kernel spills registers, on any architecture it is built for.

ptxas -v (CMakeLists.txt; scripts/ptxas_log.sh keeps its report as <object>.ptxas.log) prints, for
every kernel and every cubin architecture, "N bytes stack frame, N bytes spill stores, N bytes spill
loads". This reads those reports and fails, naming the kernel and the architecture, when a hot
kernel (each name below matches every instantiation whose mangled name contains it) has spill
stores, or when a hot kernel is missing from an architecture's report (renamed: update the list).

usage: check_spills.py OBJECT_DIR "sm_80;sm_90;compute_90" [SOURCES]   (SOURCES: .cu files expected)
"""
import os
import re
import sys

HOT = [
    # flash attention: every tile product of the forward and backward
    "flash_fwd_bf16", "flash_fwd_f32", "flash_bwd_dkdv_bf16", "flash_bwd_dq_bf16", "flash_bwd_dkdv_f32",
    "flash_bwd_dq_f32",
    # the rows of standard attention, layer norm, the loss, GeLU and dropout, the optimizer
    "attn_softmax_rows", "attn_softmax_backward_rows", "ln_forward_kernel", "ln_backward_rows_kernel",
    "ln_dwdb_partial_kernel", "ce_rows_kernel", "ce_vocab_partial_kernel", "ce_vocab_backward_kernel",
    "bias_gelu_kernel", "gelu_backward_kernel", "dropout_residual_kernel", "adamw_vec_kernel",
    "adamw_multi_kernel", "stats_chunks_kernel", "sumsq_chunks_kernel",
]

ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_[0-9]+[a-z]?)'")
PROPS = re.compile(r"Function properties for (\S+)")
SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def read_reports(obj_dir):
    """{(kernel, arch): (stack, spill stores, spill loads)} from every *.ptxas.log under obj_dir."""
    found, logs = {}, []
    for root, _, files in os.walk(obj_dir):
        logs += [os.path.join(root, f) for f in files if f.endswith(".ptxas.log")]
    for path in logs:
        arch, entry, props = None, None, None
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = ENTRY.search(line)
                if m:
                    entry, arch = m.group(1), m.group(2)
                    continue
                m = PROPS.search(line)
                if m:
                    props = m.group(1)
                    continue
                m = SPILL.search(line)
                if m and props and arch and props == entry:
                    found[(props, arch)] = tuple(int(x) for x in m.groups())
    return found, logs


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    obj_dir, targets = sys.argv[1], sys.argv[2].split(";")
    sources = sys.argv[3:]
    archs = [t for t in targets if t.startswith("sm_")]   # compute_XX is PTX: ptxas does not run
    found, logs = read_reports(obj_dir)
    failures = []
    for src in sources:
        name = os.path.basename(src) + ".o.ptxas.log"
        if not any(os.path.basename(p) == name for p in logs):
            failures.append(f"no ptxas report for {os.path.basename(src)} ({name}): build ctron_cuda_kernels first")
    for arch in archs:
        for hot in HOT:
            rows = [(k, v) for (k, a), v in found.items() if a == arch and hot in k]
            if not rows:
                failures.append(f"{hot}: no kernel of that name in the {arch} report (renamed? update HOT)")
            for kernel, (stack, stores, loads) in sorted(rows):
                if stores > 0:
                    failures.append(f"{hot} ({kernel}) on {arch}: {stores} bytes spill stores, {loads} bytes spill "
                                    f"loads, {stack} bytes stack frame")
    checked = sum(1 for (k, a) in found if a in archs and any(h in k for h in HOT))
    for f in failures:
        print("FAIL", f)
    print(f"{checked} hot kernel builds checked over {', '.join(archs) or 'no cubin architecture'}; "
          f"{len(found)} kernel builds in {len(logs)} reports; {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
