// The bf16 path's attention on the CPU (model/gpt2_cpu_bf16.h): every variant of
// attention/attention_kind.h, forward and backward (learned p's dL/dp included), tiled and
// vectorised with AVX-512 (doc/attention.md, section 'Attention on the CPU bf16 path'). The
// definition is the reference, attention/attention_cpu.h; this file computes the same functions,
// formula by formula, with the same stable evaluation of the re-weighting (max-normalised, m from
// the largest phi with the operations of every x, S1 and Z summed in double, the same degenerate
// rows).
//
// qkv   (B, T, 3, NH, hd) fp32, RoPE applied;  out (B, T, NH, hd) fp32;  stats (B, NH, T, 3) as the
// reference's. Scores, row statistics, the re-weighting and dW are fp32 (lam and the power p
// amplify the scores' rounding); the products whose results meet a bf16 matmul anyway take bf16
// operands (below).
//
// Flash-style on the CPU: a block of R query rows of one head takes its scores against every key it
// sees at once (R x T floats: O(T) per row block, never T x T), then each row's statistics (the
// reference's passes: max, S1, m, Z), then its weights, then the products with V. A CPU keeps a
// row block's scores in cache, so no variant recomputes a score: the re-weighting's two passes
// over the keys read the saved row instead of a second Q K^T. The backward recomputes a row
// block's weights with the forward's own code (the same bits), then ds row by row, and
// accumulates dK and dV per head (heads in parallel: the sums have one order for any thread count).
// The products are three register-blocked micro-kernels with keys or channels in the 16 lanes:
// scores and dW in fp32 FMAs; weights x values (and ds x keys), and the transposed accumulation of
// dK and dV, on bf16 pairs with AVX512-BF16's dot products.
// The variant is a compile-time constant: every part is chosen from AttnTraits, so a variant added
// to ATTN_VARIANT_TABLE from the existing parts runs here unchanged.
//
// Every AVX-512 function carries its own target attribute (ATTN_CPU_TARGET: the bf16 path's
// AVX-512 and AVX512-BF16); callers reach them only after cpu_bf16_support() said yes.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <new>
#include <vector>

#include "attention/attention_cpu.h"
#include "layers/bf16_cpu.h"

// GCC 12 flags the masked intrinsics' undefined pass-through vectors (a known false positive)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// the bf16 path's AVX-512 (layers/bf16_cpu.h) and AVX512-BF16's dot products and conversions
#define ATTN_CPU_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,avx512bf16")))

// ----------------------------------------------------------------------------
// vector functions (exp512 and tail_mask are layers/bf16_cpu.h's)

// ln(x) for x > 0 (subnormals included): x = 2^e m with m in (sqrt(1/2), sqrt(2)], then Cephes'
// logf polynomial in f = m - 1 and ln 2 in two parts: within 2 ulp of std::log.
ATTN_CPU_TARGET inline __m512 log512(__m512 x) {
    __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_src);  // [1, 2)
    __m512 e = _mm512_getexp_ps(x);
    __mmask16 big = _mm512_cmp_ps_mask(m, _mm512_set1_ps(1.41421356f), _CMP_GT_OQ);
    m = _mm512_mask_mul_ps(m, big, m, _mm512_set1_ps(0.5f));
    e = _mm512_mask_add_ps(e, big, e, _mm512_set1_ps(1.0f));
    __m512 f = _mm512_sub_ps(m, _mm512_set1_ps(1.0f));
    __m512 z = _mm512_mul_ps(f, f);
    __m512 y = _mm512_set1_ps(7.0376836292e-2f);
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(-1.1514610310e-1f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.1676998740e-1f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(-1.2420140846e-1f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.4249322787e-1f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(-1.6668057665e-1f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(2.0000714765e-1f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(-2.4999993993e-1f));
    y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(3.3333331174e-1f));
    y = _mm512_mul_ps(_mm512_mul_ps(y, f), z);
    y = _mm512_fmadd_ps(e, _mm512_set1_ps(-2.12194440e-4f), y);
    y = _mm512_fnmadd_ps(z, _mm512_set1_ps(0.5f), y);
    return _mm512_fmadd_ps(e, _mm512_set1_ps(0.693359375f), _mm512_add_ps(f, y));
}

// ln(1 + e) for e >= 0 without losing e's low bits: u = 1 + e rounds, c = e - (u - 1) is what
// the rounding dropped (u - 1 is exact), and ln(1 + e) = ln(u) + c / u to first order in c.
// For e below 2^-24, u = 1 and the result is e itself.
ATTN_CPU_TARGET inline __m512 log1p512(__m512 e) {
    __m512 u = _mm512_add_ps(_mm512_set1_ps(1.0f), e);
    __m512 c = _mm512_sub_ps(e, _mm512_sub_ps(u, _mm512_set1_ps(1.0f)));
    return _mm512_add_ps(log512(u), _mm512_div_ps(c, u));
}

// x^n by repeated squaring, the reference's pow_int (the same multiplications in the same order)
ATTN_CPU_TARGET inline __m512 powi512(__m512 x, int n) {
    __m512 r = _mm512_set1_ps(1.0f);
    while (n > 0) {
        if (n & 1) r = _mm512_mul_ps(r, x);
        x = _mm512_mul_ps(x, x);
        n >>= 1;
    }
    return r;
}

// r^p for r in (0, 1]: repeated squaring for integer p in [0, ATTN_P_INT_MAX] (as the reference's
// pow_p), exp(p ln r) otherwise
struct AttnPower {
    double p;
    bool integer;
    explicit AttnPower(double p_) : p(p_), integer(p_ == std::floor(p_) && p_ >= 0 && p_ <= ATTN_P_INT_MAX) {}
};
ATTN_CPU_TARGET inline __m512 pow512(__m512 r, const AttnPower& pw) {
    if (pw.integer) return powi512(r, (int)pw.p);
    return exp512(_mm512_mul_ps(_mm512_set1_ps((float)pw.p), log512(r)));
}

ATTN_CPU_TARGET inline __m512d sum_pd(__m512d acc, __m512 x) {  // acc + the 16 lanes of x, in double
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(x)));
    return _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1)));
}

ATTN_CPU_TARGET inline __mmask16 attn_lanes(int j, int n) { return n - j >= 16 ? (__mmask16)0xffff : tail_mask(n - j); }

// phi(s) of a variant and, for the backward, its derivative phi'(s) (exp: not needed, phi' = phi);
// softplus and sigmoid from one e = exp(-|s|): softplus = max(s, 0) + ln(1 + e),
// sigmoid = (s >= 0 ? 1 : e) / (1 + e), sigmoid' = e / (1 + e)^2 (doc/attention.md, 'Softplus')
template <AttnPhi F>
ATTN_CPU_TARGET inline __m512 attn_phi512(__m512 s, __m512* dphi) {
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    if constexpr (F == ATTN_PHI_EXP) {
        return exp512(s);
    } else if constexpr (F == ATTN_PHI_RELU) {
        if (dphi) *dphi = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(s, zero, _CMP_GT_OQ), zero, one);
        return _mm512_max_ps(s, zero);
    } else {
        __m512 e = exp512(_mm512_sub_ps(zero, _mm512_abs_ps(s)));
        __m512 ope = _mm512_add_ps(one, e);
        __mmask16 nonneg = _mm512_cmp_ps_mask(s, zero, _CMP_GE_OQ);
        __m512 sig = _mm512_div_ps(_mm512_mask_blend_ps(nonneg, e, one), ope);
        if constexpr (F == ATTN_PHI_SOFTPLUS) {
            if (dphi) *dphi = sig;
            return _mm512_add_ps(_mm512_max_ps(s, zero), log1p512(e));
        } else {
            if (dphi) *dphi = _mm512_div_ps(e, _mm512_mul_ps(ope, ope));
            return sig;
        }
    }
}

