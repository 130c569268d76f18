"""
The PyTorch side of scripts/bench_cpu_trainer.sh: trains the model of test/gpt2_torch.py (GPT-2 +
RoPE, nanoGPT style) on the CPU with AdamW, in float32 or (--autocast bf16) with
torch.autocast("cpu", dtype=torch.bfloat16) around the forward and the loss (PyTorch's CPU mixed
precision: fp32 weights and optimizer, bf16 matmuls), the same step as the C++ trainer (forward,
backward, global-norm clipping, AdamW with decay on the matrices), and prints the median tokens/s
of the timed steps. Not a test: a benchmark.

    /usr/bin/python3 test/torch_trainer_bench.py --attn lssar --layers 4 --channels 256 --heads 4 \
        --B 16 --T 64 --steps 10 --threads 2
"""
import argparse
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_torch import GPT, Config  # noqa: E402


def blas_libraries():
    """The BLAS shared objects mapped into this process (what torch's matmuls really call)."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "blas" in os.path.basename(path) or "mkl" in os.path.basename(path):
                libs.add(path)
    return sorted(libs)


def library_kernels():
    """What the mapped libraries dispatch to in this process: OpenBLAS's core (openblas_get_corename)
    and oneDNN's ISA (dnnl_get_effective_cpu_isa), asked of the libraries themselves."""
    import ctypes
    isa_names = {0x27: "avx512_core", 0x67: "avx512_core_vnni", 0xe7: "avx512_core_bf16",
                 0x3e7: "avx512_core_amx", 0x7: "avx2", 0x407: "avx2_vnni", 0x3: "avx", 0x1: "sse41"}
    out = []
    for path in blas_libraries():
        if "openblas" in os.path.basename(path):
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            out.append(f"OpenBLAS {lib.openblas_get_corename().decode()}")
            break
    with open("/proc/self/maps") as f:
        dnnl = sorted({line.split()[-1] for line in f if "libdnnl" in line or "libmkldnn" in line})
    if dnnl:
        isa = ctypes.CDLL(dnnl[0]).dnnl_get_effective_cpu_isa()
        out.append(f"oneDNN {isa_names.get(isa, hex(isa))}")
    return ", ".join(out) or "no OpenBLAS or oneDNN mapped"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attn", choices=["softmax", "lssa", "lssar"], default="lssar")
    ap.add_argument("--p", type=float, default=15.0)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--channels", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--B", type=int, default=16)
    ap.add_argument("--T", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2, help="untimed first steps")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--autocast", choices=["none", "bf16"], default="none")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(1337)
    cfg = Config()
    cfg.n_layer, cfg.n_head, cfg.n_embd = args.layers, args.heads, args.channels
    cfg.vocab_size, cfg.padded_vocab_size = args.vocab, (args.vocab + 127) // 128 * 128
    cfg.attn, cfg.p = args.attn, args.p
    model = GPT(cfg).float()
    with torch.no_grad():  # GPT-2 initialisation
        for name, param in model.named_parameters():
            if name.endswith("c_proj.weight"):
                param.normal_(0.0, 0.02 / math.sqrt(2 * cfg.n_layer))
            elif param.dim() == 2:
                param.normal_(0.0, 0.02)
            elif "ln" in name and name.endswith("weight"):
                param.fill_(1.0)
            else:
                param.zero_()
        model.wte.weight[cfg.vocab_size:] = 0.0
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.0}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    tokens_per_s = []
    for step in range(args.warmup + args.steps):
        batch = torch.randint(0, cfg.vocab_size, (args.B, args.T + 1))
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            _, loss = model(batch[:, :-1], batch[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        if step >= args.warmup:
            tokens_per_s.append(args.B * args.T / dt)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, autocast {args.autocast}, "
          f"oneDNN (mkldnn) {torch.backends.mkldnn.is_available()}, BLAS: {' '.join(blas_libraries()) or 'none found'}; "
          f"kernels: {library_kernels()}", file=sys.stderr)
    print(f"{statistics.median(tokens_per_s):.1f}")


if __name__ == "__main__":
    main()
