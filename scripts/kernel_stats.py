#!/usr/bin/python3
"""Static figures of every CUDA kernel of one sm_90 cubin (scripts/kernel_stats.sh runs this).

  kernel_stats.py PTXAS_LOG SASS LAUNCH_LOG CSV
    PTXAS_LOG   nvcc -Xptxas -v output: registers, spills, stack, static shared memory
    SASS        cuobjdump -sass of the cubin: the instruction mix of each kernel
    LAUNCH_LOG  the SIMT emulator's SIMT_LAUNCH_LOG of real launches (threads per block, dynamic
                shared memory at the shapes of the recorded run); kernels not in it get no occupancy
    CSV         written: one row per kernel

Theoretical occupancy follows the CUDA occupancy calculator for sm_90 (H100/H200): 65536 registers,
228 KiB of shared memory (1 KiB of it reserved per block), 64 warps and 32 blocks per SM; registers
are allocated per warp in units of 256, shared memory per block in units of 128 bytes.
The main loop of an attention kernel is the backward branch's range that holds the most tensor-core
MMAs and no smaller such range (LSSAR's forward has two, one per pass over the keys); its figures are
static counts of its SASS: an inner loop without MMA (a power by repeated squaring)
counts once, so these are lower bounds of the instructions executed per tile.
"""
import csv
import re
import subprocess
import sys

REGS_PER_SM, SMEM_PER_SM, SMEM_RESERVED_PER_BLOCK = 65536, 228 * 1024, 1024
MAX_WARPS_PER_SM, MAX_BLOCKS_PER_SM, SUBPARTITIONS = 64, 32, 4
REG_UNIT, SMEM_UNIT = 256, 128

# instruction classes of the mix: column -> opcodes (the part before the first '.')
CLASSES = [
    ("mma", {"HMMA", "IMMA", "HGMMA", "DMMA"}),
    ("mufu", {"MUFU"}),
    ("ffma", {"FFMA"}), ("fadd", {"FADD"}), ("fmul", {"FMUL"}),
    ("ldg", {"LDG"}), ("stg", {"STG"}), ("red_atom_g", {"RED", "REDG", "ATOM", "ATOMG"}),
    ("lds", {"LDS"}), ("ldsm", {"LDSM"}), ("sts", {"STS"}),
    ("ldl_stl", {"LDL", "STL"}), ("bar", {"BAR"}), ("shfl", {"SHFL"}),
]
NOT_WORK = {"NOP"}  # alignment padding

def demangle(names):
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return out.splitlines()

def key_of(demangled):
    """'void lssar_forward_kernel<64, true>(...)' -> 'lssar_forward_kernel<64,true>' (g++ and nvcc agree)."""
    s = demangled
    if s.startswith("void "):
        s = s[5:]
    depth = 0
    for i, ch in enumerate(s):
        if ch == "<": depth += 1
        elif ch == ">": depth -= 1
        elif ch == "(" and depth == 0:
            s = s[:i]
            break
    return s.replace(" ", "")

def parse_ptxas(path):
    stats, cur = {}, None
    for line in open(path):
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            cur = stats.setdefault(m.group(1), {"regs": 0, "stack": 0, "spill_st": 0, "spill_ld": 0, "smem": 0})
            continue
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            cur = stats.setdefault(m.group(1), {"regs": 0, "stack": 0, "spill_st": 0, "spill_ld": 0, "smem": 0})
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            cur["stack"], cur["spill_st"], cur["spill_ld"] = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m:
            cur["regs"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            cur["smem"] = int(s.group(1)) if s else 0
    return stats

INSN = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9_]*)([.\w]*)\s*([^;]*);")

def parse_sass(path):
    funcs, cur = {}, None
    for line in open(path):
        m = re.search(r"Function : (\S+)", line)
        if m:  # a kernel in two cubins (scripts/kernel_stats.sh concatenates them): its first listing
            cur = funcs.setdefault(m.group(1), []) if m.group(1) not in funcs else []
            continue
        m = INSN.match(line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(3), m.group(5)))
    return funcs