// ----------------------------------------------------------------------------
// One row t of a row block. Its n = t + 1 visible keys are j < n; the block's products run over
// nkp >= n keys (a multiple of 16), so every row leaves its weights and gradients zero on [n, nkp).

// A = the normalised phi: a / S1 (l1), a (none), a / n (mean; n = attn_len_n), divided as the reference divides
// (a row's only key gets exactly 1, tied keys exactly equal shares)
template <AttnNorm N>
ATTN_CPU_TARGET inline __m512 attn_normed512(__m512 a, __m512 S1, __m512 vn) {
    if constexpr (N == ATTN_NORM_L1) return _mm512_div_ps(a, S1);
    else if constexpr (N == ATTN_NORM_MEAN) return _mm512_div_ps(a, vn);
    else return a;
}
// the re-weighting's x = n A - o: one function for every x and for m, so that m is bitwise the
// largest computed x (doc/attention.md, 'Stable evaluation of the re-weighting')
template <AttnNorm N>
ATTN_CPU_TARGET inline __m512 attn_x512(__m512 a, __m512 S1, __m512 vn, __m512 vo, __m512 vn_norm) {
    return _mm512_fmsub_ps(vn, attn_normed512<N>(a, S1, vn_norm), vo);
}

struct AttnRow {
    float S1 = 1, inv_S1 = 1;  // l1: the row sum of phi, and its reciprocal for the backward
    float m = 0;                // re-weighting: the largest x
    float Z = 0;                // re-weighting: sum of u = (x/m)^p
    bool live = true;          // false: a degenerate row (W = 0, no output, no gradient)
};

// Weights of row t from its raw dot products, as attn_row_weights of the reference.
// s: in, the dots qe_t . ke_j; out, the scores s_tj (exp variants) or, with dphi, phi'(s_tj).
// a: out, phi(s_tj) (exp: shifted by the row's largest score). w: out, the final weights.
// stats: the reference's three saved values. attn_len: the reference's (0: n_t). Returns false
// for a degenerate row.
template <AttnKind K>
ATTN_CPU_TARGET inline bool attn_row_forward(float* s, float* a, float* w, float stats[3], AttnRow& row, int t, int nkp,
                                             int hd, const AttnPower& pw, int attn_len, bool dphi) {
    using Tr = AttnTraits<K>;
    static_assert(Tr::phi != ATTN_PHI_EXP || Tr::norm == ATTN_NORM_L1, "exp needs l1 (the max shift cancels)");
    const int n = t + 1;
    const __m512 scale = _mm512_set1_ps(ref::attn_score_scale<K, float>(t, hd)),
                 bias = _mm512_set1_ps(ref::attn_score_bias<K, float>(t, attn_len));
    __m512d S1_acc = _mm512_setzero_pd();
    __m512 amax = _mm512_set1_ps(-INFINITY), amin = _mm512_set1_ps(INFINITY);
    float smax = 0;
    if constexpr (Tr::phi == ATTN_PHI_EXP) {  // the shift first: the largest score
        __m512 vmax = _mm512_set1_ps(-INFINITY);
        for (int j = 0; j < n; j += 16) {
            __mmask16 k = attn_lanes(j, n);
            __m512 sv = _mm512_fmadd_ps(scale, _mm512_maskz_loadu_ps(k, s + j), bias);
            _mm512_mask_storeu_ps(s + j, k, sv);
            vmax = _mm512_mask_max_ps(vmax, k, vmax, sv);
        }
        smax = _mm512_reduce_max_ps(vmax);
    }
    for (int j = 0; j < n; j += 16) {
        __mmask16 k = attn_lanes(j, n);
        __m512 sv = _mm512_maskz_loadu_ps(k, s + j), d;
        if constexpr (Tr::phi == ATTN_PHI_EXP) sv = _mm512_sub_ps(sv, _mm512_set1_ps(smax));
        else sv = _mm512_fmadd_ps(scale, sv, bias);
        __m512 av = attn_phi512<Tr::phi>(sv, dphi ? &d : nullptr);
        if constexpr (Tr::phi != ATTN_PHI_EXP) {
            if (dphi) _mm512_mask_storeu_ps(s + j, k, d);
        }
        av = _mm512_maskz_mov_ps(k, av);
        _mm512_storeu_ps(a + j, av);
        S1_acc = sum_pd(S1_acc, av);
        amax = _mm512_mask_max_ps(amax, k, amax, av);
        amin = _mm512_mask_min_ps(amin, k, amin, av);
    }
    stats[0] = stats[1] = stats[2] = 0;
    row = AttnRow();
    const int n16 = (n + 15) / 16 * 16;
    for (int j = n16; j < nkp; j += 16) _mm512_storeu_ps(w + j, _mm512_setzero_ps());
    float S1 = (float)_mm512_reduce_add_pd(S1_acc);
    const float nf = (float)n, o = (float)ref::lssar_bias(t);
    if constexpr (Tr::norm == ATTN_NORM_L1) {
        if (S1 == 0) {  // relu: no key has a positive score
            row.live = false;
            for (int j = 0; j < n16; j += 16) _mm512_storeu_ps(w + j, _mm512_setzero_ps());
            return false;
        }
        row.S1 = S1;
        row.inv_S1 = 1.0f / S1;
        stats[0] = Tr::phi == ATTN_PHI_EXP ? smax + std::log(S1) : S1;
    }
    const __m512 vS1 = _mm512_set1_ps(row.S1), vn = _mm512_set1_ps(nf), vn_norm = _mm512_set1_ps((float)attn_len_n(t, attn_len));
    if constexpr (!Tr::reweight) {
        for (int j = 0; j < n16; j += 16) _mm512_storeu_ps(w + j, attn_normed512<Tr::norm>(_mm512_loadu_ps(a + j), vS1, vn_norm));
        return true;
    } else {
        // x = n A - o with A = a / S1 (l1), a (none), a / n (mean); m: the same operations on the
        // largest a, so that m is the largest computed x (doc/attention.md, 'Stable evaluation')
        const __m512 vo = _mm512_set1_ps(o);
        float a_max = _mm512_reduce_max_ps(amax), a_min = _mm512_reduce_min_ps(amin);
        const __m512 vmax = _mm512_set1_ps(a_max);
        float m = _mm512_cvtss_f32(attn_x512<Tr::norm>(vmax, vS1, vn, vo, vn_norm));
        stats[1] = m;
        bool uniform = o == 1 && a_min == a_max;
        if (!(m > 0) || uniform) {
            row.live = false;
            for (int j = 0; j < n16; j += 16) _mm512_storeu_ps(w + j, _mm512_setzero_ps());
            return false;  // Z = 0 in stats marks the row
        }
        row.m = m;
        const __m512 vm = _mm512_set1_ps(m), one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
        __m512d Z_acc = _mm512_setzero_pd();
        for (int j = 0; j < n16; j += 16) {
            __m512 x = attn_x512<Tr::norm>(_mm512_loadu_ps(a + j), vS1, vn, vo, vn_norm);
            __mmask16 pos = _mm512_cmp_ps_mask(x, zero, _CMP_GT_OQ) & attn_lanes(j, n);
            __m512 r = _mm512_mask_div_ps(one, pos, x, vm);  // <= 1: m is the largest x
            __m512 u = _mm512_maskz_mov_ps(pos, pow512(r, pw));
            _mm512_storeu_ps(w + j, u);
            Z_acc = sum_pd(Z_acc, u);
        }
        float Z = (float)_mm512_reduce_add_pd(Z_acc);
        if (Z == 0) {  // rounding left m > 0 while every x <= 0: degenerate too
            row.live = false;
            for (int j = 0; j < n16; j += 16) _mm512_storeu_ps(w + j, _mm512_setzero_ps());
            return false;
        }
        stats[2] = Z;
        row.Z = Z;
        const __m512 vZ = _mm512_set1_ps(Z);
        for (int j = 0; j < n16; j += 16) _mm512_storeu_ps(w + j, _mm512_div_ps(_mm512_loadu_ps(w + j), vZ));
        return true;
    }
}

