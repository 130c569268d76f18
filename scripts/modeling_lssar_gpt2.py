"""
GPT-2 + RoPE with every attention variant of lssar.cu (softmax, sigmoid, relu, lssa, lssar,
softmax_rw, sigmoid_l1_rw, relu_l1_rw, ssmax; fixed or learned re-weighting power p), as a self-contained
PyTorch module: this file, the manifest.json beside it (the project's list of variants and their
parts) and torch are all it needs. scripts/export.py writes them next to a checkpoint's weights
(pytorch_model.bin: a state_dict with nanoGPT's names) and config.json:

    from modeling_lssar_gpt2 import LssarGPT2
    model = LssarGPT2.from_pretrained("exported_dir")          # float32, eval mode
    logits, loss = model(idx, targets)                       # idx (B, T) token ids
    out = model.generate(idx, max_new_tokens=100, temperature=0.8, top_k=40)

The definition is lssar.cu's doc/attention.md: RoPE on interleaved pairs before the attention;
LSSA's cosine scores scaled by ln(hd) ln(n_t) (n_t = t + 1 keys seen by row t) and exact softplus;
the sigmoid variant's bias -ln(n_t), relu's scale 1/n_t (with attn_len = L > 0, the trainer's -tl 1:
-ln(L) and 1/L on every row); softmax's and softmax_rw's log-length scaling (attn_len = L > 1: row t's
dot scores times max(1, ln(n_t) / ln(L))); ssmax's scores s_h ln(n_t) q.k / sqrt(hd) with s_h learned
per layer and head; the re-weighting W = relu(n_t A - o_t)^p
normalised (o_t = 0 on rows 0-2, else 1), evaluated divided by the row's largest x so that no
power overflows, with rows where no x is positive (and uniform rows with o_t = 1) giving zero
output; learned p = 1 + softplus(theta) per layer and head. The language-model head is the
(padded) token embedding; logits are returned for the real vocabulary only, at every position.
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

def load_manifest():
    """The variants' parts, from the manifest.json beside this file (an export), or in the
    repository's scripts/ from scripts/manifest.py"""
    here = os.path.dirname(os.path.abspath(__file__))
    beside = os.path.join(here, "manifest.json")
    if os.path.exists(beside):
        with open(beside) as f:
            return json.load(f)
    if os.path.exists(os.path.join(here, "manifest.py")):
        sys.path.insert(0, here)
        import manifest
        return manifest.load()
    raise ImportError(f"{beside} is missing: scripts/export.py writes it beside this module")


MANIFEST = load_manifest()
# each variant's entry: score, positivity phi, normalisation, re-weighting, head parameter, whether
# its definition holds a length (has_len) and log-length scaling applies: doc/attention.md, 'Variants'
VARIANTS = {v["name"]: v for v in MANIFEST["variants"]}
SSMAX_S0 = MANIFEST["constants"]["SSMAX_S0"]  # ssmax's s at initialisation (attention/attention_kind.h)


class LssarGPT2Config:
    """The model's shape and attention, as config.json holds them."""

    def __init__(self, attn="lssar", n_layer=12, n_head=12, n_embd=768, vocab_size=50257, padded_vocab_size=50304,
                 block_size=1024, p=15.0, learn_p=False, rope_base=10000.0, layer_norm_epsilon=1e-5, attn_len=0,
                 **extra):
        if attn not in VARIANTS:
            raise ValueError(f"attn '{attn}' is not one of {', '.join(VARIANTS)}")
        v = VARIANTS[attn]
        if int(attn_len) < 0 or (int(attn_len) > 0 and not v["has_len"]):
            raise ValueError(f"attn_len = {attn_len}: must be >= 0, and is defined for "
                             f"{', '.join(n for n, w in VARIANTS.items() if w['has_len'])} only")
        if int(attn_len) == 1 and v["log_len_scaling"]:
            raise ValueError("attn_len = 1: log-length scaling divides by ln(attn_len), which must be > 0")
        self.attn_len = int(attn_len)
        self.attn, self.n_layer, self.n_head, self.n_embd = attn, n_layer, n_head, n_embd
        self.vocab_size, self.padded_vocab_size, self.block_size = vocab_size, padded_vocab_size, block_size
        self.p, self.learn_p, self.rope_base = float(p), bool(learn_p), float(rope_base)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.extra = extra  # other keys of config.json (the step, the format), kept as they were

    @classmethod
    def from_json(cls, path):
        with open(path) as f:
            return cls(**json.load(f))


