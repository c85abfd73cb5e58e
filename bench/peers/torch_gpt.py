#!/usr/bin/python3
"""PyTorch peer for ctron's benchmarks: the same GPT-2 model, trained in fp32 or bf16.

The model is the one in DESIGN.md section 1:

    token embedding [v,h] + learned position embedding [s,h], embedding dropout,
    L pre-LayerNorm blocks
        x1 = x  + Dropout(Proj(Attn(LN1(x))))
        x2 = x1 + Dropout(FC2(GeLU_tanh(FC1(LN2(x1)))))
    final LayerNorm, output layer tied to the token embedding (no bias),
    mean cross-entropy.

--attention explicit (the default) writes attention out (QK^T, scale, causal
masked_fill, softmax, dropout, .V), so that what autograd saves is what an eager
implementation saves (PyTorch 1.13 has no fused kernel); --attention sdpa calls
torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p, is_causal=True)
(PyTorch >= 2.0), which picks its own CPU kernel.

--precision fp32 (the default) trains in fp32. --precision bf16 is PyTorch's
automatic mixed precision on the CPU: the forward and the loss run under
torch.autocast("cpu", dtype=torch.bfloat16) (GEMMs on bf16 copies of the
weights, the ops autocast keeps in fp32 -- softmax, LayerNorm, cross-entropy --
in fp32), backward outside it; master weights, gradients and AdamW state stay
fp32. No gradient scaler: bf16 has fp32's exponent range.

Training: AdamW (lr 3e-4, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the 2-D
weight matrices, i.e. linear weights and both embeddings; none on biases and
LayerNorm gains/biases), random token batches from a seeded generator.

Output (stdout), one JSON object per line:
    {"step": i, "ms": ..., "loss": ...,
     "fwd_ms": ..., "bwd_ms": ..., "opt_ms": ...}  for i = 1..steps
    {"peer": "torch", "torch_version": ..., "precision": ..., "attention": ...,
     "saved_bytes_total": ..., "saved_bytes_per_layer": ...,
     "ms_median": ..., "peak_rss_kib": ...}       once, at the end

ms covers one whole optimizer step: batch generation, forward, backward,
AdamW update and zeroing the gradients. fwd_ms (forward and loss), bwd_ms
(loss.backward(), checkpoint recomputation included) and opt_ms (AdamW step +
zero_grad) split it with time.perf_counter (CPU eager ops are synchronous, so
each call has finished its work when it returns); the rest is the random batch.
There is no communication (one process). ms_median is the median over steps
2..N (step 1 is warm-up) or step 1 when only one step is run.

Saved-activation bytes are measured on the forward of step 1 (the warm-up step,
which the median ignores) with torch.autograd.graph.saved_tensors_hooks; see
SavedTensorMeter for what is counted and how blocks are told apart.

Both options are feature-detected: under a PyTorch without
scaled_dot_product_attention (1.13) --attention sdpa exits with status 2 and a
message; fp32 with explicit attention runs on every version.

The caller should set OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS
to --threads before starting Python (the BLAS pools are sized at load time);
this script also calls torch.set_num_threads(threads) and warns on stderr when
the environment disagrees.
"""

import argparse
import contextlib
import math
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as tcheckpoint

import peer_loop  # noqa: E402  (the step loop and summary line both peers share)


# --------------------------------------------------------------------------
# Saved-activation accounting
# --------------------------------------------------------------------------

def _storage_key(t):
    """(data_ptr, nbytes) of the untyped storage behind tensor t.

    Views (transposes, splits of the fused QKV output, reshapes) share their
    base's storage, so keying on the storage counts such a tensor once, with
    the full size of what is actually kept alive.
    """
    if hasattr(t, "untyped_storage"):          # PyTorch >= 2.0
        st = t.untyped_storage()
        return st.data_ptr(), st.nbytes()
    st = t.storage()                            # 1.13: TypedStorage
    if hasattr(st, "untyped"):
        st = st.untyped()
        return st.data_ptr(), st.nbytes()
    return st.data_ptr(), st.size() * st.element_size()


