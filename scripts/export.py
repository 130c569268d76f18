#!/usr/bin/env python3
"""
A checkpoint of lssar.cu as a PyTorch model, and back.

    /usr/bin/python3 scripts/export.py CKPT OUT_DIR
        writes OUT_DIR/pytorch_model.bin (a state_dict, nanoGPT's names: transformer.wte.weight,
        transformer.h.N.ln_1.weight, .attn.c_attn.weight, .attn.c_proj.bias, .mlp.c_fc.weight, ...,
        transformer.ln_f.bias, lm_head.weight tied to wte; learned p as transformer.h.N.attn.p_theta,
        ssmax's s as transformer.h.N.attn.ssmax_s),
        OUT_DIR/config.json (the model's shape, attention and p, the checkpoint's step),
        OUT_DIR/modeling_lssar_gpt2.py (the self-contained module that loads them: forward, generate),
        OUT_DIR/manifest.json (the project's list of variants, which the module reads: scripts/manifest.py)
        and OUT_DIR/model.safetensors where the safetensors module is importable.

    /usr/bin/python3 scripts/export.py --import SRC OUT_CKPT [--config CONFIG.json]
        the reverse: a checkpoint (model file) of the weights of SRC, an export directory or a
        state_dict file of that module (torch.save of model.state_dict(), or a dict holding it under
        "model", as nanoGPT's ckpt.pt; torch.compile's "_orig_mod." prefixes are dropped). The config
        is SRC's config.json unless --config names one. The checkpoint has the run's step and no
        optimizer state: the evaluation tools read it, and the trainer starts from it with -e.

Exporting the checkpoint an import wrote gives the export byte for byte again. Checksums are
computed as runtime/checkpoint.h's (FNV-1a over 8-byte words), in Python: about 15 s for GPT-2 124M.
"""
import argparse
import json
import os
import shutil
import struct
import sys

import torch

CHECKPOINT_MAGIC = 0x52415353
CHECKPOINT_VERSION = 3
HEADER_BYTES = 1024
# runtime/checkpoint.h's CheckpointHeader: the offsets this script reads and writes (a test reads
# what it writes with the C++ reader)
OFF_TRAIN_STEP = 64      # TrainStateStored.step, int64
OFF_LEARN_P = 184        # int32 (version 3)
OFF_ATTN_LEN = 188       # int32 (version 3; 0 in older files): sigmoid's and relu's constant length,
                         # softmax's and softmax_rw's log-length scaling threshold
OFF_HEADER_CHECKSUM = 1016
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import manifest  # noqa: E402  (scripts/manifest.py: the variants and tensors of the C++ headers)

MANIFEST = manifest.load()
VARIANTS = manifest.variants(MANIFEST)
ATTN_KINDS = [v["name"] for v in sorted(MANIFEST["variants"], key=lambda v: v["kind"])]  # AttnKind order
REWEIGHTING = {name for name, v in VARIANTS.items() if v["reweight"]}
# attn_has_len: the constant n of sigmoid and relu, the log-length scaling of softmax and softmax_rw (>= 2)
ATTN_LEN_KINDS = {name for name, v in VARIANTS.items() if v["has_len"]}
LOG_LEN_KINDS = {name for name, v in VARIANTS.items() if v["log_len_scaling"]}
FORMAT = "lssar.cu export 1"
MODULE_FILE = "modeling_lssar_gpt2.py"
MANIFEST_FILE = "manifest.json"  # beside the module in an export: its list of variants


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)


def checksum(data, h=1469598103934665603):
    """runtime/checkpoint.h's checkpoint_checksum: FNV-1a over 8-byte little-endian words, then the tail bytes"""
    P, M = 1099511628211, (1 << 64) - 1
    words = len(data) // 8
    for w in memoryview(data)[:words * 8].cast("Q"):
        h = ((h ^ w) * P) & M
    for b in data[words * 8:]:
        h = ((h ^ b) * P) & M
    return h


