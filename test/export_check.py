"""
The PyTorch side of test/test_export.cpp: for each checkpoint DIR/<case>.bin the C++ test wrote,

  - exports it (scripts/export.py) to DIR/<case>_export, loads the module from the exported
    modeling_lssar_gpt2.py (the copy in the export, imported from there alone) and writes its logits
    on DIR/tokens.bin (int32, B x T) in float32 and in float64 to DIR/<case>_logits32.bin and
    _logits64.bin (float64, B x T x vocab);
  - imports the export back to DIR/<case>_imported.bin and exports that to DIR/<case>_export2;

and runs the refusals, writing each message to DIR/refused_<name>.txt. The C++ test compares.

    /usr/bin/python3 test/export_check.py DIR B T case1 case2 ...
"""
import contextlib
import importlib.util
import io
import os
import subprocess
import sys

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import export  # noqa: E402  scripts/export.py, run in-process as its command line would


def load_module(export_dir):
    spec = importlib.util.spec_from_file_location(f"modeling_{os.path.basename(export_dir)}",
                                                  os.path.join(export_dir, "modeling_lssar_gpt2.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def refused(name, args, out_dir):
    """runs scripts/export.py's command line with args (in this process); writes its exit code and stderr"""
    err, code = io.StringIO(), 0
    try:
        with contextlib.redirect_stderr(err):
            export.main(args)
    except SystemExit as e:
        code = e.code
    with open(os.path.join(out_dir, f"refused_{name}.txt"), "w") as f:
        f.write(f"exit {code}\n{err.getvalue()}")


def main():
    out_dir, B, T, cases = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    with open(os.path.join(out_dir, "tokens.bin"), "rb") as f:
        idx = torch.frombuffer(bytearray(f.read()), dtype=torch.int32).to(torch.long).view(B, T)
    for case in cases:
        ckpt = os.path.join(out_dir, case + ".bin")
        exported = os.path.join(out_dir, case + "_export")
        if case == cases[0]:  # one through the command line itself
            subprocess.run([sys.executable, os.path.join(REPO, "scripts", "export.py"), ckpt, exported], check=True)
        else:
            export.main([ckpt, exported])
        module = load_module(exported)
        model = module.LssarGPT2.from_pretrained(exported)
        with torch.no_grad():
            for bits in ("32", "64"):  # float32 as loaded, then the same model in float64
                if bits == "64":
                    model = model.double()
                logits, _ = model(idx)
                assert logits.dtype == (torch.float32 if bits == "32" else torch.float64)
                with open(os.path.join(out_dir, f"{case}_logits{bits}.bin"), "wb") as f:
                    f.write(logits.to(torch.float64).contiguous().numpy().tobytes())
        export.main(["--import", exported, os.path.join(out_dir, case + "_imported.bin")])
        export.main([os.path.join(out_dir, case + "_imported.bin"), os.path.join(out_dir, case + "_export2")])

    # refusals: a corrupt checkpoint, a state_dict without a tensor, one with a tensor of another shape
    first = os.path.join(out_dir, cases[0])
    with open(first + ".bin", "rb") as f:
        data = bytearray(f.read())
    data[-3] ^= 0x40
    with open(os.path.join(out_dir, "corrupt.bin"), "wb") as f:
        f.write(data)
    refused("corrupt", [os.path.join(out_dir, "corrupt.bin"), os.path.join(out_dir, "corrupt_export")], out_dir)
    sd = torch.load(os.path.join(first + "_export", "pytorch_model.bin"))
    del sd["transformer.h.1.mlp.c_fc.bias"]
    torch.save(sd, os.path.join(out_dir, "missing.pt"))
    refused("missing", ["--import", os.path.join(out_dir, "missing.pt"), os.path.join(out_dir, "missing.bin"),
                        "--config", os.path.join(first + "_export", "config.json")], out_dir)
    sd = torch.load(os.path.join(first + "_export", "pytorch_model.bin"))
    sd["transformer.h.0.attn.c_proj.weight"] = torch.zeros(3, 3)
    torch.save({"model": sd}, os.path.join(out_dir, "shape.pt"))  # nanoGPT's ckpt.pt layout
    refused("shape", ["--import", os.path.join(out_dir, "shape.pt"), os.path.join(out_dir, "shape.bin"),
                      "--config", os.path.join(first + "_export", "config.json")], out_dir)
    print(f"export_check: {len(cases)} checkpoints, torch {torch.__version__}")


if __name__ == "__main__":
    main()