// The score gradient of row t, as attn_row_dscores of the reference (doc/attention.md, 'Backward').
// g: in, dW_tj = dy_t . v_j; out, c_t ds_tj (c_t the score's scale), zero on [n, nkp).
// dphi, a, w, row: what attn_row_forward left (dphi: phi'(s), or for exp the scores, unused).
// Returns the row's dL/dp when want_dp (re-weighting only), else 0.
template <AttnKind K>
ATTN_CPU_TARGET inline double attn_row_backward(float* g, const float* dphi, const float* a, const float* w,
                                                const AttnRow& row, int t, int nkp, int hd, const AttnPower& pw,
                                                int attn_len, bool want_dp) {
    using Tr = AttnTraits<K>;
    const int n = t + 1, n16 = (n + 15) / 16 * 16;
    const __m512 zero = _mm512_setzero_ps();
    if (!row.live) {
        for (int j = 0; j < nkp; j += 16) _mm512_storeu_ps(g + j, zero);
        return 0;
    }
    for (int j = n16; j < nkp; j += 16) _mm512_storeu_ps(g + j, zero);
    const float nf = (float)n;
    const __m512 vn = _mm512_set1_ps(nf), vS1 = _mm512_set1_ps(row.S1), inv_S1 = _mm512_set1_ps(row.inv_S1);
    const __m512 vn_norm = _mm512_set1_ps((float)attn_len_n(t, attn_len));
    double dp = 0;
    if constexpr (Tr::reweight) {
        // D2 = sum_j W_j dW_j; dx_j = p (x_j/m)^(p-1) (dW_j - D2) / (m Z) for x_j > 0; dA = n dx
        __m512 acc = zero;
        for (int j = 0; j < n16; j += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(w + j), _mm512_maskz_loadu_ps(attn_lanes(j, n), g + j), acc);
        const float d2 = _mm512_reduce_add_ps(acc);
        const __m512 D2 = _mm512_set1_ps(d2);
        const __m512 vo = _mm512_set1_ps((float)ref::lssar_bias(t)), vm = _mm512_set1_ps(row.m), one = _mm512_set1_ps(1.0f);
        const __m512 coef = _mm512_set1_ps((float)pw.p * (1.0f / (row.m * row.Z)));
        const AttnPower pw1(pw.p - 1);
        __m512 swl = zero, swdwl = zero;
        for (int j = 0; j < n16; j += 16) {
            // the forward's x and x/m, bit for bit: the same keys have x > 0
            __m512 x = attn_x512<Tr::norm>(_mm512_loadu_ps(a + j), vS1, vn, vo, vn_norm);
            __mmask16 pos = _mm512_cmp_ps_mask(x, zero, _CMP_GT_OQ) & attn_lanes(j, n);
            __m512 r = _mm512_mask_div_ps(one, pos, x, vm);
            __m512 dW = _mm512_maskz_loadu_ps(attn_lanes(j, n), g + j);
            __m512 dx = _mm512_mul_ps(_mm512_mul_ps(coef, pow512(r, pw1)), _mm512_sub_ps(dW, D2));
            _mm512_storeu_ps(g + j, _mm512_maskz_mul_ps(pos, vn, dx));  // dA
            if (want_dp) {
                __m512 lr = _mm512_maskz_mov_ps(pos, log512(r));
                __m512 wl = _mm512_mul_ps(_mm512_loadu_ps(w + j), lr);
                swl = _mm512_add_ps(swl, wl);
                swdwl = _mm512_fmadd_ps(wl, dW, swdwl);
            }
        }
        if (want_dp) dp = (double)_mm512_reduce_add_ps(swdwl) - (double)d2 * _mm512_reduce_add_ps(swl);
    }
    const __m512 scale = _mm512_set1_ps(ref::attn_score_scale<K, float>(t, hd));
    if constexpr (Tr::norm == ATTN_NORM_L1) {
        // D1 = sum_j A_j dA_j; ds = phi'(s) (dA - D1) / S1
        __m512 acc = zero;
        for (int j = 0; j < n16; j += 16)
            acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(a + j), inv_S1), _mm512_maskz_loadu_ps(attn_lanes(j, n), g + j), acc);
        const __m512 D1 = _mm512_set1_ps(_mm512_reduce_add_ps(acc));
        const __m512 f = _mm512_mul_ps(inv_S1, scale);
        for (int j = 0; j < n16; j += 16) {
            __mmask16 k = attn_lanes(j, n);
            __m512 d;  // phi'(s): exp's is phi itself
            if constexpr (Tr::phi == ATTN_PHI_EXP) d = _mm512_loadu_ps(a + j);
            else d = _mm512_maskz_loadu_ps(k, dphi + j);
            __m512 dA = _mm512_maskz_loadu_ps(k, g + j);
            _mm512_storeu_ps(g + j, _mm512_maskz_mul_ps(k, _mm512_mul_ps(d, _mm512_sub_ps(dA, D1)), f));
        }
    } else {
        // ds = c phi'(s) dA, c = 1 (none) or 1/n (mean; n = attn_len_n)
        for (int j = 0; j < n16; j += 16) {
            __mmask16 k = attn_lanes(j, n);
            __m512 d = _mm512_maskz_loadu_ps(k, dphi + j);
            if constexpr (Tr::norm == ATTN_NORM_MEAN) d = _mm512_div_ps(d, vn_norm);
            _mm512_storeu_ps(g + j, _mm512_maskz_mul_ps(k, _mm512_mul_ps(d, _mm512_maskz_loadu_ps(k, g + j)), scale));
        }
    }
    return dp;
}

