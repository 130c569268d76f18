// The CPU reference attention (float64) in every variant of the family against finite
// differences, each variant's edge cases (doc/attention.md, section 'Edge cases'), the head
// parameter's gradient (learned p, ssmax's s), log-length scaling, and LSSAR's stable evaluation at
// long length in float32.
// Gradient tolerance: relative error < 1e-6 per element (see test_layers_cpu.cpp and gradcheck.h).
#include <doctest/doctest.h>

#include <limits>

#include "attention/attention_cpu.h"
#include "runtime/cli.h"
#include "test/gradcheck.h"
#include "test/lssar_kink.h"
#include "test/test_variants.h"

constexpr double TOL = 1e-6;
#ifndef STEP
#define STEP 1e-4
#endif

struct AttnShape {
    int B, T, NH, hd;
    size_t qkv_size() const { return (size_t)B * T * 3 * NH * hd; }
    size_t out_size() const { return (size_t)B * T * NH * hd; }
    size_t at(int b, int t, int which, int h) const { return ((size_t)(b * T + t) * 3 + which) * NH * hd + h * hd; }
};

// Checks d(sum(out * R))/d(qkv) of the backward against finite differences.
static void check_attention_gradient(std::vector<double>& qkv, const AttnShape& s, AttnKind kind, double p,
                                     uint64_t seed, const std::function<bool(size_t)>& skip = nullptr,
                                     int attn_len = 0) {
    Rng rng(seed);
    auto R = random_vector(s.out_size(), rng);
    std::vector<double> out(s.out_size()), dqkv(s.qkv_size(), 0.0);
    ref::attention_backward(dqkv.data(), R.data(), qkv.data(), s.B, s.T, s.NH, s.hd, kind, p, nullptr, nullptr, attn_len);
    auto f = [&] {
        ref::attention_forward(out.data(), (double*)nullptr, qkv.data(), s.B, s.T, s.NH, s.hd, kind, p, nullptr, attn_len);
        return weighted_sum(out.data(), R.data(), out.size());
    };
    GradCheckResult r = check_gradient(f, qkv.data(), dqkv.data(), qkv.size(), STEP, skip, s.hd);
    INFO(std::string(attn_kind_name(kind)) << " p=" << p << " T=" << s.T << " attn_len=" << attn_len << ": " << describe(r));
    CHECK(r.max_rel_err < TOL);
}


// The head parameters each variant is checked at: the re-weighting's p at 1, 3, 15 and a
// non-integer p (the pow() path); ssmax's s at its initial value, a larger one, 0 (every score 0:
// uniform rows) and a negative one; the others have none.
static std::vector<double> test_powers(AttnKind kind) {
    if (attn_head_param(kind) == ATTN_HEAD_S) return {SSMAX_S0, 0.9, 0.0, -0.6};
    return attn_reweights(kind) ? std::vector<double>{1.0, 3.0, 15.0, 2.5} : std::vector<double>{0.0};
}

static std::vector<double> outputs(const std::vector<double>& qkv, const AttnShape& s, AttnKind kind, double p,
                                   std::vector<double>* stats = nullptr) {
    std::vector<double> out(s.out_size());
    if (stats) stats->assign((size_t)s.B * s.NH * s.T * 3, 0.0);
    ref::attention_forward(out.data(), stats ? stats->data() : nullptr, qkv.data(), s.B, s.T, s.NH, s.hd, kind, p);
    return out;
}

static std::vector<double> gradient(const std::vector<double>& qkv, const std::vector<double>& dout,
                                    const AttnShape& s, AttnKind kind, double p) {
    std::vector<double> dqkv(s.qkv_size(), 0.0);
    ref::attention_backward(dqkv.data(), dout.data(), qkv.data(), s.B, s.T, s.NH, s.hd, kind, p);
    return dqkv;
}

TEST_CASE("attention gradients match finite differences: every variant, p in {1, 3, 15, 2.5}, ssmax's s in {0.43, 0.9, 0, -0.6}") {
    AttnShape s{2, 9, 2, 8};
    for (AttnKind kind : test_kinds()) {
        INFO(std::string(attn_kind_name(kind)));
        // the first seed whose input keeps 1e-3 from every kink (|s| for relu, |x| for rw)
        std::vector<double> qkv;
        for (uint64_t seed = 11; seed < 31; seed++) {
            Rng rng(seed);
            qkv = random_vector(s.qkv_size(), rng);
            if (attn_kink_distance(qkv.data(), s.B, s.T, s.NH, s.hd, kind) > 1e-3) break;
        }
        REQUIRE(attn_kink_distance(qkv.data(), s.B, s.T, s.NH, s.hd, kind) > 1e-3);
        for (double p : test_powers(kind)) check_attention_gradient(qkv, s, kind, p, 100 + kind);
    }
}

TEST_CASE("row 0 sees only itself: l1 variants copy v_0, sigmoid and relu scale it by phi(s_00)") {
    AttnShape s{1, 6, 1, 8};
    Rng rng(12);
    auto qkv = random_vector(s.qkv_size(), rng);
    double qk = 0;
    for (int i = 0; i < s.hd; i++) qk += qkv[s.at(0, 0, 0, 0) + i] * qkv[s.at(0, 0, 1, 0) + i];
    double s00 = qk / std::sqrt((double)s.hd);  // n_0 = 1: ln(n_0) = 0, no bias, no 1/n
    for (AttnKind kind : test_kinds()) {
        INFO(std::string(attn_kind_name(kind)));
        auto out = outputs(qkv, s, kind, 15.0);
        AttnPhi phi = attn_variant(kind).phi;
        // relu_l1_rw: lam_0 = 0, so s_00 = 0 and relu(0) = 0: row 0 is always degenerate (W = 0)
        double w = kind == ATTN_RELU_L1_RW                  ? 0.0
                   : attn_variant(kind).norm == ATTN_NORM_L1 ? 1.0
                   : phi == ATTN_PHI_SIGMOID             ? 1.0 / (1.0 + std::exp(-s00))
                                                         : std::max(s00, 0.0);
        for (int i = 0; i < s.hd; i++) CHECK(out[i] == doctest::Approx(w * qkv[s.at(0, 0, 2, 0) + i]).epsilon(1e-14));
    }
    // rows 0..2 have o_t = 0, so x = n A > 0 for every key with phi > 0: every weight is positive
    for (AttnKind kind : {ATTN_LSSAR, ATTN_SOFTMAX_RW, ATTN_SIGMOID_L1_RW}) {
        std::vector<double> qe, ke, qn, kn, w(s.T), sc(s.T), a(s.T);
        ref::attention_prepare(qe, ke, qn, kn, qkv.data(), s.B, s.T, s.NH, s.hd, kind);
        for (int t = 0; t < 3; t++) {
            double st[3];
            CHECK(ref::attention_row_weights(w.data(), sc.data(), a.data(), st, &qe[t * s.hd], ke.data(), t, s.hd, kind, 15.0));
            for (int j = 0; j <= t; j++) CHECK(w[j] > 0);
        }
    }
}