def mix(insns):
    counts = {name: 0 for name, _ in CLASSES}
    total = 0
    for _, op, _ in insns:
        if op in NOT_WORK:
            continue
        total += 1
        for name, ops in CLASSES:
            if op in ops:
                counts[name] += 1
    counts["instructions"] = total
    return counts

def mma_loops(insns):
    """The main loop(s): every backward-branch range that holds tensor-core MMAs and no smaller such
    range, as (first address, last address, instructions, MMAs); a kernel with two passes over the
    keys (LSSAR's forward) has two. The count is static: an inner loop without MMA (a power by
    repeated squaring) counts once, though it runs several times per tile."""
    loops = []
    for addr, op, args in insns:
        m = re.match(r"\s*(0x[0-9a-f]+)", args)
        if op not in ("BRA", "JMP") or not m or int(m.group(1), 16) >= addr:
            continue
        target = int(m.group(1), 16)
        body = [x for x in insns if target <= x[0] <= addr and x[1] not in NOT_WORK]
        n_mma = sum(1 for x in body if x[1] in CLASSES[0][1])
        if n_mma:
            loops.append((target, addr, len(body), n_mma))
    inner = [l for l in loops if not any(o != l and l[0] <= o[0] and o[1] <= l[1] for o in loops)]
    return sorted(set(inner))

