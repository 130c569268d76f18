// Finite-difference gradient checking in float64, shared by the CPU reference tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <omp.h>
#include <string>
#include <vector>

#include "model/rand.h"

// Fourth-order central difference
//   D(h) = (f(x-2h) - 8 f(x-h) + 8 f(x+h) - f(x+2h)) / (12 h) = f'(x) + c h^4 + O(h^6)
// with one Richardson step, (16 D(h/2) - D(h)) / 15, which cancels the h^4 term: truncation
// O(h^6), rounding ~1e-16 |f| / h. h = step * scale, with scale the magnitude of the values
// around x (so tiny and huge inputs are probed at their own scale).
inline double numerical_derivative(const std::function<double()>& f, double* x, double step, double scale) {
    double x0 = *x;
    double h = step * (scale > 0 ? scale : 1.0);
    auto at = [&](double dx) { *x = x0 + dx; return f(); };
    auto D = [&](double hh) { return (at(-2 * hh) - 8 * at(-hh) + 8 * at(hh) - at(2 * hh)) / (12 * hh); };
    double d = (16 * D(h / 2) - D(h)) / 15;
    *x = x0;
    return d;
}

struct GradCheckResult {
    double max_rel_err = 0;  // worst relative error over the elements
    size_t worst = 0;        // its index
    double analytic = 0, numeric = 0;
    size_t checked = 0;
};

// Compares every element of an analytic gradient with finite differences of f.
// The relative error of element i is |a_i - n_i| / max(|a_i|, |n_i|, floor), floor =
// 1e-3 * max_i |n_i|: finite differences carry an absolute error of ~1e-11 of the tensor's scale,
// so elements below a thousandth of the largest are compared absolutely (to ~1e-9 of the scale).
// skip(i) may exclude elements where f is not differentiable (the test must justify it).
// Each element is probed with a step relative to the largest magnitude in its block of `block`
// consecutive elements (0: the whole tensor), e.g. block = head dim for q/k/v vectors.
inline GradCheckResult check_gradient(const std::function<double()>& f, double* x, const double* analytic, size_t n,
                                      double step = 1e-4, const std::function<bool(size_t)>& skip = nullptr,
                                      size_t block = 0) {
    if (block == 0) block = n;
    // the functions probed here are tiny: one thread avoids OpenMP start-up costs in every call
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    std::vector<double> numeric(n, 0.0);
    for (size_t i = 0; i < n; i++) {
        if (skip && skip(i)) continue;
        size_t b0 = i / block * block;
        double scale = 0;
        for (size_t k = b0; k < std::min(n, b0 + block); k++) scale = std::max(scale, std::fabs(x[k]));
        numeric[i] = numerical_derivative(f, x + i, step, scale);
    }
    omp_set_num_threads(threads);
    double scale = 0;
    for (size_t i = 0; i < n; i++) scale = std::max(scale, std::fabs(numeric[i]));
    double floor = std::max(1e-3 * scale, 1e-300);
    GradCheckResult r;
    for (size_t i = 0; i < n; i++) {
        if (skip && skip(i)) continue;
        double denom = std::max({std::fabs(analytic[i]), std::fabs(numeric[i]), floor});
        double err = std::fabs(analytic[i] - numeric[i]) / denom;
        r.checked++;
        if (r.checked == 1 || err > r.max_rel_err) {
            r.max_rel_err = err;
            r.worst = i;
            r.analytic = analytic[i];
            r.numeric = numeric[i];
        }
    }
    return r;
}

inline std::string describe(const GradCheckResult& r) {
    char buf[200];
    snprintf(buf, sizeof buf, "max rel err %.3e at %zu (analytic %.10e, numeric %.10e), %zu elements", r.max_rel_err,
             r.worst, r.analytic, r.numeric, r.checked);
    return buf;
}

inline std::vector<double> random_vector(size_t n, Rng& rng, double scale = 1.0) {
    std::vector<double> v(n);
    for (auto& x : v) x = scale * rng.normal();
    return v;
}

// sum_i out_i * r_i: a scalar whose gradient with respect to out is r
inline double weighted_sum(const double* out, const double* r, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += out[i] * r[i];
    return s;
}