TEST_CASE("one-hot re-weighted rows: output is the one value, and the row passes no gradient") {
    // row t = 5 (n = 6): key 2 points along q, the others against it, so only x_52 > 0
    AttnShape s{1, 8, 1, 8};
    Rng rng(13);
    auto qkv = random_vector(s.qkv_size(), rng);
    int t = 5;
    for (int i = 0; i < s.hd; i++) {
        double d = i == 0 ? 1.0 : 0.0;
        qkv[s.at(0, t, 0, 0) + i] = 2.0 * d;
        for (int j = 0; j <= t; j++) qkv[s.at(0, j, 1, 0) + i] = (j == 2 ? 3.0 : -1.5) * d + (i == 1 ? 0.01 * j : 0.0);
    }
    for (AttnKind kind : {ATTN_LSSAR, ATTN_SOFTMAX_RW, ATTN_SIGMOID_L1_RW, ATTN_RELU_L1_RW}) {
        INFO(std::string(attn_kind_name(kind)));
        REQUIRE(attn_kink_distance(qkv.data(), s.B, s.T, s.NH, s.hd, kind) > 1e-3);
        auto out = outputs(qkv, s, kind, 15.0);
        for (int i = 0; i < s.hd; i++) CHECK(out[(size_t)t * s.hd + i] == doctest::Approx(qkv[s.at(0, 2, 2, 0) + i]).epsilon(1e-15));
        // the gradient through the one-hot row: dq_5 must be exactly zero (W is locally constant)
        std::vector<double> dout(s.out_size(), 0.0);
        for (int i = 0; i < s.hd; i++) dout[(size_t)t * s.hd + i] = 1.0 + i;
        auto dqkv = gradient(qkv, dout, s, kind, 15.0);
        for (int i = 0; i < s.hd; i++) CHECK(dqkv[s.at(0, t, 0, 0) + i] == 0.0);
        for (double p : {1.0, 3.0, 15.0}) check_attention_gradient(qkv, s, kind, p, 104);
    }
}

TEST_CASE("tied keys: equal weights, gradients still match") {
    AttnShape s{1, 8, 1, 8};
    Rng rng(17);
    auto qkv = random_vector(s.qkv_size(), rng);
    for (int i = 0; i < s.hd; i++) qkv[s.at(0, 4, 1, 0) + i] = qkv[s.at(0, 2, 1, 0) + i];  // k_4 = k_2
    for (AttnKind kind : test_kinds()) {
        INFO(std::string(attn_kind_name(kind)));
        REQUIRE(attn_kink_distance(qkv.data(), s.B, s.T, s.NH, s.hd, kind) > 1e-3);
        std::vector<double> qe, ke, qn, kn, w(s.T), sc(s.T), a(s.T);
        ref::attention_prepare(qe, ke, qn, kn, qkv.data(), s.B, s.T, s.NH, s.hd, kind);
        double st[3];
        ref::attention_row_weights(w.data(), sc.data(), a.data(), st, &qe[6 * s.hd], ke.data(), 6, s.hd, kind, 3.0);
        CHECK(w[2] == w[4]);
        for (double p : test_powers(kind)) check_attention_gradient(qkv, s, kind, p, 107);
    }
}

TEST_CASE("degenerate zero-query rows: y = 0 and no gradient, never 0/0") {
    // q_3 = 0: every score of row 3 is equal (0, or -ln 4 for sigmoid), A is exactly uniform
    // (n = 4) and x = 4 * (1/4) - 1 = 0 for every key: W = 0 under re-weighting. For relu every
    // phi is 0 (relu_l1_rw: S1 = 0, degenerate; relu: y = 0).
    AttnShape s{1, 7, 1, 8};
    Rng rng(14);
    auto qkv = random_vector(s.qkv_size(), rng);
    int t = 3;
    for (int i = 0; i < s.hd; i++) qkv[s.at(0, t, 0, 0) + i] = 0.0;
    for (AttnKind kind : test_kinds()) {
        INFO(std::string(attn_kind_name(kind)));
        REQUIRE(attn_kink_distance(qkv.data(), s.B, s.T, s.NH, s.hd, kind) > 1e-3);
        std::vector<double> stats;
        auto out = outputs(qkv, s, kind, 15.0, &stats);
        bool zero_row = attn_reweights(kind) || attn_variant(kind).phi == ATTN_PHI_RELU;
        if (attn_reweights(kind)) CHECK(stats[t * 3 + 2] == 0.0);  // Z = 0 marks the row
        if (zero_row)
            for (int i = 0; i < s.hd; i++) CHECK(out[(size_t)t * s.hd + i] == 0.0);
        std::vector<double> dout(s.out_size(), 1.0);
        auto dqkv = gradient(qkv, dout, s, kind, 15.0);
        for (double g : dqkv) CHECK(std::isfinite(g));
        if (zero_row)
            for (int i = 0; i < s.hd; i++) CHECK(dqkv[s.at(0, t, 0, 0) + i] == 0.0);
        // every other element against finite differences; q_3 itself is skipped: at q = 0 the
        // normalisation q / max(|q|, eps) jumps, and the re-weighting's and relu's kinks meet
        // there (x = 0, s = 0), so a difference quotient has no meaning.
        size_t q3 = s.at(0, t, 0, 0);
        for (double p : test_powers(kind)) {
            if (p == 2.5) continue;
            check_attention_gradient(qkv, s, kind, p, 105, [&](size_t i) { return i >= q3 && i < q3 + s.hd; });
        }
    }
}

