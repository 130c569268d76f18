"""
What the evaluation's plots and reports share: runs given as LABEL=CSV on the command line, CSVs
read with their columns checked (a missing file or column refused naming the file and the program
that writes it), and an axis of sequence lengths (log2) with the training length marked.
"""
import csv
import sys


def number(text):
    """An int where the CSV holds one (lengths, counts), else a float."""
    return int(text) if text.lstrip("-").isdigit() else float(text)


def split_spec(spec, example="lssar=out/lssar.csv"):
    """(label, path) of a LABEL=CSV argument; refused without the '='."""
    label, sep, path = spec.rpartition("=")
    if not sep:
        sys.exit(f"error: '{spec}': give each run as LABEL=CSV, e.g. {example}")
    return label, path


def read_csv(path, columns, writer, what=None):
    """The rows (dicts) of a CSV that has at least these columns. A file that cannot be read is
    refused naming the program that writes it; one without the columns with `what` (default: the
    columns expected)."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        sys.exit(f"error: {path}: {e.strerror} ({writer} writes it)")
    if not rows or not set(columns) <= set(rows[0]):
        sys.exit(f"error: {path}: {what or f'expected a CSV with columns {chr(44).join(columns)} ({writer})'}")
    return rows


def read_runs(specs, columns, producer):
    """[(label, rows)] from LABEL=CSV specs; rows are tuples of the columns, in their order."""
    runs = []
    for spec in specs:
        label, path = split_spec(spec)
        rows = read_csv(path, columns, producer + " -o")
        runs.append((label, [tuple(number(r[c]) for c in columns) for r in rows]))
    return runs


def lengths_of(runs):
    return sorted({row[0] for _, rows in runs for row in rows})


def finish_length_axes(ax, fig, lengths, train_len, xlabel, ylabel, title, out):
    """Log2 axis of the lengths, the training length marked, labels, legend; writes the PNG."""
    if train_len:
        ax.axvline(train_len, color="gray", linestyle=":", label=f"training length {train_len}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths)
    ax.set_xticklabels([str(L) for L in lengths])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")
