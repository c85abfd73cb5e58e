#!/usr/bin/env python3
"""ctron on one GPU against PyTorch on the same GPU, in one process tree and one call (issue 30).

Configs (bf16, dropout 0, as llm.c trains): GPT-2 124M (L12 h768 a12, s1024, v50304) and GPT-2 1.5B
(L48 h1600 a25, s1024); llama at the llama bench's width (L12 h768 a12 kv4 ffn2048 v8192, here s1024 b16:
the CPU bench's s256 b4 is too small a step for a GPU) and two layers of Llama 3 8B (h4096 a32 kv8
ffn14336 v128256, s2048 b2); LoRA r16 alpha32 on all seven linears of the llama-8b-2l shape.
Implementations:
  ctron          build-gpu/ctron train --device cuda --precision bf16 --attention flash (llama: --arch
                 llama; LoRA configs: --lora-rank 16 --lora-alpha 32, ctron-lora-fa adds --lora-fa)
  torch-eager    GPT-2: bench/peers/torch_gpt.py's GPT; llama: transformers' LlamaForCausalLM (SDPA);
                 on cuda, autocast bf16, fused AdamW; LoRA configs: peft's LoRA on it (peft-lora-fa:
                 every lora_A frozen; the LoRA configs name them peft-lora and peft-lora-fa)
  torch-compile  the same model through torch.compile
  llmc           karpathy/llm.c's train_gpt2cu (bf16, its defaults: GeLU recomputed), built by
                 bench/llmc_build.sh into .gpu/llmc/ (never committed), random init (-e d12 / d48),
                 random tokens in its file format (GPT-2 configs only)
Each run is its own process (the GPU's memory is returned between runs); the step time is the median
over the steps after the warm-up (torch.compile compiles in its first step). MFU counts the model's
FLOPs, 6·N + 12·L·h·s per token (N without the position embedding), against the dense bf16 peak of the
datasheet (src/backend/gpu_peaks.c's table: H100 SXM and H200 989.5 TFLOP/s).
Runs that would not fit what --budget-s leaves are skipped and say so.

usage: gpu_bench.py --ctron build-gpu/ctron --data data/kjv.txt --budget-s 300 --out results.json
       gpu_bench.py --peer {eager,compile} --config gpt2-124m      (one peer run, JSON on stdout)
"""
import argparse
import json
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time

CONFIGS = {
    "gpt2-tiny": dict(layers=2, hidden=64, heads=4, seq=64, batch=2, vocab=512, steps=5),   # a smoke test
    "gpt2-124m": dict(layers=12, hidden=768, heads=12, seq=1024, batch=16, vocab=50304, steps=20),
    "gpt2-1.5b": dict(layers=48, hidden=1600, heads=25, seq=1024, batch=8, vocab=50304, steps=8),
    "llama-tiny": dict(arch="llama", layers=2, hidden=64, heads=4, kv=2, ffn=176, seq=64, batch=2, vocab=512,
                       steps=5),
    "lora-tiny": dict(arch="llama", layers=2, hidden=64, heads=4, kv=2, ffn=176, seq=64, batch=2, vocab=512,
                      steps=5, lora_rank=4, lora_alpha=8),
    "llama-bench": dict(arch="llama", layers=12, hidden=768, heads=12, kv=4, ffn=2048, seq=1024, batch=16,
                        vocab=8192, steps=20),
    "llama-8b-2l": dict(arch="llama", layers=2, hidden=4096, heads=32, kv=8, ffn=14336, seq=2048, batch=2,
                        vocab=128256, steps=10),
    "lora-8b-2l": dict(arch="llama", layers=2, hidden=4096, heads=32, kv=8, ffn=14336, seq=2048, batch=2,
                       vocab=128256, steps=10, lora_rank=16, lora_alpha=32),
}
# Which implementations a config's default run compares (--impls overrides).
DEFAULT_IMPLS = {"gpt2": "ctron,llmc,torch-eager,torch-compile", "llama": "ctron,torch-eager,torch-compile",
                 "lora": "ctron,ctron-lora-fa,peft-lora,peft-lora-fa"}
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
WARMUP = 3
# Dense bf16 peaks (TFLOP/s) by the device name's key; the same figures as src/backend/gpu_peaks.c.
PEAKS = [("H200 NVL", 835.5), ("H100 NVL", 835.5), ("H200", 989.5), ("H100 PCIe", 756.5), ("H100", 989.5), ("A100", 312.0)]
# Seconds each run is given, a guess from the FLOPs at a modest rate plus start-up (compile included).
EST_S = {("gpt2-124m", "ctron"): 40, ("gpt2-124m", "torch-eager"): 40, ("gpt2-124m", "torch-compile"): 110,
         ("gpt2-1.5b", "ctron"): 90, ("gpt2-1.5b", "torch-eager"): 80, ("gpt2-1.5b", "torch-compile"): 200,
         ("gpt2-124m", "llmc"): 40, ("gpt2-1.5b", "llmc"): 80, ("llama-bench", "torch-compile"): 110,
         ("llama-8b-2l", "torch-compile"): 150, ("llama-bench", "ctron"): 40, ("llama-8b-2l", "ctron"): 60}
