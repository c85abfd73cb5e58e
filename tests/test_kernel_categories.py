#!/usr/bin/env python3
"""scripts/kernel_categories.py: ctron's and torch's kernel names land in the categories they are, the table
sums each category exactly, bad input exits 2; with a peer python, bench/gpu_bench.py --peer ... --kernel-times
writes the same schema (steps 2..N-1 of a CPU run: the plumbing the GPU stage uses).
usage: test_kernel_categories.py [PEER_PYTHON]"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import kernel_categories as kc  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "tests"))
from pycheck import Checks  # noqa: E402

check = Checks()


EXPECT = {
    "gemm bf16 TN m=768 n=16384 k=3072 +bias": "GEMM",
    "attention gemm bf16 NT m=1024 n=1024 k=64 batch=12": "attention",
    "dkdv_launch (flash_attention.cu)": "attention",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64": "GEMM",
    "nvjet_hsh_192x128_64x4_1x2_h_bz_coopA_NTN": "GEMM",
    "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel": "attention",
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop": "attention",
    "cuda_crossentropy_deferred (crossentropy.cu)": "cross-entropy",
    "triton_red_fused__log_softmax_backward_data_nll_loss_backward_0": "cross-entropy",
    "cuda_adamw_update_guarded (optim.cu)": "optimizer",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamW>": "optimizer",
    "cuda_layernorm_forward (layernorm.cu)": "norms",
    "triton_per_fused_native_layer_norm_0": "norms",
    "cuda_bf16_unpack (dropout.cu)": "bf16 conversions",
    "colpass_launch (gemm.cu)": "bf16 conversions",
    "Memcpy HtoD (Pageable -> Device)": "copies and fills",
    "memcpy D2D (GEMM operand staging) (gemm.cu)": "copies and fills",   # not GEMM, though its file is gemm.cu
    "memset (cuda_backend.c)": "copies and fills",
    "(device idle: host waits)": "idle (host waits)",
    "cuda_bias_gelu_forward (gelu.cu)": "element-wise and other",
    "triton_poi_fused_add_gelu_3": "element-wise and other",
}
for name, cat in EXPECT.items():
    check(kc.category(name) == cat, f"{name!r}: {kc.category(name)!r}, expected {cat!r}")

with tempfile.TemporaryDirectory() as d:
    def write(name, rows):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            json.dump({"scope": "test", "steps": 2, "device_ms": sum(r[1] for r in rows), "launches": 0,
                       "rows": [{"what": w, "launches": 1, "device_ms": ms, "host_ms": 0, "flops": 0}
                                for w, ms in rows]}, f)
        return path
    a = write("a.json", [("gemm bf16 NN m=1 n=2 k=3", 10.0), ("gemm bf16 TN m=1 n=2 k=3", 5.0),
                         ("cuda_layernorm_forward (layernorm.cu)", 4.0), ("cuda_gelu_backward (gelu.cu)", 1.0)])
    b = write("b.json", [("nvjet_gemm_x", 8.0), ("triton_per_fused_native_layer_norm_0", 2.0)])
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "kernel_categories.py"), f"ctron={a}",
                        f"peer={b}", "--top", "1"], capture_output=True, text=True)
    out = r.stdout.splitlines()
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    gemm = next((l for l in out if l.startswith("| GEMM |")), "")
    check(gemm.startswith("| GEMM | 15.000 | 75.0 % | 8.000 | 80.0 % | ctron: gemm bf16 NN m=1 n=2 k=3 10.00; "
                          "peer: nvjet_gemm_x 8.00 |"), f"the GEMM row: {gemm!r}")
    norms = next((l for l in out if l.startswith("| norms |")), "")
    check(norms.startswith("| norms | 4.000 | 20.0 % | 2.000 | 20.0 % |"), f"the norms row: {norms!r}")
    check(out[-1] == "| **total** | 20.000 | 100 % | 10.000 | 100 % | |", f"the total: {out[-1]!r}")
    check(not any(l.startswith("| attention |") for l in out), "a category neither run has was printed")
    # Copies reach one category by either of its two patterns; it is printed once, with both summed.
    c = write("c.json", [("memcpy D2D (GEMM operand staging) (gemm.cu)", 1.5), ("Memcpy DtoD (Device -> Device)", 0.5)])
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "kernel_categories.py"), f"ctron={c}"],
                       capture_output=True, text=True)
    copies = [l for l in r.stdout.splitlines() if l.startswith("| copies and fills |")]
    check(len(copies) == 1 and copies[0].startswith("| copies and fills | 2.000 | 100.0 % |"),
          f"the copies row(s): {copies!r}")
    bad = os.path.join(d, "bad.json")
    with open(bad, "w") as f:
        f.write("{\"rows\": 3}")
    for args in (["nolabel.json"], [f"x={bad}"], [f"x={d}/missing.json"]):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "kernel_categories.py"), *args],
                           capture_output=True, text=True)
        check(r.returncode == 2 and "kernel_categories:" in r.stderr, f"{args}: exit {r.returncode}: {r.stderr!r}")

    peer = sys.argv[1] if len(sys.argv) > 1 else ""
    if not (peer and os.access(peer, os.X_OK)):
        print(f"the peer part not run: no peer python ({peer or 'none given'})")
    else:
        # The peer's profile on the CPU (eager: seconds), steps 2..N-1 of 4: 2 steps averaged.
        kt = os.path.join(d, "peer.json")
        cmd = [peer, os.path.join(ROOT, "bench", "gpu_bench.py"), "--peer", "eager", "--config", "gpt2-tiny",
               "--device", "cpu", "--steps", "4", "--kernel-times", kt, "--data", os.path.join(ROOT, "data", "kjv.txt")]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        check(r.returncode == 0, f"peer run: exit {r.returncode}: {r.stderr[-400:]}")
        if r.returncode == 0:
            p = json.load(open(kt))
            check(p["steps"] == 2 and p["scope"].startswith("steps 2..3 (2 averaged)"), f"peer scope {p['scope']!r}")
            mm = [x for x in p["rows"] if x["what"] in ("aten::mm", "aten::addmm")]
            check(mm and all(x["launches"] > 0 and x["device_ms"] > 0 for x in mm), f"peer GEMM rows {mm}")
            check(abs(sum(x["device_ms"] for x in p["rows"]) - p["device_ms"]) < 1e-6, "peer rows do not add up")
            check(not os.path.exists(kt + ".tmp"), "peer: a .tmp left behind")
        r = subprocess.run(cmd[:-4] + ["--steps", "2", "--kernel-times", kt + "2"], capture_output=True, text=True)
        check(r.returncode == 2 and "--steps 3 or more" in r.stderr, f"--steps 2: exit {r.returncode} {r.stderr!r}")

sys.exit(check.summary("test_kernel_categories"))