def occupancy(regs, smem_static, smem_dyn, threads):
    warps_per_block = (threads + 31) // 32
    limits = {"blocks": MAX_BLOCKS_PER_SM, "warps": MAX_WARPS_PER_SM // warps_per_block}
    regs_per_warp = -(-max(regs, 1) * 32 // REG_UNIT) * REG_UNIT
    # registers are allocated per SM sub-partition (4 of REGS_PER_SM / 4), whole warps in each
    # (cudaOccMaxBlocksPerSMRegsLimit in cuda_occupancy.h): 197 registers give 2 warps per
    # sub-partition, 8 warps per SM, not 65536 / (197 * 32) = 10
    limits["registers"] = (REGS_PER_SM // SUBPARTITIONS // regs_per_warp) * SUBPARTITIONS // warps_per_block
    smem_block = -(-(smem_static + smem_dyn + SMEM_RESERVED_PER_BLOCK) // SMEM_UNIT) * SMEM_UNIT
    limits["shared memory"] = SMEM_PER_SM // smem_block
    blocks = min(limits.values())
    limiter = "/".join(k for k, v in limits.items() if v == blocks)
    return blocks, blocks * warps_per_block, limiter

def legacy_elf(src, dst):
    """Copies a cubin, its ELF header rewritten from the ABI-version-8 format (CUDA >= 12.8: OS/ABI
    0x41, the SM in bits 8-15 of e_flags) to the older one (OS/ABI 0x33, ABI version 7, e_flags =
    SM | 64-bit addresses | unified texture mode | SM << 16 as the virtual architecture), which
    older disassemblers read. Sections and code are unchanged."""
    data = bytearray(open(src, "rb").read())
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit(f"kernel_stats: {src} is not a 64-bit ELF cubin")
    if data[8] == 8:
        flags = int.from_bytes(data[48:52], "little")
        sm = (flags >> 8) & 0xFF
        data[7], data[8] = 0x33, 7
        data[48:52] = (sm | 0x100 | 0x400 | (sm << 16)).to_bytes(4, "little")
    open(dst, "wb").write(data)

def main():
    if sys.argv[1] == "--legacy-elf":
        return legacy_elf(sys.argv[2], sys.argv[3])
    ptxas_path, sass_path, launch_path, csv_path = sys.argv[1:5]
    ptxas, sass = parse_ptxas(ptxas_path), parse_sass(sass_path)
    launches = {}
    for line in open(launch_path):
        parts = line.rstrip("\n").split("\t")
        if len(parts) == 3:
            launches.setdefault(key_of(parts[0]), []).append((int(parts[1]), int(parts[2])))
    mangled = sorted(set(ptxas) | set(sass))
    names = dict(zip(mangled, (key_of(d) for d in demangle(mangled))))
    rows = []
    for m in mangled:
        p = ptxas.get(m, {"regs": 0, "stack": 0, "spill_st": 0, "spill_ld": 0, "smem": 0})
        configs = sorted(set(launches.get(names[m], [(0, 0)])))
        for threads, dyn in configs:
            row = {"kernel": names[m], "regs": p["regs"], "spill_stores": p["spill_st"], "spill_loads": p["spill_ld"],
                   "stack": p["stack"], "smem_static": p["smem"], "smem_dynamic": dyn if threads else "",
                   "threads": threads or ""}
            if threads:
                row["blocks_per_sm"], row["warps_per_sm"], row["limiter"] = occupancy(p["regs"], p["smem"], dyn, threads)
            else:
                row["blocks_per_sm"] = row["warps_per_sm"] = ""
                row["limiter"] = "not launched in the recorded run"
            row.update(mix(sass.get(m, [])))
            loops = mma_loops(sass.get(m, []))
            if loops:
                n, n_mma = sum(l[2] for l in loops), sum(l[3] for l in loops)
                row["loops"] = " + ".join(f"{l[2]}/{l[3]}" for l in loops)
                row["loop_instructions"], row["loop_mma"] = n, n_mma
                row["loop_nonmma_per_mma"] = round((n - n_mma) / n_mma, 2)
                in_loops = [x[1] for x in sass[m] if any(l[0] <= x[0] <= l[1] for l in loops)]
                row["loop_mufu"] = sum(1 for op in in_loops if op == "MUFU")
                row["loop_local"] = sum(1 for op in in_loops if op in ("LDL", "STL"))  # spill traffic per tile
            rows.append(row)
    cols = ["kernel", "regs", "spill_stores", "spill_loads", "stack", "smem_static", "smem_dynamic", "threads",
            "blocks_per_sm", "warps_per_sm", "limiter", "instructions"] + [c for c, _ in CLASSES] + \
           ["loops", "loop_instructions", "loop_mma", "loop_nonmma_per_mma", "loop_mufu", "loop_local"]
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, restval="")
        w.writeheader()
        w.writerows(rows)
    print_table(rows)
    print_targets(rows)

def print_table(rows):
    short = [("kernel", 38), ("regs", 4), ("spill_stores", 5), ("smem_static", 6), ("smem_dynamic", 6),
             ("threads", 4), ("blocks_per_sm", 3), ("warps_per_sm", 3), ("instructions", 5), ("mma", 4),
             ("mufu", 4), ("ffma", 4), ("fadd", 4), ("fmul", 4), ("ldg", 4), ("stg", 4), ("red_atom_g", 4),
             ("lds", 4), ("ldsm", 4), ("sts", 4), ("bar", 3), ("loop_nonmma_per_mma", 5)]
    heads = {"spill_stores": "spill", "smem_static": "smem", "smem_dynamic": "dsmem", "threads": "thr",
             "blocks_per_sm": "blk", "warps_per_sm": "wrp", "instructions": "insns", "red_atom_g": "redg",
             "loop_nonmma_per_mma": "loop"}
    print(" ".join(f"{heads.get(c, c):>{w}}" if c != "kernel" else f"{c:<{w}}" for c, w in short))
    for r in rows:
        cells = []
        for c, w in short:
            v = r.get(c, "")
            cells.append(f"{str(v)[:w]:<{w}}" if c == "kernel" else f"{str(v):>{w}}")
        print(" ".join(cells))
    print("(regs per thread; spill = spill store bytes; smem/dsmem = static/dynamic shared bytes per block; "
          "blk/wrp = blocks/warps per SM; loop = non-MMA instructions per MMA in the main loop)")

def print_targets(rows):
    by = {r["kernel"]: r for r in rows}
    attn = [r for r in rows if re.match(r"(softmax|lssar|lssa|attention|lssar_d1)\w*<64", r["kernel"])]
    spilling = [f'{r["kernel"]} ({r["spill_stores"]} B)' for r in attn if r["spill_stores"]]
    print("target: no spills in any attention kernel at hd 64:", "met" if not spilling else
          "NOT met: " + ", ".join(spilling))
    def ratio(a, b, what):
        ra, rb = by.get(a), by.get(b)
        if not ra or not rb or not ra.get("loop_nonmma_per_mma") or not rb.get("loop_nonmma_per_mma"):
            print(f"{what}: main loop not found"); return None
        # from the instruction counts, not from the rounded per-MMA figures printed
        exact = lambda r: (r["loop_instructions"] - r["loop_mma"]) / r["loop_mma"]
        x = exact(ra) / exact(rb)
        print(f'{what}: non-MMA instructions per MMA in the main loop: {a} {ra["loop_nonmma_per_mma"]} '
              f'(instructions/MMA of its loop(s): {ra["loops"]}), {b} {rb["loop_nonmma_per_mma"]} '
              f'({rb["loops"]}): ratio {x:.3f}')
        return x
    # the family's kernels by variant (attention/attention_kind.h: softmax 0, lssar 2)
    fwd = {v: f"attention_forward_kernel<64,(AttnKind){k}>" for v, k in (("softmax", 0), ("lssar", 2))}
    bwd = {v: f"attention_backward_kernel<64,(AttnKind){k}>" for v, k in (("softmax", 0), ("lssar", 2))}
    d1 = "attention_rowd_kernel<64,(AttnKind)2,false>"  # without learned p
    x = ratio(fwd["lssar"], fwd["softmax"], "forward  hd 64")
    if x is not None:
        print(f"target: lssar forward <= 2.5x softmax's non-MMA per MMA: {'met' if x <= 2.5 else 'NOT met'} ({x:.3f}x)")
    y = ratio(bwd["lssar"], bwd["softmax"], "backward hd 64")
    z = ratio(d1, bwd["softmax"], "lssar D1 hd 64 (vs softmax backward)")
    if None not in (x, y, z):
        print(f"lssar/softmax non-MMA instructions per MMA (main loops, hd 64): forward {x:.2f}x, "
              f"backward {y:.2f}x, D1 pass {z:.2f}x of the softmax backward's")
    # MUFU (exp2, log2, reciprocal) per MMA: sm_90 computes 16 MUFU results per clock per SM
    # against 128 FP32 ones, so one MUFU holds the SFU as long as 8 FP32 instructions hold theirs
    mufu = [(k, by[k]["loop_mufu"] / by[k]["loop_mma"]) for k in (fwd["softmax"], fwd["lssar"], bwd["softmax"],
                                                                   bwd["lssar"], d1) if k in by and by[k].get("loop_mma")]
    if mufu:
        print("MUFU per MMA in the main loop (16 per clock per SM at sm_90, FP32 128): " +
              ", ".join(f"{k} {v:.2f}" for k, v in mufu))
    spilling_loops = [f'{r["kernel"]} ({r["loop_local"]})' for r in rows if r.get("loop_local")]
    print("local-memory (spill) instructions inside a main loop:", ", ".join(spilling_loops) or "none")
    for k in (bwd["softmax"], bwd["lssar"], d1):
        r = by.get(k)
        if r and r.get("warps_per_sm") != "":
            warps_per_block = (r["threads"] + 31) // 32
            budget = REGS_PER_SM // (-(-12 // warps_per_block) * warps_per_block) // 32 // 8 * 8
            print(f'target: {k} >= 12 warps/SM: {"met" if r["warps_per_sm"] >= 12 else "NOT met"} '
                  f'({r["warps_per_sm"]} warps, {r["regs"]} registers, limited by {r["limiter"]}; '
                  f'12 warps of {r["threads"]}-thread blocks need <= {budget} registers)')

if __name__ == "__main__":
    main()
