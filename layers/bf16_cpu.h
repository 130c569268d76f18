// bf16 on the CPU: the storage type, round-to-nearest-even conversion, the CPU's bf16 support
// (cpuid, and the ISA oneDNN will use), and the AVX-512 helpers of the bf16 path's fast float
// kernels (vector exp and tanh, loads and stores that round to bf16).
// Every AVX-512 function carries its own target attribute, so this header compiles for any x86-64
// and the code is reached only after cpu_bf16_support() said yes: never an illegal instruction.
#pragma once

#include <cpuid.h>
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <dnnl.hpp>

#include "layers/fast_cpu.h"  // bf16, float_to_bf16, bf16_to_float

// GCC 12 flags the masked intrinsics' undefined pass-through vectors (a known false positive)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// ----------------------------------------------------------------------------
// what the CPU offers

struct CpuBf16Support {
    bool avx512f = false, avx512_bf16 = false, amx_bf16 = false;  // cpuid
    std::string onednn_isa;  // the ISA oneDNN dispatches to (after ONEDNN_MAX_CPU_ISA)
    bool usable = false;     // bf16 matmuls in hardware, AVX-512 for the other layers and AVX512-BF16's dot
                             // products for attention's (every CPU with AMX has AVX512-BF16 too)
    std::string message;     // one line saying what is used, or why not
};

inline const char* onednn_isa_name(dnnl::cpu_isa isa) {
    switch (isa) {
    case dnnl::cpu_isa::avx512_core_amx: return "AMX-BF16 (avx512_core_amx)";
    case dnnl::cpu_isa::avx512_core_bf16: return "AVX512-BF16 (avx512_core_bf16)";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx2: return "avx2";
    default: return "an ISA without bf16";
    }
}

inline CpuBf16Support cpu_bf16_support() {
    CpuBf16Support s;
    unsigned a, b, c, d;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        s.avx512f = (b >> 16) & 1;
        s.amx_bf16 = (d >> 22) & 1;
        unsigned a1, b1, c1, d1;
        if (a >= 1 && __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) s.avx512_bf16 = (a1 >> 5) & 1;
    }
    dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    s.onednn_isa = onednn_isa_name(isa);
    bool onednn_bf16 = isa == dnnl::cpu_isa::avx512_core_amx || isa == dnnl::cpu_isa::avx512_core_bf16;
    s.usable = s.avx512f && s.avx512_bf16 && onednn_bf16;
    if (s.usable) {
        s.message = std::string("bf16 matmuls through oneDNN on ") + s.onednn_isa +
                    (s.amx_bf16 ? "" : " (this CPU has no AMX)");
    } else {
        s.message = std::string("no bf16 here (cpuid: AVX-512F ") + (s.avx512f ? "yes" : "no") + ", AVX512-BF16 " +
                    (s.avx512_bf16 ? "yes" : "no") + ", AMX-BF16 " + (s.amx_bf16 ? "yes" : "no") +
                    "; oneDNN would use " + s.onednn_isa + "): using the fp32 path";
    }
    return s;
}

// ----------------------------------------------------------------------------
// AVX-512 helpers

#define BF16_CPU_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

// 16 floats to 16 bf16, round to nearest even, NaN to a quiet NaN (as float_to_bf16)
BF16_CPU_TARGET inline __m256i cvt_ps_bf16(__m512 x) {
    __m512i bits = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    rounded = _mm512_mask_or_epi32(rounded, nan, bits, _mm512_set1_epi32(0x400000));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16));
}
BF16_CPU_TARGET inline void store_bf16(bf16* out, __m512 x) { _mm256_storeu_si256((__m256i*)out, cvt_ps_bf16(x)); }
BF16_CPU_TARGET inline void store_bf16_masked(bf16* out, __m512 x, __mmask16 m) {
    _mm256_mask_storeu_epi16(out, m, cvt_ps_bf16(x));
}
BF16_CPU_TARGET inline __m512 load_bf16(const bf16* in) {
    __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)in));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}
// lanes [0, n) of a tail, n < 16
inline __mmask16 tail_mask(int n) { return (__mmask16)((1u << n) - 1); }