_VIEW_FNS = ("TBackward", "ViewBackward", "TransposeBackward", "PermuteBackward",
             "ExpandBackward")


def _is_weight_copy(t):
    """True when t is (a view of) a dtype cast of a parameter: autocast's bf16 weight copy,
    which linear saves as t() of the cast. Model state, not an activation."""
    fn = getattr(t, "grad_fn", None)
    while fn is not None and type(fn).__name__.startswith(_VIEW_FNS):
        fn = fn.next_functions[0][0] if fn.next_functions else None
    if fn is None or not type(fn).__name__.startswith("ToCopyBackward"):
        return False
    return any(nxt is not None and type(nxt).__name__ == "AccumulateGrad"
               for nxt, _ in fn.next_functions)


class SavedTensorMeter:
    """Counts the bytes autograd keeps for backward, per region of the model.

    Every tensor that autograd saves passes through pack_hook. We record the
    untyped storage behind it (data_ptr, nbytes) once, and skip storages that
    belong to parameters or buffers (weights, the causal-mask buffer): those
    are model state, not activations.

    Blocks are separated by a "current region" tag that the model sets as it
    runs: "embed" for the embeddings and embedding dropout, "block<i>" while
    block i runs forward (also the checkpoint wrapper around it under
    --recompute full), and "head" for the final LayerNorm, the tied output
    layer and the cross-entropy. A storage is charged to the region that saves
    it first. Because the residual adds save nothing, the tensor entering block
    i (which is block i-1's output, or the embedding output for i = 0) is first
    saved by block i's LN1 (or by block i's checkpoint), so it is charged to
    block i, matching ctron's ledger name ln1_in; the last block's output is
    saved by the final LN and lands in "head" (ctron's extras).

    Under --precision bf16, autocast's bf16 copies of the weights (saved by the
    linear layers for backward) are parameters too and are skipped likewise.

    saved_bytes_per_layer is the mean over blocks of the block regions (all
    blocks are identical, so the per-block values are equal); the embedding and
    head parts are reported apart as extras.

    What PyTorch 1.13 saves on CPU (fp32, e = 4 bytes) per block, no recompute:
    LN1 input and output, copies of q, k^T and v made by the 4-D matmul (3sbh
    together), softmax output, dropout "mask", dropped probabilities, Proj
    input, LN2 input and output, FC1 output, GeLU output, LN mean/rstd, and a
    float64 scalar (the 1/sqrt(d) factor). CPU dropout keeps its scaled
    keep-mask as float32 (4 bytes per element), not as a 1-byte mask, so:
        72*sbh + 12*as^2*b + 16*sb (+8) bytes per block.
    """

    def __init__(self, model):
        self.exclude = set()
        for p in list(model.parameters()) + list(model.buffers()):
            self.exclude.add(_storage_key(p)[0])
        self.seen = {}            # data_ptr -> (region, nbytes)
        self.region = "embed"
        self.n_packed = 0

    def pack(self, t):
        self.n_packed += 1
        ptr, nbytes = _storage_key(t)
        if _is_weight_copy(t):                  # autocast's bf16 copy of a parameter
            self.exclude.add(ptr)
        if ptr != 0 and nbytes > 0 and ptr not in self.exclude and ptr not in self.seen:
            self.seen[ptr] = (self.region, nbytes)
        return t

    @staticmethod
    def unpack(t):
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)

    def by_region(self):
        out = {}
        for region, nbytes in self.seen.values():
            out[region] = out.get(region, 0) + nbytes
        return out


class _NullMeter:
    region = None


# --------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------

def attention_core(q, k, v, causal, p_drop, training):
    """softmax(q k^T / sqrt(d), causal) with dropout, times v.

    q, k, v: [b, a, s, d]; causal: bool [s, s], True where attention is NOT
    allowed. Returns the context, [b, a, s, d].
    """
    d = q.size(-1)
    att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
    att = att.masked_fill(causal, float("-inf"))
    att = F.softmax(att, dim=-1)
    att = F.dropout(att, p=p_drop, training=training)
    return torch.matmul(att, v)