TEST_CASE("relu rows with no positive score: relu gives y = 0, relu_l1_rw is degenerate; no gradient") {
    // q_5 points against every key of its row: all scores < 0, phi = 0 on the whole row
    AttnShape s{1, 8, 1, 8};
    Rng rng(18);
    auto qkv = random_vector(s.qkv_size(), rng);
    int t = 5;
    for (int j = 0; j <= t; j++)
        for (int i = 0; i < s.hd; i++) qkv[s.at(0, j, 1, 0) + i] = (i == 0 ? 2.0 : 0.0) + 0.2 * qkv[s.at(0, j, 1, 0) + i];
    for (int i = 0; i < s.hd; i++) qkv[s.at(0, t, 0, 0) + i] = i == 0 ? -1.5 : 0.1 * i;
    for (AttnKind kind : {ATTN_RELU, ATTN_RELU_L1_RW}) {
        INFO(std::string(attn_kind_name(kind)));
        REQUIRE(attn_kink_distance(qkv.data(), s.B, s.T, s.NH, s.hd, kind) > 1e-3);
        std::vector<double> stats;
        auto out = outputs(qkv, s, kind, 3.0, &stats);
        for (int i = 0; i < s.hd; i++) CHECK(out[(size_t)t * s.hd + i] == 0.0);
        if (kind == ATTN_RELU_L1_RW) CHECK(stats[t * 3 + 0] == 0.0);  // S1 = 0
        std::vector<double> dout(s.out_size(), 1.0);
        auto dqkv = gradient(qkv, dout, s, kind, 3.0);
        for (int i = 0; i < s.hd; i++) CHECK(dqkv[s.at(0, t, 0, 0) + i] == 0.0);
        for (double p : test_powers(kind)) check_attention_gradient(qkv, s, kind, p, 108);
    }
}

TEST_CASE("sigmoid saturation: huge dot scores stay finite in float32, gradients match in float64") {
    AttnShape s{1, 7, 2, 8};
    Rng rng(19);
    auto qkv = random_vector(s.qkv_size(), rng);
    for (int i = 0; i < s.hd; i++) {
        qkv[s.at(0, 4, 0, 0) + i] *= 30.0;  // |s| ~ 100: sigmoid is 1 - 1e-44 or 1e-44
        qkv[s.at(0, 6, 0, 1) + i] *= 8.0;   // |s| ~ 20: saturated, but sigma' still resolves in float64
    }
    REQUIRE(attn_kink_distance(qkv.data(), s.B, s.T, s.NH, s.hd, ATTN_SIGMOID) > 1e-3);
    check_attention_gradient(qkv, s, ATTN_SIGMOID, 0.0, 109);
    std::vector<float> qkv32(qkv.begin(), qkv.end()), out32(s.out_size()), dout32(s.out_size(), 1.0f),
        dqkv32(s.qkv_size(), 0.0f);
    ref::attention_forward(out32.data(), (float*)nullptr, qkv32.data(), s.B, s.T, s.NH, s.hd, ATTN_SIGMOID, 0.0);
    ref::attention_backward(dqkv32.data(), dout32.data(), qkv32.data(), s.B, s.T, s.NH, s.hd, ATTN_SIGMOID, 0.0);
    for (float y : out32) CHECK(std::isfinite(y));
    for (float g : dqkv32) CHECK(std::isfinite(g));
}

TEST_CASE("huge and tiny q/k norms: cosine is scale-free, gradients still match") {
    AttnShape s{1, 7, 2, 8};
    Rng rng(15);
    auto qkv = random_vector(s.qkv_size(), rng);
    std::vector<AttnKind> cos_kinds;
    for (AttnKind kind : test_kinds())
        if (attn_variant(kind).score == ATTN_SCORE_COS_LEN) cos_kinds.push_back(kind);
    std::vector<std::vector<double>> ref;
    for (AttnKind kind : cos_kinds) ref.push_back(outputs(qkv, s, kind, 15.0));
    for (int i = 0; i < s.hd; i++) {
        qkv[s.at(0, 4, 0, 0) + i] *= 1e6;   // huge query
        qkv[s.at(0, 2, 1, 0) + i] *= 1e-6;  // tiny key
        qkv[s.at(0, 5, 1, 1) + i] *= 1e8;   // huge key
        qkv[s.at(0, 6, 0, 1) + i] *= 1e-9;  // tiny query
    }
    for (size_t c = 0; c < cos_kinds.size(); c++) {
        AttnKind kind = cos_kinds[c];
        INFO(std::string(attn_kind_name(kind)));
        REQUIRE(attn_kink_distance(qkv.data(), s.B, s.T, s.NH, s.hd, kind) > 1e-3);
        auto out = outputs(qkv, s, kind, 15.0);
        for (size_t i = 0; i < out.size(); i++) CHECK(out[i] == doctest::Approx(ref[c][i]).epsilon(1e-12));
        for (double p : test_powers(kind)) check_attention_gradient(qkv, s, kind, p, 106);
    }
}

TEST_CASE("learned p: dL/dp of every head matches finite differences") {
    // p per head (2.5 and 7: the pow() path and the integer path); L = sum(out * R)
    AttnShape s{2, 9, 2, 8};
    Rng rng(20);
    auto qkv = random_vector(s.qkv_size(), rng);
    auto R = random_vector(s.out_size(), rng);
    for (AttnKind kind : {ATTN_LSSAR, ATTN_SOFTMAX_RW, ATTN_SIGMOID_L1_RW, ATTN_RELU_L1_RW}) {
        INFO(std::string(attn_kind_name(kind)));
        std::vector<double> p_head{2.5, 7.0}, dp(2, 0.0), dqkv(s.qkv_size(), 0.0), out(s.out_size());
        ref::attention_backward(dqkv.data(), R.data(), qkv.data(), s.B, s.T, s.NH, s.hd, kind, 0.0, p_head.data(), dp.data());
        auto f = [&] {
            ref::attention_forward(out.data(), (double*)nullptr, qkv.data(), s.B, s.T, s.NH, s.hd, kind, 0.0, p_head.data());
            return weighted_sum(out.data(), R.data(), out.size());
        };
        GradCheckResult r = check_gradient(f, p_head.data(), dp.data(), 2, STEP);
        INFO(describe(r));
        CHECK(r.max_rel_err < TOL);
        CHECK(std::fabs(dp[0]) > 1e-3);  // the check has something to compare
        // a per-head p equal to the shared p gives the shared p's gradient of qkv
        std::vector<double> same{3.0, 3.0}, dqkv_shared(s.qkv_size(), 0.0), dqkv_head(s.qkv_size(), 0.0);
        ref::attention_backward(dqkv_shared.data(), R.data(), qkv.data(), s.B, s.T, s.NH, s.hd, kind, 3.0);
        ref::attention_backward(dqkv_head.data(), R.data(), qkv.data(), s.B, s.T, s.NH, s.hd, kind, 0.0, same.data());
        CHECK(dqkv_shared == dqkv_head);
    }
}

