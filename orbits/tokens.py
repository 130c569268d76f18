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
import sys

import numpy as np

SHARD_MAGIC, SHARD_VERSION, SHARD_HEADER_INTS = 20240520, 1, 256


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
    """tokens (uint16) as one shard, written to path.tmp and renamed."""
    import os
    flat = np.ascontiguousarray(tokens, dtype=np.uint16).reshape(-1)
    if flat.size >= 2 ** 31:
        raise ValueError(f"{path}: {flat.size} tokens do not fit one shard's int32 count")
    header = np.zeros(SHARD_HEADER_INTS, dtype="<i4")
    header[:3] = (SHARD_MAGIC, SHARD_VERSION, flat.size)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        f.write(flat.astype("<u2").tobytes())
    os.replace(tmp, path)


def read_shard(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(SHARD_HEADER_INTS * 4), dtype="<i4")
        if header.size != SHARD_HEADER_INTS or header[0] != SHARD_MAGIC or header[1] != SHARD_VERSION:
            raise ValueError(f"{path}: not a version-1 token shard (magic {SHARD_MAGIC})")
        tokens = np.frombuffer(f.read(), dtype="<u2")
    if tokens.size != header[2]:
        raise ValueError(f"{path}: header says {header[2]} tokens, the file holds {tokens.size}")
    return tokens


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
