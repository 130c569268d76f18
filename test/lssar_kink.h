// Distance of attention inputs from the kinks of a variant, for gradient-check preconditions:
// finite differences across a kink are meaningless, so tests assert their inputs stay away.
#pragma once
#include <limits>
#include <vector>

#include "attention/attention_cpu.h"

// Smallest distance from a kink over every visible (t, j): |x_tj| of the re-weighting's ReLU
// (x = n A - o, for kinds with re-weighting; min_abs_x below uses LSSA's A), and |s_tj| of a
// relu phi. Zero queries (degenerate rows) are skipped. attn_len as the attention functions take it
// (log-length scaling changes the scores, so the x, of softmax_rw's rows beyond L).
inline double attn_kink_distance(const double* qkv, int B, int T, int NH, int hd, AttnKind kind, int attn_len = 0) {
    const AttnVariant& v = attn_variant(kind);
    // the weights before re-weighting: the same variant without its stage 2
    AttnKind stage1 = kind;
    for (const AttnVariant& u : ATTN_VARIANT_TABLE)
        if (u.score == v.score && u.phi == v.phi && u.norm == v.norm && !u.reweight) stage1 = u.kind;
    std::vector<double> qe, ke, qn, kn;
    ref::attention_prepare(qe, ke, qn, kn, qkv, B, T, NH, hd, kind);
    std::vector<double> w(T), sc(T), a(T);
    double dist = std::numeric_limits<double>::infinity();
    for (int bh = 0; bh < B * NH; bh++) {
        for (int t = 0; t < T; t++) {
            if (qn[(size_t)bh * T + t] == 0) continue;  // a zero query is the degenerate row
            const double* qe_t = &qe[((size_t)bh * T + t) * hd];
            const double* ke_h = &ke[(size_t)bh * T * hd];
            double st[3];
            bool live = true;
            if (stage1 != kind || !v.reweight) {
                live = ref::attention_row_weights(w.data(), sc.data(), a.data(), st, qe_t, ke_h, t, hd, stage1, 1.0,
                                                  attn_len);
            } else {  // no variant without stage 2 shares this one's stage 1: build A from phi
                ref::attention_row_weights(w.data(), sc.data(), a.data(), st, qe_t, ke_h, t, hd, kind, 1.0, attn_len);
                double S1 = 0;
                for (int j = 0; j <= t; j++) S1 += a[j];
                live = S1 > 0;
                for (int j = 0; j <= t; j++) w[j] = live ? a[j] / S1 : 0;
            }
            for (int j = 0; j <= t; j++) {
                // row 0 of cos_len: lam_0 = 0 makes s = 0 whatever q and k are: no kink to cross
                bool constant_score = v.score == ATTN_SCORE_COS_LEN && t == 0;
                if (v.phi == ATTN_PHI_RELU && !constant_score) dist = std::min(dist, std::fabs(sc[j]));
                // a relu key with s < 0 has x = -o_t whatever q and k are nearby (A = 0 there)
                bool dead_key = v.phi == ATTN_PHI_RELU && sc[j] <= 0;
                if (v.reweight && live && !dead_key) dist = std::min(dist, std::fabs((t + 1) * w[j] - ref::lssar_bias(t)));
            }
        }
    }
    return dist;
}

// LSSAR's kink distance: |x_tj| (the re-weighting's ReLU at x = 0; p = 1 is not differentiable there)
inline double min_abs_x(const double* qkv, int B, int T, int NH, int hd) {
    return attn_kink_distance(qkv, B, T, NH, hd, ATTN_LSSAR);
}
