// bf16 path of the CPU GELU (reference: layers/gelu_cpu.h, the same tanh approximation), AVX-512.
// Forward: inp (N) fp32 -> out (N) bf16 (the next matmul's input).
// Backward fused with what the matmul below needs: dinp (N,OC) bf16 and its column sums.
#pragma once

#include <algorithm>
#include <vector>

#include "layers/bf16_cpu.h"
#include "layers/gelu_cpu.h"

// GCC 12 flags the masked intrinsics' undefined pass-through vectors (a known false positive)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

BF16_CPU_TARGET inline __m512 gelu_tanh_arg(__m512 x) {  // sqrt(2/pi) (x + 0.044715 x^3)
    __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
    return _mm512_mul_ps(_mm512_set1_ps(ref::gelu_scale<float>()), _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x3, x));
}

BF16_CPU_TARGET inline void gelu_forward_bf16(bf16* out, const float* inp, size_t N) {
    size_t vectors = (N + 15) / 16;
#pragma omp parallel for schedule(static)
    for (size_t v = 0; v < vectors; v++) {
        size_t i = v * 16;
        __mmask16 m = N - i >= 16 ? (__mmask16)0xffff : tail_mask((int)(N - i));
        __m512 x = _mm512_maskz_loadu_ps(m, inp + i);
        __m512 th = tanh512(gelu_tanh_arg(x));
        __m512 y = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(_mm512_set1_ps(1.0f), th));
        store_bf16_masked(out + i, y, m);
    }
}

// dinp_bf (N,OC) = bf16(gelu'(inp) * dout); dbias (OC) += column sums of the fp32 gelu'(inp) * dout.
// inp, dout (N,OC) fp32. Parallel over chunks of rows, the sums by colsum_finish (the same bits for
// any number of threads); partial: scratch.
BF16_CPU_TARGET inline void gelu_backward_bf16(bf16* dinp_bf, float* dbias, const float* inp, const float* dout,
                                               int N, int OC, std::vector<float>& partial) {
    const int chunks = colsum_chunks(N);
    float* part = colsum_partial(partial, N, OC);
#pragma omp parallel for schedule(static)
    for (int c = 0; c < chunks; c++) {
        float* ps = part + (size_t)c * OC;
        std::fill(ps, ps + OC, 0.0f);
        for (int n = c * COLSUM_ROWS; n < std::min(N, (c + 1) * COLSUM_ROWS); n++) {
            for (int o = 0; o < OC; o += 16) {
                __mmask16 m = OC - o >= 16 ? (__mmask16)0xffff : tail_mask(OC - o);
                size_t at = (size_t)n * OC + o;
                __m512 x = _mm512_maskz_loadu_ps(m, inp + at);
                __m512 th = tanh512(gelu_tanh_arg(x));
                __m512 sech2 = _mm512_fnmadd_ps(th, th, _mm512_set1_ps(1.0f));
                __m512 du = _mm512_mul_ps(_mm512_set1_ps(ref::gelu_scale<float>()),
                                          _mm512_fmadd_ps(_mm512_set1_ps(3 * 0.044715f), _mm512_mul_ps(x, x),
                                                          _mm512_set1_ps(1.0f)));
                // 0.5 (1 + th) + 0.5 x sech2 du
                __m512 half = _mm512_set1_ps(0.5f);
                __m512 grad = _mm512_fmadd_ps(_mm512_mul_ps(half, x), _mm512_mul_ps(sech2, du),
                                              _mm512_mul_ps(half, _mm512_add_ps(_mm512_set1_ps(1.0f), th)));
                __m512 d = _mm512_mul_ps(grad, _mm512_maskz_loadu_ps(m, dout + at));
                _mm512_mask_storeu_ps(ps + o, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, ps + o), d));
                store_bf16_masked(dinp_bf + at, d, m);
            }
        }
    }
    colsum_finish(dbias, part, chunks, OC);
}

#pragma GCC diagnostic pop