def attention_sdpa(q, k, v, causal, p_drop, training):
    """The same through F.scaled_dot_product_attention (causal, dropout p_drop when training);
    `causal` is unused (is_causal=True)."""
    return F.scaled_dot_product_attention(q, k, v, dropout_p=p_drop if training else 0.0,
                                          is_causal=True)


ATTENTION = {"explicit": attention_core, "sdpa": attention_sdpa}


class Block(nn.Module):
    def __init__(self, h, a, p_drop, recompute, attention="explicit"):
        super().__init__()
        self.h, self.a, self.p = h, a, p_drop
        self.recompute = recompute
        self.attn = ATTENTION[attention]
        self.ln1 = nn.LayerNorm(h, eps=1e-5)
        self.qkv = nn.Linear(h, 3 * h, bias=True)
        self.proj = nn.Linear(h, h, bias=True)
        self.ln2 = nn.LayerNorm(h, eps=1e-5)
        self.fc1 = nn.Linear(h, 4 * h, bias=True)
        self.fc2 = nn.Linear(4 * h, h, bias=True)

    def forward(self, x, causal):
        b, s, h = x.shape
        a = self.a
        d = h // a
        # --- attention sublayer
        qkv = self.qkv(self.ln1(x))                                  # [b,s,3h]
        q, k, v = qkv.split(h, dim=2)
        q = q.view(b, s, a, d).transpose(1, 2)                       # [b,a,s,d]
        k = k.view(b, s, a, d).transpose(1, 2)
        v = v.view(b, s, a, d).transpose(1, 2)
        if self.recompute == "selective" and self.training:
            # Only q, k, v (views of the QKV output) are kept; QK^T, scale,
            # mask, softmax, dropout and .V run again in backward. The
            # reentrant checkpoint restores the RNG state, so the dropout mask
            # is the same in the recompute (and the autocast state, under bf16).
            ctx = tcheckpoint.checkpoint(self.attn, q, k, v, causal,
                                         self.p, self.training, use_reentrant=True)
        else:
            ctx = self.attn(q, k, v, causal, self.p, self.training)
        ctx = ctx.transpose(1, 2).contiguous().view(b, s, h)        # [b,s,h]
        x = x + F.dropout(self.proj(ctx), p=self.p, training=self.training)
        # --- MLP sublayer
        m = F.gelu(self.fc1(self.ln2(x)), approximate="tanh")       # [b,s,4h]
        x = x + F.dropout(self.fc2(m), p=self.p, training=self.training)
        return x


class GPT(nn.Module):
    def __init__(self, layers, h, a, s, v, p_drop, recompute, attention="explicit"):
        super().__init__()
        if h % a != 0:
            raise ValueError(f"--hidden {h} must be divisible by --heads {a}")
        self.layers, self.h, self.s, self.v, self.p = layers, h, s, v, p_drop
        self.recompute = recompute
        self.wte = nn.Embedding(v, h)
        self.wpe = nn.Embedding(s, h)
        self.blocks = nn.ModuleList([Block(h, a, p_drop, recompute, attention)
                                     for _ in range(layers)])
        self.lnf = nn.LayerNorm(h, eps=1e-5)
        # True above the diagonal = future positions, masked out.
        self.register_buffer("causal", torch.triu(torch.ones(s, s, dtype=torch.bool), 1),
                             persistent=False)
        self.meter = _NullMeter()
        self._init_weights()

    def _init_weights(self):
        # GPT-2 initialisation: N(0, 0.02), residual projections scaled by
        # 1/sqrt(2L), zero biases, LayerNorm (1, 0).
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02
                if name.endswith("proj.weight") or name.endswith("fc2.weight"):
                    std = 0.02 / math.sqrt(2 * max(1, self.layers))
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        b, s = idx.shape
        self.meter.region = "embed"
        pos = torch.arange(s, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)                            # [b,s,h]
        x = F.dropout(x, p=self.p, training=self.training)
        causal = self.causal[:s, :s]
        for i, blk in enumerate(self.blocks):
            self.meter.region = f"block{i}"
            if self.recompute == "full" and self.training:
                # Only the block input is kept; the whole block runs again in
                # backward (RNG state restored, so masks are the same).
                x = tcheckpoint.checkpoint(blk, x, causal, use_reentrant=True)
            else:
                x = blk(x, causal)
        self.meter.region = "head"
        x = self.lnf(x)
        logits = F.linear(x, self.wte.weight)                        # tied, no bias
        return F.cross_entropy(logits.view(-1, self.v), targets.reshape(-1))


