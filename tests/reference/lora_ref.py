#!/usr/bin/env python3
"""peft reference for ctron's LoRA and LoRA-FA (issue 27): a random-initialised tiny LlamaForCausalLM or
GPT2LMHeadModel in float32, wrapped by peft's LoRA (the versions pinned in llama_ref.py, peft 0.21.2),
given ctron's base weights and ctron's adapters; writes the loss, every trainable adapter's gradient and
the adapters after a few AdamW steps.

Usage: PEER_PYTHON tests/reference/lora_ref.py CASE_DIR [CASE_DIR ...]
Each CASE_DIR holds (written by tests/test_parity_lora.c):
  case.json   {"arch": "llama"|"qwen3"|"phi3"|"gpt2", "config": {...HF config keys...}, "r": R, "alpha": A,
               "targets": [peft module names], "fa": 0|1, "steps": K, "lr": LR, "betas": [b1, b2],
               "eps": E, "weight_decay": WD}
  base.safetensors     the base under ctron's names in nn.Linear orientation [out, in]: HF llama names, or
                       GPT-2's names without "transformer." (mapped here, Conv1D weights transposed)
  adapters.safetensors every adapter under its peft name (base_model.model.….lora_A.weight [r, in],
                       lora_B.weight [out, r])
  batch.safetensors    tokens, targets I32 [s, b] (sequence-major; targets are the next tokens: no shift)
  masks.safetensors    with "dropout": p > 0 in case.json, each adapted module's keep mask F32 [s, b, in] under
                       its peft module path: its lora_dropout becomes x * mask / (1 - p) (ctron's draw, peft's math)
Writes CASE_DIR/out.safetensors: loss F32 [1]; grad.NAME for every trainable adapter (LoRA-FA: lora_A has
requires_grad=False, so only lora_B's); step.NAME, every adapter after K AdamW steps on the same batch.
"""
import json
import os
import sys

GPT2_TOP = ("wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias")
CONV1D = (".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight")


def base_state(arch, tensors):
    """ctron's base tensors as the HF model's state dict."""
    if arch in ("llama", "qwen3", "phi3"):
        return dict(tensors)
    out = {}
    for name, t in tensors.items():
        if name.endswith(CONV1D):
            t = t.t().contiguous()   # Conv1D keeps [in, out]
        out["transformer." + name] = t
    out["lm_head.weight"] = out["transformer.wte.weight"]   # tied
    return out


def build(case, torch):
    import transformers
    cfg = case["config"]
    if case["arch"] == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg, attn_implementation="eager"))
    elif case["arch"] == "qwen3":   # Llama + per-head q/k RMSNorms (their weights in the base)
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**cfg, attn_implementation="eager"))
    elif case["arch"] == "phi3":   # Llama with q|k|v in one qkv_proj and gate|up in one gate_up_proj
        model = transformers.Phi3ForCausalLM(transformers.Phi3Config(**cfg, attn_implementation="eager"))
    else:
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**cfg, attn_implementation="eager"))
    return model.float()


def keep_dropout(model, masks, p, torch):
    """peft's lora_dropout of every adapted module replaced by ctron's mask (sequence-major [s, b, in])."""
    class MaskDropout(torch.nn.Module):
        def __init__(self, mask):
            super().__init__()
            self.mask = mask.permute(1, 0, 2).contiguous()   # HF's [b, s, in]

        def forward(self, x):
            return x * self.mask / (1.0 - p)

    for name, mask in masks.items():
        module = model.get_submodule(name)
        if "default" not in module.lora_dropout:
            raise SystemExit(f"{name}: not an adapted module")
        module.lora_dropout["default"] = MaskDropout(mask)


def run_case(d, torch):
    from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
    from safetensors.torch import load_file, save_file
    with open(os.path.join(d, "case.json")) as f:
        case = json.load(f)
    torch.manual_seed(0)
    model = build(case, torch)
    state = base_state(case["arch"], load_file(os.path.join(d, "base.safetensors")))
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith(".attn.bias") and not m.endswith("masked_bias")]
    if missing or unexpected:
        raise SystemExit(f"{d}: base weights: missing {missing}, unexpected {unexpected}")
    lcfg = LoraConfig(r=case["r"], lora_alpha=case["alpha"], target_modules=case["targets"], lora_dropout=0.0,
                      bias="none", fan_in_fan_out=case["arch"] == "gpt2", init_lora_weights=True,
                      use_rslora=bool(case.get("rslora", 0)))
    model = get_peft_model(model, lcfg)
    adapters = load_file(os.path.join(d, "adapters.safetensors"))
    res = set_peft_model_state_dict(model, adapters)
    if res.unexpected_keys:
        raise SystemExit(f"{d}: adapters not in the peft model: {res.unexpected_keys}")
    if case.get("dropout", 0.0) > 0.0:
        keep_dropout(model, load_file(os.path.join(d, "masks.safetensors")), case["dropout"], torch)
    lora = {n.replace(".default", ""): p for n, p in model.named_parameters() if "lora_" in n}
    if set(lora) != set(adapters):
        raise SystemExit(f"{d}: peft's adapters {sorted(set(lora) ^ set(adapters))} differ from ctron's")
    for n, p in lora.items():   # the same values, bit for bit
        if not torch.equal(p.detach(), adapters[n]):
            raise SystemExit(f"{d}: adapter {n} did not load as given")
        if case["fa"] and "lora_A" in n:
            p.requires_grad_(False)   # LoRA-FA: A frozen at its initialisation
    model.eval()
    batch = load_file(os.path.join(d, "batch.safetensors"))
    tokens = batch["tokens"].t().contiguous().long()    # [s, b] → HF's [b, s]
    targets = batch["targets"].t().contiguous().long()

    def loss_fn():
        logits = model(input_ids=tokens, use_cache=False).logits.float()
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    loss = loss_fn()
    loss.backward()
    out = {"loss": loss.detach().reshape(1)}
    trainable = {n: p for n, p in lora.items() if p.requires_grad}
    for n, p in trainable.items():
        out["grad." + n] = p.grad.detach().clone()
    opt = torch.optim.AdamW(list(trainable.values()), lr=case["lr"], betas=tuple(case["betas"]), eps=case["eps"],
                            weight_decay=case["weight_decay"])
    for _ in range(case["steps"]):   # the first step uses the gradients above
        opt.step()
        opt.zero_grad()
        loss_fn().backward()
    for n, p in lora.items():
        out["step." + n] = p.detach().clone()
    save_file(out, os.path.join(d, "out.safetensors"), metadata={"format": "pt"})


def main(argv):
    import torch
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(2)
    for d in argv[1:]:
        run_case(d, torch)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