// ----------------------------------------------------------------------------
// The products of a row block: R rows, fp32 FMAs, 16 lanes per vector. Leading dimensions in floats.

constexpr int ATTN_CPU_ROWS = 8;  // R: query rows per block

// S (R, nkp) = A (R, hd) . BT (hd, nkp) in fp32: scores (A = qe rows, BT = ke^T) and dW (A = dy
// rows, BT = v^T). nkp a multiple of 16; keys in the lanes, A's elements broadcast.
ATTN_CPU_TARGET inline void attn_mm_scores(float* S, int lds, const float* A, int lda, const float* BT, int ldb, int hd,
                                           int nkp) {
    constexpr int R = ATTN_CPU_ROWS;
    int j = 0;
    for (; j + 32 <= nkp; j += 32) {
        __m512 acc[R][2];
        for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
        for (int i = 0; i < hd; i++) {
            __m512 b0 = _mm512_loadu_ps(BT + (size_t)i * ldb + j), b1 = _mm512_loadu_ps(BT + (size_t)i * ldb + j + 16);
            for (int r = 0; r < R; r++) {
                __m512 av = _mm512_set1_ps(A[(size_t)r * lda + i]);
                acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
            }
        }
        for (int r = 0; r < R; r++) {
            _mm512_storeu_ps(S + (size_t)r * lds + j, acc[r][0]);
            _mm512_storeu_ps(S + (size_t)r * lds + j + 16, acc[r][1]);
        }
    }
    if (j < nkp) {
        __m512 acc[R];
        for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
        for (int i = 0; i < hd; i++) {
            __m512 b0 = _mm512_loadu_ps(BT + (size_t)i * ldb + j);
            for (int r = 0; r < R; r++) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(A[(size_t)r * lda + i]), b0, acc[r]);
        }
        for (int r = 0; r < R; r++) _mm512_storeu_ps(S + (size_t)r * lds + j, acc[r]);
    }
}

// The products whose results the bf16 path rounds to bf16 anyway (the attention output feeds a bf16
// matmul, and so do dq, dk, dv after RoPE) take bf16 operands and accumulate in fp32 with
// AVX512-BF16's vdpbf16ps (two products per lane and instruction, twice fp32's FMA rate): weights
// x values, ds x keys, and the transposed accumulations of dk and dv. What feeds the row statistics,
// the re-weighting and dL/dp stays fp32: the scores and dW = dy v^T. Operands are 32-bit words
// holding two bf16, the first in the low half: a pair of consecutive keys (along the sum) for one
// channel, or of two consecutive rows.

// Y (R, hdp) = P (R, nk) . M (nk, hdp) with bf16 pairs along the keys: outputs (P = weights,
// M = v) and dq-hat (P = ds, M = ke). Pw: row r at Pw + r ldp, word j2 = (P[r][2j2], P[r][2j2+1]);
// Mw (nk2, hdp): word [j2][c] = (M[2j2][c], M[2j2+1][c]); hdp a multiple of 16.
template <int NC>  // 16-channel chunks per pass
ATTN_CPU_TARGET inline void attn_mm_rows_chunk(float* Y, int ldy, const uint32_t* Pw, int ldp, const uint32_t* Mw, int ldm,
                                               int nk2, int c) {
    constexpr int R = ATTN_CPU_ROWS;
    __m512 acc[R][NC];
    for (int r = 0; r < R; r++)
        for (int q = 0; q < NC; q++) acc[r][q] = _mm512_setzero_ps();
    for (int j2 = 0; j2 < nk2; j2++) {
        __m512bh mv[NC];
        for (int q = 0; q < NC; q++) mv[q] = (__m512bh)_mm512_loadu_si512(Mw + (size_t)j2 * ldm + c + 16 * q);
        for (int r = 0; r < R; r++) {
            __m512bh pv = (__m512bh)_mm512_set1_epi32((int)Pw[(size_t)r * ldp + j2]);
            for (int q = 0; q < NC; q++) acc[r][q] = _mm512_dpbf16_ps(acc[r][q], pv, mv[q]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int q = 0; q < NC; q++) _mm512_storeu_ps(Y + (size_t)r * ldy + c + 16 * q, acc[r][q]);
}
ATTN_CPU_TARGET inline void attn_mm_rows(float* Y, int ldy, const uint32_t* Pw, int ldp, const uint32_t* Mw, int ldm,
                                         int nk2, int hdp) {
    int c = 0;
    for (; c + 32 <= hdp; c += 32) attn_mm_rows_chunk<2>(Y, ldy, Pw, ldp, Mw, ldm, nk2, c);
    if (c < hdp) attn_mm_rows_chunk<1>(Y, ldy, Pw, ldp, Mw, ldm, nk2, c);
}

// D (nk8, hdp) += P (R, nk8)^T . M (R, hdp) with bf16 pairs along the block's rows: dk-hat
// (P = ds, M = qe rows) and dv (P = weights, M = dy rows). Xw (R/2, ldx): word [r2][j] =
// (P[2r2][j], P[2r2+1][j]), zero past the keys; Mw (R/2, hdp): word [r2][c] = (M[2r2][c],
// M[2r2+1][c]). nk8 a multiple of 8; rows of D from j_new (a multiple of 8) on are written, not
// added to (the first block that reaches a key: D needs no clearing).
template <int NC>
ATTN_CPU_TARGET inline void attn_mm_cols_chunk(float* D, int ldd, const uint32_t* Xw, int ldx, const uint32_t* Mw,
                                               int ldm, int nk8, int j_new, int c) {
    constexpr int R2 = ATTN_CPU_ROWS / 2, J = 8;
    __m512bh mv[R2][NC];
    for (int r2 = 0; r2 < R2; r2++)
        for (int q = 0; q < NC; q++) mv[r2][q] = (__m512bh)_mm512_loadu_si512(Mw + (size_t)r2 * ldm + c + 16 * q);
    for (int j = 0; j < nk8; j += J) {
        __m512 acc[J][NC];
        for (int jj = 0; jj < J; jj++)
            for (int q = 0; q < NC; q++)
                acc[jj][q] = j >= j_new ? _mm512_setzero_ps() : _mm512_loadu_ps(D + (size_t)(j + jj) * ldd + c + 16 * q);
        for (int r2 = 0; r2 < R2; r2++) {
            for (int jj = 0; jj < J; jj++) {
                __m512bh xv = (__m512bh)_mm512_set1_epi32((int)Xw[(size_t)r2 * ldx + j + jj]);
                for (int q = 0; q < NC; q++) acc[jj][q] = _mm512_dpbf16_ps(acc[jj][q], xv, mv[r2][q]);
            }
        }
        for (int jj = 0; jj < J; jj++)
            for (int q = 0; q < NC; q++) _mm512_storeu_ps(D + (size_t)(j + jj) * ldd + c + 16 * q, acc[jj][q]);
    }
}
ATTN_CPU_TARGET inline void attn_mm_cols(float* D, int ldd, const uint32_t* Xw, int ldx, const uint32_t* Mw, int ldm,
                                         int nk8, int j_new, int hdp) {
    int c = 0;
    for (; c + 32 <= hdp; c += 32) attn_mm_cols_chunk<2>(D, ldd, Xw, ldx, Mw, ldm, nk8, j_new, c);
    if (c < hdp) attn_mm_cols_chunk<1>(D, ldd, Xw, ldx, Mw, ldm, nk8, j_new, c);
}

// 16 words from two rows of 16 floats: (bf16(lo), bf16(hi)), rounded to nearest even
ATTN_CPU_TARGET inline __m512i attn_pair16(__m512 lo, __m512 hi) {
    __m512i l = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(lo));
    __m512i h = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(hi));
    return _mm512_or_si512(l, _mm512_slli_epi32(h, 16));
}
// out (npairs, ldo words): word [p][c] = (X[2p][c], X[2p+1][c]) for c < ncols (a multiple of 16);
// X row r at X + r ldx
ATTN_CPU_TARGET inline void attn_pair_rows(uint32_t* out, size_t ldo, const float* X, size_t ldx, int npairs, int ncols) {
    for (int p = 0; p < npairs; p++)
        for (int c = 0; c < ncols; c += 16)
            _mm512_storeu_si512(out + (size_t)p * ldo + c,
                                attn_pair16(_mm512_loadu_ps(X + (size_t)2 * p * ldx + c), _mm512_loadu_ps(X + (size_t)(2 * p + 1) * ldx + c)));
}
// out row r (ncols bf16, i.e. ncols/2 words of pairs along the row) = bf16(X row r); ncols a
// multiple of 16, X zero past its data
ATTN_CPU_TARGET inline void attn_bf16_rows(uint32_t* out, size_t ldo, const float* X, size_t ldx, int nrows, int ncols) {
    for (int r = 0; r < nrows; r++)
        for (int c = 0; c < ncols; c += 16)
            _mm256_storeu_si256((__m256i*)((uint16_t*)(out + (size_t)r * ldo) + c), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(X + (size_t)r * ldx + c)));
}

