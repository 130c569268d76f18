#!/usr/bin/python3
"""Trajectories as tokens of a small vocabulary, written as the trainer's .bin shards
(dataloader/shard.h: 256 int32 header [20240520, 1, count, 0...], then uint16 tokens).

Vocabulary (V = 2 * bins + len(DTS)):
  [0, bins)              x bins: x in [-box, box) cut into `bins` equal bins
  [bins, 2 bins)         y bins, the same cut of y
  2 bins + k             the time step DTS[k] of the trajectory (its first token)
One system is one sequence of T = 1 + 2 * bodies * steps tokens:
  dt-token, then per time step the bodies in order (the star first, then the planets), each as its
  x token and its y token. Sequences are written back to back, so with the trainer's -t T every
  window is one whole system (the dataloader's window k holds tokens [kT, kT + T]) and its last
  target is the next system's dt-token.
A coordinate decodes to its bin's centre, within half a bin (box / bins) of the true value.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import fineweb  # noqa: E402  the .bin shard format, as llm.c writes it



def vocab_size(bins, n_dts=2):
    return 2 * bins + n_dts


def seq_len(bodies, steps):
    return 1 + 2 * bodies * steps


def to_bins(v, box, bins):
    """Bin index in [0, bins) of coordinates v (clipped into the box)."""
    width = 2.0 * box / bins
    return np.clip(np.floor((v + box) / width), 0, bins - 1).astype(np.int64)


def from_bins(idx, box, bins):
    """The centre of bin idx."""
    width = 2.0 * box / bins
    return -box + (idx + 0.5) * width


def encode(pos, dt_index, box, bins):
    """Tokens (n, T) of positions (n, S, B, 2) and time-step indices (n,)."""
    n, S, B, _ = pos.shape
    xy = np.stack([to_bins(pos[..., 0], box, bins), bins + to_bins(pos[..., 1], box, bins)], axis=-1)
    body_tokens = xy.reshape(n, S * B * 2)
    return np.concatenate([(2 * bins + dt_index)[:, None], body_tokens], axis=1).astype(np.uint16)


def decode(tokens, bodies, box, bins):
    """Positions (n, S, B, 2) (bin centres) and dt indices (n,) of tokens (n, T); refuses tokens
    outside their range (an x bin where a y bin belongs, and so on)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    n, T = tokens.shape
    if (T - 1) % (2 * bodies):
        raise ValueError(f"sequence length {T} is not 1 + 2 x {bodies} bodies x steps")
    dt_index = tokens[:, 0] - 2 * bins
    xy = tokens[:, 1:].reshape(n, -1, bodies, 2)
    x, y = xy[..., 0], xy[..., 1] - bins
    if (dt_index < 0).any() or (x < 0).any() or (x >= bins).any() or (y < 0).any() or (y >= bins).any():
        raise ValueError("tokens outside their ranges: not a trajectory of this layout")
    return np.stack([from_bins(x, box, bins), from_bins(y, box, bins)], axis=-1), dt_index


def write_shard(path, tokens):
    """tokens (any shape) as one shard of the trainer's .bin format (scripts/fineweb.py's writer)."""
    fineweb.write_datafile(path, np.asarray(tokens).reshape(-1))


def read_shard(path):
    return fineweb.read_datafile(path)


def main(argv=None):
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import simulate
    p = argparse.ArgumentParser(description="Simulated systems (.npz of orbits/simulate.py) to a token shard")
    p.add_argument("npz")
    p.add_argument("-o", "--out", required=True, help="output shard (.bin)")
    p.add_argument("--bins", type=int, default=128, help="bins per axis")
    a = p.parse_args(argv)
    if not 2 <= a.bins <= 16000:
        print(f"error: --bins {a.bins}: outside [2, 16000] (the vocabulary 2 x bins + 2 must fit uint16)",
              file=sys.stderr)
        return 1
    sim, cfg = simulate.load(a.npz)
    tokens = encode(sim["pos"], sim["dt_index"], cfg["box"], a.bins)
    write_shard(a.out, tokens)
    print(f"wrote {a.out}: {tokens.shape[0]} sequences of T = {tokens.shape[1]} tokens, vocabulary "
          f"{vocab_size(a.bins)}, bin width {2 * cfg['box'] / a.bins:.4g} AU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
