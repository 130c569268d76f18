// Distance of LSSAR inputs from the ReLU kink, for gradient-check preconditions.
#pragma once
#include <limits>
#include <vector>

#include "attention/attention_cpu.h"

// Smallest |x_tj| over every visible (t, j) of an LSSAR input: finite differences across the ReLU
// kink at x = 0 are meaningless for p = 1, so tests assert their inputs stay away from it.
inline double min_abs_x(const double* qkv, int B, int T, int NH, int hd) {
    std::vector<double> qe, ke, qn, kn;
    attention_prepare(qe, ke, qn, kn, qkv, B, T, NH, hd, ATTN_LSSA);
    std::vector<double> w(T), sc(T), a(T);
    double min_x = std::numeric_limits<double>::infinity();
    for (int bh = 0; bh < B * NH; bh++) {
        for (int t = 0; t < T; t++) {
            double st[3];
            attention_row_weights(w.data(), sc.data(), a.data(), st, &qe[((size_t)bh * T + t) * hd],
                                  &ke[(size_t)bh * T * hd], t, hd, ATTN_LSSA, 1.0);
            if (qn[(size_t)bh * T + t] == 0) continue;  // a zero query is the degenerate row
            for (int j = 0; j <= t; j++) min_x = std::min(min_x, std::fabs((t + 1) * w[j] - lssar_bias(t)));
        }
    }
    return min_x;
}