// exp(x): 2^k * p(r) with x = k ln2 + r, |r| <= ln2/2, p a degree-6 polynomial (Cephes' expf
// coefficients): within 2 ulp of std::exp for x in [-87, 88]; below -87 it returns 0, above 88
// +inf, as float's exp over- and underflows there.
BF16_CPU_TARGET inline __m512 exp512(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.3f), hi = _mm512_set1_ps(88.7f);
    __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), over = _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ);
    x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    // r = x - k ln2 in two parts, so that r keeps its low bits
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    __m512 r2 = _mm512_mul_ps(r, r);
    p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512 y = _mm512_scalef_ps(p, k);  // p * 2^k, exact
    y = _mm512_mask_mov_ps(y, under, _mm512_setzero_ps());
    return _mm512_mask_mov_ps(y, over, _mm512_set1_ps(__builtin_inff()));
}

// tanh(u) = 1 - 2 / (exp(2u) + 1), with the sign taken from u so that exp only sees -2|u| and
// never overflows; near 0 the subtraction loses bits relative to tanh but not to 1, which is what
// GELU's 1 + tanh needs (absolute error below 1e-7)
BF16_CPU_TARGET inline __m512 tanh512(__m512 u) {
    __m512 a = _mm512_abs_ps(u);
    __m512 e = exp512(_mm512_mul_ps(a, _mm512_set1_ps(-2.0f)));  // in (0, 1]
    __m512 t = _mm512_div_ps(_mm512_sub_ps(_mm512_set1_ps(1.0f), e), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    __m512i sign = _mm512_and_si512(_mm512_castps_si512(u), _mm512_set1_epi32((int)0x80000000u));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), sign));
}

// n floats to bf16, for n of any size
BF16_CPU_TARGET inline void round_row_bf16(bf16* out, const float* in, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) store_bf16(out + i, _mm512_loadu_ps(in + i));
    if (i < n) {
        __mmask16 m = tail_mask((int)(n - i));
        store_bf16_masked(out + i, _mm512_maskz_loadu_ps(m, in + i), m);
    }
}

// Column sums of an (N, OC) quantity that a layer computes row by row, in parallel and with the
// same bits for any number of threads: rows go in fixed chunks of COLSUM_ROWS, each chunk sums its
// rows in order into its own row of partial (chunks, OC), and colsum_finish adds the chunks' rows
// in chunk order. partial is the caller's scratch (grown, never shrunk).
constexpr int COLSUM_ROWS = 32;
inline int colsum_chunks(int N) { return (N + COLSUM_ROWS - 1) / COLSUM_ROWS; }
inline float* colsum_partial(std::vector<float>& partial, int N, int OC) {
    size_t n = (size_t)colsum_chunks(N) * OC;
    if (partial.size() < n) partial.resize(n);
    return partial.data();
}
// out (OC) += the sum over chunks of partial (chunks, OC)
BF16_CPU_TARGET inline void colsum_finish(float* out, const float* partial, int chunks, int OC) {
    int blocks = (OC + 15) / 16;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; blk++) {
        int o = blk * 16;
        __mmask16 m = OC - o >= 16 ? (__mmask16)0xffff : tail_mask(OC - o);
        __m512 sum = _mm512_setzero_ps();
        for (int c = 0; c < chunks; c++) sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(m, partial + (size_t)c * OC + o));
        _mm512_mask_storeu_ps(out + o, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, out + o), sum));
    }
}

// n bf16 to float (exact)
BF16_CPU_TARGET inline void widen_row_bf16(float* out, const bf16* in, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, load_bf16(in + i));
    for (; i < n; i++) out[i] = bf16_to_float(in[i]);
}

// row(out + begin, in + begin, count) over [0, n) in chunks of 2^14 elements, in parallel
template <class O, class I, class Row> inline void convert_in_chunks(O* out, const I* in, size_t n, Row row) {
    const size_t chunk = 1 << 14;
    size_t chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        size_t begin = c * chunk, end = begin + chunk < n ? begin + chunk : n;
        row(out + begin, in + begin, end - begin);
    }
}

// the whole buffer, in parallel
inline void round_to_bf16(bf16* out, const float* in, size_t n) { convert_in_chunks(out, in, n, round_row_bf16); }
inline void widen_bf16(float* out, const bf16* in, size_t n) { convert_in_chunks(out, in, n, widen_row_bf16); }

#pragma GCC diagnostic pop
