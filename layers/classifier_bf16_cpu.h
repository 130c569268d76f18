// bf16 path of the CPU fused classifier (reference: layers/classifier_cpu.h), AVX-512.
// logits (N,Vp) fp32, targets (N) in [0,V): losses (N), and dlogits (N,Vp) bf16 = softmax - onehot
// over the first V columns, 0 on the padded ones. The scale of the gradient (d loss / d losses[i])
// is left out: the backward's matmuls apply it (their alpha), so the forward can write dlogits
// before the backward says what the scale is, and exp runs once per logit.
// scratch: N_threads rows of Vp floats (exp(x - max) of the row, kept in cache between passes).
#pragma once

#include <cmath>
#include <vector>

#include <omp.h>

#include "layers/bf16_cpu.h"

// GCC 12 flags the masked intrinsics' undefined pass-through vectors (a known false positive)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

BF16_CPU_TARGET inline void classifier_row_bf16(float* loss, bf16* d, const float* x, float* e, int target, int V,
                                                int Vp) {
    __m512 vmax = _mm512_set1_ps(-__builtin_inff());
    int j = 0;
    for (; j + 16 <= V; j += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + j));
    if (j < V) vmax = _mm512_mask_max_ps(vmax, tail_mask(V - j), vmax, _mm512_maskz_loadu_ps(tail_mask(V - j), x + j));
    float xmax = _mm512_reduce_max_ps(vmax);
    __m512 vxmax = _mm512_set1_ps(xmax), vsum = _mm512_setzero_ps();
    for (j = 0; j + 16 <= V; j += 16) {
        __m512 ex = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), vxmax));
        _mm512_storeu_ps(e + j, ex);
        vsum = _mm512_add_ps(vsum, ex);
    }
    if (j < V) {
        __mmask16 m = tail_mask(V - j);
        __m512 ex = _mm512_maskz_mov_ps(m, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), vxmax)));
        _mm512_mask_storeu_ps(e + j, m, ex);
        vsum = _mm512_add_ps(vsum, ex);
    }
    float sum = _mm512_reduce_add_ps(vsum);
    *loss = std::log(sum) + xmax - x[target];
    if (!d) return;
    __m512 inv = _mm512_set1_ps(1.0f / sum);
    for (j = 0; j + 16 <= V; j += 16) store_bf16(d + j, _mm512_mul_ps(_mm512_loadu_ps(e + j), inv));
    if (j < V) {
        __mmask16 m = tail_mask(V - j);
        store_bf16_masked(d + j, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, e + j), inv), m);
    }
    for (j = V; j < Vp; j++) d[j] = 0;
    d[target] = float_to_bf16(e[target] / sum - 1.0f);
}

inline void fused_classifier_bf16(float* losses, bf16* dlogits, const float* logits, const int* targets, int N,
                                  int V, int Vp, std::vector<float>& scratch) {
    scratch.resize((size_t)omp_get_max_threads() * Vp);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float* e = scratch.data() + (size_t)omp_get_thread_num() * Vp;
        classifier_row_bf16(losses + n, dlogits ? dlogits + (size_t)n * Vp : nullptr, logits + (size_t)n * Vp, e,
                            targets[n], V, Vp);
    }
}

#pragma GCC diagnostic pop
