// RoPE on the CPU fast path (reference: layers/rope_cpu.h, the same rotation of the interleaved pairs
// (2i, 2i+1) of every head of q and k by angle t base^(-2i/hd)): per position a row of hd cosines and
// hd signed sines (each pair's value twice, the sines as (-s, +s)), computed in double as the
// reference computes them and kept between calls; the rotation itself is fast_rope_rotate
// (layers/layers_fast_cpu.cpp): y = x cos + swap(x) sin, swap exchanging the two elements of each pair.
#pragma once

#include <cmath>
#include <vector>

struct RopeTableFast {
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