def make_optimizer(model, lr):
    """AdamW over the trainable parameters (all of them, but a peft model's adapters only):
    weight decay 0.1 on the 2-D ones."""
    train = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in train if p.dim() >= 2]
    no_decay = [p for p in train if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8)


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description="PyTorch GPT-2 peer for ctron benchmarks")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--recompute", choices=["none", "full", "selective"], default="none")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: forward and loss under torch.autocast('cpu', bfloat16), fp32 "
                         "master weights and AdamW (default fp32)")
    ap.add_argument("--attention", choices=["explicit", "sdpa"], default="explicit",
                    help="explicit QK^T/softmax/dropout/.V, or "
                         "F.scaled_dot_product_attention (PyTorch >= 2.0) (default explicit)")
    args = ap.parse_args(argv)
    for name in ("layers", "hidden", "heads", "seq", "batch", "vocab", "steps", "threads"):
        val = getattr(args, name)
        lo = 0 if name == "layers" else 1
        if val < lo:
            ap.error(f"--{name} {val}: expected an integer >= {lo}")
    if not 0.0 <= args.dropout < 1.0:
        ap.error(f"--dropout {args.dropout}: expected 0 <= p < 1")
    if args.hidden % args.heads != 0:
        ap.error(f"--hidden {args.hidden} is not divisible by --heads {args.heads}")
    missing = unsupported(args)
    if missing:
        ap.error(f"PyTorch {torch.__version__} lacks {missing}")
    return args


def unsupported(args):
    """What this PyTorch lacks for the chosen options, or None."""
    if args.attention == "sdpa" and not hasattr(F, "scaled_dot_product_attention"):
        return "torch.nn.functional.scaled_dot_product_attention (--attention sdpa needs >= 2.0)"
    if args.precision == "bf16" and not hasattr(torch, "autocast"):
        return "torch.autocast (--precision bf16)"
    return None


def forward_context(precision):
    """The context the forward and the loss run in: CPU autocast to bf16, or nothing."""
    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    peer_loop.check_threads("torch_gpt.py", args.threads)
    torch.manual_seed(args.seed)

    model = GPT(args.layers, args.hidden, args.heads, args.seq, args.vocab,
                args.dropout, args.recompute, args.attention)
    model.train()
    opt = make_optimizer(model, args.lr)
    meter = SavedTensorMeter(model)

    def forward(idx, tgt, metered):
        if not metered:
            with forward_context(args.precision):
                return model(idx, tgt)
        model.meter = meter
        with meter.hooks(), forward_context(args.precision):
            loss = model(idx, tgt)
        model.meter = _NullMeter()
        return loss

    recs = peer_loop.train(args, forward, opt)
    peer_loop.summary(args, model, meter, recs, {
        "torch_version": torch.__version__,
        "precision": args.precision,
        "attention": args.attention,
        "config": {"layers": args.layers, "hidden": args.hidden, "heads": args.heads,
                   "seq": args.seq, "batch": args.batch, "vocab": args.vocab,
                   "dropout": args.dropout, "steps": args.steps,
                   "recompute": args.recompute, "lr": args.lr, "seed": args.seed,
                   "precision": args.precision, "attention": args.attention},
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