TEST_CASE("float32 q and k norms of 1e20 and 1e30 (the sum of squares overflows float32): rescaled, as in the kernels") {
    // |q|^2 = 1e40 or 1e60 > FLT_MAX: without rescaling the norm is inf, q/|q| = 0 and every score
    // and gradient of those rows is zeroed. The cosine is scale-free, and the scales here are powers
    // of two (2^66 = 7.4e19, 2^100 = 1.3e30), so q/|q| is exact: outputs and the other rows'
    // gradients must equal those of the unscaled float32 inputs bit for bit, and the scaled rows'
    // gradients must be theirs divided by the scale (exactly at 2^66; at 2^100 they are ~1e-37, at
    // float32's smallest normal numbers with subnormal terms, so to 1e-2 of the row's largest value).
    AttnShape s{1, 7, 2, 8};
    Rng rng(21);
    auto qkv64 = random_vector(s.qkv_size(), rng);
    auto R64 = random_vector(s.out_size(), rng);
    std::vector<float> qkv(qkv64.begin(), qkv64.end()), R(R64.begin(), R64.end());
    const std::vector<size_t> huge_rows = {s.at(0, 4, 0, 0), s.at(0, 2, 1, 0), s.at(0, 5, 1, 1)};  // q, k, k
    for (int exponent : {66, 100}) {
        std::vector<float> huge = qkv;
        for (size_t row : huge_rows)
            for (int i = 0; i < s.hd; i++) huge[row + i] = std::ldexp(huge[row + i], exponent);
        for (AttnKind kind : {ATTN_LSSA, ATTN_LSSAR}) {
            CAPTURE(exponent);
            CAPTURE(std::string(attn_kind_name(kind)));
            std::vector<float> ref(s.out_size()), out(s.out_size());
            ref::attention_forward(ref.data(), (float*)nullptr, qkv.data(), s.B, s.T, s.NH, s.hd, kind, 15.0);
            ref::attention_forward(out.data(), (float*)nullptr, huge.data(), s.B, s.T, s.NH, s.hd, kind, 15.0);
            CHECK(out == ref);
            std::vector<float> dref(s.qkv_size(), 0.0f), d(s.qkv_size(), 0.0f);
            ref::attention_backward(dref.data(), R.data(), qkv.data(), s.B, s.T, s.NH, s.hd, kind, 15.0);
            ref::attention_backward(d.data(), R.data(), huge.data(), s.B, s.T, s.NH, s.hd, kind, 15.0);
            for (size_t row : huge_rows) {
                float gmax = 0, err = 0;
                for (int i = 0; i < s.hd; i++) {
                    gmax = std::max(gmax, std::fabs(dref[row + i]));
                    err = std::max(err, std::fabs(std::ldexp(d[row + i], exponent) - dref[row + i]));
                    d[row + i] = dref[row + i] = 0;
                }
                REQUIRE(gmax > 0);
                CHECK_MESSAGE(err <= (exponent == 66 ? 0.0f : 1e-2f * gmax), "row " << row << ": " << err << " of " << gmax);
            }
            CHECK(d == dref);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// LSSAR at long length in float32 (doc/attention.md, section 'Stable evaluation of the re-weighting'):
// the stable form stays finite and matches float64; the naive relu(x)^p form overflows or
// underflows on the same inputs.

// The naive form: W = relu(x)^p / sum relu(x)^p, evaluated in T without max-normalisation.
// Counts the rows (t >= 3) it breaks: overflow (the sum is inf: W is NaN or 0 for all keys) and
// underflow (every relu(x)^p flushed to 0 although some x > 0: W = 0/0).
template <class T>
static void naive_lssar_broken_rows(const std::vector<T>& qkv, int T_, int hd, double p, int* overflow, int* underflow) {
    std::vector<T> qe, ke, qn, kn, w(T_), s(T_), a(T_);
    ref::attention_prepare(qe, ke, qn, kn, qkv.data(), 1, T_, 1, hd, ATTN_LSSA);
    *overflow = *underflow = 0;
    for (int t = 3; t < T_; t++) {
        T st[3];
        ref::attention_row_weights(w.data(), s.data(), a.data(), st, &qe[(size_t)t * hd], ke.data(), t, hd, ATTN_LSSA, p);
        T S2 = 0;
        bool any_positive = false;
        for (int j = 0; j <= t; j++) {
            T x = T(t + 1) * w[j] - T(1);
            any_positive |= x > 0;
            S2 += x > 0 ? ref::pow_int(x, (int)p) : T(0);
        }
        if (!std::isfinite(S2)) (*overflow)++;
        else if (any_positive && S2 == 0) (*underflow)++;
    }
}

struct LongInputs {
    std::vector<double> qkv;
    int T, hd;
};

// Keys share one direction, queries point away from it (all scores negative): x reaches
// thousands, relu(x)^15 overflows float32.
static LongInputs shared_direction_keys(int T, int hd, uint64_t seed) {
    Rng rng(seed);
    LongInputs in{std::vector<double>((size_t)T * 3 * hd), T, hd};
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < hd; i++) {
            double d = i == 0 ? 1.0 : 0.0;
            in.qkv[(size_t)t * 3 * hd + i] = -d + 0.1 * rng.normal();
            in.qkv[(size_t)t * 3 * hd + hd + i] = d + 0.1 * rng.normal();
            in.qkv[(size_t)t * 3 * hd + 2 * hd + i] = rng.normal();
        }
    }
    return in;
}

// Nearly identical keys: A is nearly uniform, x is tiny, relu(x)^15 underflows float32.
static LongInputs nearly_identical_keys(int T, int hd, uint64_t seed) {
    Rng rng(seed);
    LongInputs in{std::vector<double>((size_t)T * 3 * hd), T, hd};
    auto dir = random_vector(hd, rng);
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < hd; i++) {
            in.qkv[(size_t)t * 3 * hd + i] = rng.normal();
            in.qkv[(size_t)t * 3 * hd + hd + i] = dir[i] + 1e-4 * rng.normal();
            in.qkv[(size_t)t * 3 * hd + 2 * hd + i] = rng.normal();
        }
    }
    return in;
}

