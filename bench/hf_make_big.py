#!/usr/bin/env python3
"""Writes a large random Llama model directory in Hugging Face's format with numpy alone (no torch), for
measuring ctron's import memory (bench/hf_import_rss.c; docs/HF.md). Default: ~1.03 billion
parameters (hidden 2048, 20 layers, 16 heads, 4 kv heads, FFN 5632, vocab 32000, untied) in BF16,
~2.07 GB in shards of about 1 GB with model.safetensors.index.json, as hub checkpoints come. Each
tensor is drawn and written in turn: the script holds one tensor, never the model.

usage: python3 bench/hf_make_big.py OUT [--layers 20] [--hidden 2048] [--shard-bytes 1000000000]
"""
import argparse
import json
import os
import struct
import sys

import numpy as np


def tensors(a):
    h, f, v, kv = a.hidden, a.ffn, a.vocab, a.kv_heads * a.hidden // a.heads
    yield "model.embed_tokens.weight", (v, h)
    for i in range(a.layers):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", (h,)
        yield p + "self_attn.q_proj.weight", (h, h)
        yield p + "self_attn.k_proj.weight", (kv, h)
        yield p + "self_attn.v_proj.weight", (kv, h)
        yield p + "self_attn.o_proj.weight", (h, h)
        yield p + "post_attention_layernorm.weight", (h,)
        yield p + "mlp.gate_proj.weight", (f, h)
        yield p + "mlp.up_proj.weight", (f, h)
        yield p + "mlp.down_proj.weight", (h, f)
    yield "model.norm.weight", (h,)
    yield "lm_head.weight", (v, h)


def bf16(shape, rng):
    x = rng.standard_normal(int(np.prod(shape)), dtype=np.float32) * np.float32(0.02)
    if len(shape) == 1:
        x += np.float32(1.0)
    return (x.view(np.uint32) >> 16).astype(np.uint16)   # truncated: any bf16 will do here


def write_shard(path, items, rng):
    offsets, at = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in items:
        n = int(np.prod(shape)) * 2
        offsets[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [at, at + n]}
        at += n
    hdr = json.dumps(offsets, separators=(",", ":")).encode()
    hdr += b" " * (-len(hdr) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr)
        for name, shape in items:
            f.write(bf16(shape, rng).tobytes())
    return at


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=20)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=5632)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--shard-bytes", type=int, default=1_000_000_000)
    a = p.parse_args()
    if os.path.exists(a.out):
        sys.exit(f"{a.out} exists")
    os.makedirs(a.out)
    shards, cur, size = [], [], 0
    for name, shape in tensors(a):
        n = int(np.prod(shape)) * 2
        if cur and size + n > a.shard_bytes:
            shards.append(cur)
            cur, size = [], 0
        cur.append((name, shape))
        size += n
    shards.append(cur)
    rng = np.random.default_rng(0)
    weight_map, total, params = {}, 0, 0
    for k, items in enumerate(shards):
        file = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        total += write_shard(os.path.join(a.out, file), items, rng)
        for name, shape in items:
            weight_map[name] = file
            params += int(np.prod(shape))
    json.dump({"metadata": {"total_parameters": params, "total_size": total}, "weight_map": weight_map},
              open(os.path.join(a.out, "model.safetensors.index.json"), "w"), indent=2)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": a.vocab,
           "hidden_size": a.hidden, "intermediate_size": a.ffn, "num_hidden_layers": a.layers,
           "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads, "hidden_act": "silu",
           "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    json.dump(cfg, open(os.path.join(a.out, "config.json"), "w"), indent=2)
    print(f"{a.out}: {params} parameters, {total} bytes of BF16 in {len(shards)} shards")


if __name__ == "__main__":
    main()
