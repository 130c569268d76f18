// The CPU reference lives in namespace ref.
// CPU reference: AdamW with bias correction and decoupled weight decay.
// params, grads, m, v (n); t is the 1-based step. Hyperparameters are double so that a float64
// model uses them exactly.
#pragma once
#include <cmath>
#include <cstddef>

namespace ref {

template <class T>
void adamw_update(T* params, const T* grads, T* m, T* v, size_t n, double lr, double beta1, double beta2,
                  double eps, double weight_decay, int t) {
    T bc1 = T(1) - std::pow(T(beta1), T(t));
    T bc2 = T(1) - std::pow(T(beta2), T(t));
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        T g = grads[i];
        m[i] = T(beta1) * m[i] + (T(1) - T(beta1)) * g;
        v[i] = T(beta2) * v[i] + (T(1) - T(beta2)) * g * g;
        T mhat = m[i] / bc1, vhat = v[i] / bc2;
        params[i] -= T(lr) * (mhat / (std::sqrt(vhat) + T(eps)) + T(weight_decay) * params[i]);
    }
}

}  // namespace ref