// max |y32 - y64| / max |y64| over the whole output, after checking y32 is finite
static double stable_float32_error(const LongInputs& in, double p) {
    size_t n_out = (size_t)in.T * in.hd;
    std::vector<double> y64(n_out);
    ref::attention_forward(y64.data(), (double*)nullptr, in.qkv.data(), 1, in.T, 1, in.hd, ATTN_LSSAR, p);
    std::vector<float> qkv32(in.qkv.begin(), in.qkv.end()), y32(n_out);
    ref::attention_forward(y32.data(), (float*)nullptr, qkv32.data(), 1, in.T, 1, in.hd, ATTN_LSSAR, p);
    double scale = 0, err = 0;
    size_t nonfinite = 0;
    for (size_t i = 0; i < n_out; i++) {
        nonfinite += !std::isfinite(y32[i]);
        scale = std::max(scale, std::fabs(y64[i]));
        err = std::max(err, std::fabs((double)y32[i] - y64[i]));
    }
    REQUIRE(nonfinite == 0);
    return err / scale;
}

TEST_CASE("LSSAR at T=4096 in float32, keys sharing a direction: stable form matches float64, naive overflows") {
    LongInputs in = shared_direction_keys(4096, 64, 21);
    // float32 rounds the scores (relative 6e-8) and S1; the re-weighting raises x/m to the 15th
    // power, which multiplies relative errors by up to 15: ~1e-4 of the output scale is the budget.
    double err = stable_float32_error(in, 15.0);
    MESSAGE("stable float32 vs float64 (keys sharing a direction): " << err);
    CHECK(err < 1e-4);
    std::vector<float> qkv32(in.qkv.begin(), in.qkv.end());
    int overflow = 0, underflow = 0;
    naive_lssar_broken_rows(qkv32, in.T, in.hd, 15.0, &overflow, &underflow);
    MESSAGE("naive float32 relu(x)^15: " << overflow << " of " << in.T - 3 << " rows overflow");
    CHECK(overflow > in.T / 10);  // 19% here: x reaches ~3000, and 3000^15 ~ 1e52 > FLT_MAX
}

TEST_CASE("LSSAR at T=4096 in float32, nearly identical keys: stable form matches float64, naive underflows") {
    LongInputs in = nearly_identical_keys(4096, 64, 22);
    // The problem itself is ill-conditioned here: x = n A - 1 is ~1e-3 (the row maxima m lie in
    // [7e-5, 2e-3]) and float32 rounds every score s = lam cos (lam = ln 64 ln n ~ 35) by up to
    // lam 2^-24 ~ 2e-6, which moves each x by ~2e-6: a relative error of ~2e-3 at x = 1e-3, that
    // p = 15 multiplies to ~3e-2 in u. No float32 evaluation can do better; bound 5e-2.
    double err = stable_float32_error(in, 15.0);
    MESSAGE("stable float32 vs float64 (nearly identical keys): " << err);
    CHECK(err < 5e-2);
    std::vector<float> qkv32(in.qkv.begin(), in.qkv.end());
    int overflow = 0, underflow = 0;
    naive_lssar_broken_rows(qkv32, in.T, in.hd, 15.0, &overflow, &underflow);
    MESSAGE("naive float32 relu(x)^15: " << underflow << " of " << in.T - 3 << " rows underflow to 0/0");
    CHECK(underflow > in.T / 2);
}

// The training-length constant (attn_len = L > 0): sigmoid's bias -ln(L), relu's scale 1/L on
// every row, against the formulas evaluated directly in float64 here:
//   sigmoid: y_t = sum_{j<=t} v_j / (1 + exp(-(q_t.k_j / sqrt(hd) - ln L)))
//   relu:    y_t = sum_{j<=t} v_j max(q_t.k_j / sqrt(hd), 0) / L
// at rows below, at and above L (T = 12, L = 5). Both sides are float64 sums of at most 12 terms
// of size ~1 in different orders: they agree to ~1e-15, checked at 1e-13. On row L - 1 (n_t = L)
// attn_len = L and attn_len = 0 are the same function: bit for bit, the same operations.
TEST_CASE("attn_len: sigmoid's -ln(L) and relu's 1/L at a constant length, against float64 formulas; gradients") {
    AttnShape s{2, 12, 2, 8};
    const int L = 5;
    Rng rng(23);
    auto qkv = random_vector(s.qkv_size(), rng);
    for (AttnKind kind : {ATTN_SIGMOID, ATTN_RELU}) {
        INFO(std::string(attn_kind_name(kind)));
        REQUIRE(attn_kink_distance(qkv.data(), s.B, s.T, s.NH, s.hd, kind) > 1e-3);
        std::vector<double> out(s.out_size()), per_row(s.out_size());
        ref::attention_forward(out.data(), (double*)nullptr, qkv.data(), s.B, s.T, s.NH, s.hd, kind, 0.0, nullptr, L);
        ref::attention_forward(per_row.data(), (double*)nullptr, qkv.data(), s.B, s.T, s.NH, s.hd, kind, 0.0, nullptr, 0);
        double max_err = 0, scale = 0;
        bool differs_elsewhere = false;
        for (int b = 0; b < s.B; b++)
            for (int h = 0; h < s.NH; h++)
                for (int t = 0; t < s.T; t++) {
                    const double* q = &qkv[s.at(b, t, 0, h)];
                    std::vector<double> y(s.hd, 0.0);
                    for (int j = 0; j <= t; j++) {
                        const double *k = &qkv[s.at(b, j, 1, h)], *v = &qkv[s.at(b, j, 2, h)];
                        double dot = 0;
                        for (int i = 0; i < s.hd; i++) dot += q[i] * k[i];
                        double sc = dot / std::sqrt((double)s.hd);
                        double w = kind == ATTN_SIGMOID ? 1.0 / (1.0 + std::exp(-(sc - std::log((double)L))))
                                                        : std::max(sc, 0.0) / L;
                        for (int i = 0; i < s.hd; i++) y[i] += w * v[i];
                    }
                    size_t o = ((size_t)(b * s.T + t) * s.NH + h) * s.hd;
                    for (int i = 0; i < s.hd; i++) {
                        max_err = std::max(max_err, std::fabs(out[o + i] - y[i]));
                        scale = std::max(scale, std::fabs(y[i]));
                        if (t == L - 1) CHECK(out[o + i] == per_row[o + i]);
                        else differs_elsewhere |= out[o + i] != per_row[o + i];
                    }
                }
        CAPTURE(max_err);
        CHECK(scale > 0.1);
        CHECK(max_err < 1e-13 * scale);
        CHECK(differs_elsewhere);  // the constant is not n_t
        check_attention_gradient(qkv, s, kind, 0.0, 110, nullptr, L);
        check_attention_gradient(qkv, s, kind, 0.0, 111, nullptr, 1);  // L = 1: no bias, no scale
    }
}

