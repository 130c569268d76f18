// The fast CPU path: what every kernel of it shares. Its kernels are Highway code (Google's portable
// SIMD library), compiled once for every ISA target above a portable baseline (Makefile:
// FAST_CPU_BASELINE) and dispatched at run time to the best target the CPU runs: x86 SSE4, AVX2 and
// AVX-512 (with AVX512-BF16's dot products where the CPU has them), aarch64 NEON. These headers hold
// no Highway type, so any translation unit calls them; the code is in $(BUILD)/fast/*.o.
//
// Two numerics, chosen per call:
//   fp32  every product and sum in fp32;
//   bf16  the operands of the products that meet a bf16 matmul rounded to bf16 (round to nearest
//         even), products and sums in fp32: vdpbf16ps where the CPU has AVX512-BF16, the same
//         products computed exactly by FMAs on the widened values elsewhere (a bf16 x bf16 product
//         has 16 significant bits: exact in fp32), so the bf16 path's results exist on every CPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

enum class FastNumerics { fp32, bf16 };
inline const char* fast_numerics_name(FastNumerics n) { return n == FastNumerics::bf16 ? "bf16" : "fp32"; }

// The target the next call dispatches to, as Highway names it ("AVX2", "AVX3", "NEON", ...), with
// "+BF16" where the bf16 numerics take AVX512-BF16's dot products.
std::string fast_cpu_target();
// Every target compiled into this build that the CPU runs, best first (Highway's bit values).
std::vector<int64_t> fast_cpu_targets();
const char* fast_cpu_target_name(int64_t target);
// Tests: dispatch to that one target from now on (0: the best again). Returns false, and changes
// nothing, for a target the CPU does not run or the build does not hold.
bool fast_cpu_force_target(int64_t target);
// Whether the CPU has AVX512-BF16's dot products, and whether the bf16 numerics use them (on the
// AVX-512 target only). Tests turn them off to run the exact emulation on the same CPU.
bool fast_cpu_has_bf16_dot();
bool fast_cpu_uses_bf16_dot();
void fast_cpu_allow_bf16_dot(bool allow);
