// AdamW's sensitivity to an error in the gradient, for tests that bound the parameters after an
// update from the precision of the gradient (test_pytorch, test_cpu_bf16).
#pragma once

#include <algorithm>
#include <cmath>

// One element's AdamW step t from moments m, v with gradient x moves it by lr (u(x) + wd theta):
//   u(x) = mhat / (sqrt(vhat) + eps),  mhat = (b1 m + (1 - b1) x) / bc1,  vhat = (b2 v + (1 - b2) x^2) / bc2.
// With a = b1 m / bc1, b = (1 - b1) / bc1, c = b2 v / bc2, d = (1 - b2) / bc2 and s(x) = sqrt(c + d x^2):
//   u(x) = (a + b x) / (s + eps),     u'(x) = (b c + b eps s - a d x) / (s (s + eps)^2).
// A gradient within delta of the exact g changes u by at most delta sup|u'| over [g - delta, g + delta]
// (mean value theorem). The numerator N(x) = b c + b eps s(x) - a d x is convex (s is), so its
// largest value on the interval is at an end, and its smallest is at least b c + b eps s_min -
// max(a d x) over the ends; s is smallest at the point of the interval nearest 0 (s_min). Where
// v = 0 (every earlier gradient exactly 0), m = 0 too and u'(x) = b eps / (s + eps)^2.
// So AdamW's sensitivity depends on the gradient's size: at step 1 u' = eps / (|g| + eps)^2, which
// leaves u = +-1 for a gradient far above eps whatever its rounding, and turns the float32 error of
// a gradient near eps into up to delta / eps of a step. A bound proportional to the largest move
// (lr) cannot follow from float32's precision; this one does, element by element.
inline double adamw_sensitivity(double m, double v, double g, double delta, double beta1, double beta2, double eps,
                                int t) {
    double bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
    double a = beta1 * m / bc1, b = (1 - beta1) / bc1, c = beta2 * v / bc2, d = (1 - beta2) / bc2;
    double lo = g - delta, hi = g + delta;
    double x_min = (lo <= 0 && hi >= 0) ? 0.0 : std::min(std::fabs(lo), std::fabs(hi));
    double s_min = std::sqrt(c + d * x_min * x_min);
    if (c == 0) {
        if (a != 0) return INFINITY;  // v underflowed while m did not: no bound
        return b * eps / ((s_min + eps) * (s_min + eps));
    }
    auto N = [&](double x) { return b * c + b * eps * std::sqrt(c + d * x * x) - a * d * x; };
    double n_max = std::max({N(lo), N(hi), std::max(a * d * lo, a * d * hi) - b * c - b * eps * s_min});
    return n_max / (s_min * (s_min + eps) * (s_min + eps));
}


// One element's AdamW step in float64: theta, m, v before the step, gradient g, step t (1-based).
// Returns the new theta; m, v are updated.
inline double adamw_step_exact(double theta, double& m, double& v, double g, double lr, double beta1, double beta2,
                               double eps, double weight_decay, int t) {
    m = beta1 * m + (1 - beta1) * g;
    v = beta2 * v + (1 - beta2) * g * g;
    double mhat = m / (1 - std::pow(beta1, t)), vhat = v / (1 - std::pow(beta2, t));
    return theta - lr * (mhat / (std::sqrt(vhat) + eps) + weight_decay * theta);
}