LLMC_DEPTH = {"gpt2-124m": "d12", "gpt2-1.5b": "d48"}   # llm.c's GPT-2 shapes: h 768 a 12 / h 1600 a 25


def family(cfg):
    return "lora" if "lora_rank" in CONFIGS[cfg] else CONFIGS[cfg].get("arch", "gpt2")


def model_flops_per_token(c):
    """6 FLOPs per weight a token meets in a GEMM (forward + both backward products) + attention's
    12·L·h·s; LoRA (LoRA-FA or not) counts the same model FLOPs as full fine-tuning, as peft's users do."""
    L, h, s, v = c["layers"], c["hidden"], c["seq"], c["vocab"]
    if c.get("arch") == "llama":   # the output layer (the embedding is a lookup), q, k, v, o, gate, up, down
        d = h // c["heads"]
        n = v * h + L * (h * h + 2 * h * c["kv"] * d + h * h + 3 * h * c["ffn"])
    else:
        n = v * h + L * (12 * h * h + 13 * h) + 2 * h   # tied embedding, blocks, final LayerNorm
    return 6 * n + 12 * L * h * s


def llama_model(c, dev, lora_fa):
    """transformers' LlamaForCausalLM of the config (random init, SDPA, no dropout), and peft's LoRA on
    it for the LoRA configs (lora_fa: every lora_A frozen too)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=c["vocab"], hidden_size=c["hidden"], intermediate_size=c["ffn"],
                      num_hidden_layers=c["layers"], num_attention_heads=c["heads"], num_key_value_heads=c["kv"],
                      max_position_embeddings=c["seq"], tie_word_embeddings=False, attention_bias=False,
                      mlp_bias=False, attention_dropout=0.0, hidden_act="silu", use_cache=False)
    cfg._attn_implementation = "sdpa"
    model = LlamaForCausalLM(cfg).float().to(dev)
    if "lora_rank" in c:
        import peft
        lc = peft.LoraConfig(r=c["lora_rank"], lora_alpha=c["lora_alpha"], lora_dropout=0.0, bias="none",
                             target_modules=LORA_TARGETS)
        model = peft.get_peft_model(model, lc)
        if lora_fa:
            for name, p in model.named_parameters():
                if "lora_A" in name:
                    p.requires_grad_(False)
    return model


def peer_profiler(torch, dev):
    """torch.profiler over the device's activity (the kernels and copies on a GPU; the ops on the CPU)."""
    from torch.profiler import ProfilerActivity, profile
    return profile(activities=[ProfilerActivity.CUDA if dev == "cuda" else ProfilerActivity.CPU])


