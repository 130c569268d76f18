#!/usr/bin/env python3
"""FineWeb (or FineWeb-Edu) -> GPT-2 token shards in llm.c's .bin format.

For users with internet access; the tests only import write_datafile() from here.
Needs: pip install datasets tiktoken numpy tqdm

    python3 scripts/fineweb.py -v 10B            # ~10B tokens, 100M-token shards, in data/fineweb10B/
    python3 scripts/fineweb.py -t edu -v 100B -o data/edu_fineweb100B

Output, as llm.c/dev/data/fineweb.py writes it: every document is <|endoftext|> (50256)
followed by its GPT-2 tokens; the first shard is the validation split (fineweb_val_000000.bin),
the second the test split (fineweb_test_000001.bin: held out for the reported figures, as every
corpus script of this project holds out one), the rest are training shards (fineweb_train_000002.bin,
...); llm.c's own shards have no test split. Each shard is a 256 int32 header
(20240520, 1, token count, zeros) and then uint16 tokens. Train with
    -i "data/fineweb10B/fineweb_train_*.bin" -j "data/fineweb10B/fineweb_val_*.bin"
"""
import argparse
import os
import sys

MAGIC, VERSION, HEADER_INTS = 20240520, 1, 256
EOT = 50256


def shard_split(shard):
    """The split of shard number `shard`: 0 val, 1 test, the rest train."""
    return "val" if shard == 0 else "test" if shard == 1 else "train"


def write_datafile(filename, toks):
    """Writes the token ids toks (any sequence of ints in [0, 65536)) as one .bin shard,
    through a temporary file, so an interrupted run never leaves a half shard."""
    import numpy as np
    toks = np.asarray(toks, dtype=np.int64)
    if toks.size and (toks.min() < 0 or toks.max() >= 2**16):
        raise ValueError(f"{filename}: token ids must be in [0, 65536) to fit uint16")
    if toks.size > 2**31 - 1:
        raise ValueError(f"{filename}: {toks.size} tokens do not fit one shard's int32 count")
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[0], header[1], header[2] = MAGIC, VERSION, toks.size
    tmp = filename + ".tmp"
    with open(tmp, "wb") as f:
        f.write(header.tobytes())
        f.write(toks.astype("<u2").tobytes())
    os.replace(tmp, filename)


def read_datafile(filename):
    """Reads a .bin shard back as a numpy uint16 array, checking its header and size."""
    import numpy as np
    with open(filename, "rb") as f:
        header = np.frombuffer(f.read(HEADER_INTS * 4), dtype="<i4")
        if header.size != HEADER_INTS or header[0] != MAGIC or header[1] != VERSION:
            raise ValueError(f"{filename}: not a version {VERSION} token shard (magic {MAGIC})")
        toks = np.frombuffer(f.read(), dtype="<u2")
    if toks.size != header[2]:
        raise ValueError(f"{filename}: header says {header[2]} tokens, the file holds {toks.size}")
    return toks


def tokenize(doc):
    import numpy as np
    import tiktoken
    enc = tiktoken.get_encoding("gpt2")
    toks = [EOT] + enc.encode_ordinary(doc["text"])
    return np.array(toks, dtype=np.uint16)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-t", "--type", choices=["classic", "edu"], default="classic", help="FineWeb or FineWeb-Edu")
    p.add_argument("-v", "--version", choices=["10B", "100B"], default="10B", help="sample size in tokens")
    p.add_argument("-s", "--shard_size", type=int, default=10**8, help="tokens per shard")
    p.add_argument("-o", "--out", default=None, help="output folder (default data/fineweb10B, data/edu_fineweb10B, ...)")
    p.add_argument("-j", "--procs", type=int, default=max(1, (os.cpu_count() or 2) // 2), help="tokenizer processes")
    args = p.parse_args()
    try:
        import multiprocessing as mp
        import numpy as np
        from datasets import load_dataset
        from tqdm import tqdm
    except ImportError as e:
        sys.exit(f"fineweb.py: {e}; install with: pip install datasets tiktoken numpy tqdm")

    name = {"classic": "HuggingFaceFW/fineweb", "edu": "HuggingFaceFW/fineweb-edu"}[args.type]
    remote = {"10B": "sample-10BT", "100B": "sample-100BT"}[args.version]
    prefix = {"classic": "fineweb", "edu": "edu_fineweb"}[args.type]
    out = args.out or os.path.join("data", f"{prefix}{args.version}")
    os.makedirs(out, exist_ok=True)
    data = load_dataset(name, name=remote, split="train")

    buf = np.empty(args.shard_size, dtype=np.uint16)
    fill, shard, bar = 0, 0, None
    with mp.Pool(args.procs) as pool:
        for toks in pool.imap(tokenize, data, chunksize=16):
            pos = 0
            while pos < len(toks):  # a document may continue into the next shard
                take = min(args.shard_size - fill, len(toks) - pos)
                buf[fill:fill + take] = toks[pos:pos + take]
                fill, pos = fill + take, pos + take
                if bar is None:
                    bar = tqdm(total=args.shard_size, unit="tokens", desc=f"shard {shard}")
                bar.update(take)
                if fill == args.shard_size:
                    bar.close()
                    split = shard_split(shard)
                    write_datafile(os.path.join(out, f"{prefix}_{split}_{shard:06d}.bin"), buf)
                    shard, fill, bar = shard + 1, 0, None
    if fill:
        split = shard_split(shard)
        write_datafile(os.path.join(out, f"{prefix}_{split}_{shard:06d}.bin"), buf[:fill])
        shard += 1
    print(f"wrote {shard} shards to {out}")


if __name__ == "__main__":
    main()
