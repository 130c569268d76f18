// The CPU reference lives in namespace ref.
// CPU reference: squared L2 norm of a buffer (the global gradient norm is the sqrt of the sum
// over all parameter gradients), accumulated in double.
#pragma once
#include <cstddef>

namespace ref {

template <class T>
double global_norm_squared(const T* x, size_t n) {
    double sum = 0;
#pragma omp parallel for reduction(+ : sum)
    for (size_t i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
    return sum;
}

}  // namespace ref
