// The CPU reference lives in namespace ref.
// CPU reference: rotary position embedding on q and k.
// Interleaved pairs (2i, 2i+1) of every head are rotated by angle t * base^(-2i/hd).
// inp, out (B,T,3,NH,hd): q and k rotated, v copied. out may alias inp.
#pragma once
#include <cmath>
#include <vector>

namespace ref {

template <class T>
void rope_rotate(T* out, const T* inp, int B, int T_, int NH, int hd, double base, double sign) {
    int C = NH * hd, half = hd / 2;
    // cos and sin of every (t, i) once per call, in double
    std::vector<T> cos_ti((size_t)T_ * half), sin_ti((size_t)T_ * half);
    for (int t = 0; t < T_; t++) {
        for (int i = 0; i < half; i++) {
            double angle = t * std::pow(base, -2.0 * i / hd);
            cos_ti[(size_t)t * half + i] = T(std::cos(angle));
            sin_ti[(size_t)t * half + i] = T(sign * std::sin(angle));
        }
    }
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T_; t++) {
            const T* x = inp + (size_t)(b * T_ + t) * 3 * C;
            T* y = out + (size_t)(b * T_ + t) * 3 * C;
            for (int i = 0; i < half; i++) {
                T c = cos_ti[(size_t)t * half + i], s = sin_ti[(size_t)t * half + i];
                for (int qk = 0; qk < 2; qk++) {
                    for (int h = 0; h < NH; h++) {
                        size_t k = (size_t)qk * C + h * hd + 2 * i;
                        T x0 = x[k], x1 = x[k + 1];
                        y[k] = x0 * c - x1 * s;
                        y[k + 1] = x0 * s + x1 * c;
                    }
                }
            }
            if (y != x) {
                for (int i = 2 * C; i < 3 * C; i++) y[i] = x[i];
            }
        }
    }
}

template <class T>
void rope_forward(T* out, const T* inp, int B, int T_, int NH, int hd, double base) {
    rope_rotate(out, inp, B, T_, NH, hd, base, +1.0);
}

// The rotation is orthogonal, so its backward is the rotation by the opposite angle.
template <class T>
void rope_backward(T* dinp, const T* dout, int B, int T_, int NH, int hd, double base) {
    rope_rotate(dinp, dout, B, T_, NH, hd, base, -1.0);
}

}  // namespace ref
