// The CPU reference lives in namespace ref.
// CPU reference: GELU, tanh approximation (GPT-2's).  inp, out (N)
#pragma once
#include <cmath>

namespace ref {

template <class T> constexpr T gelu_scale() { return T(0.7978845608028654); }  // sqrt(2/pi)

template <class T>
void gelu_forward(T* out, const T* inp, int N) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        T x = inp[i];
        out[i] = T(0.5) * x * (T(1) + std::tanh(gelu_scale<T>() * (x + T(0.044715) * x * x * x)));
    }
}

template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, int N) {
#pragma omp parallel for
    for (int i = 0; i < N; i++) {
        T x = inp[i];
        T u = gelu_scale<T>() * (x + T(0.044715) * x * x * x);
        T th = std::tanh(u);
        T sech2 = T(1) - th * th;
        T du = gelu_scale<T>() * (T(1) + T(3 * 0.044715) * x * x);
        dinp[i] += (T(0.5) * (T(1) + th) + T(0.5) * x * sech2 * du) * dout[i];
    }
}

}  // namespace ref
