// bf16 path of the CPU layernorm (reference: layers/layernorm_cpu.h, same formulas, eps 1e-5):
// AVX-512 over the channels, fp32 statistics, the output (a matmul's input) rounded to bf16.
// inp (N,C) fp32, w, b (C), out (N,C) bf16, mean, rstd (N).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "layers/bf16_cpu.h"

// GCC 12 flags the masked intrinsics' undefined pass-through vectors (a known false positive)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

BF16_CPU_TARGET inline float reduce_add(__m512 x) { return _mm512_reduce_add_ps(x); }

// the masked 16-lane chunks of a row of C: every loop below is `for (i = 0; i < C; i += 16)`
BF16_CPU_TARGET inline __mmask16 row_mask(int i, int C) { return C - i >= 16 ? (__mmask16)0xffff : tail_mask(C - i); }

BF16_CPU_TARGET inline void layernorm_forward_bf16(bf16* out, float* mean, float* rstd, const float* inp,
                                                   const float* w, const float* b, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float* x = inp + (size_t)n * C;
        __m512 s = _mm512_setzero_ps();
        for (int i = 0; i < C; i += 16) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(row_mask(i, C), x + i));
        float m = reduce_add(s) / C;
        __m512 vm = _mm512_set1_ps(m), v = _mm512_setzero_ps();
        for (int i = 0; i < C; i += 16) {
            __mmask16 k = row_mask(i, C);
            __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + i), vm);
            v = _mm512_fmadd_ps(d, d, v);
        }
        float rs = 1.0f / std::sqrt(reduce_add(v) / C + 1e-5f);
        __m512 vrs = _mm512_set1_ps(rs);
        bf16* o = out + (size_t)n * C;
        for (int i = 0; i < C; i += 16) {
            __mmask16 k = row_mask(i, C);
            __m512 norm = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm), vrs);
            __m512 y = _mm512_fmadd_ps(norm, _mm512_maskz_loadu_ps(k, w + i), _mm512_maskz_loadu_ps(k, b + i));
            store_bf16_masked(o + i, y, k);
        }
        mean[n] = m;
        rstd[n] = rs;
    }
}

// dinp (N,C) += d layernorm; dw, db (C) += their gradients. dout (N,C) fp32.
// Parallel over chunks of rows: each row's dx, and the chunk's partial sums of dw and db, summed by
// colsum_finish (the same bits for any number of threads); partial: scratch.
BF16_CPU_TARGET inline void layernorm_backward_bf16(float* dinp, float* dw, float* db, const float* dout,
                                                    const float* inp, const float* w, const float* mean,
                                                    const float* rstd, int N, int C, std::vector<float>& partial) {
    const int chunks = colsum_chunks(N);
    float* part = colsum_partial(partial, N, 2 * C);  // per chunk: dw (C), then db (C)
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < chunks; ch++) {
        float* pw = part + (size_t)ch * 2 * C;
        float* pb = pw + C;
        std::fill(pw, pw + 2 * C, 0.0f);
        for (int n = ch * COLSUM_ROWS; n < std::min(N, (ch + 1) * COLSUM_ROWS); n++) {
            const float* dy = dout + (size_t)n * C;
            const float* x = inp + (size_t)n * C;
            __m512 vm = _mm512_set1_ps(mean[n]), vrs = _mm512_set1_ps(rstd[n]);
            // dnorm = dy * w; dx = rs * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
            __m512 sd = _mm512_setzero_ps(), sdn = _mm512_setzero_ps();
            for (int i = 0; i < C; i += 16) {
                __mmask16 k = row_mask(i, C);
                __m512 norm = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm), vrs);
                __m512 dyv = _mm512_maskz_loadu_ps(k, dy + i);
                __m512 dnorm = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, w + i), dyv);
                sd = _mm512_add_ps(sd, dnorm);
                sdn = _mm512_fmadd_ps(dnorm, norm, sdn);
                _mm512_mask_storeu_ps(pw + i, k, _mm512_fmadd_ps(norm, dyv, _mm512_maskz_loadu_ps(k, pw + i)));
                _mm512_mask_storeu_ps(pb + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, pb + i), dyv));
            }
            __m512 dnorm_mean = _mm512_set1_ps(reduce_add(sd) / C), dnorm_norm_mean = _mm512_set1_ps(reduce_add(sdn) / C);
            float* dx = dinp + (size_t)n * C;
            for (int i = 0; i < C; i += 16) {
                __mmask16 k = row_mask(i, C);
                __m512 norm = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vm), vrs);
                __m512 dnorm = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, w + i), _mm512_maskz_loadu_ps(k, dy + i));
                __m512 g = _mm512_sub_ps(_mm512_sub_ps(dnorm, dnorm_mean), _mm512_mul_ps(norm, dnorm_norm_mean));
                _mm512_mask_storeu_ps(dx + i, k, _mm512_fmadd_ps(vrs, g, _mm512_maskz_loadu_ps(k, dx + i)));
            }
        }
    }
    std::vector<float> sums(2 * (size_t)C, 0.0f);
    colsum_finish(sums.data(), part, chunks, 2 * C);
    for (int i = 0; i < C; i++) dw[i] += sums[i], db[i] += sums[C + i];
}

#pragma GCC diagnostic pop