def rope(x, base):
    """Rotates the interleaved pairs (2i, 2i+1) of every head by t base^(-2i/hd). x: (B, NH, T, hd)"""
    T, hd = x.size(-2), x.size(-1)
    i = torch.arange(hd // 2, dtype=torch.float64, device=x.device)
    t = torch.arange(T, dtype=torch.float64, device=x.device)
    angle = t[:, None] * base ** (-2.0 * i / hd)[None, :]  # (T, hd/2), in float64 as the C++ code
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).flatten(-2)


def exact_softplus(s):
    """ln(1 + e^s) with no threshold (F.softplus returns s above 20: LSSA's scores pass 20)"""
    return -F.logsigmoid(-s)


def l1_normalise(a, dim=-1):
    """a / sum(a), the sum in float64; rows that sum to 0 stay 0"""
    s = a.double().sum(dim, keepdim=True)
    safe = torch.where(s > 0, s, torch.ones_like(s))
    return torch.where(s > 0, a.double() / safe, torch.zeros_like(s)).to(a.dtype)


def attention_weights(q, k, attn, p, attn_len=0, s_head=None):
    """Causal attention weights (B, NH, T, T) of variant `attn`; p: a number or (NH,) per head;
    attn_len: the n of the dot_logn bias and the mean scale, 0 for each row's n_t; for dot scores
    with exp, L > 1 is log-length scaling; s_head: ssmax's s, (NH,)"""
    v = VARIANTS[attn]
    score, phi, norm, reweight = v["score"], v["phi"], v["norm"], v["reweight"]
    T, hd = q.size(-2), q.size(-1)
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    n = torch.arange(1, T + 1, dtype=q.dtype, device=q.device)[:, None]  # keys each row sees
    n_len = n if attn_len == 0 else torch.full_like(n, float(attn_len))
    if score == "cos_len":
        qh = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        kh = k / k.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        s = (math.log(hd) * torch.log(n)) * (qh @ kh.transpose(-2, -1))
    elif score == "ssmax":
        s = (s_head.to(q.dtype).reshape(-1, 1, 1) * torch.log(n)) * ((q @ k.transpose(-2, -1)) / math.sqrt(hd))
    else:
        s = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        if score == "dot_logn":
            s = s - torch.log(n_len)
        if v["log_len_scaling"] and attn_len > 1:  # max(1, ln(n_t) / ln(L)): 1 within L
            s = s * torch.where(n > attn_len, torch.log(n) / math.log(attn_len), torch.ones_like(n))
    if phi == "exp":
        s_masked = s.masked_fill(~mask, float("-inf"))
        a = torch.exp(s_masked - s_masked.amax(dim=-1, keepdim=True))  # exp with the max shift; 0 above the diagonal
    else:
        a = {"softplus": exact_softplus, "sigmoid": torch.sigmoid, "relu": torch.relu}[phi](s) * mask
    A = l1_normalise(a) if norm == "l1" else a / n_len if norm == "mean" else a
    if not reweight:
        return A
    # x = n A - o; W = relu(x)^p / sum, evaluated as (relu(x) / m)^p, m the row's largest x
    o = (torch.arange(T, device=q.device) >= 3).to(q.dtype)[:, None]
    x = n * A - o
    m = x.masked_fill(~mask, float("-inf")).amax(dim=-1, keepdim=True)
    # uniform rows with o = 1 (every visible phi equal: x is rounding noise) pass nothing
    a_vis_max = a.masked_fill(~mask, float("-inf")).amax(dim=-1, keepdim=True)
    a_vis_min = a.masked_fill(~mask, float("inf")).amin(dim=-1, keepdim=True)
    uniform = (a_vis_max == a_vis_min) & (o > 0)
    degenerate = ~(m > 0) | uniform
    safe_m = torch.where(degenerate, torch.ones_like(m), m)
    if not torch.is_tensor(p):
        p = torch.tensor(float(p), dtype=q.dtype, device=q.device)
    p = p.to(q.dtype).reshape(-1, 1, 1) if p.dim() > 0 else p  # (NH, 1, 1) per head
    u = (torch.relu(x) / safe_m).clamp(max=1.0).pow(p) * mask
    W = l1_normalise(u)
    return torch.where(degenerate, torch.zeros_like(W), W)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        if cfg.learn_p:  # p = 1 + softplus(theta) per head
            self.p_theta = nn.Parameter(torch.zeros(cfg.n_head))
        if VARIANTS[cfg.attn]["head_param"] == "s":  # ssmax's s per head
            self.ssmax_s = nn.Parameter(torch.full((cfg.n_head,), SSMAX_S0))

    def p(self):
        return 1.0 + exact_softplus(self.p_theta) if self.cfg.learn_p else self.cfg.p

    def forward(self, x):
        B, T, C = x.size()
        NH = self.cfg.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in (q, k, v))  # (B, NH, T, hd)
        q, k = rope(q, self.cfg.rope_base), rope(k, self.cfg.rope_base)
        s_head = self.ssmax_s if VARIANTS[self.cfg.attn]["head_param"] == "s" else None
        y = attention_weights(q, k, self.cfg.attn, self.p(), self.cfg.attn_len, s_head) @ v
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
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class LssarGPT2(nn.Module):
    """GPT-2 with RoPE (no learned positions); lm_head tied to the padded token embedding."""

    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.padded_vocab_size, cfg.n_embd),
            h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),
            ln_f=nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon),
        ))
        self.lm_head = nn.Linear(cfg.n_embd, cfg.padded_vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied, as in GPT-2 and nanoGPT

    def forward(self, idx, targets=None):
        """Logits (B, T, vocab_size) at every position, and the mean cross-entropy if targets are given."""
        x = self.transformer.wte(idx)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))[..., :self.config.vocab_size]
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, context=None):
        """Appends max_new_tokens sampled tokens to idx (B, T): temperature 0 or top_k 1 is greedy.
        The model sees the last `context` tokens (default: its training length, block_size; RoPE
        has no hard limit)."""
        context = context or self.config.block_size
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -context:])
            logits = logits[:, -1, :]
            if temperature == 0 or top_k == 1:
                nxt = logits.argmax(dim=-1, keepdim=True)
            else:
                logits = logits / temperature
                if top_k is not None:
                    kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, [-1]]
                    logits = logits.masked_fill(logits < kth, float("-inf"))
                nxt = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
            idx = torch.cat((idx, nxt), dim=1)
        return idx

    @classmethod
    def from_pretrained(cls, directory, map_location="cpu"):
        """The model of an export directory: config.json and pytorch_model.bin (or model.safetensors)."""
        cfg = LssarGPT2Config.from_json(os.path.join(directory, "config.json"))
        model = cls(cfg)
        weights = os.path.join(directory, "pytorch_model.bin")
        if os.path.exists(weights):
            state = torch.load(weights, map_location=map_location)
        else:
            from safetensors.torch import load_file
            state = load_file(os.path.join(directory, "model.safetensors"), device=str(map_location))
            state.setdefault("lm_head.weight", state["transformer.wte.weight"])
        model.load_state_dict(state)
        return model.eval()
