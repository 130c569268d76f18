// bf16 path of RoPE (reference: layers/rope_cpu.h, the same rotation of the interleaved pairs
// (2i, 2i+1) of every head of q and k by angle t base^(-2i/hd)), AVX-512: per position a row of hd
// cosines and hd signed sines (each pair's value twice, the sines as (-s, +s)), computed in double
// as the reference computes them and kept between calls; a row of 16 channels (8 pairs) rotates as
// y = x cos + swap(x) sin, swap exchanging the two elements of each pair.
// inp, out (B,T,3,NH,hd): q and k rotated, v copied (out may alias inp).
#pragma once

#include <cmath>
#include <vector>

#include "layers/bf16_cpu.h"

// GCC 12 flags the masked intrinsics' undefined pass-through vectors (a known false positive)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

struct RopeTableBf16 {
    int T = 0, hd = 0;
    double base = 0;
    std::vector<float> cs;  // (T, 2, hd): cosines, then sines with the sign of the pair's first element negated

    void ensure(int T_, int hd_, double base_) {
        if (T_ == T && hd_ == hd && base_ == base) return;
        T = T_, hd = hd_, base = base_;
        cs.assign((size_t)T * 2 * hd, 0.0f);
        for (int t = 0; t < T; t++) {
            float* c = &cs[(size_t)t * 2 * hd];
            for (int i = 0; i < hd / 2; i++) {
                double angle = t * std::pow(base, -2.0 * i / hd);
                float co = (float)std::cos(angle), si = (float)std::sin(angle);
                c[2 * i] = c[2 * i + 1] = co;
                c[hd + 2 * i] = -si;
                c[hd + 2 * i + 1] = si;
            }
        }
    }
};

// sign +1: the forward rotation; -1: its inverse, the backward (the rotation is orthogonal)
BF16_CPU_TARGET inline void rope_rotate_row_bf16(float* y, const float* x, const float* cs, int hd, float sign) {
    const __m512 vsign = _mm512_set1_ps(sign);
    for (int i = 0; i < hd; i += 16) {
        __mmask16 m = hd - i >= 16 ? (__mmask16)0xffff : tail_mask(hd - i);
        __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
        __m512 sw = _mm512_permute_ps(xv, 0xB1);  // (x1, x0, x3, x2, ...)
        __m512 s = _mm512_mul_ps(vsign, _mm512_maskz_loadu_ps(m, cs + hd + i));
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(sw, s, _mm512_mul_ps(xv, _mm512_maskz_loadu_ps(m, cs + i))));
    }
}

inline void rope_rotate_bf16(float* out, const float* inp, int B, int T, int NH, int hd, const RopeTableBf16& table,
                             float sign) {
    const int C = NH * hd;
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        const float* x = inp + (size_t)bt * 3 * C;
        float* y = out + (size_t)bt * 3 * C;
        const float* cs = &table.cs[(size_t)(bt % T) * 2 * hd];
        for (int h = 0; h < 2 * NH; h++) rope_rotate_row_bf16(y + h * hd, x + h * hd, cs, hd, sign);  // q, then k
        if (y != x) std::copy(x + 2 * C, x + 3 * C, y + 2 * C);
    }
}

inline void rope_forward_bf16(float* out, const float* inp, int B, int T, int NH, int hd, RopeTableBf16& table,
                              double base) {
    table.ensure(T, hd, base);
    rope_rotate_bf16(out, inp, B, T, NH, hd, table, 1.0f);
}
inline void rope_backward_bf16(float* dinp, const float* dout, int B, int T, int NH, int hd, RopeTableBf16& table,
                               double base) {
    table.ensure(T, hd, base);
    rope_rotate_bf16(dinp, dout, B, T, NH, hd, table, -1.0f);
}

#pragma GCC diagnostic pop
