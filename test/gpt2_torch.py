"""
An independent PyTorch implementation of GPT-2 + RoPE with every attention variant of the family,
written to read like nanoGPT's model.py. It is the reference the C++ CPU back end is checked
against (test/test_pytorch.cpp): it builds a tiny model, runs one forward/backward and a few AdamW
steps in float64 with autograd, and writes everything to a small binary debug state.

    /usr/bin/python3 test/gpt2_torch.py --attn lssar --p 15 --out build/torch_state_lssar.bin
    /usr/bin/python3 test/gpt2_torch.py --attn softmax --attn-len 8 --out build/torch_state_softmax_len8.bin

It also scores a multiple-choice eval file (llm.c's format) with a checkpoint's weights, one row
per completion, in float64, for test/test_mc_eval.cpp (per-example losses as a CSV):

    /usr/bin/python3 test/gpt2_torch.py --mc-eval CKPT --mc-file FILE.bin --out scores.csv [--n N]

The attention follows doc/attention.md (the project's specification), written here from the formulas
with PyTorch autograd doing the backward. Only the lists come from the C++ code, through the
manifest (scripts/manifest.py): which parts make each variant, the variants' numbers, the parameter
tensors' order and shapes, and ssmax's initial s; none of the computation does.
"""
import argparse
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import manifest  # noqa: E402

STATE_MAGIC = 20241129
STATE_VERSION = 2  # 2: the header's 13th int is attn_len (version 1 files have 12, attn_len 0)


