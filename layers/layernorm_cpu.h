// The CPU reference lives in namespace ref.
// CPU reference: layernorm over the last dimension, eps 1e-5.
// inp, out (N,C) with N = B*T rows; w, b (C); mean, rstd (N) saved for the backward.
#pragma once
#include <cmath>

namespace ref {

template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* w, const T* b, int N, int C) {
    const T eps = T(1e-5);
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* x = inp + (size_t)n * C;
        T m = 0;
        for (int i = 0; i < C; i++) m += x[i];
        m /= C;
        T var = 0;
        for (int i = 0; i < C; i++) var += (x[i] - m) * (x[i] - m);
        var /= C;
        T rs = T(1) / std::sqrt(var + eps);
        T* o = out + (size_t)n * C;
        for (int i = 0; i < C; i++) o[i] = (x[i] - m) * rs * w[i] + b[i];
        mean[n] = m;
        rstd[n] = rs;
    }
}

template <class T>
void layernorm_backward(T* dinp, T* dw, T* db, const T* dout, const T* inp, const T* w, const T* mean,
                        const T* rstd, int N, int C) {
#pragma omp parallel for
    for (int n = 0; n < N; n++) {
        const T* dy = dout + (size_t)n * C;
        const T* x = inp + (size_t)n * C;
        T m = mean[n], rs = rstd[n];
        // dnorm = dy * w; dx = rs * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
        T dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int i = 0; i < C; i++) {
            T norm = (x[i] - m) * rs;
            T dnorm = w[i] * dy[i];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        T* dx = dinp + (size_t)n * C;
        for (int i = 0; i < C; i++) {
            T norm = (x[i] - m) * rs;
            dx[i] += rs * (w[i] * dy[i] - dnorm_mean - norm * dnorm_norm_mean);
        }
    }
    // parameter gradients: a reduction over rows, parallel over channels
#pragma omp parallel for
    for (int i = 0; i < C; i++) {
        T sw = 0, sb = 0;
        for (int n = 0; n < N; n++) {
            T dy = dout[(size_t)n * C + i];
            sw += (inp[(size_t)n * C + i] - mean[n]) * rstd[n] * dy;
            sb += dy;
        }
        dw[i] += sw;
        db[i] += sb;
    }
}

}  // namespace ref
