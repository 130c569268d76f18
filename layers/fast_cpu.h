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
#include <cstring>
#include <string>
#include <vector>

enum class FastNumerics { fp32, bf16 };
inline const char* fast_numerics_name(FastNumerics n) { return n == FastNumerics::bf16 ? "bf16" : "fp32"; }

// FAST_CPU_MAX_TARGET=<target> in the environment caps the dispatch (as ONEDNN_MAX_CPU_ISA caps
// oneDNN): FAST_CPU_MAX_TARGET=AVX2 runs the AVX2 code on an AVX-512 CPU; a name this build does not
// hold or the CPU does not run ends the program naming those it could take.
//
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

typedef uint16_t bf16;  // the upper half of an IEEE float

// round to nearest, ties to even (what AVX512-BF16's vcvtneps2bf16 and CUDA's __float2bfloat16
// do); NaN stays a quiet NaN
inline bf16 float_to_bf16(float x) {
    uint32_t bits;
    memcpy(&bits, &x, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (bf16)((bits >> 16) | 0x40);
    bits += 0x7fffu + ((bits >> 16) & 1);
    return (bf16)(bits >> 16);
}
inline float bf16_to_float(bf16 h) {
    uint32_t bits = (uint32_t)h << 16;
    float x;
    memcpy(&x, &bits, 4);
    return x;
}

// ----------------------------------------------------------------------------
// The layers of the fast path (layers/layers_fast_cpu.cpp), every one parallel over OpenMP's
// threads with the same bits for any number of them. X is the matmuls' input type: float (fp32
// numerics) or bf16 (round to nearest even). Shapes as the references' (layers/*_cpu.h).
// Column sums (bias and layernorm gradients) go through fixed chunks of rows summed in chunk order;
// partial is the caller's scratch (grown, never shrunk).

// out (n) = bf16(in (n)), and back (exact)
void fast_round_bf16(bf16* out, const float* in, size_t n);
void fast_widen_bf16(float* out, const bf16* in, size_t n);

// layernorm (eps 1e-5): inp (N,C) -> out (N,C), mean, rstd (N)
void fast_layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                            int N, int C);
void fast_layernorm_forward(bf16* out, float* mean, float* rstd, const float* inp, const float* w, const float* b,
                            int N, int C);
// dinp (N,C) += d layernorm; dw, db (C) += their gradients
void fast_layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                             const float* mean, const float* rstd, int N, int C, std::vector<float>& partial);

// GELU (tanh approximation): out (N) = gelu(inp)
void fast_gelu_forward(float* out, const float* inp, size_t N);
void fast_gelu_forward(bf16* out, const float* inp, size_t N);
// dinp (N,OC) = gelu'(inp) dout (in X), dbias (OC) += its column sums in fp32
void fast_gelu_backward(float* dinp, float* dbias, const float* inp, const float* dout, int N, int OC,
                        std::vector<float>& partial);
void fast_gelu_backward(bf16* dinp, float* dbias, const float* inp, const float* dout, int N, int OC,
                        std::vector<float>& partial);

// A matmul's output gradient as its backward reads it: dout_x (N,OC) = X(dout) (bf16 only; the fp32
// numerics read dout itself), dbias (OC, or null) += column sums of dout
void fast_matmul_dout(bf16* dout_x, float* dbias, const float* dout, int N, int OC, std::vector<float>& partial);
void fast_colsums(float* dbias, const float* dout, int N, int OC, std::vector<float>& partial);

// RoPE on q and k of inp (B,T,3,NH,hd) -> out (may alias inp; v copied): the rotation by the table's
// row t (cs: (T, 2, hd), cosines then signed sines, layers/rope_fast_cpu.h), sign -1 its inverse
void fast_rope_rotate(float* out, const float* inp, int B, int T, int NH, int hd, const float* cs, float sign);

// fused classifier: losses (N), and with dlogits (N,Vp) = softmax - onehot over V columns (0 on the
// padding). scratch: a row of Vp floats per thread.
void fast_classifier(float* losses, float* dlogits, const float* logits, const int* targets, int N, int V, int Vp,
                     std::vector<float>& scratch);
void fast_classifier(float* losses, bf16* dlogits, const float* logits, const int* targets, int N, int V, int Vp,
                     std::vector<float>& scratch);

// AdamW (layers/adamw_cpu.h's formula in fp32) with grads *= grad_scale first, and the bf16 copy of
// the new weights where params_bf is given
void fast_adamw(float* params, bf16* params_bf, const float* grads, float* m, float* v, size_t n, float lr,
                float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t);
// sum of squares of x (n) in double
double fast_sum_squares(const float* x, size_t n);