// ----------------------------------------------------------------------------
// One head's operands, laid out for the products: rows padded to Tp (a multiple of 32 keys),
// channels to hdp (a multiple of 16), padding zero.

template <class T> struct Align64Alloc {  // vectors of 64-byte aligned storage
    typedef T value_type;
    Align64Alloc() = default;
    template <class U> Align64Alloc(const Align64Alloc<U>&) {}
    T* allocate(size_t n) { return (T*)::operator new(n * sizeof(T), std::align_val_t(64)); }
    void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
    template <class U> bool operator==(const Align64Alloc<U>&) const { return true; }
    template <class U> bool operator!=(const Align64Alloc<U>&) const { return false; }
};
typedef std::vector<float, Align64Alloc<float>> AttnBuf;
typedef std::vector<uint32_t, Align64Alloc<uint32_t>> AttnWords;  // pairs of bf16
template <class V> inline typename V::value_type* attn_sized(V& v, size_t n) {  // grows, never shrinks
    if (v.size() < n) v.resize(n);
    return v.data();
}

struct AttnHeadShape {
    int T, NH, hd;
    int Tp;   // rows (keys) padded to a multiple of 32
    int hdp;  // channels padded to a multiple of 16
    int attn_len;  // the n of sigmoid's bias and relu's scale: 0 for n_t (attention/attention_cpu.h)
    AttnHeadShape(int T_, int NH_, int hd_, int attn_len_ = 0)
        : T(T_), NH(NH_), hd(hd_), Tp((T_ + 31) / 32 * 32), hdp((hd_ + 15) / 16 * 16), attn_len(attn_len_) {}
    size_t rows() const { return (size_t)Tp * hdp; }  // a (Tp, hdp) operand; also (hdp, Tp) transposed
};

// |x| of one row of n <= hdp floats as the reference's l2_norm_rescaled: x scaled by the power of
// two that brings its largest element into [0.5, 1) before the sum of squares (no overflow or
// underflow), the scale undone on the root. Scaling by a power of two is exact and commutes with
// every operation of the sum, so where the unscaled sum of squares lies well inside fp32's range it
// is that result already (up to squares below 2^-126, under 2^-66 of the sum): only rows outside
// that range take the scaled path.
ATTN_CPU_TARGET inline float attn_norm512(const float* x, int n) {
    __m512 sum2 = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __m512 xv = _mm512_maskz_loadu_ps(attn_lanes(i, n), x + i);
        sum2 = _mm512_fmadd_ps(xv, xv, sum2);
    }
    float s2 = _mm512_reduce_add_ps(sum2);
    if (s2 > 0x1p-60f && s2 < 0x1p60f) return std::sqrt(s2);
    __m512 amax = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_maskz_loadu_ps(attn_lanes(i, n), x + i)));
    float am = _mm512_reduce_max_ps(amax);
    if (!(am > 0) || !std::isfinite(am)) return am > 0 ? am : 0.0f;
    // am = f 2^e with f in [0.5, 1): e = floor(log2 am) + 1
    const __m512 e = _mm512_add_ps(_mm512_getexp_ps(_mm512_set1_ps(am)), _mm512_set1_ps(1.0f));
    const __m512 minus_e = _mm512_sub_ps(_mm512_setzero_ps(), e);
    sum2 = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __m512 xs = _mm512_scalef_ps(_mm512_maskz_loadu_ps(attn_lanes(i, n), x + i), minus_e);  // exact
        sum2 = _mm512_fmadd_ps(xs, xs, sum2);
    }
    return _mm512_cvtss_f32(_mm512_scalef_ps(_mm512_sqrt_ps(_mm512_set1_ps(_mm512_reduce_add_ps(sum2))), e));
}

constexpr int ATTN_PREFETCH_ROWS = 8;  // how far ahead the row loops fetch a head's rows of qkv, dout, dqkv

// rows (Tp, hdp) of one head from x (row t at x[t * stride], hd floats): q or k as the scores take
// them (normalise: x / max(|x|, eps), as the reference's attention_prepare), v, or dy; norms[t] = |x_t|
// when given. Padding zero.
ATTN_CPU_TARGET inline void attn_load_rows(float* rows, float* norms, const float* x, size_t stride,
                                           const AttnHeadShape& sh, bool normalise) {
    for (int t = 0; t < sh.T; t++) {
        const float* xt = x + (size_t)t * stride;
        if (t + ATTN_PREFETCH_ROWS < sh.T)  // rows lie pages apart: no hardware prefetcher follows them
            for (int i = 0; i < sh.hd; i += 16) _mm_prefetch((const char*)(xt + ATTN_PREFETCH_ROWS * stride + i), _MM_HINT_T0);
        float scale = 1.0f;
        if (normalise || norms) {
            float nrm = attn_norm512(xt, sh.hd);
            if (norms) norms[t] = nrm;
            if (normalise) scale = 1.0f / std::max(nrm, (float)ref::LSSA_NORM_EPS);
        }
        const __m512 vs = _mm512_set1_ps(scale);
        for (int i = 0; i < sh.hdp; i += 16)
            _mm512_storeu_ps(rows + (size_t)t * sh.hdp + i, _mm512_mul_ps(_mm512_maskz_loadu_ps(attn_lanes(i, sh.hd), xt + i), vs));
    }
    std::fill(rows + (size_t)sh.T * sh.hdp, rows + (size_t)sh.Tp * sh.hdp, 0.0f);
}