def tensor_shapes(cfg):
    """(torch name, per_layer, shape) of every non-empty parameter tensor of the flat C++ layout, in
    its order (the manifest's, model/gpt2_config.h's): a per-layer tensor's shape is (L, ...), its
    layers stacked."""
    L, C, Vp, NH = cfg["n_layer"], cfg["n_embd"], cfg["padded_vocab_size"], cfg["n_head"]
    head = VARIANTS[cfg["attn"]]["head_param"]
    shapes = []
    for t in MANIFEST["params"]:
        shape = manifest.dims(t["shape"], C=C, Vp=Vp, NH=NH, NHP=NH if cfg["learn_p"] else 0,
                              NHS=NH if head == "s" else 0)
        shape = (L,) + shape if t["per_layer"] else shape
        if numel(shape) > 0:
            shapes.append((t["torch_name"], t["per_layer"], shape))
    return shapes


def state_keys(name, per_layer, L):
    """The state_dict's names of a tensor: one per layer for a per-layer tensor"""
    return [f"transformer.h.{layer}.{name}" for layer in range(L)] if per_layer else ["transformer." + name]


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# ----------------------------------------------------------------------------
# checkpoint -> export

def read_checkpoint(path):
    """(config dict, the weights as one float32 tensor in the C++ layout) of a model file"""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    if len(data) < HEADER_BYTES:
        fail(f"{path}: {len(data)} bytes, shorter than a checkpoint's {HEADER_BYTES}-byte header")
    magic, version, T, V, Vp, L, NH, C, attn = struct.unpack_from("<2I7i", data, 0)
    p, rope_base = struct.unpack_from("<2f", data, 36)
    (num_params, payload_sum) = struct.unpack_from("<2Q", data, 48)
    if magic != CHECKPOINT_MAGIC:
        fail(f"{path}: magic {magic:#x}, not a checkpoint of lssar.cu's trainer ({CHECKPOINT_MAGIC:#x})")
    if version not in (2, 3):
        fail(f"{path}: checkpoint version {version}; this script reads versions 2 and 3")
    if version == 3:
        (stored,) = struct.unpack_from("<Q", data, OFF_HEADER_CHECKSUM)
        if checksum(data[:OFF_HEADER_CHECKSUM]) != stored:
            fail(f"{path}: header checksum mismatch: the header is corrupt")
    if not 0 <= attn < len(ATTN_KINDS):
        fail(f"{path}: attention kind {attn} is not one of 0..{len(ATTN_KINDS) - 1}")
    (learn_p,) = struct.unpack_from("<i", data, OFF_LEARN_P) if version == 3 else (0,)
    (attn_len,) = struct.unpack_from("<i", data, OFF_ATTN_LEN) if version == 3 else (0,)
    (step,) = struct.unpack_from("<q", data, OFF_TRAIN_STEP)
    cfg = {"attn": ATTN_KINDS[attn], "n_layer": L, "n_head": NH, "n_embd": C, "vocab_size": V,
           "padded_vocab_size": Vp, "block_size": T, "p": p, "learn_p": bool(learn_p), "rope_base": rope_base,
           "attn_len": attn_len,
           "layer_norm_epsilon": 1e-5, "step": step, "model_type": "lssar_gpt2", "format": FORMAT}
    want = sum(numel(s) for _, _, s in tensor_shapes(cfg))
    if num_params != want:
        fail(f"{path}: the header says {num_params} parameters, its config has {want}")
    if len(data) != HEADER_BYTES + 4 * num_params:
        fail(f"{path}: {len(data)} bytes, expected {HEADER_BYTES + 4 * num_params} for {num_params} parameters "
             "(truncated or trailing bytes)")
    payload = data[HEADER_BYTES:]
    if checksum(payload) != payload_sum:
        fail(f"{path}: checksum mismatch: the weights are corrupt")
    return cfg, torch.frombuffer(bytearray(payload), dtype=torch.float32)