def rope(x, base):
    """Rotate interleaved pairs (2i, 2i+1) of every head by angle t * base^(-2i/hd). x: (B, NH, T, hd)"""
    B, NH, T, hd = x.shape
    i = torch.arange(hd // 2, dtype=torch.float64)
    t = torch.arange(T, dtype=torch.float64)
    angle = t[:, None] * base ** (-2.0 * i / hd)[None, :]  # (T, hd/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    y0 = x0 * cos - x1 * sin
    y1 = x0 * sin + x1 * cos
    return torch.stack([y0, y1], dim=-1).flatten(-2)


MANIFEST = manifest.load()
# Each variant: (score, phi, normalisation, re-weighting), as doc/attention.md, section 'Variants' defines them.
VARIANTS = {v["name"]: (v["score"], v["phi"], v["norm"], v["reweight"]) for v in MANIFEST["variants"]}
SSMAX_S0 = MANIFEST["constants"]["SSMAX_S0"]  # ssmax's s per head at initialisation
ATTN_KINDS = {v["name"]: v["kind"] for v in MANIFEST["variants"]}  # the C++ AttnKind numbers


def safe_divide(a, b):
    """a / b where b > 0, else 0 (a degenerate row: all weights 0, no gradient)"""
    ok = b > 0
    return torch.where(ok, a / torch.where(ok, b, torch.ones_like(b)), torch.zeros_like(a))


def causal_attention_weights(q, k, kind, p, attn_len=0, s_head=None):
    """Attention weights (B, NH, T, T) of a variant; zero above the diagonal. attn_len = L > 1 on
    dot scores with exp: log-length scaling, row t's scores times max(1, log(n_t) / log(L)).
    s_head: ssmax's s, one per head."""
    score, phi, norm, reweight = VARIANTS[kind]
    T, hd = q.size(-2), q.size(-1)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    n = torch.arange(1, T + 1, dtype=q.dtype)[:, None]  # visible tokens of each row
    if score == "cos_len":  # LSSA: cosine scores scaled by log(hd) * log(n_t)
        eps = 1e-12
        qh = q / q.norm(dim=-1, keepdim=True).clamp_min(eps)
        kh = k / k.norm(dim=-1, keepdim=True).clamp_min(eps)
        s = math.log(hd) * torch.log(n) * (qh @ kh.transpose(-2, -1))
    elif score == "ssmax":  # scalable softmax: s_h log(n_t) q.k / sqrt(hd)
        s = s_head.view(-1, 1, 1) * torch.log(n) * (q @ k.transpose(-2, -1)) / math.sqrt(hd)
    else:
        s = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        if score == "dot_logn":  # the sigmoid attention's bias -log(n_t)
            s = s - torch.log(n)
        if score == "dot" and phi == "exp" and attn_len > 1:
            s = s * torch.clamp(torch.log(n) / math.log(attn_len), min=1.0)
    if phi == "exp":
        a = F.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)  # exp, l1 in one step
    else:
        a = {"softplus": lambda s: -F.logsigmoid(-s),  # exact softplus (no threshold)
             "sigmoid": torch.sigmoid, "relu": torch.relu}[phi](s) * mask
        if norm == "l1":
            a = safe_divide(a, a.sum(dim=-1, keepdim=True))
        elif norm == "mean":
            a = a / n
    if not reweight:
        return a
    # re-weight with relu(n A - o)^p, o = 0 on the first three rows, then l1-normalise
    o = (torch.arange(T) >= 3).to(q.dtype)[:, None]
    r = torch.relu(n * a - o).pow(p) * mask
    return safe_divide(r, r.sum(dim=-1, keepdim=True))


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        if VARIANTS[cfg.attn][0] == "ssmax":  # s per head
            self.ssmax_s = nn.Parameter(torch.full((cfg.n_head,), SSMAX_S0))
        self.cfg = cfg

    def forward(self, x):
        B, T, C = x.size()
        NH = self.cfg.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, NH, C // NH).transpose(1, 2)  # (B, NH, T, hd)
        k = k.view(B, T, NH, C // NH).transpose(1, 2)
        v = v.view(B, T, NH, C // NH).transpose(1, 2)
        q, k = rope(q, self.cfg.rope_base), rope(k, self.cfg.rope_base)
        s_head = self.ssmax_s if VARIANTS[self.cfg.attn][0] == "ssmax" else None
        y = causal_attention_weights(q, k, self.cfg.attn, self.cfg.p, self.cfg.attn_len, s_head) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """GPT-2 with RoPE instead of learned positions; lm-head tied to the (padded) embedding."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.padded_vocab_size, cfg.n_embd)
        self.h = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)

    def forward(self, idx, targets):
        x = self.wte(idx)
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # (B, T, Vp)
        V = self.cfg.vocab_size
        loss = F.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1))
        return logits, loss

    def layout(self):
        """(per_layer, module path) of every non-empty parameter tensor of the C++ layout (the
        manifest's order): a per-layer tensor is stacked over the blocks."""
        cfg = self.cfg
        NH = cfg.n_head
        out = []
        for t in MANIFEST["params"]:
            shape = manifest.dims(t["shape"], C=cfg.n_embd, Vp=cfg.padded_vocab_size, NH=NH, NHP=0,
                                  NHS=NH if VARIANTS[cfg.attn][0] == "ssmax" else 0)
            if math.prod(shape) > 0:
                out.append((t["per_layer"], t["torch_name"]))
        return out

    def flat_tensors(self, get=lambda t: t):
        """The parameters in the C++ layout (model/gpt2_config.h): per-layer tensors stacked."""
        at = lambda module, name: get(module.get_parameter(name))
        return [torch.stack([at(b, name) for b in self.h]) if per_layer else at(self, name)
                for per_layer, name in self.layout()]

    def flat_params(self):
        return torch.cat([t.detach().reshape(-1) for t in self.flat_tensors()])

    def flat_grads(self):
        # gradients of the stacked views are the per-module gradients, stacked the same way
        return torch.cat([t.detach().reshape(-1) for t in self.flat_tensors(lambda t: t.grad)])


class Config:
    n_layer = 2
    n_head = 4
    n_embd = 32
    vocab_size = 97
    padded_vocab_size = 128
    rope_base = 10000.0
    attn = "lssar"
    p = 15.0
    attn_len = 0


def init_weights(model, cfg, gen):
    """GPT-2 initialisation (each tensor as the manifest's init says: gpt2_init_params), then a
    perturbation of every parameter (biases and layernorms too) so that no gradient is trivially zero."""
    init = {t["torch_name"]: t["init"] for t in MANIFEST["params"]}
    with torch.no_grad():
        for name, param in model.named_parameters():
            kind = init[name[name.index(".", 2) + 1:] if name.startswith("h.") else name]
            if kind == "ssmax_s0":
                param.fill_(SSMAX_S0)
            elif kind == "residual":
                param.normal_(0.0, 0.02 / math.sqrt(2 * cfg.n_layer), generator=gen)
            elif kind in ("normal", "wte"):  # wte's padded rows are zeroed below
                param.normal_(0.0, 0.02, generator=gen)
            elif kind == "ones":
                param.fill_(1.0)
            elif kind == "zeros":
                param.zero_()
            else:
                raise ValueError(f"{name}: initialisation {kind!r} is not written here")
            param.add_(torch.randn(param.shape, generator=gen, dtype=param.dtype) * 0.05)
        model.wte.weight[cfg.vocab_size:] = 0.0  # padded rows are never tokens


# ----------------------------------------------------------------------------
# multiple-choice scoring of a checkpoint (runtime/checkpoint.h's model file, llm.c's eval file)

def load_checkpoint(path):
    """(Config, flat float64 parameters) of a model file (runtime/checkpoint.h): 1024-byte header,
    then fp32 weights."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, T, V, Vp, L, NH, C, attn = struct.unpack_from("<2I7i", data, 0)
    p, rope_base = struct.unpack_from("<2f", data, 36)
    (num_params,) = struct.unpack_from("<Q", data, 48)
    # versions 2 and 3 share these first 64 bytes (3 adds the run's identity after the train state)
    assert magic == 0x52415353 and version in (2, 3), f"{path}: magic {magic:#x} version {version}, expected a version 2 or 3 checkpoint"
    cfg = Config()
    cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.vocab_size, cfg.padded_vocab_size = L, NH, C, V, Vp
    cfg.attn = {v: k for k, v in ATTN_KINDS.items()}[attn]
    cfg.p, cfg.rope_base = float(p), float(rope_base)
    (cfg.attn_len,) = struct.unpack_from("<i", data, 188) if version == 3 else (0,)  # CheckpointHeader.attn_len
    flat = torch.frombuffer(bytearray(data[1024:1024 + 4 * num_params]), dtype=torch.float32).to(torch.float64)
    return cfg, flat


def set_flat_params(model, flat):
    """The inverse of GPT.flat_tensors: copy the C++ layout into the modules."""
    at = 0

    def take(t):
        nonlocal at
        t.data.copy_(flat[at:at + t.numel()].view_as(t))
        at += t.numel()
    for per_layer, name in model.layout():
        for module in model.h if per_layer else [model]:
            take(module.get_parameter(name))
    assert at == flat.numel(), f"{flat.numel()} parameters in the checkpoint, the model takes {at}"


def read_mc_file(path):
    """[(label, context, [completions])] of an eval file (256 int32 header, uint16 examples)."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, n = struct.unpack_from("<3i", data, 0)
    assert magic == 20240522 and version == 1, f"{path}: not an eval file"
    words = struct.unpack_from(f"<{(len(data) - 1024) // 2}H", data, 1024)
    out, at = [], 0
    for _ in range(n):
        assert words[at] == 65535
        label, nc, at = words[at + 3], words[at + 4], at + 5
        lists = []
        for _ in range(nc + 1):
            lists.append(list(words[at + 1:at + 1 + words[at]]))
            at += 1 + words[at]
        out.append((label, lists[0], lists[1:]))
    return out


@torch.no_grad()
def mc_eval(args):
    torch.set_default_dtype(torch.float64)
    cfg, flat = load_checkpoint(args.mc_eval)
    model = GPT(cfg)
    set_flat_params(model, flat)
    examples = read_mc_file(args.mc_file)[:args.n or None]
    width = max(len(c) for _, _, c in examples)
    with open(args.out, "w") as f:
        f.write("index,label,pred,pred_norm" + "".join(f",sum_loss_{i}" for i in range(width)) +
                "".join(f",mean_loss_{i}" for i in range(width)) + "\n")
        for index, (label, ctx, comps) in enumerate(examples):
            sums = []
            for comp in comps:  # row context + completion; position len(ctx) - 1 + i predicts comp[i]
                row = torch.tensor([ctx + comp])
                logits, _ = model(row, row)  # (the loss over the whole row is not used)
                logp = F.log_softmax(logits[0, :, :cfg.vocab_size], dim=-1)
                pos = torch.arange(len(ctx) - 1, len(ctx) - 1 + len(comp))
                sums.append(-logp[pos, torch.tensor(comp)].sum().item())
            means = [s / len(c) for s, c in zip(sums, comps)]
            pad = [""] * (width - len(comps))
            cells = [index, label, sums.index(min(sums)), means.index(min(means))] + \
                [f"{x:.12g}" for x in sums] + pad + [f"{x:.12g}" for x in means] + pad
            f.write(",".join(map(str, cells)) + "\n")
    print(f"wrote {args.out}: {len(examples)} examples scored by torch {torch.__version__}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attn", choices=ATTN_KINDS, default="lssar")
    ap.add_argument("--p", type=float, default=15.0)
    ap.add_argument("--attn-len", type=int, default=0, help="attn_len (softmax, softmax_rw: log-length scaling beyond it)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--mc-eval", metavar="CKPT", help="score --mc-file with this checkpoint instead")
    ap.add_argument("--mc-file")
    ap.add_argument("--n", type=int, default=0, help="--mc-eval: the first n examples (0: all)")
    ap.add_argument("--B", type=int, default=3)
    ap.add_argument("--T", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1337)
    args = ap.parse_args()
    if args.mc_eval:
        return mc_eval(args)

    torch.set_default_dtype(torch.float64)
    cfg = Config()
    cfg.attn, cfg.p, cfg.attn_len = args.attn, args.p, args.attn_len
    gen = torch.Generator().manual_seed(args.seed)
    model = GPT(cfg)
    init_weights(model, cfg, gen)
    idx = torch.randint(0, cfg.vocab_size, (args.B, args.T), generator=gen)
    targets = torch.randint(0, cfg.vocab_size, (args.B, args.T), generator=gen)
    params0 = model.flat_params().clone()

    lr, betas, eps, wd = 1e-3, (0.9, 0.95), 1e-8, 0.1
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=betas, eps=eps)
    step_losses = []
    for step in range(args.steps):
        opt.zero_grad()
        logits, loss = model(idx, targets)
        loss.backward()
        if step == 0:
            logits0, loss0, grads0 = logits.detach().clone(), loss.item(), model.flat_grads().clone()
        step_losses.append(loss.item())
        opt.step()
    params_after = model.flat_params()

    with open(args.out, "wb") as f:
        header = [STATE_MAGIC, STATE_VERSION, cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.vocab_size,
                  cfg.padded_vocab_size, ATTN_KINDS[cfg.attn], args.B, args.T, args.steps, params0.numel(), cfg.attn_len]
        f.write(struct.pack("<13i", *header))
        f.write(struct.pack("<7d", cfg.p, cfg.rope_base, lr, betas[0], betas[1], eps, wd))
        f.write(idx.to(torch.int32).numpy().tobytes())
        f.write(targets.to(torch.int32).numpy().tobytes())
        for t in (params0, logits0.reshape(-1), torch.tensor([loss0]), grads0, torch.tensor(step_losses),
                  params_after):
            f.write(t.to(torch.float64).numpy().tobytes())
    print(f"wrote {args.out}: {cfg.attn} p={cfg.p} attn_len={cfg.attn_len} loss {loss0:.6f}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