// dst (16 rows, stride ldd) = the transpose of src (16 rows, stride lds)
ATTN_CPU_TARGET inline void attn_transpose16(float* dst, size_t ldd, const float* src, size_t lds) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * lds);
    for (int i = 0; i < 16; i += 2) {  // per 128-bit lane: (a0 b0 a1 b1), (a2 b2 a3 b3)
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {  // per lane L, r[i + c]: column 4L + c of rows i..i+3
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    for (int c = 0; c < 4; c++) {  // columns c, c + 4, c + 8, c + 12
        __m512 v0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), v1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
        __m512 v2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88), v3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
        _mm512_storeu_ps(dst + c * ldd, _mm512_shuffle_f32x4(v0, v2, 0x88));
        _mm512_storeu_ps(dst + (c + 8) * ldd, _mm512_shuffle_f32x4(v0, v2, 0xdd));
        _mm512_storeu_ps(dst + (c + 4) * ldd, _mm512_shuffle_f32x4(v1, v3, 0x88));
        _mm512_storeu_ps(dst + (c + 12) * ldd, _mm512_shuffle_f32x4(v1, v3, 0xdd));
    }
}

// rowsT (ncols, nrows) = the transpose of rows (nrows, ncols), both multiples of 16; 32-bit
// elements (floats, or words of bf16 pairs: the shuffles move bits)
ATTN_CPU_TARGET inline void attn_transpose(float* rowsT, const float* rows, int nrows, int ncols) {
    for (int t = 0; t < nrows; t += 16)
        for (int i = 0; i < ncols; i += 16) attn_transpose16(rowsT + (size_t)i * nrows + t, nrows, rows + (size_t)t * ncols + i, ncols);
}

// One thread's scratch, kept between calls: a row block's scores (or phi'), phi, weights and
// gradients (R, Tp) and their bf16 pairs, and in the backward one head's operands.
struct AttnThreadScratch {
    AttnBuf s, a, w, g, y;        // (R, Tp) x 4, (R, hdp)
    AttnWords w_keys, g_keys;     // (R, Tp/2): pairs along the keys of w and g
    AttnWords w_rows, g_rows;     // (R/2, Tp): pairs along the rows of w and g
    AttnWords q_rows, dy_rows;    // (R/2, hdp): pairs along the rows of the block's qe and dy
    AttnBuf qe, ke, keT, vT, dy, dqe, dke, dv;  // a head's (Tp, hdp) operands (keT, vT: (hdp, Tp))
    AttnWords ke_keys;                          // (Tp/2, hdp): ke in pairs along the keys
    std::vector<float> qn, kn;                  // (T)
    void size_block(const AttnHeadShape& sh) {
        size_t n = (size_t)ATTN_CPU_ROWS * sh.Tp;
        attn_sized(s, n), attn_sized(a, n), attn_sized(w, n), attn_sized(g, n);
        attn_sized(y, (size_t)ATTN_CPU_ROWS * sh.hdp);
        attn_sized(w_keys, n / 2), attn_sized(g_keys, n / 2), attn_sized(w_rows, n / 2), attn_sized(g_rows, n / 2);
        attn_sized(q_rows, (size_t)ATTN_CPU_ROWS / 2 * sh.hdp), attn_sized(dy_rows, (size_t)ATTN_CPU_ROWS / 2 * sh.hdp);
    }
    void size_head(const AttnHeadShape& sh) {
        size_t n = sh.rows();
        for (AttnBuf* b : {&qe, &ke, &keT, &vT, &dy, &dqe, &dke, &dv}) attn_sized(*b, n);
        attn_sized(ke_keys, n / 2);
        attn_sized(qn, (size_t)sh.T), attn_sized(kn, (size_t)sh.T);
    }
};

// What the layer keeps between calls: the forward's operands of every head, and each thread's
// scratch (sizes change rarely, so nothing is allocated in a training step after the first).
struct AttentionCpuWorkspace {
    AttnBuf qe, keT;   // (B NH) heads of (Tp, hdp) and (hdp, Tp)
    AttnWords v_keys;  // (B NH) heads of (Tp/2, hdp): v in pairs along the keys
    std::vector<AttnThreadScratch> threads;
    AttnThreadScratch& mine() { return threads[omp_get_thread_num()]; }
    void size_threads() {
        if (threads.size() < (size_t)omp_get_max_threads()) threads.resize(omp_get_max_threads());
    }
};

// The weights of rows [t0, t0 + R) of one head (rows past T: zero) into sc.w (R, Tp), stats
// (3 per row, or null) and rows (per row, or null); returns nkp, the keys the block's products run
// over (a multiple of 16, weights zero past each row's keys). qe (Tp, hdp) as attn_load_rows
// makes it, keT (hdp, Tp) its keys' transpose. dphi: the scores' buffer gets phi' (backward).
template <AttnKind K>
ATTN_CPU_TARGET inline int attn_block_weights(AttnThreadScratch& sc, AttnRow* rows, float* stats, const float* qe,
                                              const float* keT, int t0, const AttnHeadShape& sh, const AttnPower& pw,
                                              bool dphi) {
    constexpr int R = ATTN_CPU_ROWS;
    int nrows = std::min(R, sh.T - t0), nk = t0 + nrows, nkp = (nk + 15) / 16 * 16;
    attn_mm_scores(sc.s.data(), sh.Tp, qe + (size_t)t0 * sh.hdp, sh.hdp, keT, sh.Tp, sh.hd, nkp);
    for (int r = 0; r < R; r++) {
        size_t o = (size_t)r * sh.Tp;
        if (r >= nrows) {
            std::fill(sc.w.begin() + o, sc.w.begin() + o + nkp, 0.0f);
            if (rows) rows[r].live = false;
            continue;
        }
        float st[3];
        AttnRow row;
        attn_row_forward<K>(&sc.s[o], &sc.a[o], &sc.w[o], st, row, t0 + r, nkp, sh.hd, pw, sh.attn_len, dphi);
        if (stats)
            for (int c = 0; c < 3; c++) stats[(size_t)r * 3 + c] = st[c];
        if (rows) rows[r] = row;
    }
    return nkp;
}

// ----------------------------------------------------------------------------
// The layer

// The rows of the block of one head starting at t0 (R rows, outputs (R, hdp)): weights, then
// y = W v on bf16 pairs, written to out (B, T, NH, hd) at this head's rows, and the rows' stats.
template <AttnKind K>
ATTN_CPU_TARGET inline void attention_forward_block(AttnThreadScratch& sc, float* out, float* stats, const float* qe,
                                                    const float* keT, const uint32_t* v_keys, int t0,
                                                    const AttnHeadShape& sh, int C, const AttnPower& pw) {
    constexpr int R = ATTN_CPU_ROWS;
    float st[3 * R];
    int nrows = std::min(R, sh.T - t0);
    int nkp = attn_block_weights<K>(sc, nullptr, st, qe, keT, t0, sh, pw, false);
    attn_bf16_rows(sc.w_keys.data(), sh.Tp / 2, sc.w.data(), sh.Tp, R, nkp);
    attn_mm_rows(sc.y.data(), sh.hdp, sc.w_keys.data(), sh.Tp / 2, v_keys, sh.hdp, nkp / 2, sh.hdp);
    for (int r = 0; r < nrows; r++) {
        std::copy(&sc.y[(size_t)r * sh.hdp], &sc.y[(size_t)r * sh.hdp] + sh.hd, out + (size_t)(t0 + r) * C);
        if (stats)
            for (int c = 0; c < 3; c++) stats[(size_t)(t0 + r) * 3 + c] = st[r * 3 + c];
    }
}

