// The CPU reference lives in namespace ref.
// CPU reference: AdamW with bias correction and decoupled weight decay.
// params, grads, m, v (n); grads *= s.grad_scale in place first; s.step is the 1-based step.
// The hyperparameters (layers/adamw_step.h) are double so that a float64 model uses them exactly.
#pragma once
#include <cmath>
#include <cstddef>

#include "layers/adamw_step.h"

namespace ref {

template <class T>
void adamw_update(T* params, T* grads, T* m, T* v, size_t n, const AdamWStep& s) {
    double lr = s.lr, beta1 = s.beta1, beta2 = s.beta2, eps = s.eps, weight_decay = s.weight_decay;
    T bc1 = T(1) - std::pow(T(beta1), T(s.step));
    T bc2 = T(1) - std::pow(T(beta2), T(s.step));
    bool scale = s.grad_scale != 1.0;
#pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        T g = grads[i];
        if (scale) grads[i] = g = g * T(s.grad_scale);
        m[i] = T(beta1) * m[i] + (T(1) - T(beta1)) * g;
        v[i] = T(beta2) * v[i] + (T(1) - T(beta2)) * g * g;
        T mhat = m[i] / bc1, vhat = v[i] / bc2;
        params[i] -= T(lr) * (mhat / (std::sqrt(vhat) + T(eps)) + T(weight_decay) * params[i]);
    }
}

}  // namespace ref