def write_peer_kernel_times(path, prof, dev, steps):
    """The peer's device time per kernel name, averaged over `steps` steps, in CTRON_KERNEL_TIMES's JSON
    schema (scope, steps, device_ms, launches, rows of what / launches / device_ms), so that
    scripts/kernel_categories.py sets the two side by side."""
    rows = []
    for e in prof.key_averages():
        if dev == "cuda":
            us = getattr(e, "self_device_time_total", None)
            us = getattr(e, "self_cuda_time_total", 0.0) if us is None else us
        else:
            us = e.self_cpu_time_total
        if us <= 0:
            continue
        rows.append({"what": e.key[:160], "launches": e.count / steps, "device_ms": us / 1e3 / steps,
                     "host_ms": 0.0, "flops": 0.0})
    rows.sort(key=lambda r: -r["device_ms"])
    out = {"scope": f"steps 2..{steps + 1} ({steps} averaged), torch.profiler", "steps": steps,
           "device_ms": sum(r["device_ms"] for r in rows), "host_ms": 0.0,
           "launches": sum(r["launches"] for r in rows), "rows": rows}
    with open(path + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(path + ".tmp", path)


def byte_windows(torch, path, c, dev, gen):
    """ctron's own data for the peer: the file's bytes as token ids (ctron's byte-level tokens, within any vocabulary
    of 256 or more), its first 90 % (ctron's training split), a batch of seq + 1 windows at random offsets a step;
    returns a function of no arguments giving (idx, tgt)."""
    with open(path, "rb") as f:
        raw = f.read()
    tokens = torch.frombuffer(bytearray(raw[:len(raw) * 9 // 10]), dtype=torch.uint8).to(dev).long()
    if tokens.numel() <= c["seq"] + 1:
        sys.exit(f"gpu_bench.py: {path}: {tokens.numel()} training bytes, a window needs {c['seq'] + 2}")
    span = torch.arange(c["seq"] + 1, device=dev)

    def batch():
        off = torch.randint(0, tokens.numel() - c["seq"] - 1, (c["batch"], 1), device=dev, generator=gen)
        w = tokens[off + span]
        return w[:, :-1], w[:, 1:]
    return batch


def peer_run(args):
    """One PyTorch run on cuda; prints a JSON line."""
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
    c = CONFIGS[args.config]
    dev = args.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    torch.manual_seed(1)
    torch.backends.cuda.matmul.allow_tf32 = True
    if c.get("arch") == "llama":
        llama = llama_model(c, dev, args.peer == "lora-fa")

        def model(idx, tgt):
            logits = llama(input_ids=idx, use_cache=False).logits
            return F.cross_entropy(logits.float().view(-1, c["vocab"]), tgt.reshape(-1))
        params = [p for p in llama.parameters() if p.requires_grad]
        llama.train()
    else:
        from torch_gpt import GPT
        model = GPT(c["layers"], c["hidden"], c["heads"], c["seq"], c["vocab"], 0.0, args.recompute, "sdpa").to(dev)
        model.train()
        params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.1, fused=dev == "cuda")
    step_fn = torch.compile(model) if args.peer == "compile" else model
    gen = torch.Generator(device=dev).manual_seed(2)
    next_batch = byte_windows(torch, args.data, c, dev, gen)   # the text ctron trains on, so the losses compare
    ms, losses = [], []
    steps = args.steps or c["steps"]
    prof = None
    for i in range(steps):
        if args.kernel_times and i == 1:   # steps 2 .. N-1, as ctron's CTRON_KERNEL_TIMES
            prof = peer_profiler(torch, dev)
            prof.__enter__()
        if prof is not None and i == steps - 1:
            prof.__exit__(None, None, None)
            write_peer_kernel_times(args.kernel_times, prof, dev, steps - 2)
            prof = None
        idx, tgt = next_batch()
        sync()
        t0 = time.perf_counter()
        with torch.autocast(dev, dtype=torch.bfloat16):
            loss = step_fn(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss.item())
    print(json.dumps({"ms_steps": ms, "loss_first": losses[0], "loss_last": losses[-1],
                      "peak_bytes": torch.cuda.max_memory_allocated() if dev == "cuda" else None,
                      "torch": torch.__version__,
                      "device": torch.cuda.get_device_name() if dev == "cuda" else dev}))
    return 0


def ctron_cmd(args, name, c):
    """ctron's command line for config c (without --log): the bench's setting, also scripts/gpu_check.sh's
    kernel times (--print-cmd)."""
    cmd = [args.ctron, "train", "--device", args.device, "--precision", "bf16", "--attention", "flash",
           "--dropout", "0", "--data", args.data, "--layers", str(c["layers"]), "--hidden", str(c["hidden"]),
           "--heads", str(c["heads"]), "--seq", str(c["seq"]), "--batch", str(c["batch"]),
           "--vocab", str(c["vocab"]), "--steps", str(args.steps or c["steps"]), "--eval-every", "0",
           "--eval-batches", "1", "--threads", str(min(16, os.cpu_count() or 1))]
    if c.get("arch") == "llama":
        cmd += ["--arch", "llama", "--kv-heads", str(c["kv"]), "--ffn-hidden", str(c["ffn"])]
    if "lora_rank" in c:
        cmd += ["--lora-rank", str(c["lora_rank"]), "--lora-alpha", str(c["lora_alpha"])]
        if name == "ctron-lora-fa":
            cmd += ["--lora-fa"]
    return cmd


def run_ctron(args, name, c, timeout):
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "log.jsonl")
        cmd = ctron_cmd(args, name, c) + ["--log", log]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            return {"error": f"exit {p.returncode}: {p.stderr.strip()[-400:] or p.stdout.strip()[-400:]}"}
        recs = [json.loads(line) for line in open(log) if line.strip()]
        out = {"ms_steps": [r["ms"] for r in recs], "loss_first": recs[0]["loss"], "loss_last": recs[-1]["loss"],
               "act_bytes": recs[-1].get("act_bytes")}
        held = [ln for ln in p.stdout.splitlines() if "ctron holds" in ln]
        out["header"] = held[0].strip() if held else None
        mfu = [ln for ln in p.stdout.splitlines() if ln.startswith("step ") and "MFU" in ln]
        out["ctron_mfu_line"] = mfu[-1] if mfu else None
        return out


def write_llmc_tokens(path, n, vocab, seed):
    """llm.c's token file: a 256-int32 header (magic 20240520, version 1, count), then uint16 tokens."""
    import random
    rng = random.Random(seed)
    header = [20240520, 1, n] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack(f"<{n}H", *(rng.randrange(vocab) for _ in range(n))))


def run_llmc(args, cfg, c, timeout):
    if cfg not in LLMC_DEPTH:
        return {"error": f"llm.c has no descriptor for {cfg}"}
    if not os.access(args.llmc, os.X_OK):
        return {"error": f"no llm.c binary at {args.llmc} (bench/llmc_build.sh)"}
    with tempfile.TemporaryDirectory() as d:
        n = c["batch"] * c["seq"] * (c["steps"] + 2) + 1
        write_llmc_tokens(os.path.join(d, "train.bin"), n, 50257, 1)
        write_llmc_tokens(os.path.join(d, "val.bin"), c["batch"] * c["seq"] + 1, 50257, 2)
        cmd = [os.path.abspath(args.llmc), "-i", "train.bin", "-j", "val.bin", "-e", LLMC_DEPTH[cfg],
               "-b", str(c["batch"]), "-t", str(c["seq"]), "-x", str(c["steps"]), "-v", "100000", "-m", "1",
               "-s", "0", "-n", "0", "-h", "0"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=d)
    steps = re.findall(r"^step +\d+/\d+ \| loss ([0-9.]+).*?\| ([0-9.]+) ms \|", p.stdout, re.M)
    if p.returncode != 0 or not steps:
        return {"error": f"exit {p.returncode}: {(p.stderr.strip() or p.stdout.strip())[-400:]}"}
    return {"ms_steps": [float(ms) for _, ms in steps], "loss_first": float(steps[0][0]),
            "loss_last": float(steps[-1][0])}


def run_peer(args, impl, cfg, timeout):
    # peft-lora: the LoRA config's model in eager mode (llama_model wraps it in peft's LoRA)
    peer = {"torch-eager": "eager", "torch-compile": "compile", "peft-lora": "eager", "peft-lora-fa": "lora-fa"}[impl]
    cmd = [args.python, os.path.abspath(__file__), "--peer", peer, "--config", cfg, "--device", args.device,
           "--data", args.data]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}: {p.stderr.strip()[-400:]}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def device_name():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ctron", default="build-gpu/ctron")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data",
                                                "kjv.txt"), help="the text (default: the repository's data/kjv.txt)")
    ap.add_argument("--budget-s", type=float, default=480)
    ap.add_argument("--out", default="gpu_bench.json")
    ap.add_argument("--configs", default="gpt2-124m,gpt2-1.5b")
    ap.add_argument("--impls", default="", help="default: each config's family's list (DEFAULT_IMPLS)")
    ap.add_argument("--llmc", default=".gpu/llmc/train_gpt2cu", help="llm.c's train_gpt2cu (bench/llmc_build.sh)")
    ap.add_argument("--peer", choices=["eager", "compile", "lora-fa"])
    ap.add_argument("--config", choices=sorted(CONFIGS))
    ap.add_argument("--recompute", default="none", choices=["none", "selective", "full"])
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a local smoke test only")
    ap.add_argument("--python", default=sys.executable, help="the Python with torch for the peers")
    ap.add_argument("--kernel-times", metavar="FILE.json", help="with --peer: the device time per kernel over steps "
                    "2..N-1 (torch.profiler), in CTRON_KERNEL_TIMES's schema (--steps 3 at least)")
    ap.add_argument("--print-cmd", metavar="CONFIG", help="print ctron's command for CONFIG (--steps: its steps), "
                    "one argument a line, and exit")
    args = ap.parse_args()
    if args.print_cmd:
        if args.print_cmd not in CONFIGS:
            print(f"gpu_bench: unknown config '{args.print_cmd}' (expected one of {', '.join(CONFIGS)})",
                  file=sys.stderr)
            return 2
        print("\n".join(ctron_cmd(args, "ctron", CONFIGS[args.print_cmd])))
        return 0
    if args.peer:
        if args.kernel_times and (args.steps or CONFIGS[args.config]["steps"]) < 3:
            print("gpu_bench: --kernel-times needs --steps 3 or more (steps 2..N-1 are profiled)", file=sys.stderr)
            return 2
        return peer_run(args)
    t0 = time.time()
    dev = device_name()
    peak = next((p for key, p in PEAKS if key in dev), None)
    results = []
    for cfg in [x for x in args.configs.split(",") if x]:
        if cfg not in CONFIGS:
            print(f"gpu_bench: unknown config '{cfg}' (expected one of {', '.join(CONFIGS)})", file=sys.stderr)
            return 2
        c = CONFIGS[cfg]
        impls = args.impls or DEFAULT_IMPLS[family(cfg)]
        for impl in [x for x in impls.split(",") if x]:
            if impl not in ("ctron", "ctron-lora-fa", "llmc", "torch-eager", "torch-compile", "peft-lora",
                            "peft-lora-fa"):
                print(f"gpu_bench: unknown implementation '{impl}'", file=sys.stderr)
                return 2
            left = args.budget_s - (time.time() - t0)
            need = EST_S.get((cfg, impl), 120)
            rec = {"config": cfg, "impl": impl}
            if left < need:
                rec["error"] = f"skipped: {left:.0f} s left, {need} s needed"
            else:
                try:
                    if impl.startswith("ctron"):
                        rec.update(run_ctron(args, impl, c, left))
                    elif impl == "llmc":
                        rec.update(run_llmc(args, cfg, c, left))
                    else:
                        rec.update(run_peer(args, impl, cfg, left))
                except subprocess.TimeoutExpired:
                    rec["error"] = f"timed out after {left:.0f} s"
            if "ms_steps" in rec:
                timed = rec["ms_steps"][WARMUP:] or rec["ms_steps"]
                rec["ms_median"] = statistics.median(timed)
                rec["tokens_per_s"] = c["batch"] * c["seq"] / (rec["ms_median"] / 1e3)
                if peak:
                    rec["mfu"] = rec["tokens_per_s"] * model_flops_per_token(c) / (peak * 1e12)
            results.append(rec)
            print(json.dumps({k: v for k, v in rec.items() if k != "ms_steps"}), flush=True)
    with open(args.out, "w") as f:
        json.dump({"device": dev, "peak_tflops": peak, "configs": CONFIGS, "results": results}, f, indent=1)
    print(f"\ndevice: {dev}; dense bf16 peak {peak} TFLOP/s; MFU = model FLOPs (6N + 12Lhs per token) / peak\n")
    print("| config | impl | ms/step | tokens/s | MFU | vs torch.compile (LoRA: vs peft LoRA-FA) | memory | note |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        # against torch.compile, or for the LoRA configs peft's LoRA-FA (eager: peft under compile is not a
        # configuration its users run)
        ref = next((x for x in results if x["config"] == r["config"] and "tokens_per_s" in x and
                    x["impl"] == ("peft-lora-fa" if family(r["config"]) == "lora" else "torch-compile")), None)
        if "tokens_per_s" in r:
            mem = r.get("peak_bytes") or r.get("act_bytes")
            kind = "peak alloc" if r.get("peak_bytes") else "act"
            vs = f"{r['tokens_per_s'] / ref['tokens_per_s']:.2f}x" if ref else "-"
            mfu = f"{100 * r['mfu']:.1f} %" if "mfu" in r else "-"
            mem_s = f"{mem / 2**30:.2f} GiB {kind}" if mem else "-"
            print(f"| {r['config']} | {r['impl']} | {r['ms_median']:.1f} | {r['tokens_per_s']:.0f} | {mfu} | {vs} | "
                  f"{mem_s} | loss {r['loss_first']:.3f}->{r['loss_last']:.3f} |")
        else:
            print(f"| {r['config']} | {r['impl']} | - | - | - | - | - | {r['error'][:120]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