template <AttnKind K>
void attention_forward_cpu_k(AttentionCpuWorkspace& ws, float* out, float* stats, const float* qkv, int B, int T, int NH,
                             int hd, double p, const double* p_head, int attn_len) {
    constexpr int R = ATTN_CPU_ROWS;
    const AttnHeadShape sh(T, NH, hd, attn_len);
    const int C = NH * hd, BH = B * NH, NB = (T + R - 1) / R;
    const size_t per_head = sh.rows();
    attn_sized(ws.qe, (size_t)BH * per_head), attn_sized(ws.keT, (size_t)BH * per_head);
    attn_sized(ws.v_keys, (size_t)BH * per_head / 2);
    ws.size_threads();
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < BH; bh++) {
        AttnThreadScratch& sc = ws.mine();
        sc.size_head(sh);
        int b = bh / NH, h = bh % NH;
        const float* x = qkv + (size_t)b * T * 3 * C + h * hd;
        size_t o = (size_t)bh * per_head;
        attn_load_rows(&ws.qe[o], nullptr, x, (size_t)3 * C, sh, AttnTraits<K>::cos_len);
        attn_load_rows(sc.ke.data(), nullptr, x + C, (size_t)3 * C, sh, AttnTraits<K>::cos_len);
        attn_transpose(&ws.keT[o], sc.ke.data(), sh.Tp, sh.hdp);
        attn_load_rows(sc.dv.data(), nullptr, x + 2 * C, (size_t)3 * C, sh, false);  // v, through dv's storage
        attn_pair_rows(&ws.v_keys[o / 2], sh.hdp, sc.dv.data(), sh.hdp, sh.Tp / 2, sh.hdp);
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int item = 0; item < BH * NB; item++) {
        int rb = NB - 1 - item / BH, bh = item % BH;  // the longest blocks first
        int b = bh / NH, h = bh % NH;
        AttnThreadScratch& sc = ws.mine();
        sc.size_block(sh);
        size_t o = (size_t)bh * per_head;
        attention_forward_block<K>(sc, out + (size_t)b * T * C + h * hd, stats ? stats + (size_t)bh * T * 3 : nullptr,
                                   &ws.qe[o], &ws.keT[o], &ws.v_keys[o / 2], rb * R, sh, C,
                                   AttnPower(p_head ? p_head[h] : p));
    }
}

// dx (hd) = dxh mapped back through x -> x / max(|x|, eps) (normalise; xh = x / |x|, as the
// reference's l2norm_backward), or dxh itself
template <bool normalise>
ATTN_CPU_TARGET inline void attn_grad_row(float* dx, const float* dxh, const float* xh, float norm, int hd) {
    __m512 dot = _mm512_setzero_ps(), inv = _mm512_set1_ps(1.0f);
    if constexpr (normalise) {
        if (norm > (float)ref::LSSA_NORM_EPS) {
            for (int i = 0; i < hd; i += 16) {
                __mmask16 k = attn_lanes(i, hd);
                dot = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, xh + i), _mm512_maskz_loadu_ps(k, dxh + i), dot);
            }
            dot = _mm512_set1_ps(_mm512_reduce_add_ps(dot));
            inv = _mm512_set1_ps(1.0f / norm);
        } else {
            inv = _mm512_set1_ps((float)(1.0 / ref::LSSA_NORM_EPS));
        }
    }
    for (int i = 0; i < hd; i += 16) {
        __mmask16 k = attn_lanes(i, hd);
        __m512 g = _mm512_maskz_loadu_ps(k, dxh + i);
        if constexpr (normalise) g = _mm512_mul_ps(_mm512_fnmadd_ps(_mm512_maskz_loadu_ps(k, xh + i), dot, g), inv);
        _mm512_mask_storeu_ps(dx + i, k, g);
    }
}

// One head's backward: dqkv (its q, k, v slices, row t at t 3C) = the gradients; returns the
// head's dL/dp (want_dp, re-weighting only). Row blocks in order; dk and dv accumulate over them.
template <AttnKind K>
ATTN_CPU_TARGET inline double attention_backward_head(AttnThreadScratch& sc, float* dqkv, const float* dout,
                                                      const float* qkv, const AttnHeadShape& sh, int C,
                                                      const AttnPower& pw, bool want_dp) {
    constexpr int R = ATTN_CPU_ROWS;
    constexpr bool cos_len = AttnTraits<K>::cos_len;
    const int T = sh.T, hd = sh.hd, hdp = sh.hdp, Tp = sh.Tp;
    float *qe = sc.qe.data(), *ke = sc.ke.data(), *dy = sc.dy.data();
    attn_load_rows(qe, cos_len ? sc.qn.data() : nullptr, qkv, (size_t)3 * C, sh, cos_len);
    attn_load_rows(ke, cos_len ? sc.kn.data() : nullptr, qkv + C, (size_t)3 * C, sh, cos_len);
    attn_transpose(sc.keT.data(), ke, Tp, hdp);
    attn_pair_rows(sc.ke_keys.data(), hdp, ke, hdp, Tp / 2, hdp);
    attn_load_rows(sc.dv.data(), nullptr, qkv + 2 * C, (size_t)3 * C, sh, false);  // v, through dv's storage
    attn_transpose(sc.vT.data(), sc.dv.data(), Tp, hdp);
    attn_load_rows(dy, nullptr, dout, (size_t)C, sh, false);
    AttnRow rows[R];
    double dp = 0;
    for (int t0 = 0; t0 < T; t0 += R) {
        int nrows = std::min(R, T - t0), nk = t0 + nrows, nk8 = (nk + 7) / 8 * 8;
        int nkp = attn_block_weights<K>(sc, rows, nullptr, qe, sc.keT.data(), t0, sh, pw, true);
        // dW = dy v^T, then c_t ds row by row (zero rows past T)
        attn_mm_scores(sc.g.data(), Tp, dy + (size_t)t0 * hdp, hdp, sc.vT.data(), Tp, hd, nkp);
        for (int r = 0; r < R; r++) {
            size_t o = (size_t)r * Tp;
            if (r >= nrows) {
                std::fill(sc.g.begin() + o, sc.g.begin() + o + nkp, 0.0f);
                continue;
            }
            dp += attn_row_backward<K>(&sc.g[o], &sc.s[o], &sc.a[o], &sc.w[o], rows[r], t0 + r, nkp, hd, pw, sh.attn_len,
                                       want_dp);
        }
        // dq-hat = ds ke; dk-hat += ds^T qe; dv += W^T dy (bf16 pairs)
        attn_bf16_rows(sc.g_keys.data(), Tp / 2, sc.g.data(), Tp, R, nkp);
        attn_mm_rows(&sc.dqe[(size_t)t0 * hdp], hdp, sc.g_keys.data(), Tp / 2, sc.ke_keys.data(), hdp, nkp / 2, hdp);
        attn_pair_rows(sc.g_rows.data(), Tp, sc.g.data(), Tp, R / 2, nkp);
        attn_pair_rows(sc.w_rows.data(), Tp, sc.w.data(), Tp, R / 2, nkp);
        attn_pair_rows(sc.q_rows.data(), hdp, qe + (size_t)t0 * hdp, hdp, R / 2, hdp);
        attn_pair_rows(sc.dy_rows.data(), hdp, dy + (size_t)t0 * hdp, hdp, R / 2, hdp);
        attn_mm_cols(sc.dke.data(), hdp, sc.g_rows.data(), Tp, sc.q_rows.data(), hdp, nk8, t0, hdp);
        attn_mm_cols(sc.dv.data(), hdp, sc.w_rows.data(), Tp, sc.dy_rows.data(), hdp, nk8, t0, hdp);
    }
    // through the normalisation of q and k (cos_len), into dqkv
    for (int t = 0; t < T; t++) {
        float* dq = dqkv + (size_t)t * 3 * C;
        if (t + ATTN_PREFETCH_ROWS < T)
            for (int w = 0; w < 3; w++)
                for (int i = 0; i < hd; i += 16) _mm_prefetch((const char*)(dq + ATTN_PREFETCH_ROWS * 3 * C + w * C + i), _MM_HINT_T0);
        size_t o = (size_t)t * hdp;
        attn_grad_row<cos_len>(dq, &sc.dqe[o], qe + o, cos_len ? sc.qn[t] : 0.0f, hd);
        attn_grad_row<cos_len>(dq + C, &sc.dke[o], ke + o, cos_len ? sc.kn[t] : 0.0f, hd);
        attn_grad_row<false>(dq + 2 * C, &sc.dv[o], nullptr, 0.0f, hd);
    }
    return dp;
}