def state_dict_of(cfg, flat):
    """The module's state_dict (nanoGPT's names) of the flat weights; lm_head.weight is wte itself."""
    sd, at = {}, 0
    for name, per_layer, shape in tensor_shapes(cfg):
        t = flat[at:at + numel(shape)].view(shape)
        at += numel(shape)
        for i, key in enumerate(state_keys(name, per_layer, cfg["n_layer"])):
            sd[key] = (t[i] if per_layer else t).clone()
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    return sd


def head_param_text(cfg):
    """"learned p", "learned s" (ssmax) or "p 15" """
    head = VARIANTS[cfg["attn"]]["head_param"]
    return "learned p" if cfg["learn_p"] else "learned s" if head == "s" else "p %g" % cfg["p"]


def export(ckpt, out_dir):
    cfg, flat = read_checkpoint(ckpt)
    sd = state_dict_of(cfg, flat)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        f.write(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    torch.save(sd, os.path.join(out_dir, "pytorch_model.bin"))
    shutil.copyfile(os.path.join(os.path.dirname(os.path.abspath(__file__)), MODULE_FILE),
                    os.path.join(out_dir, MODULE_FILE))
    with open(os.path.join(out_dir, MANIFEST_FILE), "w") as f:
        f.write(json.dumps(MANIFEST, indent=1) + "\n")
    written = ["config.json", "pytorch_model.bin", MODULE_FILE, MANIFEST_FILE]
    try:
        from safetensors.torch import save_file
    except ImportError:
        save_file = None
    if save_file is not None:  # no shared tensors there: lm_head is wte again on loading
        save_file({k: v for k, v in sd.items() if k != "lm_head.weight"}, os.path.join(out_dir, "model.safetensors"))
        written.append("model.safetensors")
    print(f"{ckpt}: {cfg['attn']}, {cfg['n_layer']} layers, {cfg['n_head']} heads, {cfg['n_embd']} channels, "
          f"vocab {cfg['vocab_size']}, {head_param_text(cfg)}, step {cfg['step']}, "
          f"{flat.numel()} parameters")
    print(f"wrote {out_dir}/: {', '.join(written)}")


# ----------------------------------------------------------------------------
# state_dict -> checkpoint

def load_state_dict(src):
    """The state_dict of SRC (an export directory or a torch.save file), and the config.json beside it"""
    if os.path.isdir(src):
        path = os.path.join(src, "pytorch_model.bin")
        config = os.path.join(src, "config.json")
    else:
        path, config = src, os.path.join(os.path.dirname(os.path.abspath(src)), "config.json")
    if not os.path.exists(path):
        fail(f"{src}: no {path} (give an export directory or a state_dict file written by torch.save)")
    obj = torch.load(path, map_location="cpu")
    if isinstance(obj, dict) and isinstance(obj.get("model"), dict):
        obj = obj["model"]  # nanoGPT's ckpt.pt
    if not isinstance(obj, dict) or not all(torch.is_tensor(v) for v in obj.values()):
        fail(f"{path}: not a state_dict (a dict of tensors, as model.state_dict() gives)")
    return {k.removeprefix("_orig_mod."): v for k, v in obj.items()}, config


def flat_of(cfg, sd, src):
    """The weights in the C++ layout, every name of the module present with its shape"""
    L = cfg["n_layer"]
    tensors = []
    expected = set()
    for name, per_layer, shape in tensor_shapes(cfg):
        keys = state_keys(name, per_layer, L)
        per_key = shape[1:] if per_layer else shape
        for k in keys:
            if k not in sd:
                fail(f"{src}: no tensor '{k}' in the state_dict (config: {cfg['attn']}, {L} layers, learned p "
                     f"{'yes' if cfg['learn_p'] else 'no'})")
            if tuple(sd[k].shape) != tuple(per_key):
                fail(f"{src}: '{k}' has shape {tuple(sd[k].shape)}, the config needs {tuple(per_key)}")
            tensors.append(sd[k].detach().to(torch.float32).reshape(-1))
        expected.update(keys)
    extra = sorted(set(sd) - expected - {"lm_head.weight"})
    if extra:
        fail(f"{src}: tensors the model does not have: {', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''}")
    if "lm_head.weight" in sd and not torch.equal(sd["lm_head.weight"], sd["transformer.wte.weight"]):
        fail(f"{src}: lm_head.weight differs from transformer.wte.weight; this model ties them")
    return torch.cat(tensors)


def write_checkpoint(path, cfg, flat):
    """A version 3 model file (runtime/checkpoint.h) of the weights: the config, the step, no run identity"""
    payload = flat.contiguous().numpy().tobytes()
    h = bytearray(HEADER_BYTES)
    struct.pack_into("<2I7i", h, 0, CHECKPOINT_MAGIC, CHECKPOINT_VERSION, cfg["block_size"], cfg["vocab_size"],
                     cfg["padded_vocab_size"], cfg["n_layer"], cfg["n_head"], cfg["n_embd"],
                     ATTN_KINDS.index(cfg["attn"]))
    struct.pack_into("<2fi", h, 36, cfg["p"], cfg["rope_base"], 1)  # world size 1: no optimizer shards
    struct.pack_into("<2Q", h, 48, flat.numel(), checksum(payload))
    struct.pack_into("<q", h, OFF_TRAIN_STEP, int(cfg.get("step", 0)))
    struct.pack_into("<i", h, OFF_LEARN_P, 1 if cfg["learn_p"] else 0)
    struct.pack_into("<i", h, OFF_ATTN_LEN, int(cfg.get("attn_len", 0)))
    struct.pack_into("<Q", h, OFF_HEADER_CHECKSUM, checksum(bytes(h[:OFF_HEADER_CHECKSUM])))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(bytes(h))
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def import_(src, out_ckpt, config_path):
    sd, beside = load_state_dict(src)
    config_path = config_path or beside
    try:
        with open(config_path) as f:
            cfg = json.load(f)
    except OSError:
        fail(f"{src}: no config: {config_path} is missing (give --config CONFIG.json, as export.py writes it)")
    for key in ("attn", "n_layer", "n_head", "n_embd", "vocab_size", "padded_vocab_size", "block_size", "p",
                "learn_p", "rope_base"):
        if key not in cfg:
            fail(f"{config_path}: no '{key}'")
    if cfg["attn"] not in ATTN_KINDS:
        fail(f"{config_path}: attn '{cfg['attn']}' is not one of {', '.join(ATTN_KINDS)}")
    if cfg["learn_p"] and cfg["attn"] not in REWEIGHTING:
        fail(f"{config_path}: learn_p with {cfg['attn']}, which has no re-weighting")
    attn_len = cfg.get("attn_len", 0)
    if not isinstance(attn_len, int) or attn_len < 0 or (attn_len > 0 and cfg["attn"] not in ATTN_LEN_KINDS):
        fail(f"{config_path}: attn_len = {attn_len}: must be an integer >= 0, and is defined for "
             f"{', '.join(sorted(ATTN_LEN_KINDS))} only")
    if attn_len == 1 and cfg["attn"] in LOG_LEN_KINDS:
        fail(f"{config_path}: attn_len = 1: log-length scaling divides by ln(attn_len), which must be > 0 (attn_len >= 2)")
    flat = flat_of(cfg, sd, src)
    write_checkpoint(out_ckpt, cfg, flat)
    print(f"wrote {out_ckpt}: {cfg['attn']}, {cfg['n_layer']} layers, {flat.numel()} parameters, step "
          f"{cfg.get('step', 0)} (no optimizer state: start a run from it with -e)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", help="checkpoint to export (or, with --import, the export dir or state_dict file)")
    ap.add_argument("out", help="output directory (or, with --import, the checkpoint to write)")
    ap.add_argument("--import", dest="do_import", action="store_true", help="state_dict -> checkpoint")
    ap.add_argument("--config", help="--import: the config.json (default: the one beside SRC)")
    args = ap.parse_args(argv)
    if args.do_import:
        import_(args.src, args.out, args.config)
    else:
        if args.config:
            fail("--config goes with --import")
        export(args.src, args.out)


if __name__ == "__main__":
    main()
