// bf16 path of the CPU AdamW (reference: layers/adamw_cpu.h, the same formula in fp32), AVX-512,
// fused with the two passes around it: the gradient scale (clipping) before, and after, the bf16
// copy of the updated fp32 master weights that the next forward's matmuls read.
// params, grads, m, v (n) fp32; params_bf (n) bf16 = round to nearest even of the new params.
// A pure function of the master weights, so a resume rebuilds the same bf16 weights from them.
#pragma once

#include <cmath>
#include <algorithm>
#include <cstddef>
#include <vector>

#include "layers/bf16_cpu.h"

// GCC 12 flags the masked intrinsics' undefined pass-through vectors (a known false positive)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

BF16_CPU_TARGET inline void adamw_update_bf16(float* params, bf16* params_bf, const float* grads, float* m, float* v,
                                              size_t n, float lr, float beta1, float beta2, float eps,
                                              float weight_decay, float grad_scale, int t) {
    float bc1 = 1.0f - std::pow(beta1, (float)t), bc2 = 1.0f - std::pow(beta2, (float)t);
    const __m512 b1 = _mm512_set1_ps(beta1), b2 = _mm512_set1_ps(beta2), one_b1 = _mm512_set1_ps(1.0f - beta1),
                 one_b2 = _mm512_set1_ps(1.0f - beta2), vbc1 = _mm512_set1_ps(bc1), vbc2 = _mm512_set1_ps(bc2),
                 veps = _mm512_set1_ps(eps), vlr = _mm512_set1_ps(lr), vwd = _mm512_set1_ps(weight_decay),
                 vscale = _mm512_set1_ps(grad_scale);
    size_t vectors = (n + 15) / 16;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < vectors; k++) {
        size_t i = k * 16;
        __mmask16 mask = n - i >= 16 ? (__mmask16)0xffff : tail_mask((int)(n - i));
        __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, grads + i), vscale);
        __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_maskz_loadu_ps(mask, m + i)), _mm512_mul_ps(one_b1, g));
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_maskz_loadu_ps(mask, v + i)),
                                  _mm512_mul_ps(_mm512_mul_ps(one_b2, g), g));
        __m512 mhat = _mm512_div_ps(mi, vbc1), vhat = _mm512_div_ps(vi, vbc2);
        __m512 p = _mm512_maskz_loadu_ps(mask, params + i);
        __m512 step = _mm512_add_ps(_mm512_div_ps(mhat, _mm512_add_ps(_mm512_sqrt_ps(vhat), veps)),
                                    _mm512_mul_ps(vwd, p));
        p = _mm512_sub_ps(p, _mm512_mul_ps(vlr, step));
        _mm512_mask_storeu_ps(m + i, mask, mi);
        _mm512_mask_storeu_ps(v + i, mask, vi);
        _mm512_mask_storeu_ps(params + i, mask, p);
        store_bf16_masked(params_bf + i, p, mask);
    }
}

// sum of squares of x (n) in double, in fixed chunks added in chunk order: the same bits for any
// number of threads
BF16_CPU_TARGET inline double sum_squares_bf16_path(const float* x, size_t n) {
    const size_t chunk = 1 << 16;
    size_t chunks = (n + chunk - 1) / chunk;
    std::vector<double> partial(chunks);
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        size_t begin = c * chunk, end = std::min(n, begin + chunk);
        __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
        size_t i = begin;
        for (; i + 16 <= end; i += 16) {
            __m512 f = _mm512_loadu_ps(x + i);
            __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(f));
            __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1)));
            s0 = _mm512_fmadd_pd(lo, lo, s0);
            s1 = _mm512_fmadd_pd(hi, hi, s1);
        }
        double s = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
        for (; i < end; i++) s += (double)x[i] * x[i];
        partial[c] = s;
    }
    double sum = 0;
    for (double s : partial) sum += s;
    return sum;
}

#pragma GCC diagnostic pop