// With every score 0 (q = 0), a sigmoid row with the constant L weighs each key 1 / (L + 1): row t
// sums to n_t / (L + 1), which passes 1 once n_t > L + 1 and grows with the row (what makes the
// constant form blow up beyond the training length), while the per-row rule keeps n_t / (n_t + 1).
TEST_CASE("attn_len: with zero scores sigmoid's row sums are n_t / (L + 1), growing past the training length") {
    AttnShape s{1, 40, 1, 8};
    const int L = 8;
    std::vector<double> qkv(s.qkv_size(), 0.0);
    for (int t = 0; t < s.T; t++)
        for (int i = 0; i < s.hd; i++) qkv[s.at(0, t, 2, 0) + i] = 1.0;  // v = 1: y_t = the row's sum of weights
    for (int attn_len : {L, 0}) {
        std::vector<double> out(s.out_size());
        ref::attention_forward(out.data(), (double*)nullptr, qkv.data(), s.B, s.T, s.NH, s.hd, ATTN_SIGMOID, 0.0, nullptr,
                          attn_len);
        for (int t = 0; t < s.T; t++) {
            double n = t + 1, want = attn_len ? n / (L + 1) : n / (n + 1);
            CHECK(out[(size_t)t * s.hd] == doctest::Approx(want).epsilon(1e-14));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Dot scores with exp evaluated directly in float64 here, for the two variants that scale them per
// row (ssmax, log-length scaling): s_tj = c_t q_t.k_j / sqrt(hd) with c_t = factor(t, h), the
// max-shifted softmax A, with rw_p > 0 the re-weighting W = relu(n A - o)^p / sum_j relu(n A - o)^p
// (o = [t >= 3]; W = 0 where every x <= 0), and y_t = sum_j W_tj v_j.
static std::vector<double> direct_dot_exp(const std::vector<double>& qkv, const AttnShape& s,
                                          const std::function<double(int, int)>& factor, double rw_p = 0) {
    std::vector<double> out(s.out_size(), 0.0);
    for (int b = 0; b < s.B; b++)
        for (int h = 0; h < s.NH; h++)
            for (int t = 0; t < s.T; t++) {
                const double* q = &qkv[s.at(b, t, 0, h)];
                std::vector<double> w(t + 1);
                double smax = -std::numeric_limits<double>::infinity(), sum = 0;
                for (int j = 0; j <= t; j++) {
                    const double* k = &qkv[s.at(b, j, 1, h)];
                    double dot = 0;
                    for (int i = 0; i < s.hd; i++) dot += q[i] * k[i];
                    w[j] = factor(t, h) * dot / std::sqrt((double)s.hd);
                    smax = std::max(smax, w[j]);
                }
                for (int j = 0; j <= t; j++) sum += (w[j] = std::exp(w[j] - smax));
                for (int j = 0; j <= t; j++) w[j] /= sum;
                if (rw_p > 0) {
                    double Z = 0;
                    for (int j = 0; j <= t; j++) {
                        double x = (t + 1) * w[j] - (t >= 3 ? 1.0 : 0.0);
                        Z += (w[j] = x > 0 ? std::pow(x, rw_p) : 0.0);
                    }
                    for (int j = 0; j <= t; j++) w[j] = Z > 0 ? w[j] / Z : 0.0;
                }
                double* y = &out[((size_t)(b * s.T + t) * s.NH + h) * s.hd];
                for (int j = 0; j <= t; j++)
                    for (int i = 0; i < s.hd; i++) y[i] += w[j] * qkv[s.at(b, j, 2, h) + i];
            }
    return out;
}

// max |a - b| / max |b|, after checking that b is not all zero
static double rel_max_err(const std::vector<double>& a, const std::vector<double>& b) {
    double err = 0, scale = 0;
    for (size_t i = 0; i < a.size(); i++) err = std::max(err, std::fabs(a[i] - b[i])), scale = std::max(scale, std::fabs(b[i]));
    REQUIRE(scale > 0.1);
    return err / scale;
}

// ssmax with s per head (p_head): the output against the definition evaluated directly; dL/ds of
// every head and dqkv against finite differences, with s = 0.43 and 0.9, s = 0 on both heads (every
// score 0, uniform rows: dL/ds is still defined and nonzero), and 0 beside a negative s. Both sides
// of the output check are float64 sums of at most 12 terms of size ~1 in different orders: they
// agree to ~1e-15, checked at 1e-13.
TEST_CASE("ssmax: s_h ln(n_t) q.k / sqrt(hd) per head against float64 formulas; dL/ds per head and dqkv against finite differences") {
    AttnShape s{2, 12, 2, 8};
    Rng rng(24);
    auto qkv = random_vector(s.qkv_size(), rng);
    auto R = random_vector(s.out_size(), rng);
    for (std::vector<double> s_head : {std::vector<double>{SSMAX_S0, 0.9}, {0.0, 0.0}, {0.0, -0.6}}) {
        CAPTURE(s_head[0]);
        CAPTURE(s_head[1]);
        std::vector<double> out(s.out_size());
        ref::attention_forward(out.data(), (double*)nullptr, qkv.data(), s.B, s.T, s.NH, s.hd, ATTN_SSMAX, 0.0, s_head.data());
        auto want = direct_dot_exp(qkv, s, [&](int t, int h) { return s_head[h] * std::log(t + 1.0); });
        CHECK(rel_max_err(out, want) < 1e-13);
        std::vector<double> dp(2, 0.0), dqkv(s.qkv_size(), 0.0);
        ref::attention_backward(dqkv.data(), R.data(), qkv.data(), s.B, s.T, s.NH, s.hd, ATTN_SSMAX, 0.0, s_head.data(),
                                dp.data());
        auto f = [&] {
            ref::attention_forward(out.data(), (double*)nullptr, qkv.data(), s.B, s.T, s.NH, s.hd, ATTN_SSMAX, 0.0,
                                   s_head.data());
            return weighted_sum(out.data(), R.data(), out.size());
        };
        GradCheckResult r = check_gradient(f, s_head.data(), dp.data(), 2, STEP);
        INFO("dL/ds: " << describe(r));
        CHECK(r.max_rel_err < TOL);
        for (int h = 0; h < 2; h++) CHECK(std::fabs(dp[h]) > 1e-3);  // the check has something to compare
        GradCheckResult rq = check_gradient(f, qkv.data(), dqkv.data(), qkv.size(), STEP, nullptr, s.hd);
        INFO("dqkv: " << describe(rq));
        CHECK(rq.max_rel_err < TOL);
    }
    // s = 0: every score is 0, each row the mean of its v, and q, k get no gradient
    std::vector<double> zero{0.0, 0.0}, out(s.out_size()), dqkv(s.qkv_size(), 0.0);
    ref::attention_forward(out.data(), (double*)nullptr, qkv.data(), s.B, s.T, s.NH, s.hd, ATTN_SSMAX, 0.0, zero.data());
    ref::attention_backward(dqkv.data(), R.data(), qkv.data(), s.B, s.T, s.NH, s.hd, ATTN_SSMAX, 0.0, zero.data());
    for (int t = 0; t < s.T; t++) {
        double mean = 0;
        for (int j = 0; j <= t; j++) mean += qkv[s.at(0, j, 2, 0)];
        CHECK(out[(size_t)t * s.NH * s.hd] == doctest::Approx(mean / (t + 1)).epsilon(1e-14));
        for (int i = 0; i < s.hd; i++) CHECK(dqkv[s.at(0, t, 0, 0) + i] == 0.0);
        for (int i = 0; i < s.hd; i++) CHECK(dqkv[s.at(0, t, 1, 0) + i] == 0.0);
    }
    // a per-head s equal to the shared s: the shared s's gradient of qkv, bit for bit
    std::vector<double> same{0.7, 0.7}, dqkv_shared(s.qkv_size(), 0.0), dqkv_head(s.qkv_size(), 0.0);
    ref::attention_backward(dqkv_shared.data(), R.data(), qkv.data(), s.B, s.T, s.NH, s.hd, ATTN_SSMAX, 0.7);
    ref::attention_backward(dqkv_head.data(), R.data(), qkv.data(), s.B, s.T, s.NH, s.hd, ATTN_SSMAX, 0.0, same.data());
    CHECK(dqkv_shared == dqkv_head);
}

// Log-length scaling (attn_len = L > 1, softmax and softmax_rw): within the training length
// (n_t <= L) the factor is exactly 1 and the function is softmax's: the same operations, so the same
// bits, in float64 and float32. T <= L: every output, stat and gradient; T > L: the rows with
// n_t <= L of the output, the stats and dq (dk and dv sum over later rows too).
template <class F>
static void check_within_len_bitwise(AttnKind kind, double p, const AttnShape& s, int L, uint64_t seed) {
    Rng rng(seed);
    auto qkv64 = random_vector(s.qkv_size(), rng), dout64 = random_vector(s.out_size(), rng);
    std::vector<F> qkv(qkv64.begin(), qkv64.end()), dout(dout64.begin(), dout64.end());
    auto run = [&](int attn_len, std::vector<F>& out, std::vector<F>& stats, std::vector<F>& dqkv) {
        out.assign(s.out_size(), F(0)), stats.assign((size_t)s.B * s.NH * s.T * 3, F(0)), dqkv.assign(s.qkv_size(), F(0));
        ref::attention_forward(out.data(), stats.data(), qkv.data(), s.B, s.T, s.NH, s.hd, kind, p, nullptr, attn_len);
        ref::attention_backward(dqkv.data(), dout.data(), qkv.data(), s.B, s.T, s.NH, s.hd, kind, p, nullptr, nullptr,
                                attn_len);
    };
    std::vector<F> out0, st0, d0, outL, stL, dL;
    run(0, out0, st0, d0);
    run(L, outL, stL, dL);
    if (s.T <= L) {
        CHECK(outL == out0);
        CHECK(stL == st0);
        CHECK(dL == d0);
        return;
    }
    size_t same = 0, differ = 0;
    for (int b = 0; b < s.B; b++)
        for (int t = 0; t < s.T; t++)
            for (int h = 0; h < s.NH; h++) {
                size_t o = ((size_t)(b * s.T + t) * s.NH + h) * s.hd, q = s.at(b, t, 0, h), st = (((size_t)b * s.NH + h) * s.T + t) * 3;
                bool eq = std::equal(&outL[o], &outL[o] + s.hd, &out0[o]) && std::equal(&dL[q], &dL[q] + s.hd, &d0[q]) &&
                          std::equal(&stL[st], &stL[st] + 3, &st0[st]);
                if (t + 1 <= L) CHECK(eq);
                same += eq, differ += !eq;
            }
    CHECK(same == (size_t)s.B * s.NH * L);
    CHECK(differ == (size_t)s.B * s.NH * (s.T - L));  // beyond L the scores are scaled
}

TEST_CASE("log-length scaling within the training length is softmax bit for bit (float64 and float32)") {
    for (AttnKind kind : {ATTN_SOFTMAX, ATTN_SOFTMAX_RW}) {
        INFO(std::string(attn_kind_name(kind)));
        for (double p : kind == ATTN_SOFTMAX ? std::vector<double>{0.0} : std::vector<double>{3.0, 2.5}) {
            CAPTURE(p);
            for (int L : {9, 12, 1024}) {  // T = 9 <= L
                CAPTURE(L);
                check_within_len_bitwise<double>(kind, p, AttnShape{2, 9, 2, 8}, L, 25);
                check_within_len_bitwise<float>(kind, p, AttnShape{2, 9, 2, 8}, L, 25);
            }
            for (int L : {2, 5}) {  // T = 12 > L
                CAPTURE(L);
                check_within_len_bitwise<double>(kind, p, AttnShape{2, 12, 2, 8}, L, 26);
                check_within_len_bitwise<float>(kind, p, AttnShape{2, 12, 2, 8}, L, 26);
            }
        }
    }
}

// Beyond L: the output against the definition evaluated directly in float64 (scores times
// ln(n_t) / ln(L) for n_t > L), the re-weighting at p = 3 on top for softmax_rw; float64 sums of at
// most 12 terms of size ~1 in different orders (the re-weighting's cube triples their relative
// error): they agree to ~1e-15, checked at 1e-13. Gradients against finite differences at L = 5
// and L = 2 (the smallest L), every p of softmax_rw.
TEST_CASE("log-length scaling beyond the training length: against float64 formulas; gradients against finite differences") {
    AttnShape s{2, 12, 2, 8};
    // the first seed whose input keeps 1e-3 from softmax_rw's kinks (|x|) at both L
    std::vector<double> qkv;
    auto clear_of_kinks = [&] {
        return attn_kink_distance(qkv.data(), s.B, s.T, s.NH, s.hd, ATTN_SOFTMAX_RW, 5) > 1e-3 &&
               attn_kink_distance(qkv.data(), s.B, s.T, s.NH, s.hd, ATTN_SOFTMAX_RW, 2) > 1e-3;
    };
    for (uint64_t seed = 27; seed < 60; seed++) {
        Rng rng(seed);
        qkv = random_vector(s.qkv_size(), rng);
        if (clear_of_kinks()) break;
    }
    REQUIRE(clear_of_kinks());
    for (AttnKind kind : {ATTN_SOFTMAX, ATTN_SOFTMAX_RW}) {
        INFO(std::string(attn_kind_name(kind)));
        double rw_p = kind == ATTN_SOFTMAX_RW ? 3.0 : 0.0;
        for (int L : {5, 2}) {
            CAPTURE(L);
            std::vector<double> out(s.out_size()), unscaled(s.out_size());
            ref::attention_forward(out.data(), (double*)nullptr, qkv.data(), s.B, s.T, s.NH, s.hd, kind, rw_p, nullptr, L);
            ref::attention_forward(unscaled.data(), (double*)nullptr, qkv.data(), s.B, s.T, s.NH, s.hd, kind, rw_p);
            auto want = direct_dot_exp(
                qkv, s, [&](int t, int) { return t + 1 > L ? std::log(t + 1.0) / std::log((double)L) : 1.0; }, rw_p);
            CHECK(rel_max_err(out, want) < 1e-13);
            CHECK(rel_max_err(unscaled, want) > 1e-3);  // the scaling is there to find
            for (double p : test_powers(kind)) check_attention_gradient(qkv, s, kind, p, 112, nullptr, L);
        }
    }
}

TEST_CASE("attn_len is refused where it is not defined, and when negative; log-length scaling refuses 1") {
    CHECK(attn_len_error(ATTN_SIGMOID, 0).empty());
    CHECK(attn_len_error(ATTN_SIGMOID, 1024).empty());
    CHECK(attn_len_error(ATTN_RELU, 16).empty());
    CHECK(attn_len_error(ATTN_SIGMOID, 1).empty());  // a constant length of 1: no bias, no scale
    CHECK(attn_len_error(ATTN_RELU, 1).empty());
    for (AttnKind kind : test_kinds()) CHECK(attn_len_error(kind, 0).empty());
    // the variants with a length: sigmoid, relu (the constant n), softmax, softmax_rw (log-length scaling)
    CHECK(attn_len_kind_list() == "softmax, sigmoid, relu, softmax_rw");
    for (AttnKind kind : test_kinds()) {
        bool has_len = kind == ATTN_SIGMOID || kind == ATTN_RELU || kind == ATTN_SOFTMAX || kind == ATTN_SOFTMAX_RW;
        CHECK(attn_has_len(kind) == has_len);
        CHECK(attn_log_scales(kind) == (kind == ATTN_SOFTMAX || kind == ATTN_SOFTMAX_RW));
        std::string e = attn_len_error(kind, 64);
        CHECK(e.empty() == has_len);
        if (!e.empty()) {
            INFO(e);
            CHECK(e.find("attn_len = 64") != std::string::npos);
            CHECK(e.find("softmax, sigmoid, relu, softmax_rw") != std::string::npos);
            CHECK(e.find(attn_kind_name(kind)) != std::string::npos);
        }
    }
    for (AttnKind kind : {ATTN_SSMAX, ATTN_LSSAR}) {
        for (int L : {1, 2, 64}) {
            std::string e = attn_len_error(kind, L);
            INFO(e);
            CHECK(e.find("attn_len = " + std::to_string(L)) != std::string::npos);
            CHECK(e.find("softmax, sigmoid, relu, softmax_rw") != std::string::npos);
            CHECK(e.find(std::string(attn_kind_name(kind)) + " has no length") != std::string::npos);
        }
    }
    for (AttnKind kind : {ATTN_SOFTMAX, ATTN_SOFTMAX_RW}) {
        INFO(std::string(attn_kind_name(kind)));
        std::string one = attn_len_error(kind, 1);  // ln(1) = 0 would divide
        CHECK(one.find("attn_len = 1") != std::string::npos);
        CHECK(one.find("attn_len >= 2") != std::string::npos);
        for (int L : {2, 3, 1024}) CHECK(attn_len_error(kind, L).empty());
    }
    std::string neg = attn_len_error(ATTN_RELU, -3);
    CHECK(neg.find("attn_len = -3") != std::string::npos);
    CHECK(neg.find(">= 0") != std::string::npos);
    CHECK(attn_len_error(ATTN_SOFTMAX, -1).find(">= 0") != std::string::npos);
}

TEST_CASE("evaluating at another p: refused below 1 and for variants without re-weighting") {
    double p;
    CHECK(cli_p_override_error(ATTN_LSSAR, "c.bin", "3", &p).empty());
    CHECK(p == 3.0);
    CHECK(cli_p_override_error(ATTN_RELU_L1_RW, "c.bin", "15", &p).empty());
    std::string low = cli_p_override_error(ATTN_LSSAR, "c.bin", "0.5", &p);
    CHECK(low.find("-p 0.5") != std::string::npos);
    CHECK(low.find(">= 1") != std::string::npos);
    std::string none = cli_p_override_error(ATTN_SOFTMAX, "c.bin", "3", &p);
    CHECK(none.find("c.bin") != std::string::npos);
    CHECK(none.find("softmax") != std::string::npos);
    CHECK(none.find("no re-weighting") != std::string::npos);
    CHECK(cli_p_override_error(ATTN_SIGMOID, "c.bin", "3", &p).find("no re-weighting") != std::string::npos);
    CHECK(cli_p_override_error(ATTN_LSSAR, "c.bin", "x", &p).find("expected a number") != std::string::npos);
}
