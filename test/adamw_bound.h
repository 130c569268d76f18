// AdamW's sensitivity to an error in the gradient, for tests that bound the parameters after an
// update from the precision of the gradient (test_pytorch, test_cpu_fast).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

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

// How far apart two runs of S AdamW steps of one element can end when each step's gradient may
// differ by delta_s from g_s (the reference run's gradients, g[s] and delta[s] for steps s = 1..S,
// learning rates lr[s]; no weight decay). Step t's direction u_t = M_t / (sqrt(V_t) + eps) depends
// on every gradient so far: M_t = sum_s w_ts g_s, V_t = sum_s c_ts g_s^2 with
// w_ts = (1 - b1) b1^(t-s) / (1 - b1^t), c_ts = (1 - b2) b2^(t-s) / (1 - b2^t), so
//   du_t/dg_s = w_ts / D_t - M_t c_ts g_s / (sqrt(V_t) D_t^2),   D_t = sqrt(V_t) + eps,
// and the end points differ by at most sum_t lr_t |du_t| with |du_t| <= sum_{s<t} |du_t/dg_s| delta_s
// (first order in the earlier gradients) + adamw_sensitivity's bound for the step's own gradient
// (over its whole interval, so a gradient within delta of 0 counts fully).
inline double adamw_trajectory_bound(const std::vector<double>& g, const std::vector<double>& delta,
                                     const std::vector<double>& lr, double beta1, double beta2, double eps) {
    double total = 0;
    for (size_t t = 1; t <= g.size(); t++) {
        double bc1 = 1 - std::pow(beta1, (double)t), bc2 = 1 - std::pow(beta2, (double)t);
        double M = 0, V = 0, m_before = 0, v_before = 0;  // m, v before step t: as AdamW keeps them
        for (size_t s = 1; s <= t; s++) {
            double w = (1 - beta1) * std::pow(beta1, (double)(t - s)), c = (1 - beta2) * std::pow(beta2, (double)(t - s));
            M += w / bc1 * g[s - 1];
            V += c / bc2 * g[s - 1] * g[s - 1];
            if (s < t) {
                m_before += (1 - beta1) * std::pow(beta1, (double)(t - 1 - s)) * g[s - 1];
                v_before += (1 - beta2) * std::pow(beta2, (double)(t - 1 - s)) * g[s - 1] * g[s - 1];
            }
        }
        double sv = std::sqrt(V), D = sv + eps, du = 0;
        for (size_t s = 1; s < t && sv > 0; s++) {
            double w = (1 - beta1) * std::pow(beta1, (double)(t - s)) / bc1, c = (1 - beta2) * std::pow(beta2, (double)(t - s)) / bc2;
            du += std::fabs(w / D - M * c * g[s - 1] / (sv * D * D)) * delta[s - 1];
        }
        du += adamw_sensitivity(m_before, v_before, g[t - 1], delta[t - 1], beta1, beta2, eps, (int)t) * delta[t - 1];
        total += lr[t - 1] * du;
    }
    return total;
}