template <AttnKind K>
void attention_backward_cpu_k(AttentionCpuWorkspace& ws, float* dqkv, const float* dout, const float* qkv, int B, int T,
                              int NH, int hd, double p, const double* p_head, double* dp_head, int attn_len) {
    const AttnHeadShape sh(T, NH, hd, attn_len);
    const int C = NH * hd, BH = B * NH;
    const bool want_dp = AttnTraits<K>::reweight && dp_head != nullptr;
    std::vector<double> dp(BH, 0.0);
    ws.size_threads();
#pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < BH; bh++) {
        AttnThreadScratch& sc = ws.mine();
        sc.size_block(sh);
        sc.size_head(sh);
        int b = bh / NH, h = bh % NH;
        size_t off = (size_t)b * T * 3 * C + h * hd;
        dp[bh] = attention_backward_head<K>(sc, dqkv + off, dout + (size_t)b * T * C + h * hd, qkv + off, sh, C,
                                            AttnPower(p_head ? p_head[h] : p), want_dp);
    }
    if (dp_head)  // heads in order: the same sum for any number of threads
        for (int bh = 0; bh < BH; bh++) dp_head[bh % NH] += dp[bh];
}

// The weights of one head h of a forward on one sequence (qkv (1, T, 3, NH, hd)) with the
// forward's own code: W (T, T) row-major, zero above the diagonal; valid[t] = 0 for a degenerate
// row. What eval/attention_maps.h reads on the bf16 path.
template <AttnKind K>
void attention_map_cpu_k(std::vector<float>& W, std::vector<uint8_t>& valid, const float* qkv, int T, int NH, int hd,
                         int h, double p, int attn_len) {
    constexpr int R = ATTN_CPU_ROWS;
    const AttnHeadShape sh(T, NH, hd, attn_len);
    const int C = NH * hd;
    AttentionCpuWorkspace ws;
    ws.size_threads();
    AttnThreadScratch& sc0 = ws.threads[0];
    sc0.size_head(sh);
    attn_load_rows(sc0.qe.data(), nullptr, qkv + h * hd, (size_t)3 * C, sh, AttnTraits<K>::cos_len);
    attn_load_rows(sc0.ke.data(), nullptr, qkv + C + h * hd, (size_t)3 * C, sh, AttnTraits<K>::cos_len);
    attn_transpose(sc0.keT.data(), sc0.ke.data(), sh.Tp, sh.hdp);
    const float *qe = sc0.qe.data(), *keT = sc0.keT.data();
    W.assign((size_t)T * T, 0.0f);
    valid.assign(T, 0);
    const AttnPower pw(p);
#pragma omp parallel for schedule(dynamic, 1)
    for (int t0 = 0; t0 < T; t0 += R) {
        AttnThreadScratch& sc = ws.mine();
        sc.size_block(sh);
        AttnRow rows[R];
        attn_block_weights<K>(sc, rows, nullptr, qe, keT, t0, sh, pw, false);
        for (int r = 0; r < R && t0 + r < T; r++) {
            int t = t0 + r;
            std::copy(&sc.w[(size_t)r * sh.Tp], &sc.w[(size_t)r * sh.Tp] + t + 1, &W[(size_t)t * T]);
            valid[t] = rows[r].live ? 1 : 0;
        }
    }
}

// ----------------------------------------------------------------------------
// Run-time entry points (the kind becomes a compile-time constant: attn_dispatch)

// attn_len: as the reference's attention_forward (0: the row's n_t)
inline void attention_forward_cpu(AttentionCpuWorkspace& ws, float* out, float* stats, const float* qkv, int B, int T,
                                  int NH, int hd, AttnKind kind, double p, const double* p_head = nullptr,
                                  int attn_len = 0) {
    ref::attention_check_len(kind, attn_len, "attention_forward_cpu");
    attn_dispatch(kind, [&](auto k) {
        attention_forward_cpu_k<decltype(k)::value>(ws, out, stats, qkv, B, T, NH, hd, p, p_head, attn_len);
    });
}

// dqkv = d(loss)/d(qkv) (written, not accumulated: unlike the reference's attention_backward);
// dp_head[h] += d(loss)/d(p of head h) when given (re-weighting only)
inline void attention_backward_cpu(AttentionCpuWorkspace& ws, float* dqkv, const float* dout, const float* qkv, int B,
                                   int T, int NH, int hd, AttnKind kind, double p, const double* p_head = nullptr,
                                   double* dp_head = nullptr, int attn_len = 0) {
    ref::attention_check_len(kind, attn_len, "attention_backward_cpu");
    attn_dispatch(kind, [&](auto k) {
        attention_backward_cpu_k<decltype(k)::value>(ws, dqkv, dout, qkv, B, T, NH, hd, p, p_head, dp_head, attn_len);
    });
}

inline void attention_map_cpu(std::vector<float>& W, std::vector<uint8_t>& valid, const float* qkv, int T, int NH, int hd,
                              int h, AttnKind kind, double p, int attn_len = 0) {
    ref::attention_check_len(kind, attn_len, "attention_map_cpu");
    attn_dispatch(kind, [&](auto k) { attention_map_cpu_k<decltype(k)::value>(W, valid, qkv, T, NH, hd, h, p, attn_len); });
}

#pragma GCC diagnostic pop
