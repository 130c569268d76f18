#!/usr/bin/python3
"""Plots of the CSVs written by build/attention_maps_cpu_<attn> -o PREFIX.

  # heatmap of one layer and head's weights (log colour scale shows the tail a linear one hides)
  /usr/bin/python3 eval/plot_attention_maps.py heatmap maps/lssar_L0_H0.csv --log -o lssar_L0_H0.png
  # mean entropy (over layers and heads) versus row position, for several runs
  /usr/bin/python3 eval/plot_attention_maps.py entropy maps/softmax_stats.csv:softmax maps/lssar_stats.csv:lssar -o entropy.png
"""
import argparse
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.colors as colors
import matplotlib.pyplot as plt
import numpy as np


def fail(msg):
    sys.exit("error: " + msg)


def read_map(path):
    """rows (R,) and weights (R, T) of a PREFIX_L<l>_H<h>.csv (header row,0,1,..,T-1)"""
    try:
        data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    except OSError as e:
        fail(f"cannot read {path} ({e}); give a PREFIX_L<l>_H<h>.csv of attention_maps")
    return data[:, 0].astype(int), data[:, 1:]


def heatmap(args):
    rows, w = read_map(args.csv)
    T = w.shape[1]
    fig, ax = plt.subplots(figsize=(6, 5))
    # zeros (above the diagonal, or underflowed) have no logarithm: shown as the background
    norm = colors.LogNorm(vmin=max(args.vmin, w[w > 0].min()), vmax=1.0) if args.log else colors.Normalize(0, w.max())
    shown = np.ma.masked_less_equal(w, 0) if args.log else w
    # the rows may be a sample (-rows): place each at its own index
    im = ax.imshow(shown, aspect="auto", interpolation="nearest", norm=norm, cmap="viridis",
                   extent=(-0.5, T - 0.5, rows[-1] + 0.5, rows[0] - 0.5))
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position t")
    ax.set_title(args.title or args.csv)
    fig.colorbar(im, ax=ax, label="attention weight")
    fig.tight_layout()
    fig.savefig(args.o, dpi=120)
    print("wrote", args.o)


def entropy(args):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for spec in args.stats:
        path, _, label = spec.partition(":")
        try:
            d = np.genfromtxt(path, delimiter=",", names=True)  # degenerate rows are nan
        except OSError as e:
            fail(f"cannot read {path} ({e}); give a PREFIX_stats.csv of attention_maps")
        if args.layer is not None:
            d = d[d["layer"] == args.layer]
            if d.size == 0:
                fail(f"{path} has no rows of layer {args.layer}")
        T = int(d["row"].max()) + 1
        # mean over the layers and heads present, per row
        value = np.array([np.nanmean(d[args.stat][d["row"] == t]) for t in range(T)])
        ax.plot(np.arange(1, T + 1), value, label=label or path, lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("row position t + 1 (keys attended)")
    ax.set_ylabel(f"mean {args.stat}" + ("" if args.layer is None else f", layer {args.layer}"))
    if args.stat == "entropy":
        t = np.arange(1, T + 1)
        ax.plot(t, np.log(t), "k:", lw=0.8, label="log(t+1) (uniform)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.o, dpi=120)
    print("wrote", args.o)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("heatmap", help="heatmap of a PREFIX_L<l>_H<h>.csv")
    h.add_argument("csv")
    h.add_argument("--log", action="store_true", help="log colour scale")
    h.add_argument("--vmin", type=float, default=1e-6, help="smallest weight of the log scale (default 1e-6)")
    h.add_argument("--title")
    h.add_argument("-o", default="attention_map.png")
    h.set_defaults(run=heatmap)
    e = sub.add_parser("entropy", help="a statistic versus row position from PREFIX_stats.csv files")
    e.add_argument("stats", nargs="+", help="PATH[:LABEL] of each run")
    e.add_argument("--stat", default="entropy", choices=["entropy", "span", "max", "self", "distance"])
    e.add_argument("--layer", type=int, help="one layer (default: mean over all in the file)")
    e.add_argument("-o", default="attention_entropy.png")
    e.set_defaults(run=entropy)
    args = p.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
