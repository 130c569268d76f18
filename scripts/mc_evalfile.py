"""
Multiple-choice eval files in llm.c's format (llm.c/dev/data/data_common.py's write_evalfile), the
Python twin of eval/mc_file.h. Standard library only.

    header    256 int32, little-endian: magic 20240522, version 1, number of examples,
              the longest example in bytes, then zeros
    examples  each a stream of uint16: 65535 (start), the example's size in bytes, its index,
              label, number of completions, context length, context tokens, then per completion
              its length and tokens

An example is a dict {"label": int, "ctx_tokens": [int], "ending_tokens": [[int], ...]}, the
shape llm.c's preparation scripts hand to their writer, so for the same examples both write the
same bytes.
"""
import os
import struct

MAGIC = 20240522
VERSION = 1
HEADER_INTS = 256
START = 65535


def encode_example(index, ex):
    """The uint16 stream of one example (its size field filled in)."""
    ctx, endings, label = ex["ctx_tokens"], ex["ending_tokens"], ex["label"]
    if len(endings) < 2 or not 0 <= label < len(endings):
        raise ValueError(f"example {index}: label {label} of {len(endings)} completions (need >= 2 and a label among them)")
    stream = [START, 0, index, label, len(endings)]
    for toks in [ctx] + list(endings):
        if not toks:
            raise ValueError(f"example {index}: an empty context or completion")
        if not all(0 <= t < START for t in toks):
            raise ValueError(f"example {index}: a token id outside [0, 65535)")
        stream.append(len(toks))
        stream.extend(toks)
    nbytes = 2 * len(stream)
    if nbytes >= 1 << 16:
        raise ValueError(f"example {index}: {nbytes} bytes, the size field holds at most 65535")
    stream[1] = nbytes
    return stream


def encode_evalfile(examples):
    """The bytes of an eval file holding examples (indices 0, 1, ... in list order)."""
    if not 1 <= len(examples) <= 1 << 16:
        raise ValueError(f"{len(examples)} examples, expected 1 to 65536")
    streams = [encode_example(i, ex) for i, ex in enumerate(examples)]
    longest = max(2 * len(s) for s in streams)
    header = [MAGIC, VERSION, len(examples), longest] + [0] * (HEADER_INTS - 4)
    body = [v for s in streams for v in s]
    return struct.pack(f"<{HEADER_INTS}i", *header) + struct.pack(f"<{len(body)}H", *body)


def write_evalfile(path, examples):
    """Writes the file through path.tmp and a rename, so that no half file has the name."""
    data = encode_evalfile(examples)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return len(data)


def read_evalfile(path):
    """The examples of an eval file (structure checked; eval/mc_file.h is the full validator)."""
    with open(path, "rb") as f:
        return read_evalfile_bytes(f.read(), path)


def read_evalfile_bytes(data, path="<bytes>"):
    h = struct.unpack_from(f"<{HEADER_INTS}i", data, 0)
    if h[0] != MAGIC or h[1] != VERSION:
        raise ValueError(f"{path}: magic {h[0]} version {h[1]}, expected {MAGIC} {VERSION}")
    words = struct.unpack_from(f"<{(len(data) - 4 * HEADER_INTS) // 2}H", data, 4 * HEADER_INTS)
    examples, at = [], 0
    for i in range(h[2]):
        if words[at] != START or words[at + 2] != i:
            raise ValueError(f"{path}: example {i}: bad start marker or index")
        end = at + words[at + 1] // 2
        label, n = words[at + 3], words[at + 4]
        at += 5
        lists = []
        for _ in range(n + 1):
            k = words[at]
            lists.append(list(words[at + 1:at + 1 + k]))
            at += 1 + k
        if at != end:
            raise ValueError(f"{path}: example {i}: size field disagrees with its fields")
        examples.append({"label": label, "ctx_tokens": lists[0], "ending_tokens": lists[1:]})
    return examples
